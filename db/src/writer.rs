//! The SQLite writer: one thread per database file and process, with its own
//! connection, that runs a whole write transaction per message.
//!
//! sqlx runs each pooled SQLite connection on a thread of its own and every statement is a
//! round trip to it: a fenced transaction (`BEGIN IMMEDIATE`, the fence, the body, `COMMIT`)
//! cost four hand-offs between threads, and in this VM a hand-off costs more than the
//! statements it carries. Here the transaction is one closure sent to the writer thread, which
//! runs it synchronously on its connection: one hand-off there and one back
//! (docs/PERFORMANCE.md, Throughput, fourth pass). It serves the hot writes (a claimed run's
//! fenced writes and its claim, a new run, an upload's row); everything else keeps going
//! through sea-orm's pool, and the process's write gate orders the two: a transaction sent
//! here first takes its turn at the gate like every other writer of the process.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::{Arc, Mutex, OnceLock, Weak, mpsc};

use libsqlite3_sys as ffi;
use sea_orm::{DbErr, RuntimeErr, Statement, Value};

use crate::write::Row;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A handle on the writer thread of one database file; the thread ends with the last handle.
pub struct Writer {
    jobs: mpsc::Sender<Job>,
    /// The process's write gate of the same file (`db::begin_write`).
    gate: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer {
    /// This process's writer for the SQLite file `file`, shared by every store on it; its
    /// connection keeps a page cache of `cache_kib` KiB, and its transactions queue at `gate`.
    pub(crate) fn for_file(
        file: &Path,
        cache_kib: u32,
        gate: Arc<tokio::sync::Mutex<()>>,
    ) -> Arc<Writer> {
        static WRITERS: OnceLock<Mutex<HashMap<PathBuf, Weak<Writer>>>> = OnceLock::new();
        let mut writers = WRITERS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(writer) = writers.get(file).and_then(Weak::upgrade) {
            return writer;
        }
        writers.retain(|_, w| w.strong_count() > 0);
        let (jobs, inbox) = mpsc::channel::<Job>();
        let path = file.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("shelf-sqlite-writer".into())
            .spawn(move || {
                let mut conn = Connection::open(&path, cache_kib);
                conn.checkpoint_elsewhere(&path);
                for job in inbox {
                    job(&mut conn);
                }
            });
        if let Err(e) = spawned {
            // Every transaction sent to a writer without a thread fails with this error.
            tracing::error!(error = %e, "cannot start the SQLite writer thread");
        }
        let writer = Arc::new(Writer { jobs, gate });
        writers.insert(file.to_path_buf(), Arc::downgrade(&writer));
        writer
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction on the writer's connection, once this
    /// process's turn at the write lock has come: committed if it returns `Ok`, rolled back if
    /// it returns an error or panics. `work` runs on the writer thread: it may block briefly
    /// (a rename, a directory), never for long.
    pub(crate) async fn transaction<T, E>(
        &self,
        work: impl FnOnce(&mut Txn<'_>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<DbErr> + Send + 'static,
    {
        // Nothing more goes into a database known to be damaged (`db::mark_damaged`).
        if let Some(refused) = crate::failure::refused_as_damaged() {
            return Err(E::from(refused));
        }
        let _turn = tokio::time::timeout(crate::connect::BUSY_TIMEOUT, self.gate.lock())
            .await
            .map_err(|_| E::from(crate::gate::no_turn()))?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn: &mut Connection| {
            let _ = reply.send(conn.transaction(work));
        });
        self.jobs
            .send(job)
            .map_err(|_| E::from(error("the SQLite writer thread has stopped")))?;
        answer
            .await
            .map_err(|_| E::from(error("the SQLite writer thread has stopped")))?
    }
}

/// The writer thread's connection and its prepared statements.
struct Connection {
    db: Result<*mut ffi::sqlite3, String>,
    statements: HashMap<String, *mut ffi::sqlite3_stmt>,
    /// Wakes the checkpointer thread (see [`Connection::checkpoint_elsewhere`]); boxed so that
    /// the WAL hook's pointer to it stays put. Dropped after the connection is closed.
    checkpoints: Option<Box<mpsc::SyncSender<()>>>,
}

/// WAL pages after a commit from which the writer asks for a checkpoint: SQLite's own
/// `wal_autocheckpoint` default.
const CHECKPOINT_PAGES: c_int = 1000;

/// Checkpoints the checkpointer threads of this process ran (read by a test).
static CHECKPOINTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The writer connection's WAL hook: past [`CHECKPOINT_PAGES`], wakes the checkpointer (one
/// pending wake-up is enough; a busy checkpointer catches up on its next pass).
unsafe extern "C" fn on_wal_commit(
    wake: *mut std::os::raw::c_void,
    _db: *mut ffi::sqlite3,
    _schema: *const c_char,
    pages: c_int,
) -> c_int {
    if pages >= CHECKPOINT_PAGES && !wake.is_null() {
        // SAFETY: `wake` is the connection's boxed sender, which outlives the hook (the
        // connection is closed before it is dropped).
        let wake = unsafe { &*(wake as *const mpsc::SyncSender<()>) };
        let _ = wake.try_send(());
    }
    ffi::SQLITE_OK
}

/// Prepared statements kept per connection; a text past this many clears the cache (the
/// engine's fenced writes use a few dozen distinct texts).
const STATEMENT_CACHE: usize = 256;

impl Connection {
    fn open(path: &Path, cache_kib: u32) -> Connection {
        let db = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("database path {} holds a NUL byte", path.display()))
            .and_then(|name| {
                let mut db = ptr::null_mut();
                // SAFETY: `name` is a NUL-terminated path; `db` receives the handle, which is
                // closed in `Drop` (also when opening failed, as SQLite requires).
                let rc = unsafe {
                    ffi::sqlite3_open_v2(
                        name.as_ptr(),
                        &mut db,
                        ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_NOMUTEX,
                        ptr::null(),
                    )
                };
                if rc != ffi::SQLITE_OK {
                    let message = last_error(db);
                    // SAFETY: a handle SQLite returned with a failed open must still be closed.
                    unsafe { ffi::sqlite3_close(db) };
                    return Err(format!("cannot open {}: {message}", path.display()));
                }
                Ok(db)
            });
        let mut conn = Connection {
            db,
            statements: HashMap::new(),
            checkpoints: None,
        };
        if let Ok(db) = conn.db {
            crate::connect::install_busy_handler(db);
            // The pool already made the file WAL (a persistent setting); the rest is per
            // connection, as the pool sets it on its own.
            let pragmas = format!(
                "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -{cache_kib};"
            );
            if let Err(e) = conn.exec(&pragmas) {
                conn.db = Err(e.to_string());
            }
        }
        conn
    }

    /// Moves this connection's WAL checkpoints to a thread of their own. SQLite checkpoints
    /// on the connection whose commit takes the WAL past 1,000 pages, inside that commit: on
    /// the writer thread that stalled every write of the process for the checkpoint's copy
    /// and fsyncs (up to 22 ms each into an 8 GB database). Here the commit only wakes a
    /// checkpointer with its own connection, which runs a passive checkpoint (it never blocks
    /// writers) while the writer goes on. Without that thread SQLite's own checkpoints stay.
    fn checkpoint_elsewhere(&mut self, path: &Path) {
        let Ok(db) = self.db else { return };
        let (wake, asked) = mpsc::sync_channel::<()>(1);
        let path = path.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("shelf-sqlite-ckpt".into())
            .spawn(move || {
                let checkpointer = Connection::open(&path, 256);
                for () in asked {
                    checkpointer.checkpoint();
                }
            });
        if spawned.is_err() {
            return;
        }
        let wake = Box::new(wake);
        // SAFETY: `db` is this thread's open connection; the hook's argument is the boxed
        // sender stored below, dropped only after `db` is closed (see `Drop`). Setting a WAL
        // hook replaces (turns off) SQLite's automatic checkpoints on this connection.
        unsafe {
            ffi::sqlite3_wal_hook(
                db,
                Some(on_wal_commit),
                (&*wake as *const mpsc::SyncSender<()>).cast_mut().cast(),
            );
        }
        self.checkpoints = Some(wake);
    }

    /// A passive checkpoint: copies what it can of the WAL into the database without waiting
    /// for writers or readers (busy is normal: another process may be checkpointing).
    fn checkpoint(&self) {
        let Ok(db) = self.db else { return };
        let (mut log, mut copied) = (0, 0);
        // SAFETY: `db` is this thread's open connection; a null schema name means all.
        let rc = unsafe {
            ffi::sqlite3_wal_checkpoint_v2(
                db,
                ptr::null(),
                ffi::SQLITE_CHECKPOINT_PASSIVE,
                &mut log,
                &mut copied,
            )
        };
        if rc == ffi::SQLITE_OK {
            CHECKPOINTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        } else {
            tracing::debug!(code = rc, message = %last_error(db), "WAL checkpoint did not run");
        }
    }

    fn handle(&self) -> Result<*mut ffi::sqlite3, DbErr> {
        self.db.clone().map_err(|e| error(&e))
    }

    fn transaction<T, E: From<DbErr>>(
        &mut self,
        work: impl FnOnce(&mut Txn<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        self.exec("BEGIN IMMEDIATE")?;
        let done = catch_unwind(AssertUnwindSafe(|| work(&mut Txn { conn: self })));
        match done {
            Ok(Ok(value)) => match self.exec("COMMIT") {
                Ok(()) => Ok(value),
                Err(e) => {
                    self.rollback();
                    Err(e.into())
                }
            },
            Ok(Err(e)) => {
                self.rollback();
                Err(e)
            }
            Err(_) => {
                self.rollback();
                Err(error("a write transaction panicked; it was rolled back").into())
            }
        }
    }

    fn rollback(&mut self) {
        // Fails only when SQLite already rolled back (some I/O and full-disk errors do).
        let _ = self.exec("ROLLBACK");
    }

    /// Runs `sql` (one or more statements without parameters).
    fn exec(&mut self, sql: &str) -> Result<(), DbErr> {
        let db = self.handle()?;
        let text = CString::new(sql).map_err(|_| error("SQL text holds a NUL byte"))?;
        // SAFETY: `db` is this thread's open connection and `text` is NUL-terminated.
        let rc =
            unsafe { ffi::sqlite3_exec(db, text.as_ptr(), None, ptr::null_mut(), ptr::null_mut()) };
        if rc != ffi::SQLITE_OK {
            return Err(sqlite_error(db, sql));
        }
        Ok(())
    }

    /// The prepared statement of `sql`, from the cache or prepared now.
    fn prepared(&mut self, sql: &str) -> Result<*mut ffi::sqlite3_stmt, DbErr> {
        if let Some(&stmt) = self.statements.get(sql) {
            return Ok(stmt);
        }
        let db = self.handle()?;
        let length = c_int::try_from(sql.len()).map_err(|_| error("SQL text too long"))?;
        let mut stmt = ptr::null_mut();
        let mut tail: *const c_char = ptr::null();
        // SAFETY: `sql` is valid for `length` bytes (no NUL needed with an explicit length);
        // `tail` points into it.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                db,
                sql.as_ptr().cast(),
                length,
                ffi::SQLITE_PREPARE_PERSISTENT,
                &mut stmt,
                &mut tail,
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(sqlite_error(db, sql));
        }
        let consumed = (tail as usize).saturating_sub(sql.as_ptr() as usize);
        let rest = sql.get(consumed..).unwrap_or("");
        if stmt.is_null()
            || !rest
                .trim_matches(|c: char| c.is_whitespace() || c == ';')
                .is_empty()
        {
            // SAFETY: finalizing a null or freshly prepared statement is allowed.
            unsafe { ffi::sqlite3_finalize(stmt) };
            return Err(error(&format!(
                "the writer runs exactly one statement per text: {}",
                head(sql)
            )));
        }
        if self.statements.len() >= STATEMENT_CACHE {
            self.clear_statements();
        }
        self.statements.insert(sql.to_string(), stmt);
        Ok(stmt)
    }

    fn clear_statements(&mut self) {
        for (_, stmt) in self.statements.drain() {
            // SAFETY: each cached statement is finalized once, here or in `Drop`.
            unsafe { ffi::sqlite3_finalize(stmt) };
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.clear_statements();
        if let Ok(db) = self.db {
            // SAFETY: every statement of `db` was finalized above. The WAL hook's sender
            // (`checkpoints`) is dropped after this, so the hook never sees it dropped.
            unsafe { ffi::sqlite3_close(db) };
        }
    }
}

/// The statements of one transaction on the writer's connection (seen by callers as a
/// `crate::Tx`).
pub(crate) struct Txn<'a> {
    conn: &'a mut Connection,
}

// SAFETY: a `Txn` lives only inside a job on the writer thread, and the `Tx` future that holds
// it is polled to its end there (`Database::write`); the bound only lets that future be typed
// `Send` like the pooled one. The connection is never used from another thread.
unsafe impl Send for Txn<'_> {}

/// What a `Tx` calls on the writer thread: object-safe, so `Tx` needs one lifetime only.
pub(crate) trait WriterCalls: Send {
    fn execute(&mut self, stmt: &Statement) -> Result<u64, DbErr>;
    fn each_row(&mut self, stmt: &Statement, on_row: &mut dyn FnMut(&Row<'_>))
    -> Result<(), DbErr>;
}

impl WriterCalls for Txn<'_> {
    fn execute(&mut self, stmt: &Statement) -> Result<u64, DbErr> {
        Txn::execute(self, stmt)
    }

    fn each_row(
        &mut self,
        stmt: &Statement,
        on_row: &mut dyn FnMut(&Row<'_>),
    ) -> Result<(), DbErr> {
        self.run(stmt, |row| {
            on_row(&Row::on_writer(&SqliteRow { stmt: row }))
        })
    }
}

impl Txn<'_> {
    /// Runs `stmt` (one statement, `?` placeholders) and returns the rows it changed.
    pub(crate) fn execute(&mut self, stmt: &Statement) -> Result<u64, DbErr> {
        self.run(stmt, |_| {})?;
        let db = self.conn.handle()?;
        // SAFETY: `db` is this thread's open connection.
        let changes = unsafe { ffi::sqlite3_changes(db) };
        Ok(u64::try_from(changes).unwrap_or(0))
    }

    /// Runs `stmt` and reads its first row with `read`, if it returned one (the writer's own
    /// tests; `Tx` reads rows through `WriterCalls::each_row`).
    #[cfg(test)]
    pub(crate) fn query_row<T>(
        &mut self,
        stmt: &Statement,
        read: impl FnOnce(&Row<'_>) -> T,
    ) -> Result<Option<T>, DbErr> {
        let mut read = Some(read);
        let mut first = None;
        self.run(stmt, |row| {
            if let Some(read) = read.take() {
                first = Some(read(&Row::on_writer(&SqliteRow { stmt: row })));
            }
        })?;
        Ok(first)
    }

    /// Binds `stmt`'s values, steps it to the end (`on_row` sees each row) and resets it.
    fn run(
        &mut self,
        stmt: &Statement,
        mut on_row: impl FnMut(*mut ffi::sqlite3_stmt),
    ) -> Result<(), DbErr> {
        let db = self.conn.handle()?;
        let prepared = self.conn.prepared(&stmt.sql)?;
        let outcome = bind_all(prepared, stmt).and_then(|()| {
            loop {
                // SAFETY: `prepared` belongs to this thread's connection and is bound.
                match unsafe { ffi::sqlite3_step(prepared) } {
                    ffi::SQLITE_ROW => {
                        // SAFETY: as above; a row with no column is skipped.
                        if unsafe { ffi::sqlite3_column_count(prepared) } > 0 {
                            on_row(prepared);
                        }
                    }
                    ffi::SQLITE_DONE => break Ok(()),
                    _ => break Err(sqlite_error(db, &stmt.sql)),
                }
            }
        });
        // SAFETY: resetting and unbinding a statement of this connection; the reset repeats an
        // error already reported above.
        unsafe {
            ffi::sqlite3_reset(prepared);
            ffi::sqlite3_clear_bindings(prepared);
        }
        outcome
    }
}

/// The row a statement of the writer's connection is positioned on (seen by callers as a
/// [`Row`]).
pub(crate) struct SqliteRow {
    stmt: *mut ffi::sqlite3_stmt,
}

impl SqliteRow {
    fn column(&self, index: usize) -> Option<c_int> {
        let index = c_int::try_from(index).ok()?;
        // SAFETY: `stmt` is positioned on a row for as long as this `Row` lives.
        (index < unsafe { ffi::sqlite3_column_count(self.stmt) }).then_some(index)
    }

    /// Column `index` as an integer (0 for NULL or a missing column).
    pub(crate) fn int(&self, index: usize) -> i64 {
        // SAFETY: as in `column`.
        self.column(index)
            .map_or(0, |i| unsafe { ffi::sqlite3_column_int64(self.stmt, i) })
    }

    /// Column `index` as text (`None` for NULL or a missing column).
    pub(crate) fn text(&self, index: usize) -> Option<String> {
        let i = self.column(index)?;
        // SAFETY: as in `column`; the text SQLite returns is valid until the next step, and
        // is copied here before that.
        unsafe {
            let text = ffi::sqlite3_column_text(self.stmt, i);
            if text.is_null() {
                return None;
            }
            let length = usize::try_from(ffi::sqlite3_column_bytes(self.stmt, i)).ok()?;
            let bytes = std::slice::from_raw_parts(text, length);
            Some(String::from_utf8_lossy(bytes).into_owned())
        }
    }
}

/// Binds `stmt`'s values to the parameters of `prepared`, in order.
fn bind_all(prepared: *mut ffi::sqlite3_stmt, stmt: &Statement) -> Result<(), DbErr> {
    let values: &[Value] = stmt.values.as_ref().map_or(&[], |v| v.0.as_slice());
    // SAFETY: `prepared` is a live statement of the writer's connection.
    let expected = unsafe { ffi::sqlite3_bind_parameter_count(prepared) };
    if usize::try_from(expected).ok() != Some(values.len()) {
        return Err(error(&format!(
            "statement takes {expected} values, {} given: {}",
            values.len(),
            head(&stmt.sql)
        )));
    }
    for (i, value) in values.iter().enumerate() {
        let index = c_int::try_from(i + 1).map_err(|_| error("too many values"))?;
        // SAFETY: `index` is within the statement's parameters (checked above); text and
        // blobs are copied by SQLite (SQLITE_TRANSIENT) before the call returns.
        let rc = unsafe {
            match value {
                Value::Bool(Some(b)) => ffi::sqlite3_bind_int64(prepared, index, i64::from(*b)),
                Value::TinyInt(Some(n)) => ffi::sqlite3_bind_int64(prepared, index, (*n).into()),
                Value::SmallInt(Some(n)) => ffi::sqlite3_bind_int64(prepared, index, (*n).into()),
                Value::Int(Some(n)) => ffi::sqlite3_bind_int64(prepared, index, (*n).into()),
                Value::BigInt(Some(n)) => ffi::sqlite3_bind_int64(prepared, index, *n),
                Value::TinyUnsigned(Some(n)) => {
                    ffi::sqlite3_bind_int64(prepared, index, (*n).into())
                }
                Value::SmallUnsigned(Some(n)) => {
                    ffi::sqlite3_bind_int64(prepared, index, (*n).into())
                }
                Value::Unsigned(Some(n)) => ffi::sqlite3_bind_int64(prepared, index, (*n).into()),
                Value::BigUnsigned(Some(n)) => match i64::try_from(*n) {
                    Ok(n) => ffi::sqlite3_bind_int64(prepared, index, n),
                    Err(_) => return Err(error("an unsigned value exceeds SQLite's integers")),
                },
                Value::Float(Some(x)) => ffi::sqlite3_bind_double(prepared, index, (*x).into()),
                Value::Double(Some(x)) => ffi::sqlite3_bind_double(prepared, index, *x),
                Value::String(Some(s)) => bind_text(prepared, index, s),
                Value::Char(Some(c)) => bind_text(prepared, index, &c.to_string()),
                Value::Json(Some(j)) => bind_text(prepared, index, &j.to_string()),
                Value::Bytes(Some(b)) => ffi::sqlite3_bind_blob64(
                    prepared,
                    index,
                    b.as_ptr().cast(),
                    b.len() as u64,
                    ffi::SQLITE_TRANSIENT(),
                ),
                Value::Bool(None)
                | Value::TinyInt(None)
                | Value::SmallInt(None)
                | Value::Int(None)
                | Value::BigInt(None)
                | Value::TinyUnsigned(None)
                | Value::SmallUnsigned(None)
                | Value::Unsigned(None)
                | Value::BigUnsigned(None)
                | Value::Float(None)
                | Value::Double(None)
                | Value::String(None)
                | Value::Char(None)
                | Value::Json(None)
                | Value::Bytes(None) => ffi::sqlite3_bind_null(prepared, index),
                other => {
                    return Err(error(&format!(
                        "the SQLite writer binds no {other:?} (write it as text)"
                    )));
                }
            }
        };
        if rc != ffi::SQLITE_OK {
            return Err(error(&format!("cannot bind value {}: code {rc}", i + 1)));
        }
    }
    Ok(())
}

/// SAFETY: `prepared` is a live statement and `index` one of its parameters.
unsafe fn bind_text(prepared: *mut ffi::sqlite3_stmt, index: c_int, text: &str) -> c_int {
    // SAFETY: per this function's contract; SQLite copies the text (SQLITE_TRANSIENT).
    unsafe {
        ffi::sqlite3_bind_text64(
            prepared,
            index,
            text.as_ptr().cast(),
            text.len() as u64,
            ffi::SQLITE_TRANSIENT(),
            ffi::SQLITE_UTF8 as u8,
        )
    }
}

fn last_error(db: *mut ffi::sqlite3) -> String {
    if db.is_null() {
        return "out of memory".to_string();
    }
    // SAFETY: `db` is a connection handle; SQLite returns a NUL-terminated message it owns.
    unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db)) }
        .to_string_lossy()
        .into_owned()
}

/// The connection's last error, worded as sqlx words SQLite's (so `db::is_busy` and the
/// constraint checks read it the same).
fn sqlite_error(db: *mut ffi::sqlite3, sql: &str) -> DbErr {
    // SAFETY: `db` is a connection handle.
    let code = unsafe { ffi::sqlite3_extended_errcode(db) };
    let e = error(&format!(
        "error returned from database: ({code}) {} in: {}",
        last_error(db),
        head(sql)
    ));
    if crate::failure::is_corrupt_code(i64::from(code)) {
        crate::failure::mark_damaged(&e.to_string());
    }
    e
}

fn error(message: &str) -> DbErr {
    DbErr::Exec(RuntimeErr::Internal(message.to_string()))
}

/// The start of a statement, for error messages.
fn head(sql: &str) -> &str {
    let end = sql
        .char_indices()
        .nth(80)
        .map_or(sql.len(), |(index, _)| index);
    &sql[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use sea_orm::{ConnectionTrait, DbBackend};

    fn stmt(sql: &str, values: Vec<Value>) -> Statement {
        Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
    }

    async fn database() -> (tempfile::TempDir, sea_orm::DatabaseConnection, Arc<Writer>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("writer.sqlite");
        let db = crate::connect(&file, 2).await.expect("connect");
        db.execute_unprepared(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, data BLOB, x REAL)",
        )
        .await
        .expect("create");
        let writer = crate::gate::writer_for(&db).expect("a SQLite file has a writer");
        (dir, db, writer)
    }

    #[tokio::test]
    async fn a_transaction_commits_its_statements_and_reads_returning_rows() {
        let (_dir, db, writer) = database().await;
        let id = writer
            .transaction(|txn| {
                txn.execute(&stmt(
                    "INSERT INTO t (name, data, x) VALUES (?, ?, ?)",
                    vec!["a ; ? 'b'".into(), vec![0u8, 1, 2].into(), 1.5f64.into()],
                ))?;
                txn.query_row(
                    &stmt(
                        "UPDATE t SET name = name || ? WHERE id = 1 RETURNING id, name, NULL",
                        vec!["!".into()],
                    ),
                    |row| (row.int(0), row.text(1), row.text(2), row.text(9)),
                )
            })
            .await
            .expect("transaction");
        assert_eq!(id, Some((1, Some("a ; ? 'b'!".to_string()), None, None)));
        let row = db
            .query_one_raw(stmt("SELECT name, length(data) AS n, x FROM t", vec![]))
            .await
            .expect("select")
            .expect("row");
        assert_eq!(row.try_get::<String>("", "name").unwrap(), "a ; ? 'b'!");
        assert_eq!(row.try_get::<i64>("", "n").unwrap(), 3);
        assert_eq!(row.try_get::<f64>("", "x").unwrap(), 1.5);
    }

    #[tokio::test]
    async fn an_error_or_a_panic_rolls_the_whole_transaction_back() {
        let (_dir, db, writer) = database().await;
        let failed: Result<(), DbErr> = writer
            .transaction(|txn| {
                txn.execute(&stmt(
                    "INSERT INTO t (name) VALUES (?)",
                    vec!["kept?".into()],
                ))?;
                txn.execute(&stmt("INSERT INTO t (name) VALUES (NULL)", vec![]))?;
                Ok(())
            })
            .await;
        let message = failed.expect_err("NOT NULL").to_string();
        assert!(message.contains("NOT NULL constraint failed"), "{message}");
        let panicked: Result<(), DbErr> = writer
            .transaction(|txn| {
                txn.execute(&stmt(
                    "INSERT INTO t (name) VALUES (?)",
                    vec!["kept?".into()],
                ))?;
                panic!("a bug in a transaction's body");
            })
            .await;
        assert!(panicked.is_err());
        let mismatched: Result<u64, DbErr> = writer
            .transaction(|txn| txn.execute(&stmt("INSERT INTO t (name) VALUES (?)", vec![])))
            .await;
        assert!(
            mismatched
                .expect_err("no value")
                .to_string()
                .contains("takes 1 values")
        );
        let two: Result<u64, DbErr> = writer
            .transaction(|txn| txn.execute(&stmt("SELECT 1; SELECT 2", vec![])))
            .await;
        assert!(two.expect_err("two").to_string().contains("one statement"));
        let count = db
            .query_one_raw(stmt("SELECT count(*) AS n FROM t", vec![]))
            .await
            .expect("count")
            .expect("row");
        assert_eq!(count.try_get::<i64>("", "n").unwrap(), 0);
        // The writer still works after all of that.
        writer
            .transaction(|txn| txn.execute(&stmt("INSERT INTO t (name) VALUES ('ok')", vec![])))
            .await
            .expect("insert after failures");
    }

    #[tokio::test]
    async fn checkpoints_run_on_their_own_thread_and_the_writer_keeps_writing() {
        let (_dir, db, writer) = database().await;
        let before = CHECKPOINTS.load(std::sync::atomic::Ordering::Relaxed);
        // About 2,500 pages of 4 KiB, in 50 commits: past the checkpoint point several times.
        for batch in 0..50 {
            writer
                .transaction(move |txn| {
                    for i in 0..10 {
                        txn.execute(&stmt(
                            "INSERT INTO t (name, data) VALUES (?, zeroblob(20000))",
                            vec![format!("{batch}-{i}").into()],
                        ))?;
                    }
                    Ok::<_, DbErr>(())
                })
                .await
                .expect("insert");
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while CHECKPOINTS.load(std::sync::atomic::Ordering::Relaxed) == before {
            assert!(std::time::Instant::now() < deadline, "no checkpoint ran");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let count = db
            .query_one_raw(stmt("SELECT count(*) AS n FROM t", vec![]))
            .await
            .expect("count")
            .expect("row");
        assert_eq!(count.try_get::<i64>("", "n").unwrap(), 500);
    }

    #[tokio::test]
    async fn stores_on_one_file_share_one_writer() {
        let (_dir, db, writer) = database().await;
        let again = crate::gate::writer_for(&db).expect("writer");
        assert!(Arc::ptr_eq(&writer, &again));
    }
}
