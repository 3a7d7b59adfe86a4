//! The one way a write transaction runs: [`Database::write`] takes the transaction as one
//! synchronous closure over a [`Tx`], and runs it where it is cheapest. On a SQLite file that
//! is the writer thread (one hand-off there and one back, `crate::writer`); on PostgreSQL, or
//! SQLite in memory, it is a pooled transaction driven from the blocking pool (each statement
//! a round trip to the server anyway). Either way the transaction first takes this process's
//! turn at the write gate, commits when the closure returns `Ok` and rolls back when it
//! returns an error or panics, so callers write each transaction once.

use std::sync::{Arc, OnceLock};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, QueryResult, Statement};
use tokio::runtime::Handle;

use crate::gate::{WriteTxn, begin_write, writer_for};
use crate::sql::fit;
use crate::writer::{SqliteRow, Txn, Writer};

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

    /// Runs `work` as one write transaction: committed if it returns `Ok`, rolled back if it
    /// returns an error or panics. `work` may block briefly (a rename, a directory), never for
    /// long: on SQLite it holds the database's one write lock.
    pub async fn write<T, E>(
        &self,
        work: impl FnOnce(&mut Tx<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<DbErr> + Send + 'static,
    {
        if let Some(writer) = self.writer() {
            return writer.transaction(work).await;
        }
        let txn = begin_write(&self.conn).await?;
        let handle = Handle::current();
        let ran = tokio::task::spawn_blocking(move || {
            let outcome = work(&mut Tx {
                inner: Inner::Pool {
                    txn: &txn,
                    handle: &handle,
                },
            });
            (outcome, txn)
        })
        .await;
        let (outcome, txn) = match ran {
            Ok(ran) => ran,
            // The transaction was dropped with the closure's thread: it rolls back.
            Err(e) => return Err(E::from(DbErr::Custom(format!("write transaction: {e}")))),
        };
        finish(txn, outcome).await
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
    Writer(Txn<'a>),
    Pool {
        txn: &'a WriteTxn,
        handle: &'a Handle,
    },
}

impl<'a> Tx<'a> {
    pub(crate) fn on_writer(txn: Txn<'a>) -> Self {
        Tx {
            inner: Inner::Writer(txn),
        }
    }

    /// The backend the transaction runs on, for the few statements that differ (row locks).
    pub fn backend(&self) -> DbBackend {
        match &self.inner {
            Inner::Writer(_) => DbBackend::Sqlite,
            Inner::Pool { txn, .. } => txn.get_database_backend(),
        }
    }

    pub fn is_postgres(&self) -> bool {
        self.backend() == DbBackend::Postgres
    }

    /// Runs `stmt` and returns the rows it changed.
    pub fn execute(&mut self, stmt: &Statement) -> Result<u64, DbErr> {
        match &mut self.inner {
            Inner::Writer(txn) => txn.execute(stmt),
            Inner::Pool { txn, handle } => {
                let stmt = fit(txn.get_database_backend(), stmt.clone());
                handle
                    .block_on(txn.execute_raw(stmt))
                    .map(|done| done.rows_affected())
            }
        }
    }

    /// Runs `stmt` and reads its first row with `read`, if it returned one (a query or a
    /// `RETURNING` clause).
    pub fn query_row<T>(
        &mut self,
        stmt: &Statement,
        read: impl FnOnce(&Row<'_>) -> T,
    ) -> Result<Option<T>, DbErr> {
        match &mut self.inner {
            Inner::Writer(txn) => txn.query_row(stmt, read),
            Inner::Pool { txn, handle } => {
                let stmt = fit(txn.get_database_backend(), stmt.clone());
                let row = handle.block_on(txn.query_one_raw(stmt))?;
                Ok(row.map(|row| read(&Row(RowInner::Pool(&row)))))
            }
        }
    }

    /// Runs `stmt` and reads every row it returned with `read`, in order.
    pub fn query_rows<T>(
        &mut self,
        stmt: &Statement,
        mut read: impl FnMut(&Row<'_>) -> T,
    ) -> Result<Vec<T>, DbErr> {
        match &mut self.inner {
            Inner::Writer(txn) => txn.query_rows(stmt, read),
            Inner::Pool { txn, handle } => {
                let stmt = fit(txn.get_database_backend(), stmt.clone());
                let rows = handle.block_on(txn.query_all_raw(stmt))?;
                Ok(rows
                    .iter()
                    .map(|row| read(&Row(RowInner::Pool(row))))
                    .collect())
            }
        }
    }

    /// Runs `stmt` and returns the first column of its first row as an integer, if it
    /// returned a row.
    pub fn query_i64(&mut self, stmt: &Statement) -> Result<Option<i64>, DbErr> {
        self.query_row(stmt, |row| row.int(0))
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

    /// The same closure on both paths: the writer thread (a file) and the pool (in memory).
    async fn commits_rolls_back_and_reads(db: Database) {
        db.conn()
            .execute_unprepared("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)")
            .await
            .expect("create");
        let read = db
            .write(|tx| {
                tx.execute(&stmt("INSERT INTO t (name) VALUES (?)", vec!["a".into()]))?;
                tx.execute(&stmt("INSERT INTO t (name) VALUES (?)", vec!["z".into()]))?;
                let all = tx
                    .query_rows(&stmt("SELECT name FROM t ORDER BY id", vec![]), |row| {
                        row.text(0)
                    })?;
                assert_eq!(all, [Some("a".to_string()), Some("z".to_string())]);
                tx.execute(&stmt("DELETE FROM t WHERE name = ?", vec!["z".into()]))?;
                tx.query_row(
                    &stmt(
                        "SELECT id, name, NULL FROM t WHERE name = ?",
                        vec!["a".into()],
                    ),
                    |row| (row.int(0), row.text(1), row.text(2)),
                )
            })
            .await
            .expect("write");
        assert_eq!(read, Some((1, Some("a".into()), None)));
        let failed: Result<(), DbErr> = db
            .write(|tx| {
                tx.execute(&stmt("INSERT INTO t (name) VALUES (?)", vec!["b".into()]))?;
                Err(DbErr::Custom("changed my mind".into()))
            })
            .await;
        assert!(failed.is_err());
        let panicked = tokio::spawn({
            let db = db.clone();
            async move {
                db.write(|tx| -> Result<(), DbErr> {
                    tx.execute(&stmt("INSERT INTO t (name) VALUES (?)", vec!["c".into()]))?;
                    panic!("a bug in the closure")
                })
                .await
            }
        })
        .await;
        assert!(matches!(panicked, Ok(Err(_)) | Err(_)));
        let names = db
            .conn()
            .query_all_sql(stmt("SELECT name FROM t ORDER BY id", vec![]))
            .await
            .expect("select");
        assert_eq!(names.len(), 1, "only the committed row stays");
        assert_eq!(
            db.write(|tx| tx.query_i64(&stmt("SELECT count(*) FROM t", vec![])))
                .await
                .expect("count"),
            Some(1)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_file_writes_on_the_writer_thread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = crate::connect(&dir.path().join("w.sqlite"), 2)
            .await
            .expect("connect");
        let db = Database::new(conn);
        assert!(db.writer().is_some());
        commits_rolls_back_and_reads(db).await;
    }

    #[tokio::test]
    async fn memory_writes_through_the_pool() {
        let conn = sea_orm::Database::connect("sqlite::memory:")
            .await
            .expect("connect");
        let db = Database::new(conn);
        assert!(db.writer().is_none());
        commits_rolls_back_and_reads(db).await;
    }
}
