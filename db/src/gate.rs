//! The process's write gate: `begin_write` starts a write transaction that first takes this
//! process's turn at the database file's one write lock (SQLite), so writers queue in arrival
//! order instead of meeting in the busy handler; `writer_for` finds the file's writer thread.

use std::collections::HashMap;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, ExecResult,
    QueryResult, SqliteTransactionMode, Statement, TransactionOptions, TransactionTrait,
};
use tokio::sync::OwnedMutexGuard;

use crate::connect::{BUSY_TIMEOUT, cache_size_kib, sqlite_file};
use crate::failure::{note_if_corrupt, refused_as_damaged};

/// A write transaction that holds, on SQLite, this process's turn at the database's one write
/// lock until it commits, rolls back or drops.
pub struct WriteTxn {
    // Declared first so that a dropped transaction queues its rollback before the turn passes.
    txn: DatabaseTransaction,
    _turn: Option<OwnedMutexGuard<()>>,
}

impl WriteTxn {
    pub async fn commit(self) -> Result<(), DbErr> {
        self.txn.commit().await
    }

    pub async fn rollback(self) -> Result<(), DbErr> {
        self.txn.rollback().await
    }
}

impl Deref for WriteTxn {
    type Target = DatabaseTransaction;

    fn deref(&self) -> &DatabaseTransaction {
        &self.txn
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for WriteTxn {
    fn get_database_backend(&self) -> DbBackend {
        self.txn.get_database_backend()
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        self.txn.execute_raw(stmt).await
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        self.txn.execute_unprepared(sql).await
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        self.txn.query_one_raw(stmt).await
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        self.txn.query_all_raw(stmt).await
    }

    fn support_returning(&self) -> bool {
        self.txn.support_returning()
    }
}

/// Starts a write transaction that takes the write lock up front (`BEGIN IMMEDIATE` on
/// SQLite), so a read-then-write transaction waits for the lock instead of failing with
/// "database is locked".
///
/// On SQLite the writers of one process first queue for their turn on an async mutex per
/// database file, in arrival order. Without it they meet in SQLite's busy handler, which
/// sleeps 1, 2, 5, 10 … ms and retries: the lock usually frees long before the sleeper wakes,
/// and the queue is not fair. Other processes (the API and a worker) still meet in the busy
/// handler. A turn not given within the busy timeout fails as SQLite would, so a task that
/// already holds a write transaction and asks for another waits no longer than before.
/// PostgreSQL has no database write lock: no turn is taken there.
pub async fn begin_write(db: &DatabaseConnection) -> Result<WriteTxn, DbErr> {
    if let Some(refused) = refused_as_damaged() {
        return Err(refused);
    }
    let turn = match write_gate(db) {
        Some(gate) => match tokio::time::timeout(BUSY_TIMEOUT, gate.lock_owned()).await {
            Ok(turn) => Some(turn),
            Err(_) => return Err(no_turn()),
        },
        None => None,
    };
    let txn = db
        .begin_with_options(TransactionOptions {
            sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
            ..Default::default()
        })
        .await
        .inspect_err(|e| {
            note_if_corrupt(e);
        })?;
    Ok(WriteTxn { txn, _turn: turn })
}

/// A writer that waited the busy timeout for its turn, worded like SQLite's own busy error.
pub(crate) fn no_turn() -> DbErr {
    DbErr::Custom("database is locked (no write turn within the busy timeout)".to_string())
}

/// The writer thread for `db`'s SQLite file ([`crate::writer`]), shared by every store of
/// this process on it; none on PostgreSQL or for an in-memory database. The thread ends with
/// the last handle: a store keeps its handle rather than asking for each write.
pub(crate) fn writer_for(db: &DatabaseConnection) -> Option<Arc<crate::writer::Writer>> {
    let file = sqlite_file(db)?;
    let gate = write_gate(db)?;
    let pool = db.get_sqlite_connection_pool();
    let cache_kib = cache_size_kib(pool.options().get_max_connections());
    Some(crate::writer::Writer::for_file(&file, cache_kib, gate))
}

type Gates = Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>;

/// The write gate of `db`'s SQLite file, shared by every pool of this process on that file;
/// none on PostgreSQL or for an in-memory database (each of those is its own database).
fn write_gate(db: &DatabaseConnection) -> Option<Arc<tokio::sync::Mutex<()>>> {
    let file = sqlite_file(db)?;
    static GATES: OnceLock<Gates> = OnceLock::new();
    let mut gates = GATES
        .get_or_init(Gates::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Some(gates.entry(file).or_default().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect;
    use crate::sql::SqlExt;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_of_two_pools_on_one_file_share_the_turn_and_all_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("gate.sqlite");
        let a = connect(&file, 4).await.expect("connect a");
        let b = connect(&file, 4).await.expect("connect b");
        a.execute_unprepared("CREATE TABLE t (n INTEGER NOT NULL)")
            .await
            .expect("create");
        assert!(Arc::ptr_eq(
            &write_gate(&a).expect("gate a"),
            &write_gate(&b).expect("gate b")
        ));
        let mut tasks = Vec::new();
        for i in 0..40i64 {
            let db = if i % 2 == 0 { a.clone() } else { b.clone() };
            tasks.push(tokio::spawn(async move {
                let txn = begin_write(&db).await?;
                // A read before the write: the pattern that needs the lock taken up front.
                txn.query_one_sql(Statement::from_string(
                    DbBackend::Sqlite,
                    "SELECT count(*) FROM t",
                ))
                .await?;
                txn.execute_sql(Statement::from_sql_and_values(
                    DbBackend::Sqlite,
                    "INSERT INTO t (n) VALUES (?)",
                    [i.into()],
                ))
                .await?;
                txn.commit().await
            }));
        }
        for task in tasks {
            task.await.expect("join").expect("write");
        }
        let row = a
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT count(*) AS c FROM t",
            ))
            .await
            .expect("count")
            .expect("row");
        assert_eq!(row.try_get::<i64>("", "c").expect("c"), 40);
    }

    #[tokio::test]
    async fn a_dropped_transaction_passes_the_turn_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = connect(&dir.path().join("drop.sqlite"), 2)
            .await
            .expect("connect");
        let first = begin_write(&db).await.expect("first");
        drop(first);
        let second = begin_write(&db).await.expect("second");
        second.rollback().await.expect("rollback");
    }
}
