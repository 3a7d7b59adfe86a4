//! Opening the SQLite database the way every Shelf process must: WAL, foreign keys on,
//! `synchronous=NORMAL` and a 5 s busy timeout on every pooled connection.

use std::path::Path;
use std::time::Duration;

use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbErr};

pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens (creating if missing) the database at `path` with `max_connections` pooled
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
