//! Opening the database the way every Shelf process must. SQLite (the embedded default): WAL,
//! foreign keys on, `synchronous=NORMAL` and a 5 s busy timeout on every pooled connection.
//! PostgreSQL (several hosts): a pool of the same size on the server the URL names, with TLS
//! through rustls when the URL asks for it (`sslmode=require`). `begin_write`: the write
//! transactions of every crate, queued per process on SQLite. `is_transient` and `is_corrupt`:
//! which database errors pass by themselves, and which mean a damaged database, after which
//! this process refuses to write (`mark_damaged`).

use std::collections::HashMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction, DbBackend,
    DbErr, ExecResult, QueryResult, SqliteTransactionMode, Statement, TransactionOptions,
    TransactionTrait,
};
use tokio::sync::OwnedMutexGuard;

pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Which database a process opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseTarget {
    /// A SQLite file, created when missing.
    Sqlite(PathBuf),
    /// A `postgres://` or `postgresql://` URL; the database must exist.
    Postgres(String),
}

impl DatabaseTarget {
    pub fn is_postgres(&self) -> bool {
        matches!(self, DatabaseTarget::Postgres(_))
    }
}

/// Opens `target` with `max_connections` pooled connections.
pub async fn connect_target(
    target: &DatabaseTarget,
    max_connections: u32,
) -> Result<DatabaseConnection, DbErr> {
    match target {
        DatabaseTarget::Sqlite(path) => connect(path, max_connections).await,
        DatabaseTarget::Postgres(url) => connect_postgres(url, max_connections).await,
    }
}

async fn connect_postgres(url: &str, max_connections: u32) -> Result<DatabaseConnection, DbErr> {
    let mut options = ConnectOptions::new(url);
    options
        .max_connections(max_connections.max(1))
        .min_connections(1)
        .connect_timeout(Duration::from_secs(10))
        .acquire_timeout(Duration::from_secs(30))
        .sqlx_logging(false);
    Database::connect(options).await
}

/// Opens (creating if missing) the SQLite database at `path` with `max_connections` pooled
/// connections. sea-orm gives SQLite one connection unless told otherwise, which would
/// serialize readers behind writers.
pub async fn connect(path: &Path, max_connections: u32) -> Result<DatabaseConnection, DbErr> {
    let file = path.to_path_buf();
    // The URL only selects the driver; the real file name is set below so that paths need no
    // URL escaping.
    let mut options = ConnectOptions::new("sqlite://shelf.sqlite");
    options
        .max_connections(max_connections.max(1))
        .min_connections(1)
        .acquire_timeout(Duration::from_secs(30))
        // A pooled SQLite connection is a file handle in this process: pinging it before
        // every acquire only adds a round trip through sqlx's connection thread per statement.
        .test_before_acquire(false)
        .sqlx_logging(false)
        .map_sqlx_sqlite_pool_opts(|pool| {
            pool.after_connect(|conn, _| {
                Box::pin(async move {
                    let mut handle = conn.lock_handle().await?;
                    busy::install(handle.as_raw_handle());
                    Ok(())
                })
            })
        })
        .map_sqlx_sqlite_opts(move |o| {
            o.filename(&file)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                .busy_timeout(BUSY_TIMEOUT)
                .pragma("cache_size", cache_size_pragma(max_connections))
        });
    // Two processes opening a new file at once both switch it to WAL, which needs the file's
    // exclusive lock: SQLite answers one of them SQLITE_BUSY at once, without its busy handler
    // (waiting could deadlock). The switch is quick, so opening again soon succeeds.
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match Database::connect(options.clone()).await {
            Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            opened => return opened,
        }
    }
}

/// How a connection waits for a lock another process holds (the API's and a worker's writers,
/// which no in-process gate can order).
///
/// SQLite's own handler (`busy_timeout`) sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms
/// and retries: write transactions here last well under a millisecond, so a waiter usually
/// sleeps far past the moment the lock frees, and the longer it has waited the later it looks
/// again. This one looks again after 100 µs at first, then 500 µs, then 2 ms, and gives up with
/// `SQLITE_BUSY` after the same [`BUSY_TIMEOUT`] (docs/PERFORMANCE.md, Throughput).
mod busy {
    use std::os::raw::{c_int, c_void};
    use std::ptr::NonNull;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    /// Retries this process's connections made in [`wait_a_little`].
    pub(super) static RETRIES: AtomicU64 = AtomicU64::new(0);

    use libsqlite3_sys::{sqlite3, sqlite3_busy_handler};

    /// The pause before the `count`-th retry, in microseconds.
    pub(super) fn pause_us(count: u64) -> u64 {
        match count {
            0..20 => 100,
            20..100 => 500,
            _ => 2_000,
        }
    }

    /// The time spent waiting before the `count`-th retry, in microseconds.
    pub(super) fn waited_us(count: u64) -> u64 {
        (0..count.min(100)).map(pause_us).sum::<u64>() + count.saturating_sub(100) * 2_000
    }

    extern "C" fn wait_a_little(_: *mut c_void, count: c_int) -> c_int {
        let count = u64::try_from(count).unwrap_or(0);
        if waited_us(count) >= super::BUSY_TIMEOUT.as_micros() as u64 {
            return 0;
        }
        RETRIES.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_micros(pause_us(count)));
        1
    }

    /// Replaces the connection's busy handler (and so its `busy_timeout`) with [`wait_a_little`].
    pub(super) fn install(handle: NonNull<sqlite3>) {
        // SAFETY: `handle` is an open connection locked out of sqlx's worker thread for this
        // call; the handler is a plain function that keeps no state.
        unsafe {
            sqlite3_busy_handler(handle.as_ptr(), Some(wait_a_little), std::ptr::null_mut());
        }
    }
}

/// Gives a raw connection (the engine's writer thread's) the same busy handler as the pool's.
pub(crate) fn install_busy_handler(handle: *mut libsqlite3_sys::sqlite3) {
    if let Some(handle) = std::ptr::NonNull::new(handle) {
        busy::install(handle);
    }
}

/// SQLite's `SQLITE_BUSY` / `SQLITE_LOCKED`, as sqlx reports them.
pub fn is_busy(e: &DbErr) -> bool {
    let text = e.to_string();
    text.contains("database is locked") || text.contains("database is busy")
}

/// Whether an engine error is a refusal that passes on its own: a busy or locked SQLite file
/// (a backup tool, another process's long transaction), a turn at the write lock not given in
/// time, a PostgreSQL connection dropped or restarting, a serialization failure or deadlock.
/// A write refused this way is worth retrying; any other error is not.
pub fn is_transient(error: &crate::EngineError) -> bool {
    let crate::EngineError::Db(e) = error else {
        return false;
    };
    if is_busy(e) {
        return true;
    }
    let text = e.to_string().to_ascii_lowercase();
    [
        "sqlite_busy",
        "connection reset",
        "connection refused",
        "connection closed",
        "broken pipe",
        "pool timed out",
        "timed out",
        "terminating connection",
        "server closed the connection",
        "the database system is starting up",
        "the database system is shutting down",
        "could not serialize access",
        "deadlock detected",
        "unexpected eof",
        "io error",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// SQLite's primary result codes of a damaged file: `SQLITE_CORRUPT` (also its extended codes
/// `_VTAB`, `_SEQUENCE`, `_INDEX`) and `SQLITE_NOTADB`. An extended code keeps its primary code
/// in the low byte.
const SQLITE_CORRUPT: i64 = 11;
const SQLITE_NOTADB: i64 = 26;

/// PostgreSQL's SQLSTATEs of damaged storage: `data_corrupted` and `index_corrupted`.
const PG_CORRUPT_STATES: [&str; 2] = ["XX001", "XX002"];

/// The words of every refusal by the damage latch ([`mark_damaged`]), which [`is_corrupt_text`]
/// recognizes, so a refused write is reported as damage like the error that tripped it.
const DAMAGED: &str = "database is known to be damaged";

/// Whether a SQLite result code (primary or extended) says the file is damaged.
pub fn is_corrupt_code(code: i64) -> bool {
    matches!(code & 0xff, SQLITE_CORRUPT | SQLITE_NOTADB)
}

/// Whether an engine error says the database is damaged: SQLite's `SQLITE_CORRUPT` or
/// `SQLITE_NOTADB` (with their extended codes), PostgreSQL's `XX001`/`XX002`, or a write the
/// damage latch refused. Unlike [`is_transient`] errors, these never pass by themselves.
pub fn is_corrupt(error: &crate::EngineError) -> bool {
    match error {
        crate::EngineError::Db(e) => is_corrupt_db(e),
        _ => false,
    }
}

/// [`is_corrupt`] for a database error: the driver's code when it kept one, else its words.
pub fn is_corrupt_db(e: &DbErr) -> bool {
    is_corrupt_by_code(e) || is_corrupt_text(&e.to_string())
}

/// Whether the database itself answered `e` with a damage code (SQLite's result code or
/// PostgreSQL's SQLSTATE, as the driver keeps it): unlike words, no text a user wrote (a file
/// name in a message) can make one up.
fn is_corrupt_by_code(e: &DbErr) -> bool {
    let (DbErr::Conn(runtime) | DbErr::Exec(runtime) | DbErr::Query(runtime)) = e else {
        return false;
    };
    let sea_orm::RuntimeErr::SqlxError(sqlx) = runtime else {
        return false;
    };
    sqlx.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|code| {
            let code = code.as_ref();
            PG_CORRUPT_STATES.contains(&code) || code.parse().is_ok_and(is_corrupt_code)
        })
}

/// [`is_corrupt`] for an error that only survives as text (wrapped, formatted, logged): SQLite's
/// messages for the two codes, a code as sqlx (`(code: 11)`) or the engine's writer (`(11)`)
/// print it, or the latch's refusal.
pub fn is_corrupt_text(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    if [
        "database disk image is malformed",
        "file is not a database",
        DAMAGED,
    ]
    .iter()
    .any(|needle| lower.contains(needle))
    {
        return true;
    }
    ["(code: ", "error returned from database: ("]
        .iter()
        .any(|prefix| {
            lower.match_indices(prefix).any(|(at, _)| {
                let rest = &lower[at + prefix.len()..];
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                rest[digits..].starts_with(')') && rest[..digits].parse().is_ok_and(is_corrupt_code)
            })
        })
}

/// What the operator does about a damaged database, logged once with the first sign of it.
pub const DAMAGE_RECOVERY: &str = "the database is damaged: this process writes nothing more \
    into it. Stop `shelf api` and `shelf worker`, keep a copy of the damaged file, restore the \
    last backup (`shelf admin db-restore FILE --yes`, or `shelf admin workspace-restore FILE.zip \
    --yes`; on PostgreSQL `pg_restore`), run `shelf migrate && shelf admin db-check`, then start \
    the services again (docs/operations.md, Backup and restore)";

/// The first sign of damage this process saw; once set, never cleared.
static DAMAGE: OnceLock<String> = OnceLock::new();

/// Latches "the database is damaged" for the rest of the process: [`begin_write`] and the
/// writer thread then refuse every write with a corrupt error instead of writing more into a
/// damaged file. The first call logs `detail` at error level with [`DAMAGE_RECOVERY`]; later
/// calls change nothing. A Shelf process opens one database, so the latch is process-wide.
pub fn mark_damaged(detail: &str) {
    if DAMAGE.set(detail.to_string()).is_ok() {
        tracing::error!(
            code = "database_corrupt",
            detail,
            recovery = DAMAGE_RECOVERY,
            "database damage detected"
        );
    }
}

/// The first sign of damage this process saw, when it saw one.
pub fn known_damage() -> Option<&'static str> {
    DAMAGE.get().map(String::as_str)
}

/// Classifies `e` ([`is_corrupt_db`]) and, when the database answered it with a damage code,
/// latches the damage ([`mark_damaged`]). Every conversion of a database error into a crate's
/// error calls this, so the first corrupt error met anywhere in the process stops its writes.
/// Only the code latches: words alone (which a stored file name could carry into a message)
/// make a `database_corrupt` answer, never a process that refuses to write.
pub fn note_if_corrupt(e: &DbErr) -> bool {
    if is_corrupt_by_code(e) {
        mark_damaged(&e.to_string());
        return true;
    }
    is_corrupt_db(e)
}

/// The error of a write refused because the database is known to be damaged.
pub(crate) fn refused_as_damaged() -> Option<DbErr> {
    known_damage().map(|first| {
        DbErr::Custom(format!(
            "{DAMAGED} (first seen: {first}); writes are refused until it is restored from a backup"
        ))
    })
}

/// SQLite's `SQLITE_FULL`: a write found no room on the disk (or hit the file-size limit).
const SQLITE_FULL: i64 = 13;

/// PostgreSQL's SQLSTATE `disk_full`.
const PG_DISK_FULL: &str = "53100";

/// Whether a database error says the disk is full: SQLite's `SQLITE_FULL` ("database or disk
/// is full"), PostgreSQL's `53100`, or the operating system's `ENOSPC` in its words. A full
/// disk is a resource limit the operator fixes, not an internal error: callers report it as
/// `insufficient_storage`.
pub fn is_storage_full(e: &DbErr) -> bool {
    let runtime = match e {
        DbErr::Conn(r) | DbErr::Exec(r) | DbErr::Query(r) => Some(r),
        _ => None,
    };
    if let Some(sea_orm::RuntimeErr::SqlxError(sqlx)) = runtime
        && let Some(code) = sqlx.as_database_error().and_then(|d| d.code())
    {
        let code = code.as_ref();
        if code == PG_DISK_FULL || code.parse::<i64>().is_ok_and(|c| c & 0xff == SQLITE_FULL) {
            return true;
        }
    }
    is_storage_full_text(&e.to_string())
}

/// [`is_storage_full`] for a file-system error: `ENOSPC` or a disk quota used up.
pub fn is_storage_full_io(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    ) || is_storage_full_text(&e.to_string())
}

/// [`is_storage_full`] for an error that only survives as text (wrapped, formatted): SQLite's,
/// the kernel's and PostgreSQL's words for it.
pub fn is_storage_full_text(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "database or disk is full",
        "no space left on device",
        "disk quota exceeded",
        "(os error 28)",
        "(code: 13)",
        "could not extend file",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The page cache of all of a pool's connections together, in KiB.
///
/// Each connection keeps its own cache and fills it up to its limit: with 32 MiB each, the
/// API's eight connections grew to 25 MiB of heap on the peer benchmark's concurrent searches
/// for no measurable gain, since the kernel's page cache holds the file anyway and a miss costs
/// one `pread` (docs/PERFORMANCE.md, Throughput).
const PAGE_CACHE_BUDGET_KIB: u32 = 8 * 1024;

/// No connection gets less than this: SQLite's own default is about 2 MiB.
const MIN_PAGE_CACHE_KIB: u32 = 512;

/// `PRAGMA cache_size` for each of `max_connections` connections: the pool's budget split among
/// them (a negative value is a size in KiB).
fn cache_size_pragma(max_connections: u32) -> String {
    format!("-{}", cache_size_kib(max_connections))
}

/// Each connection's share of the pool's page cache budget, in KiB.
fn cache_size_kib(max_connections: u32) -> u32 {
    (PAGE_CACHE_BUDGET_KIB / max_connections.max(1)).max(MIN_PAGE_CACHE_KIB)
}

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
pub fn writer_for(db: &DatabaseConnection) -> Option<Arc<crate::writer::Writer>> {
    let file = sqlite_file(db)?;
    let gate = write_gate(db)?;
    let pool = db.get_sqlite_connection_pool();
    let cache_kib = cache_size_kib(pool.options().get_max_connections());
    Some(crate::writer::Writer::for_file(&file, cache_kib, gate))
}

/// The file of a SQLite database, none on PostgreSQL or in memory.
fn sqlite_file(db: &DatabaseConnection) -> Option<PathBuf> {
    if db.get_database_backend() != DbBackend::Sqlite {
        return None;
    }
    let options = db.get_sqlite_connection_pool().connect_options();
    let file = options.get_filename();
    if file.as_os_str().is_empty() || file == Path::new(":memory:") {
        return None;
    }
    Some(file.to_path_buf())
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
    use crate::sql::SqlExt;

    #[tokio::test]
    async fn a_full_database_is_told_apart_from_other_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = connect(&dir.path().join("full.sqlite"), 1)
            .await
            .expect("connect");
        db.execute_unprepared("CREATE TABLE t (b BLOB NOT NULL)")
            .await
            .expect("create");
        // The file may not grow past its current pages: SQLite answers SQLITE_FULL, as on a
        // full disk.
        let pages = db
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "PRAGMA page_count",
            ))
            .await
            .expect("page_count")
            .and_then(|row| row.try_get_by_index::<i64>(0).ok())
            .expect("pages");
        db.execute_unprepared(&format!("PRAGMA max_page_count = {pages}"))
            .await
            .expect("cap");
        let full = db
            .execute_unprepared("INSERT INTO t VALUES (zeroblob(1000000))")
            .await
            .expect_err("no room");
        assert!(is_storage_full(&full), "{full}");
        assert!(!is_busy(&full));
        assert!(!is_storage_full(&DbErr::Custom(
            "database is locked".into()
        )));

        let enospc = std::io::Error::from_raw_os_error(28);
        assert!(is_storage_full_io(&enospc), "{enospc}");
        assert!(is_storage_full_io(&std::io::Error::other(format!(
            "writing: {enospc}"
        ))));
        assert!(!is_storage_full_io(&std::io::Error::from_raw_os_error(13)));
        assert!(is_storage_full_text(&format!("database: {full}")));
        assert!(!is_storage_full_text(
            "error returned from database: (code: 130) other"
        ));
    }

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
    async fn a_pool_splits_the_page_cache_budget_among_its_connections() {
        assert_eq!(cache_size_pragma(1), "-8192");
        assert_eq!(cache_size_pragma(64), "-512");
        let dir = tempfile::tempdir().expect("tempdir");
        let db = connect(&dir.path().join("cache.sqlite"), 8)
            .await
            .expect("connect");
        let row = db
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "PRAGMA cache_size",
            ))
            .await
            .expect("pragma")
            .expect("row");
        assert_eq!(row.try_get_by_index::<i64>(0).expect("cache_size"), -1024);
    }

    #[test]
    fn the_busy_handler_looks_again_soon_and_gives_up_after_the_busy_timeout() {
        let limit = BUSY_TIMEOUT.as_micros() as u64;
        let last = (0..100_000u64)
            .find(|&n| busy::waited_us(n) >= limit)
            .expect("gives up");
        assert!(busy::pause_us(0) <= 100 && busy::pause_us(last) <= 2_000);
        assert_eq!(
            busy::waited_us(last),
            (0..last).map(busy::pause_us).sum::<u64>()
        );
        assert!(busy::waited_us(last) < limit + 2_000);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_of_another_process_waits_in_the_busy_handler_then_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("busy.sqlite");
        let holder = connect(&file, 1).await.expect("connect holder");
        let waiter = connect(&file, 1).await.expect("connect waiter");
        holder
            .execute_unprepared("CREATE TABLE t (n INTEGER NOT NULL)")
            .await
            .expect("create");
        // Plain `BEGIN IMMEDIATE` on both, past the in-process gate: as two processes would.
        let immediate = || TransactionOptions {
            sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
            ..Default::default()
        };
        let held = holder.begin_with_options(immediate()).await.expect("hold");
        let writer = tokio::spawn(async move {
            let txn = waiter.begin_with_options(immediate()).await?;
            txn.execute_unprepared("INSERT INTO t (n) VALUES (2)")
                .await?;
            txn.commit().await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!writer.is_finished(), "the lock was held");
        // The waiter waits in Shelf's handler, not in SQLite's `busy_timeout` one.
        assert!(busy::RETRIES.load(std::sync::atomic::Ordering::Relaxed) > 0);
        held.execute_unprepared("INSERT INTO t (n) VALUES (1)")
            .await
            .expect("insert");
        held.commit().await.expect("commit");
        writer.await.expect("join").expect("the waiter wrote");
        let row = holder
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT group_concat(n) AS ns FROM (SELECT n FROM t ORDER BY n)",
            ))
            .await
            .expect("read")
            .expect("row");
        assert_eq!(row.try_get::<String>("", "ns").expect("ns"), "1,2");
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

    #[test]
    fn corrupt_and_notadb_codes_and_words_are_damage_and_nothing_else_is() {
        for code in [11, 26, 267, 523, 779] {
            assert!(is_corrupt_code(code), "{code}");
        }
        for code in [0, 1, 5, 10, 13, 19, 266, 1034, 2067] {
            assert!(!is_corrupt_code(code), "{code}");
        }
        for text in [
            "Query Error: error returned from database: (code: 11) database disk image is malformed",
            "error returned from database: (267) vtable constructor failed in: SELECT",
            "Execution Error: error returned from database: (code: 26) file is not a database",
            "DATABASE DISK IMAGE IS MALFORMED",
            "database is known to be damaged (first seen: x); writes are refused",
        ] {
            assert!(is_corrupt_text(text), "{text}");
            assert!(is_corrupt_db(&DbErr::Custom(text.into())), "{text}");
        }
        for text in [
            "error returned from database: (code: 5) database is locked",
            "error returned from database: (code: 2067) UNIQUE constraint failed: t.n",
            "error returned from database: (code: 13) database or disk is full",
            "code 11 (code: 11x) (11 apples)",
        ] {
            assert!(!is_corrupt_text(text), "{text}");
        }
        let e = crate::EngineError::Db(DbErr::Custom(
            "error returned from database: (11) database disk image is malformed".into(),
        ));
        assert!(is_corrupt(&e) && !is_transient(&e));
    }

    /// Makes a SQLite file whose table `damaged` has its root page overwritten with garbage,
    /// beside an intact table `healthy`: the file opens, and only reads of `damaged` fail.
    async fn file_with_a_damaged_table(file: &Path) {
        let db = connect(file, 1).await.expect("connect");
        db.execute_unprepared(
            "CREATE TABLE healthy (n INTEGER NOT NULL); CREATE TABLE damaged (n INTEGER NOT NULL); \
             INSERT INTO healthy (n) VALUES (1); INSERT INTO damaged (n) VALUES (1), (2);",
        )
        .await
        .expect("create");
        let scalar = |sql: &'static str| {
            let db = db.clone();
            async move {
                let row = db
                    .query_one_sql(Statement::from_string(DbBackend::Sqlite, sql))
                    .await
                    .expect(sql)
                    .expect("row");
                row.try_get_by_index::<i64>(0).expect(sql)
            }
        };
        let page_size = scalar("PRAGMA page_size").await;
        let root = scalar("SELECT rootpage FROM sqlite_schema WHERE name = 'damaged'").await;
        // Everything into the main file, so the damage below is what every reader sees.
        db.execute_unprepared("PRAGMA wal_checkpoint(TRUNCATE)")
            .await
            .expect("checkpoint");
        db.close().await.expect("close");
        let mut bytes = std::fs::read(file).expect("read");
        let start = usize::try_from((root - 1) * page_size).expect("offset");
        let end = start + usize::try_from(page_size).expect("size");
        bytes[start..end].fill(0x5a);
        std::fs::write(file, bytes).expect("damage");
    }

    /// The latch is process-wide, so this test runs in a child process of this test binary
    /// (the parent only starts it): no other test here ever meets a latched database.
    #[test]
    fn after_a_corrupt_error_this_process_writes_nothing_more() {
        const CHILD: &str = "SHELF_TEST_DAMAGE_LATCH_CHILD";
        const NAME: &str = "db::tests::after_a_corrupt_error_this_process_writes_nothing_more";
        if std::env::var_os(CHILD).is_some() {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(latch_child());
            println!("latch child passed");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .expect("run the child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("latch child passed"),
            "child failed ({:?}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    async fn latch_child() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("damaged.sqlite");
        file_with_a_damaged_table(&file).await;
        let db = connect(&file, 2)
            .await
            .expect("the damaged file still opens");
        let insert = |n: i64| {
            Statement::from_sql_and_values(
                DbBackend::Sqlite,
                "INSERT INTO healthy (n) VALUES (?)",
                [n.into()],
            )
        };
        // Before any damage is seen, writes to the intact table go through.
        let txn = begin_write(&db).await.expect("begin");
        txn.execute_sql(insert(2)).await.expect("insert");
        txn.commit().await.expect("commit");
        assert!(known_damage().is_none());
        // Words alone (a file name in a message, say) classify, but latch nothing.
        let words =
            DbErr::Custom("a file named (code: 11) database disk image is malformed".into());
        assert!(note_if_corrupt(&words));
        assert!(known_damage().is_none());

        // A read of the damaged table fails, and its conversion into the engine's error (as
        // every `?` does) latches the damage.
        let read = db
            .query_all_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT n FROM damaged",
            ))
            .await
            .expect_err("the damaged page cannot be read");
        let error = crate::EngineError::from(read);
        assert!(is_corrupt(&error), "{error}");
        assert!(known_damage().is_some());

        // From now on no write reaches the file, though this one would touch no damaged page.
        let refused = begin_write(&db).await.err().expect("begin_write refuses");
        assert!(is_corrupt_db(&refused), "{refused}");
        let writer = writer_for(&db).expect("writer");
        let refused: Result<u64, DbErr> =
            writer.transaction(move |txn| txn.execute(&insert(3))).await;
        assert!(is_corrupt_db(&refused.expect_err("the writer refuses")));
        let row = db
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT count(*) FROM healthy",
            ))
            .await
            .expect("count")
            .expect("row");
        assert_eq!(row.try_get_by_index::<i64>(0).expect("count"), 2);
    }
}
