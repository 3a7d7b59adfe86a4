//! The one way a hot write transaction runs: [`Database::write`] takes the transaction as one
//! closure over a [`Tx`] returning a future, and runs it where it is cheapest. On a SQLite
//! file that is the writer thread (one hand-off there and one back, `crate::writer`), where
//! every `Tx` call completes at once and the future is polled to its end in one go; on
//! PostgreSQL, or SQLite in memory, it is a pooled transaction whose statements are awaited
//! like any other. Either way the transaction first takes this process's turn at the write
//! gate, commits when the future returns `Ok` and rolls back when it returns an error or
//! panics, and completes even if its caller stops waiting: callers write each transaction once.
//!
//! The future awaits nothing but its `Tx` (on the writer thread one that does is refused and
//! rolled back rather than left holding every write), and may do brief blocking work (a
//! rename) between statements.

use std::sync::{Arc, OnceLock};

use futures::FutureExt;
use futures::future::BoxFuture;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, QueryResult, Statement};

use crate::gate::{WriteTxn, begin_write, writer_for};
use crate::sql::fit;
use crate::writer::{SqliteRow, Writer, WriterCalls};

/// The refusal of a transaction that awaited something other than its `Tx` on the writer
/// thread.
const AWAITED_OTHER: &str =
    "a write transaction awaited something other than its statements; it was rolled back";

/// A database connection with its write path: the pool for reads and the one place write
/// transactions go through. Cheap to clone; clones share the writer.
#[derive(Clone)]
pub struct Database {
    conn: DatabaseConnection,
    /// This process's writer thread of the SQLite file, looked up on the first write and kept
    /// (the thread lives as long as a handle does); `None` on PostgreSQL or in memory.
    writer: Arc<OnceLock<Option<Arc<Writer>>>>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("backend", &self.conn.get_database_backend())
            .finish_non_exhaustive()
    }
}

/// A `Database` reads like its pool: only its writes take another path.
impl std::ops::Deref for Database {
    type Target = DatabaseConnection;

    fn deref(&self) -> &DatabaseConnection {
        &self.conn
    }
}

impl From<DatabaseConnection> for Database {
    fn from(conn: DatabaseConnection) -> Self {
        Database::new(conn)
    }
}

impl Database {
    pub fn new(conn: DatabaseConnection) -> Self {
        Database {
            conn,
            writer: Arc::default(),
        }
    }

    /// The pool, for reads and for the writes that are not hot (through [`begin_write`]).
    pub fn conn(&self) -> &DatabaseConnection {
        &self.conn
    }

    pub fn backend(&self) -> DbBackend {
        self.conn.get_database_backend()
    }

    fn writer(&self) -> Option<&Arc<Writer>> {
        self.writer.get_or_init(|| writer_for(&self.conn)).as_ref()
    }

    /// Runs `work` as one write transaction: committed if its future returns `Ok`, rolled
    /// back if it returns an error or panics. Write it as
    /// `db.write(move |tx| Box::pin(async move { tx.execute(&a).await?; … Ok(v) }))`.
    pub async fn write<T, E, F>(&self, work: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<DbErr> + Send + 'static,
        F: for<'t, 'x> FnOnce(&'t mut Tx<'x>) -> BoxFuture<'t, Result<T, E>> + Send + 'static,
    {
        if let Some(writer) = self.writer() {
            return writer
                .transaction(move |txn| {
                    // Every `Tx` call completes on its first poll here, so one poll finishes a
                    // transaction that awaits only its `Tx`. One that awaits anything else
                    // (a timer, a channel) would hold the writer thread, and every write of
                    // the process, for as long: it is refused and rolled back instead.
                    work(&mut Tx {
                        inner: Inner::Writer(txn),
                    })
                    .now_or_never()
                    .unwrap_or_else(|| Err(E::from(DbErr::Custom(AWAITED_OTHER.to_string()))))
                })
                .await;
        }
        let txn = begin_write(&self.conn).await?;
        // A task of its own: like a transaction handed to the writer thread, it completes
        // even if the caller stops waiting for it.
        tokio::spawn(async move {
            let outcome = work(&mut Tx {
                inner: Inner::Pool { txn: &txn },
            })
            .await;
            finish(txn, outcome).await
        })
        .await
        // A panic in `work`: the transaction was dropped with its task, so it rolled back.
        .unwrap_or_else(|e| Err(E::from(DbErr::Custom(format!("write transaction: {e}")))))
    }
}

/// Commits a pooled transaction whose work succeeded, rolls back one whose work failed.
async fn finish<T, E: From<DbErr>>(txn: WriteTxn, outcome: Result<T, E>) -> Result<T, E> {
    match outcome {
        Ok(value) => {
            txn.commit().await?;
            Ok(value)
        }
        Err(e) => {
            // The work's error is the one worth reporting; a failed rollback ends the
            // transaction anyway when the connection drops it.
            let _ = txn.rollback().await;
            Err(e)
        }
    }
}

/// The statements of one write transaction, on the writer thread or a pooled connection.
/// Statements use SQLite's positional `?` and are fitted to the backend (`crate::sql::fit`).
pub struct Tx<'a> {
    inner: Inner<'a>,
}

enum Inner<'a> {
    Writer(&'a mut dyn WriterCalls),
    Pool { txn: &'a WriteTxn },
}

impl Tx<'_> {
    /// The backend the transaction runs on, for the few statements that differ (row locks).
    pub fn backend(&self) -> DbBackend {
        match &self.inner {
            Inner::Writer(_) => DbBackend::Sqlite,
            Inner::Pool { txn } => txn.get_database_backend(),
        }
    }

    pub fn is_postgres(&self) -> bool {
        self.backend() == DbBackend::Postgres
    }

    /// Runs `stmt` and returns the rows it changed.
    pub async fn execute(&mut self, stmt: &Statement) -> Result<u64, DbErr> {
        match &mut self.inner {
            Inner::Writer(txn) => txn.execute(stmt),
            Inner::Pool { txn } => {
                let stmt = fit(txn.get_database_backend(), stmt.clone());
                Ok(txn.execute_raw(stmt).await?.rows_affected())
            }
        }
    }

    /// Runs `stmt` and reads its first row with `read`, if it returned one (a query or a
    /// `RETURNING` clause).
    pub async fn query_row<T>(
        &mut self,
        stmt: &Statement,
        read: impl FnOnce(&Row<'_>) -> T,
    ) -> Result<Option<T>, DbErr> {
        match &mut self.inner {
            Inner::Writer(txn) => {
                let (mut read, mut first) = (Some(read), None);
                txn.each_row(stmt, &mut |row| {
                    if let Some(read) = read.take() {
                        first = Some(read(row));
                    }
                })?;
                Ok(first)
            }
            Inner::Pool { txn } => {
                let stmt = fit(txn.get_database_backend(), stmt.clone());
                let row = txn.query_one_raw(stmt).await?;
                Ok(row.map(|row| read(&Row(RowInner::Pool(&row)))))
            }
        }
    }

    /// Runs `stmt` and reads every row it returned with `read`, in order.
    pub async fn query_rows<T>(
        &mut self,
        stmt: &Statement,
        mut read: impl FnMut(&Row<'_>) -> T,
    ) -> Result<Vec<T>, DbErr> {
        match &mut self.inner {
            Inner::Writer(txn) => {
                let mut rows = Vec::new();
                txn.each_row(stmt, &mut |row| rows.push(read(row)))?;
                Ok(rows)
            }
            Inner::Pool { txn } => {
                let stmt = fit(txn.get_database_backend(), stmt.clone());
                let rows = txn.query_all_raw(stmt).await?;
                Ok(rows
                    .iter()
                    .map(|row| read(&Row(RowInner::Pool(row))))
                    .collect())
            }
        }
    }

    /// Runs `stmt` and returns the first column of its first row as an integer, if it
    /// returned a row.
    pub async fn query_i64(&mut self, stmt: &Statement) -> Result<Option<i64>, DbErr> {
        self.query_row(stmt, |row| row.int(0)).await
    }
}

/// The row a statement of a [`Tx`] returned.
pub struct Row<'a>(RowInner<'a>);

enum RowInner<'a> {
    Writer(&'a SqliteRow),
    Pool(&'a QueryResult),
}

impl<'a> Row<'a> {
    pub(crate) fn on_writer(row: &'a SqliteRow) -> Self {
        Row(RowInner::Writer(row))
    }

    /// Column `index` as an integer (0 for NULL or a missing column).
    pub fn int(&self, index: usize) -> i64 {
        match &self.0 {
            RowInner::Writer(row) => row.int(index),
            RowInner::Pool(row) => row
                .try_get_by_index::<Option<i64>>(index)
                .ok()
                .flatten()
                .or_else(|| {
                    row.try_get_by_index::<Option<i32>>(index)
                        .ok()
                        .flatten()
                        .map(i64::from)
                })
                .or_else(|| {
                    row.try_get_by_index::<Option<bool>>(index)
                        .ok()
                        .flatten()
                        .map(i64::from)
                })
                .unwrap_or(0),
        }
    }

    /// Column `index` as text (`None` for NULL or a missing column).
    pub fn text(&self, index: usize) -> Option<String> {
        match &self.0 {
            RowInner::Writer(row) => row.text(index),
            RowInner::Pool(row) => row.try_get_by_index::<Option<String>>(index).ok().flatten(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::SqlExt;

    fn stmt(sql: &str, values: Vec<sea_orm::Value>) -> Statement {
        Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
    }

    async fn count(db: &Database, table: &str) -> Option<i64> {
        db.conn()
            .query_one_sql(stmt(&format!("SELECT count(*) FROM {table}"), vec![]))
            .await
            .expect("count")
            .and_then(|row| row.try_get_by_index::<i64>(0).ok())
    }

    /// The same transactions on both paths: the writer thread (a file) and the pool (memory).
    async fn commits_rolls_back_and_reads(db: Database) {
        db.conn()
            .execute_unprepared("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
            .await
            .expect("create");
        let read = db
            .write(|tx| {
                Box::pin(async move {
                    let insert =
                        |name: &str| stmt("INSERT INTO t (name) VALUES (?)", vec![name.into()]);
                    tx.execute(&insert("a")).await?;
                    tx.execute(&insert("z")).await?;
                    let all = tx
                        .query_rows(&stmt("SELECT name FROM t ORDER BY id", vec![]), |row| {
                            row.text(0)
                        })
                        .await?;
                    assert_eq!(all, [Some("a".to_string()), Some("z".to_string())]);
                    tx.execute(&stmt("DELETE FROM t WHERE name = 'z'", vec![]))
                        .await?;
                    let first = stmt("SELECT id, name, NULL FROM t WHERE name = 'a'", vec![]);
                    tx.query_row(&first, |row| (row.int(0), row.text(1), row.text(2)))
                        .await
                })
            })
            .await
            .expect("write");
        assert_eq!(read, Some((1, Some("a".into()), None)));

        let failed: Result<(), DbErr> = db
            .write(|tx| {
                Box::pin(async move {
                    tx.execute(&stmt("INSERT INTO t (name) VALUES ('b')", vec![]))
                        .await?;
                    Err(DbErr::Custom("changed my mind".into()))
                })
            })
            .await;
        assert!(failed.is_err());

        let panicked = tokio::spawn({
            let db = db.clone();
            async move {
                db.write(|tx| {
                    Box::pin(async move {
                        tx.execute(&stmt("INSERT INTO t (name) VALUES ('c')", vec![]))
                            .await?;
                        if tx.backend() == DbBackend::Sqlite {
                            panic!("a bug in the transaction");
                        }
                        Ok::<(), DbErr>(())
                    })
                })
                .await
            }
        })
        .await;
        assert!(matches!(panicked, Ok(Err(_)) | Err(_)));
        assert_eq!(
            count(&db, "t").await,
            Some(1),
            "only the committed row stays"
        );
        let counted = db
            .write(|tx| {
                Box::pin(async move { tx.query_i64(&stmt("SELECT count(*) FROM t", vec![])).await })
            })
            .await
            .expect("count");
        assert_eq!(counted, Some(1));
    }

    /// A transaction whose caller stops waiting (a dropped request) still completes: it has
    /// begun, so its writes commit, on either path.
    async fn a_started_transaction_outlives_its_caller(db: Database) {
        db.conn()
            .execute_unprepared("CREATE TABLE IF NOT EXISTS late (n INTEGER)")
            .await
            .expect("create");
        let (started_tx, started) = std::sync::mpsc::channel::<()>();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let caller = tokio::spawn({
            let db = db.clone();
            async move {
                db.write(move |tx| {
                    Box::pin(async move {
                        let _ = started_tx.send(());
                        // Holds its thread (the writer's, or a runtime worker's) until told.
                        let _ = go_rx.recv();
                        tx.execute(&stmt("INSERT INTO late (n) VALUES (1)", vec![]))
                            .await
                    })
                })
                .await
            }
        });
        tokio::task::spawn_blocking(move || started.recv())
            .await
            .expect("join")
            .expect("the transaction began");
        caller.abort();
        assert!(caller.await.is_err(), "the caller was dropped");
        go.send(()).expect("release the transaction");
        // The commit follows on the transaction's own thread or task; poll for it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while count(&db, "late").await != Some(1) {
            assert!(std::time::Instant::now() < deadline, "never committed");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_transaction_that_awaits_anything_else_is_refused_on_the_writer_thread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = crate::connect(&dir.path().join("w.sqlite"), 2)
            .await
            .expect("connect");
        let db = Database::new(conn);
        db.conn()
            .execute_unprepared("CREATE TABLE t (n INTEGER)")
            .await
            .expect("create");
        let refused: Result<(), DbErr> = db
            .write(|tx| {
                Box::pin(async move {
                    tx.execute(&stmt("INSERT INTO t (n) VALUES (1)", vec![]))
                        .await?;
                    tokio::task::yield_now().await;
                    Ok(())
                })
            })
            .await;
        let error = refused.expect_err("refused, not hung");
        assert!(
            error.to_string().contains("awaited something other"),
            "{error}"
        );
        assert_eq!(count(&db, "t").await, Some(0), "rolled back");
        // The writer thread is free for the next transaction.
        db.write(|tx| {
            Box::pin(async move {
                tx.execute(&stmt("INSERT INTO t (n) VALUES (2)", vec![]))
                    .await
            })
        })
        .await
        .expect("next write");
        assert_eq!(count(&db, "t").await, Some(1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_file_writes_on_the_writer_thread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = crate::connect(&dir.path().join("w.sqlite"), 2)
            .await
            .expect("connect");
        let db = Database::new(conn);
        assert!(db.writer().is_some());
        commits_rolls_back_and_reads(db.clone()).await;
        a_started_transaction_outlives_its_caller(db).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memory_writes_through_the_pool() {
        let conn = sea_orm::Database::connect("sqlite::memory:")
            .await
            .expect("connect");
        let db = Database::new(conn);
        assert!(db.writer().is_none());
        commits_rolls_back_and_reads(db.clone()).await;
        a_started_transaction_outlives_its_caller(db).await;
    }
}
