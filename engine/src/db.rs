//! Opening the database the way every Shelf process must. SQLite (the embedded default): WAL,
//! foreign keys on, `synchronous=NORMAL` and a 5 s busy timeout on every pooled connection.
//! PostgreSQL (several hosts): a pool of the same size on the server the URL names, with TLS
//! through rustls when the URL asks for it (`sslmode=require`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbErr};

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
        .map_sqlx_sqlite_opts(move |o| {
            o.filename(&file)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                .busy_timeout(BUSY_TIMEOUT)
                // 32 MiB of page cache per connection: fewer reads through the kernel.
                .pragma("cache_size", "-32768")
        });
    Database::connect(options).await
}
