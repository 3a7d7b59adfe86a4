//! Opening the database the way every Shelf process must. SQLite (the embedded default): WAL,
//! foreign keys on, `synchronous=NORMAL` and a 5 s busy timeout on every pooled connection.
//! PostgreSQL (several hosts): a pool of the same size on the server the URL names, with TLS
//! through rustls when the URL asks for it (`sslmode=require`). Every pooled SQLite connection
//! gets the busy handler below and its share of the pool's page cache budget.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbBackend, DbErr};

use crate::failure::is_busy;

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
        .sqlx_logging(false)
        .map_sqlx_postgres_pool_opts(no_reaper);
    Database::connect(options).await
}

/// No idle timeout and no maximum lifetime, so sqlx runs no periodic reaper over the pool:
/// that sweep can spin at 100 % of a core for ever once the pool's idle count underflows
/// (sqlx issue 3645, fixed upstream after the sqlx this sea-orm uses), which showed here as a
/// `shelf import` that never exited. A pooled connection lives as long as the process (a
/// SQLite one is a file handle; a PostgreSQL one is checked before each use and replaced when
/// broken).
fn no_reaper<DB: sea_orm::sqlx::Database>(
    pool: sea_orm::sqlx::pool::PoolOptions<DB>,
) -> sea_orm::sqlx::pool::PoolOptions<DB> {
    pool.idle_timeout(None).max_lifetime(None)
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
            no_reaper(pool).after_connect(|conn, _| {
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

/// Gives a raw connection (the writer thread's) the same busy handler as the pool's.
pub(crate) fn install_busy_handler(handle: *mut libsqlite3_sys::sqlite3) {
    if let Some(handle) = std::ptr::NonNull::new(handle) {
        busy::install(handle);
    }
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
pub(crate) fn cache_size_kib(max_connections: u32) -> u32 {
    (PAGE_CACHE_BUDGET_KIB / max_connections.max(1)).max(MIN_PAGE_CACHE_KIB)
}

/// The file of a SQLite database, none on PostgreSQL or in memory.
pub(crate) fn sqlite_file(db: &DatabaseConnection) -> Option<PathBuf> {
    if db.get_database_backend() != DbBackend::Sqlite {
        return None;
    }
    let options = db.get_sqlite_connection_pool().connect_options();
    let file = options.get_filename();
    // sqlx names an in-memory database `file:sqlx-in-memory-N` (and keeps `in_memory`
    // private): that name is no file.
    if file.as_os_str().is_empty()
        || file == Path::new(":memory:")
        || file.to_string_lossy().starts_with("file:sqlx-in-memory-")
    {
        return None;
    }
    Some(file.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::SqlExt;
    use sea_orm::{
        ConnectionTrait, SqliteTransactionMode, Statement, TransactionOptions, TransactionTrait,
    };

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
}
