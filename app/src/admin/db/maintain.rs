//! `shelf admin db-maintain`: pruning superseded runs, then `PRAGMA optimize`, an optional
//! `VACUUM` and a WAL checkpoint on SQLite; the pruning and `ANALYZE` on PostgreSQL.

use sea_orm::DatabaseConnection;
use serde::Serialize;

use super::super::paths::sidecars;
use super::{
    AdminError, Backend, Settings, file_len, live_database, open_file, open_server, rows, scalar,
    sqlite_only,
};
use crate::db::schema_status;

/// `shelf admin db-maintain`.
#[derive(Debug, Clone, Serialize)]
pub struct DbMaintenance {
    pub backend: Backend,
    pub database: String,
    /// Superseded runs pruned with their texts, page records, stages and events (keeping
    /// `run_retention` per document); `None` when the schema is not this binary's (pending or
    /// unknown migrations), whose tables the pruning statements might not match.
    pub pruned_runs: Option<u64>,
    /// `SHELF_RUN_RETENTION`: the runs kept per document.
    pub run_retention: u32,
    pub vacuumed: bool,
    /// PostgreSQL: `ANALYZE` ran (SQLite's `PRAGMA optimize` analyzes what needs it).
    pub analyzed: bool,
    /// The SQLite file's size, or `pg_database_size` on PostgreSQL.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// SQLite only: the WAL checkpoint.
    #[serde(flatten)]
    pub wal: Option<WalCheckpoint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WalCheckpoint {
    /// `wal_checkpoint(TRUNCATE)`: 1 when a reader kept it from finishing, else 0.
    pub checkpoint_busy: i64,
    pub checkpoint_log_frames: i64,
    pub checkpoint_checkpointed_frames: i64,
    pub wal_bytes_before: u64,
    pub wal_bytes_after: u64,
}
/// Prunes every superseded run on the command's own connection, as the background task of
/// `shelf worker` and `shelf api` does but without pausing, when the schema is this binary's.
async fn prune_runs(db: &DatabaseConnection, keep: u32) -> Result<Option<u64>, AdminError> {
    let status = schema_status(db)
        .await
        .map_err(|e| AdminError::Db(e.to_string()))?;
    if !status.pending.is_empty() || !status.unknown.is_empty() {
        return Ok(None);
    }
    // The store's lease only matters to claims, which this store never makes.
    let store = shelf_engine::RunStore::new(db.clone(), std::time::Duration::from_secs(30));
    let pruned = crate::retention::prune(
        &store,
        keep,
        std::time::Duration::ZERO,
        &tokio_util::sync::CancellationToken::new(),
    )
    .await
    .map_err(|e| AdminError::Db(e.to_string()))?;
    Ok(Some(pruned))
}

/// Prunes superseded runs (`SHELF_RUN_RETENTION` per document), then `PRAGMA optimize`,
/// optionally `VACUUM`, then `wal_checkpoint(TRUNCATE)` (last, because a vacuum in WAL mode
/// writes the whole database through the WAL). On PostgreSQL, the pruning and `ANALYZE`;
/// `--vacuum` is refused (autovacuum, or `VACUUM` through psql, is PostgreSQL's own business).
pub async fn maintain(settings: &Settings, vacuum: bool) -> Result<DbMaintenance, AdminError> {
    if settings.is_postgres() {
        if vacuum {
            sqlite_only(
                settings,
                "db-maintain --vacuum",
                "PostgreSQL reclaims space with autovacuum; run `VACUUM (ANALYZE)` through psql \
                 when needed, or `shelf admin db-maintain` without --vacuum to ANALYZE",
            )?;
        }
        let db = open_server(settings).await?;
        let size = "SELECT pg_database_size(current_database())";
        let before = scalar(&db, size).await?;
        let pruned_runs = prune_runs(&db, settings.storage.run_retention).await?;
        rows(&db, "ANALYZE").await?;
        let after = scalar(&db, size).await?;
        db.close().await?;
        return Ok(DbMaintenance {
            backend: Backend::Postgres,
            database: settings.database_display(),
            pruned_runs,
            run_retention: settings.storage.run_retention,
            vacuumed: false,
            analyzed: true,
            bytes_before: u64::try_from(before).unwrap_or(0),
            bytes_after: u64::try_from(after).unwrap_or(0),
            wal: None,
        });
    }
    let database = live_database(settings)?;
    let [wal, _, _] = sidecars(&database);
    let (bytes_before, wal_bytes_before) = (file_len(&database), file_len(&wal));
    let db = open_file(&database).await?;
    let pruned_runs = prune_runs(&db, settings.storage.run_retention).await?;
    rows(&db, "PRAGMA optimize").await?;
    if vacuum {
        rows(&db, "VACUUM").await?;
    }
    let checkpoint = rows(&db, "PRAGMA wal_checkpoint(TRUNCATE)").await?;
    let figure = |i| {
        checkpoint
            .first()
            .and_then(|row| row.try_get_by_index::<i64>(i).ok())
            .unwrap_or(0)
    };
    let (busy, log, checkpointed) = (figure(0), figure(1), figure(2));
    db.close().await?;
    Ok(DbMaintenance {
        backend: Backend::Sqlite,
        pruned_runs,
        run_retention: settings.storage.run_retention,
        vacuumed: vacuum,
        analyzed: false,
        bytes_before,
        bytes_after: file_len(&database),
        wal: Some(WalCheckpoint {
            checkpoint_busy: busy,
            checkpoint_log_frames: log,
            checkpoint_checkpointed_frames: checkpointed,
            wal_bytes_before,
            wal_bytes_after: file_len(&wal),
        }),
        database: database.display().to_string(),
    })
}
