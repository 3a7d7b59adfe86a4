//! Opening Shelf's database: connection pragmas, migrations (under the write lock, so that
//! processes starting at once on a new database do not race), and the check that refuses a
//! database written by a newer Shelf.

use shelf_db::sql::SqlExt;
use std::path::Path;
use std::time::{Duration, Instant};

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, SqliteTransactionMode,
    Statement, TransactionOptions, TransactionTrait,
};
use shelf_db::{DatabaseTarget, is_busy};
use shelf_migrations::{Migrator, MigratorTrait, known_migrations};

use crate::error::AppError;

/// The state of the schema against this binary.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SchemaStatus {
    pub applied: Vec<String>,
    pub pending: Vec<String>,
    /// Applied migrations this binary does not know: the database is newer than the binary.
    pub unknown: Vec<String>,
}

/// Opens the database `settings` name: the SQLite file (its directory created when missing) or
/// the PostgreSQL server of `SHELF_DATABASE_URL`, with the configured pool size.
pub async fn connect_settings(
    settings: &crate::Settings,
    max_connections: u32,
) -> Result<DatabaseConnection, AppError> {
    match settings.database_target() {
        DatabaseTarget::Sqlite(path) => connect(&path, max_connections).await,
        target @ DatabaseTarget::Postgres(_) => shelf_db::connect_target(&target, max_connections)
            .await
            .map_err(|e| AppError::Storage {
                detail: format!(
                    "cannot open database {}: {}",
                    settings.database_display(),
                    without_password_in(&e.to_string(), settings)
                ),
            }),
    }
}

/// Driver errors may quote the URL, or a part of it: never let its password reach a message.
fn without_password_in(text: &str, settings: &crate::Settings) -> String {
    let text = match &settings.storage.database_url {
        Some(url) => text.replace(url.expose(), &settings.database_display()),
        None => text.to_string(),
    };
    let mut text = crate::settings::without_password(&text);
    // A very short password would blank ordinary words; the forms above still catch it.
    for password in settings
        .storage
        .database_passwords
        .iter()
        .map(|p| p.expose())
    {
        if password.len() >= 4 {
            text = text.replace(password, shelf_db::secrets::MASK);
        }
    }
    text
}

/// What [`check_at_start`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartCheck {
    /// `PRAGMA quick_check` answered `ok` for a file (and WAL) of `bytes` bytes.
    Passed { bytes: u64, elapsed_ms: u64 },
    /// The check did not run, for this reason.
    Skipped { reason: String },
}

/// Runs `PRAGMA quick_check` before a writing service starts (`shelf api`, `shelf worker`,
/// `shelf import`), when the SQLite file and its WAL are small enough for it to take well
/// under a second (`SHELF_DATABASE_START_CHECK_MAX_BYTES`, 64 MiB by default: it reads the
/// whole file, about 0.16 s for 64 MiB in a release build), and logs whether it ran and what it found. A damaged file is refused with
/// `database_corrupt` (which latches the damage, logging the recovery steps once), so no
/// process starts writing into it. The check runs on a connection of its own, opened for it:
/// a long-lived pooled connection can report FTS5 damage that is not there.
pub async fn check_at_start(settings: &crate::Settings) -> Result<StartCheck, AppError> {
    let skipped = |reason: String| {
        tracing::info!(ran = false, reason = %reason, "database check at start skipped");
        Ok(StartCheck::Skipped { reason })
    };
    if settings.is_postgres() {
        return skipped("PostgreSQL checks its own pages".into());
    }
    let path = &settings.storage.database_path;
    let Ok(meta) = std::fs::metadata(path) else {
        return skipped("no database file yet".into());
    };
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let bytes = meta.len() + std::fs::metadata(wal).map_or(0, |m| m.len());
    let limit = settings.storage.database_start_check_max_bytes;
    if limit == 0 {
        return skipped("SHELF_DATABASE_START_CHECK_MAX_BYTES=0".into());
    }
    if bytes > limit {
        return skipped(format!(
            "the database is {bytes} bytes, over SHELF_DATABASE_START_CHECK_MAX_BYTES={limit}; \
             `shelf admin db-check` checks it whole"
        ));
    }
    let started = Instant::now();
    let db = connect(path, 1).await?;
    let verdict = db
        .query_all_sql(Statement::from_string(
            DbBackend::Sqlite,
            "PRAGMA quick_check(20)",
        ))
        .await
        .map(|rows| {
            rows.iter()
                .filter_map(|row| row.try_get_by_index::<String>(0).ok())
                .collect::<Vec<_>>()
        });
    let _ = db.close().await;
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let problems = match verdict {
        Ok(lines) if lines == ["ok"] => {
            tracing::info!(
                ran = true,
                verdict = "ok",
                bytes,
                elapsed_ms,
                "database check at start"
            );
            return Ok(StartCheck::Passed { bytes, elapsed_ms });
        }
        Ok(lines) => lines.join("; "),
        Err(e) if shelf_db::is_corrupt_db(&e) => e.to_string(),
        Err(e) => return Err(e.into()),
    };
    let detail = format!("PRAGMA quick_check at start found: {problems}");
    tracing::error!(ran = true, verdict = %problems, bytes, elapsed_ms, "database check at start failed");
    shelf_db::mark_damaged(&detail);
    Err(AppError::DatabaseCorrupt { detail })
}

pub async fn connect(path: &Path, max_connections: u32) -> Result<DatabaseConnection, AppError> {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(|e| AppError::Storage {
            detail: format!("cannot create {}: {e}", parent.display()),
        })?;
    }
    shelf_db::connect(path, max_connections).await.map_err(|e| {
        let detail = format!("cannot open database {}: {e}", path.display());
        if shelf_db::note_if_corrupt(&e) {
            AppError::DatabaseCorrupt { detail }
        } else {
            AppError::Storage { detail }
        }
    })
}

pub async fn schema_status(db: &impl ConnectionTrait) -> Result<SchemaStatus, AppError> {
    let find_table = match db.get_database_backend() {
        DbBackend::Postgres => {
            "SELECT table_name FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = 'seaql_migrations'"
        }
        _ => "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'seaql_migrations'",
    };
    let table = db
        .query_one_sql(Statement::from_string(DbBackend::Sqlite, find_table))
        .await?;
    let mut applied = Vec::new();
    if table.is_some() {
        for row in db
            .query_all_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT version FROM seaql_migrations ORDER BY version",
            ))
            .await?
        {
            applied.push(row.try_get::<String>("", "version")?);
        }
    }
    let known = known_migrations();
    let pending = known
        .iter()
        .filter(|m| !applied.contains(m))
        .cloned()
        .collect();
    let unknown = applied
        .iter()
        .filter(|m| !known.contains(m))
        .cloned()
        .collect();
    Ok(SchemaStatus {
        applied,
        pending,
        unknown,
    })
}

/// What [`migrate`] did: the migrations this call applied (none when another process did
/// them first), and the schema state afterwards.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Migrated {
    pub applied_now: Vec<String>,
    pub status: SchemaStatus,
}

/// How long a process waits for another one's migrations (or any long write) to release the
/// write lock; the connection's own busy timeout is shorter than a slow migration may take.
const MIGRATION_LOCK_WAIT: Duration = Duration::from_secs(120);

/// Applies pending migrations. Refuses a database that a newer Shelf migrated.
///
/// The migrations run in one `BEGIN IMMEDIATE` transaction: the first of several processes
/// starting on a new database takes the write lock and migrates; the others wait for the lock,
/// read the schema again inside it, and find nothing left to do. A failed migration leaves the
/// database as it was.
pub async fn migrate(db: &DatabaseConnection) -> Result<Migrated, AppError> {
    let status = schema_status(db).await?;
    refuse_newer(&status)?;
    if status.pending.is_empty() {
        return Ok(Migrated {
            applied_now: Vec::new(),
            status,
        });
    }
    let txn = begin_immediate_waiting(db).await?;
    if db.get_database_backend() == DbBackend::Postgres {
        // PostgreSQL has no database-wide write lock: a transaction-scoped advisory lock plays
        // its part, so that processes starting at once migrate one after another.
        txn.execute_sql(Statement::from_string(
            DbBackend::Sqlite,
            format!("SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"),
        ))
        .await?;
    }
    // Another process may have migrated while this one waited for the lock.
    let locked = schema_status(&txn).await?;
    refuse_newer(&locked)?;
    if !locked.pending.is_empty() {
        Migrator::up(&txn, None).await?;
    }
    txn.commit().await?;
    Ok(Migrated {
        applied_now: locked.pending,
        status: schema_status(db).await?,
    })
}

/// The advisory lock key of migrations on PostgreSQL (any constant; "shelf" in ASCII).
const MIGRATION_LOCK_KEY: i64 = 0x0073_6865_6c66;

/// `BEGIN IMMEDIATE`, retried while another connection holds the write lock.
async fn begin_immediate_waiting(db: &DatabaseConnection) -> Result<DatabaseTransaction, AppError> {
    let deadline = Instant::now() + MIGRATION_LOCK_WAIT;
    loop {
        let begun = db
            .begin_with_options(TransactionOptions {
                sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
                ..Default::default()
            })
            .await;
        match begun {
            Ok(txn) => return Ok(txn),
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                tracing::info!("waiting for another process to release the database");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn refuse_newer(status: &SchemaStatus) -> Result<(), AppError> {
    if status.unknown.is_empty() {
        Ok(())
    } else {
        Err(AppError::SchemaTooNew {
            unknown: status.unknown.clone(),
        })
    }
}
