//! The database's own administration: integrity and migration check (`check`), size and row
//! statistics (`stats`), maintenance (`maintain`: pruning superseded runs, optimize, WAL
//! checkpoint, vacuum), online backup and restore (`backup`). This module holds what they
//! share: the report's backend, the refusal on PostgreSQL, and the single connection each
//! command opens for itself, so none needs the schema to be current and none changes the
//! database it only inspects. On PostgreSQL, check, statistics and `ANALYZE` work through the
//! server; the file-level commands refuse and name PostgreSQL's own tools.

mod backup;
mod check;
mod maintain;
mod stats;

pub use backup::{DbBackup, DbRestore, backup, restore};
pub(crate) use backup::{
    Fault, install_database, no_fault, restore_target, snapshot, temp_beside, verify_backup,
};
// The workspace restore's tests inject faults into the database restore through it.
#[cfg(test)]
pub(crate) use backup::restore_with;
pub use check::{DbCheck, ForeignKeyViolation, check};
pub use maintain::{DbMaintenance, WalCheckpoint, maintain};
pub use stats::{DbStats, StorageFigures, TableRows, stats};

use shelf_db::sql::SqlExt;
use std::path::{Path, PathBuf};

use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sea_orm::{DatabaseConnection, DbBackend, QueryResult, SqlxSqliteConnector, Statement};
use serde::Serialize;

use super::AdminError;
use super::paths::absolute;
use crate::settings::Settings;

/// Which database a report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Sqlite,
    Postgres,
}
/// Refuses `command` when the settings select PostgreSQL, whose files Shelf never touches:
/// `instead` names the tool that does the job there.
pub(crate) fn sqlite_only(
    settings: &Settings,
    command: &'static str,
    instead: &'static str,
) -> Result<(), AdminError> {
    if settings.is_postgres() {
        Err(AdminError::PostgresUnsupported {
            command,
            database: settings.database_display(),
            instead,
        })
    } else {
        Ok(())
    }
}

/// Opens one connection to an existing SQLite file, changing nothing about it.
async fn open_file(path: &Path) -> Result<DatabaseConnection, AdminError> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(false)
        .busy_timeout(shelf_db::BUSY_TIMEOUT);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .map_err(|e| AdminError::Db(format!("cannot open {}: {e}", path.display())))?;
    Ok(SqlxSqliteConnector::from_sqlx_sqlite_pool(pool))
}

/// One connection to the PostgreSQL server of the settings (errors without the password).
async fn open_server(settings: &Settings) -> Result<DatabaseConnection, AdminError> {
    crate::db::connect_settings(settings, 1)
        .await
        .map_err(|e| match e {
            crate::AppError::Storage { detail } => AdminError::Db(detail),
            other => AdminError::Db(other.to_string()),
        })
}

async fn rows(db: &DatabaseConnection, sql: &str) -> Result<Vec<QueryResult>, AdminError> {
    Ok(db
        .query_all_sql(Statement::from_string(DbBackend::Sqlite, sql))
        .await?)
}

/// The one integer a statement answers (`PRAGMA page_count`, `SELECT count(*) ...`).
async fn scalar(db: &DatabaseConnection, sql: &str) -> Result<i64, AdminError> {
    rows(db, sql)
        .await?
        .first()
        .and_then(|row| row.try_get_by_index::<i64>(0).ok())
        .ok_or_else(|| AdminError::Db(format!("`{sql}` answered no number")))
}

/// A table name quoted as an identifier (inner quotes doubled), valid on both backends.
fn quoted(table: &str) -> String {
    format!("\"{}\"", table.replace('"', "\"\""))
}

/// The live database of these settings, which must exist.
fn live_database(settings: &Settings) -> Result<PathBuf, AdminError> {
    let path = absolute(&settings.storage.database_path)?;
    if path.is_file() {
        Ok(path)
    } else {
        Err(AdminError::DatabaseMissing { path })
    }
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

async fn integrity(db: &DatabaseConnection) -> Vec<String> {
    match rows(db, "PRAGMA integrity_check").await {
        Ok(found) => found
            .iter()
            .map(|row| row.try_get_by_index::<String>(0).unwrap_or_default())
            .collect(),
        // A damaged file often fails the check outright ("database disk image is malformed").
        Err(e) => vec![e.to_string()],
    }
}
