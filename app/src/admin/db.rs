//! The database's own administration: integrity and migration check, size and row statistics,
//! maintenance (pruning superseded runs, optimize, WAL checkpoint, vacuum), online backup (`VACUUM INTO` a verified temp
//! file that then replaces the destination) and restore (verify, set the old file and its
//! sidecars aside, rename; undone on failure).
//! Every command opens its own single connection, so none needs the schema to be current and
//! none changes the database it only inspects. On PostgreSQL, check, statistics and `ANALYZE`
//! work through the server; the file-level commands refuse and name PostgreSQL's own tools.

use shelf_engine::sql::SqlExt;
use std::path::{Path, PathBuf};

use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sea_orm::{DatabaseConnection, DbBackend, QueryResult, SqlxSqliteConnector, Statement};
use serde::Serialize;
use shelf_migrations::known_migrations;

use super::paths::{
    absolute, backup_destination, refuse_symlinks, sidecars, source_file, sync_dir,
};
use super::{AdminError, lock};
use crate::db::{SchemaStatus, schema_status};
use crate::settings::Settings;

/// At most this many foreign-key violations are listed (all are counted).
const MAX_LISTED_VIOLATIONS: usize = 100;

/// The tables the full schema holds, on either backend: the migrations' own list
/// (`shelf_migrations::TABLES`, kept equal to what they create by their schema test) and the
/// migrator's history. `db-check` on PostgreSQL reports any that is missing.
fn expected_tables() -> impl Iterator<Item = &'static str> {
    shelf_migrations::TABLES
        .iter()
        .copied()
        .chain(["seaql_migrations"])
}

/// Which database a report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The verdict of `shelf admin db-check`.
#[derive(Debug, Clone, Serialize)]
pub struct DbCheck {
    pub backend: Backend,
    /// The SQLite file, or the PostgreSQL URL without its password.
    pub database: String,
    pub healthy: bool,
    /// SQLite: `PRAGMA integrity_check`: `["ok"]`, or what it found (or the error it hit).
    /// PostgreSQL: `["ok"]` when the server answers and every expected table exists (the server
    /// checks its own pages), else what is wrong.
    pub integrity: Vec<String>,
    /// Always 0 on PostgreSQL, which enforces foreign keys on every write.
    pub foreign_key_violation_count: usize,
    pub foreign_key_violations: Vec<ForeignKeyViolation>,
    /// Applied, pending and unknown migrations; absent when the history is unreadable.
    pub migrations: Option<SchemaStatus>,
    /// Each reason the database is not healthy, in words.
    pub problems: Vec<String>,
    /// What killed processes left under `uploads/` (staged `.part` files and empty upload
    /// directories older than the grace period, trash of committed deletes): `shelf api`
    /// removes them at start. Not a health problem. Absent when the database could not be
    /// opened or the directory not read.
    pub upload_leftovers: Option<crate::uploads::Leftovers>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ForeignKeyViolation {
    pub table: String,
    pub rowid: Option<i64>,
    pub parent: String,
}

/// `shelf admin db-stats`.
#[derive(Debug, Clone, Serialize)]
pub struct DbStats {
    pub backend: Backend,
    pub database: String,
    #[serde(flatten)]
    pub storage: StorageFigures,
    pub tables: Vec<TableRows>,
}

/// Sizes as each backend knows them.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum StorageFigures {
    Sqlite {
        file_bytes: u64,
        wal_bytes: u64,
        shm_bytes: u64,
        page_size: i64,
        page_count: i64,
        freelist_count: i64,
    },
    Postgres {
        /// `pg_database_size`: every table, index and TOAST of the database.
        database_bytes: i64,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct TableRows {
    pub table: String,
    pub rows: i64,
    /// PostgreSQL only: `pg_total_relation_size` (table, indexes and TOAST).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
}

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

/// A written backup.
#[derive(Debug, Clone, Serialize)]
pub struct DbBackup {
    pub destination: PathBuf,
    pub bytes: u64,
    pub applied_migrations: Vec<String>,
}

/// A finished restore.
#[derive(Debug, Clone, Serialize)]
pub struct DbRestore {
    pub database: PathBuf,
    pub applied_migrations: Vec<String>,
    /// Migrations this shelf knows that the backup predates: `shelf migrate` applies them.
    pub pending_migrations: Vec<String>,
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
        .busy_timeout(shelf_engine::db::BUSY_TIMEOUT);
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
    let path = absolute(&settings.database_path)?;
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

/// What the migration history says is wrong, pushed to `problems`.
async fn migration_check(
    db: &DatabaseConnection,
    problems: &mut Vec<String>,
) -> Option<SchemaStatus> {
    match schema_status(db).await {
        Ok(status) => {
            if status.applied.is_empty() {
                problems.push("no migrations applied: not a Shelf database yet".into());
            }
            if !status.pending.is_empty() {
                problems.push(format!(
                    "pending migrations ({}): run `shelf migrate`",
                    status.pending.join(", ")
                ));
            }
            if !status.unknown.is_empty() {
                problems.push(format!(
                    "migrations unknown to this shelf ({}): the database is newer",
                    status.unknown.join(", ")
                ));
            }
            Some(status)
        }
        Err(e) => {
            problems.push(format!("migration history unreadable: {e}"));
            None
        }
    }
}

/// A database that could not be opened: a verdict, not a failure of the check.
fn unopenable(backend: Backend, database: String, e: AdminError) -> DbCheck {
    DbCheck {
        backend,
        database,
        healthy: false,
        integrity: vec![e.to_string()],
        foreign_key_violation_count: 0,
        foreign_key_violations: Vec::new(),
        migrations: None,
        problems: vec![format!("cannot open the database: {e}")],
        upload_leftovers: None,
    }
}

/// SQLite: `PRAGMA integrity_check`, `PRAGMA foreign_key_check` and the migration history.
/// PostgreSQL: the server answers, every expected table exists, and the migration history.
pub async fn check(settings: &Settings) -> Result<DbCheck, AdminError> {
    if settings.is_postgres() {
        return Ok(check_postgres(settings).await);
    }
    let database = live_database(settings)?;
    let shown = database.display().to_string();
    let db = match open_file(&database).await {
        Ok(db) => db,
        Err(e) => return Ok(unopenable(Backend::Sqlite, shown, e)),
    };
    let integrity = integrity(&db).await;
    let mut problems = Vec::new();
    if integrity != ["ok"] {
        problems.push(format!("integrity check: {}", integrity.join("; ")));
    }
    let mut violations = Vec::new();
    let mut violation_count = 0;
    match rows(&db, "PRAGMA foreign_key_check").await {
        Ok(found) => {
            violation_count = found.len();
            for row in found.iter().take(MAX_LISTED_VIOLATIONS) {
                violations.push(ForeignKeyViolation {
                    table: row.try_get_by_index(0).unwrap_or_default(),
                    rowid: row.try_get_by_index(1).ok(),
                    parent: row.try_get_by_index(2).unwrap_or_default(),
                });
            }
            if violation_count > 0 {
                problems.push(format!("{violation_count} foreign key violation(s)"));
            }
        }
        Err(e) => problems.push(format!("foreign key check failed: {e}")),
    }
    let migrations = migration_check(&db, &mut problems).await;
    let upload_leftovers = leftovers(&db, settings).await;
    db.close().await?;
    Ok(DbCheck {
        backend: Backend::Sqlite,
        database: shown,
        healthy: problems.is_empty(),
        integrity,
        foreign_key_violation_count: violation_count,
        foreign_key_violations: violations,
        migrations,
        problems,
        upload_leftovers,
    })
}

/// The upload leftovers of the data directory, as of now.
async fn leftovers(
    db: &DatabaseConnection,
    settings: &Settings,
) -> Option<crate::uploads::Leftovers> {
    match crate::uploads::find_leftovers(db, &settings.data_dir, std::time::SystemTime::now()).await
    {
        Ok(found) => Some(found),
        Err(error) => {
            tracing::warn!(%error, "cannot look for upload leftovers");
            None
        }
    }
}

/// The tables (and views) of the connection's current schema on PostgreSQL: on PostgreSQL
/// `search_cleaned` and `search_raw` are views over `search_documents`.
async fn server_tables(db: &DatabaseConnection) -> Result<Vec<String>, AdminError> {
    // `information_schema` names are of a domain type the driver does not decode as text.
    rows(
        db,
        "SELECT CAST(table_name AS TEXT) AS name FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_type IN ('BASE TABLE', 'VIEW') \
         ORDER BY 1",
    )
    .await?
    .iter()
    .map(|row| Ok(row.try_get_by_index::<String>(0)?))
    .collect()
}

async fn check_postgres(settings: &Settings) -> DbCheck {
    let database = settings.database_display();
    let db = match open_server(settings).await {
        Ok(db) => db,
        Err(e) => return unopenable(Backend::Postgres, database, e),
    };
    let mut integrity = Vec::new();
    // Cast: a bare `1` is a 4-byte integer on PostgreSQL, and `scalar` reads 8.
    match scalar(&db, "SELECT CAST(1 AS BIGINT)").await {
        Ok(1) => {}
        Ok(n) => integrity.push(format!("SELECT 1 answered {n}")),
        Err(e) => integrity.push(format!("SELECT 1 failed: {e}")),
    }
    match server_tables(&db).await {
        Ok(present) => {
            let missing: Vec<&str> = expected_tables()
                .filter(|t| !present.iter().any(|p| p == t))
                .collect();
            if !missing.is_empty() {
                integrity.push(format!("missing tables: {}", missing.join(", ")));
            }
        }
        Err(e) => integrity.push(format!("cannot list tables: {e}")),
    }
    if integrity.is_empty() {
        integrity.push("ok".into());
    }
    let mut problems = Vec::new();
    if integrity != ["ok"] {
        problems.push(format!("integrity check: {}", integrity.join("; ")));
    }
    let migrations = migration_check(&db, &mut problems).await;
    let upload_leftovers = leftovers(&db, settings).await;
    let _ = db.close().await;
    DbCheck {
        backend: Backend::Postgres,
        database,
        healthy: problems.is_empty(),
        integrity,
        foreign_key_violation_count: 0,
        foreign_key_violations: Vec::new(),
        migrations,
        problems,
        upload_leftovers,
    }
}

/// File sizes, page figures and rows per table; on PostgreSQL the database's size and each
/// table's rows and size.
pub async fn stats(settings: &Settings) -> Result<DbStats, AdminError> {
    if settings.is_postgres() {
        return stats_postgres(settings).await;
    }
    let database = live_database(settings)?;
    let [wal, shm, _] = sidecars(&database);
    let db = open_file(&database).await?;
    let page_size = scalar(&db, "PRAGMA page_size").await?;
    let page_count = scalar(&db, "PRAGMA page_count").await?;
    let freelist_count = scalar(&db, "PRAGMA freelist_count").await?;
    let names = rows(
        &db,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         ORDER BY name",
    )
    .await?;
    let mut tables = Vec::new();
    for row in names {
        let table: String = row.try_get_by_index(0)?;
        let rows = scalar(&db, &format!("SELECT count(*) FROM {}", quoted(&table))).await?;
        tables.push(TableRows {
            table,
            rows,
            bytes: None,
        });
    }
    db.close().await?;
    Ok(DbStats {
        backend: Backend::Sqlite,
        storage: StorageFigures::Sqlite {
            file_bytes: file_len(&database),
            wal_bytes: file_len(&wal),
            shm_bytes: file_len(&shm),
            page_size,
            page_count,
            freelist_count,
        },
        database: database.display().to_string(),
        tables,
    })
}

async fn stats_postgres(settings: &Settings) -> Result<DbStats, AdminError> {
    let db = open_server(settings).await?;
    let database_bytes = scalar(&db, "SELECT pg_database_size(current_database())").await?;
    let sized = rows(
        &db,
        "SELECT CAST(c.relname AS TEXT) AS name, pg_total_relation_size(c.oid) AS bytes \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') ORDER BY 1",
    )
    .await?;
    let mut tables = Vec::new();
    for row in sized {
        let table: String = row.try_get_by_index(0)?;
        let bytes: i64 = row.try_get_by_index(1)?;
        // Exact counts, as on SQLite: `reltuples` is only the planner's estimate.
        let rows = scalar(&db, &format!("SELECT count(*) FROM {}", quoted(&table))).await?;
        tables.push(TableRows {
            table,
            rows,
            bytes: Some(bytes),
        });
    }
    db.close().await?;
    Ok(DbStats {
        backend: Backend::Postgres,
        database: settings.database_display(),
        storage: StorageFigures::Postgres { database_bytes },
        tables,
    })
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
        let pruned_runs = prune_runs(&db, settings.run_retention).await?;
        rows(&db, "ANALYZE").await?;
        let after = scalar(&db, size).await?;
        db.close().await?;
        return Ok(DbMaintenance {
            backend: Backend::Postgres,
            database: settings.database_display(),
            pruned_runs,
            run_retention: settings.run_retention,
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
    let pruned_runs = prune_runs(&db, settings.run_retention).await?;
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
        run_retention: settings.run_retention,
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

/// What to use instead of `db-backup` on PostgreSQL.
const PG_BACKUP: &str = "back the database up with \
     `pg_dump --format=custom --file=shelf.dump \"$SHELF_DATABASE_URL\"`";
/// What to use instead of `db-restore` on PostgreSQL.
const PG_RESTORE: &str = "stop the services, then restore a `pg_dump` archive with \
     `pg_restore --clean --if-exists --dbname=\"$SHELF_DATABASE_URL\" shelf.dump`";

/// Writes a consistent copy of the live database to `into` (an empty or missing file) with
/// `VACUUM INTO`, which reads one snapshot and so works while the API and workers write, then
/// verifies the copy.
pub(crate) async fn snapshot(settings: &Settings, into: &Path) -> Result<SchemaStatus, AdminError> {
    sqlite_only(settings, "a database snapshot", PG_BACKUP)?;
    let database = live_database(settings)?;
    let target = into
        .to_str()
        .ok_or_else(|| AdminError::InvalidDestination {
            detail: format!("{} is not a UTF-8 path", into.display()),
        })?;
    let db = open_file(&database).await?;
    let result = db
        .execute_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "VACUUM INTO ?",
            [target.into()],
        ))
        .await;
    db.close().await?;
    result?;
    verify_backup(into).await
}

/// Verifies a database file that is about to become (or was just written as) a backup: a
/// SQLite file that passes `integrity_check`, written by Shelf, and not by a newer one. The
/// file is switched to rollback journaling, so it is complete on its own, without sidecars.
pub(crate) async fn verify_backup(path: &Path) -> Result<SchemaStatus, AdminError> {
    let shown = path.display().to_string();
    let db = open_file(path)
        .await
        .map_err(|e| AdminError::invalid(format!("{shown}: {e}")))?;
    let result = async {
        rows(&db, "PRAGMA journal_mode = DELETE").await?;
        let integrity = integrity(&db).await;
        if integrity != ["ok"] {
            return Err(AdminError::invalid(format!(
                "the integrity check failed: {}",
                integrity.join("; ")
            )));
        }
        Ok(schema_status(&db).await.ok())
    }
    .await
    .map_err(|e| match e {
        AdminError::Db(detail) => AdminError::invalid(format!("{shown}: {detail}")),
        other => other,
    });
    db.close().await?;
    let status =
        result?.ok_or_else(|| AdminError::invalid("its migration history is unreadable"))?;
    let known = known_migrations();
    if !status.applied.iter().any(|m| known.contains(m)) {
        return Err(AdminError::invalid(
            "it is not a Shelf database (no Shelf migrations applied)",
        ));
    }
    if !status.unknown.is_empty() {
        return Err(AdminError::BackupTooNew {
            unknown: status.unknown,
        });
    }
    Ok(status)
}

/// Where a test makes a restore fail: called with the name of each step of the swap before it
/// runs (`move-files`, `put-files`, `keep-database`, `move-sidecars`, `rename-database`); an error there
/// fails the restore as a real one would. Restores outside tests pass [`no_fault`].
pub(crate) type Fault<'a> = &'a (dyn Fn(&'static str) -> std::io::Result<()> + Sync);

/// The [`Fault`] of every real restore: none.
pub(crate) fn no_fault(_step: &'static str) -> std::io::Result<()> {
    Ok(())
}

/// A new database in place, the one it replaced (and that one's sidecars) kept beside it in a
/// `.shelf-restore-previous-*` directory until [`commit`](Self::commit) removes them or
/// [`rollback`](Self::rollback) puts them back.
pub(crate) struct InstalledDatabase {
    database: PathBuf,
    dir: PathBuf,
    aside: tempfile::TempDir,
    /// The old database is hard-linked into `aside`.
    kept_database: bool,
    /// The old sidecars moved into `aside`, by their original paths.
    moved: Vec<PathBuf>,
    /// The new file took the database's name.
    renamed: bool,
}

impl InstalledDatabase {
    fn aside(&self, original: &Path) -> PathBuf {
        self.aside
            .path()
            .join(original.file_name().unwrap_or_default())
    }

    /// The restore is complete: the replaced database and its sidecars go.
    pub(crate) fn commit(self) {
        let kept = self.aside.path().to_path_buf();
        if let Err(error) = self.aside.close() {
            tracing::warn!(path = %kept.display(), %error, "cannot remove the replaced database");
        }
    }

    /// Puts the old database and its sidecars back as they were. If that fails too, the
    /// directory that holds them is kept, and the error names it.
    pub(crate) fn rollback(self) -> Result<(), AdminError> {
        let undo = || -> std::io::Result<()> {
            if self.renamed {
                if self.kept_database {
                    std::fs::rename(self.aside(&self.database), &self.database)?;
                } else {
                    std::fs::remove_file(&self.database)?;
                }
            }
            for sidecar in self.moved.iter().rev() {
                std::fs::rename(self.aside(sidecar), sidecar)?;
            }
            std::fs::File::open(&self.dir)?.sync_all()
        };
        match undo() {
            Ok(()) => {
                drop(self.aside);
                Ok(())
            }
            Err(source) => {
                let kept = self.aside.keep();
                Err(AdminError::Io {
                    what: format!(
                        "the old database could not be put back; it and its -wal/-shm files are \
                         in {}: move them back beside {} by hand",
                        kept.display(),
                        self.database.display()
                    ),
                    source,
                })
            }
        }
    }
}

/// Puts a verified database file in place so that a failure at any step leaves the old
/// database as it was, its committed transactions included:
///
/// 1. the old file is hard-linked into a `.shelf-restore-previous-*` directory beside it;
/// 2. its `-wal`, `-shm` and `-journal` sidecars are moved there (an old WAL left beside the
///    new file would be replayed into it and corrupt it, so they go first, but nothing is
///    deleted);
/// 3. the new file is renamed over the database, atomically, and the directory synced.
///
/// A failure undoes what was done. The caller commits (removing the old files) once the whole
/// restore has succeeded, or rolls back if a later step of its own fails.
pub(crate) fn install_database(
    verified: tempfile::TempPath,
    database: &Path,
    fault: Fault<'_>,
) -> Result<InstalledDatabase, AdminError> {
    std::fs::File::open(&verified)
        .and_then(|f| f.sync_all())
        .map_err(AdminError::io("cannot sync", &verified))?;
    let dir = database.parent().unwrap_or(Path::new("/")).to_path_buf();
    let aside = tempfile::Builder::new()
        .prefix(".shelf-restore-previous-")
        .tempdir_in(&dir)
        .map_err(AdminError::io(
            "cannot create a temporary directory in",
            &dir,
        ))?;
    let mut installed = InstalledDatabase {
        database: database.to_path_buf(),
        dir,
        aside,
        kept_database: false,
        moved: Vec::new(),
        renamed: false,
    };
    let failed = |installed: InstalledDatabase, e: AdminError| match installed.rollback() {
        Ok(()) => e.undone("the restore was undone: the old database and its WAL are in place"),
        Err(undo) => undo,
    };
    if let Err(e) = fault("keep-database").and_then(|()| {
        if std::fs::symlink_metadata(database).is_ok_and(|m| m.is_file()) {
            std::fs::hard_link(database, installed.aside(database))?;
            installed.kept_database = true;
        }
        Ok(())
    }) {
        let e = AdminError::io("cannot keep the current database", database)(e);
        return Err(failed(installed, e));
    }
    for sidecar in sidecars(database) {
        if std::fs::symlink_metadata(&sidecar).is_err() {
            continue;
        }
        let target = installed.aside(&sidecar);
        if let Err(e) = fault("move-sidecars").and_then(|()| std::fs::rename(&sidecar, &target)) {
            let e = AdminError::io("cannot move aside", &sidecar)(e);
            return Err(failed(installed, e));
        }
        installed.moved.push(sidecar);
    }
    // On failure the new file is dropped (and so removed) here.
    let renamed = fault("rename-database")
        .and_then(|()| verified.persist(database).map_err(|e| e.error).map(|_| ()));
    if let Err(e) = renamed {
        return Err(failed(
            installed,
            AdminError::io("cannot replace", database)(e),
        ));
    }
    installed.renamed = true;
    if let Err(e) = sync_dir(&installed.dir) {
        return Err(failed(installed, e));
    }
    Ok(installed)
}

/// A temp file beside `path` (same file system, so the final rename is atomic).
pub(crate) fn temp_beside(dir: &Path, prefix: &str) -> Result<tempfile::NamedTempFile, AdminError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(AdminError::io("cannot create a temporary file in", dir))
}

/// The database path a restore writes, checked for symlinks, with its directory created.
pub(crate) fn restore_target(
    settings: &Settings,
    what: &'static str,
) -> Result<PathBuf, AdminError> {
    let database = absolute(&settings.database_path)?;
    refuse_symlinks(&database, what)?;
    if let Some(parent) = database.parent() {
        std::fs::create_dir_all(parent).map_err(AdminError::io("cannot create", parent))?;
    }
    Ok(database)
}

/// `shelf admin db-backup DEST`.
pub async fn backup(settings: &Settings, dest: &Path) -> Result<DbBackup, AdminError> {
    sqlite_only(settings, "db-backup", PG_BACKUP)?;
    let (destination, parent) = backup_destination(dest, "db-backup")?;
    let temp = temp_beside(&parent, ".shelf-db-backup-")?;
    let status = snapshot(settings, temp.path()).await?;
    temp.as_file()
        .sync_all()
        .map_err(AdminError::io("cannot sync", temp.path()))?;
    temp.persist(&destination)
        .map_err(|e| AdminError::io("cannot write", &destination)(e.error))?;
    sync_dir(&parent)?;
    Ok(DbBackup {
        bytes: file_len(&destination),
        destination,
        applied_migrations: status.applied,
    })
}

/// `shelf admin db-restore FILE --yes`: refused while any process holds the data directory.
/// A failure leaves the old database as it was (see [`install_database`]).
pub async fn restore(settings: &Settings, file: &Path) -> Result<DbRestore, AdminError> {
    restore_with(settings, file, &no_fault).await
}

pub(crate) async fn restore_with(
    settings: &Settings,
    file: &Path,
    fault: Fault<'_>,
) -> Result<DbRestore, AdminError> {
    sqlite_only(settings, "db-restore", PG_RESTORE)?;
    let source = source_file(file)?;
    let _lock = lock::hold_exclusive(&settings.data_dir, "the database")?;
    let database = restore_target(settings, "db-restore")?;
    let parent = database.parent().unwrap_or(Path::new("/"));
    let temp = temp_beside(parent, ".shelf-db-restore-")?.into_temp_path();
    tokio::fs::copy(&source, &temp)
        .await
        .map_err(AdminError::io("cannot copy", &source))?;
    // The copy took the source's mode; a restored database is private to its owner.
    std::fs::set_permissions(&temp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(AdminError::io("cannot set the mode of", &temp))?;
    let status = verify_backup(&temp).await?;
    install_database(temp, &database, fault)?.commit();
    Ok(DbRestore {
        database,
        applied_migrations: status.applied,
        pending_migrations: status.pending,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn expected_tables_are_what_the_migrations_create() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = crate::db::connect(&dir.path().join("s.sqlite"), 1)
            .await
            .expect("connect");
        crate::db::migrate(&db).await.expect("migrate");
        let names = |sql: &'static str| {
            let db = db.clone();
            async move {
                rows(&db, sql)
                    .await
                    .expect("query")
                    .iter()
                    .map(|r| r.try_get_by_index::<String>(0).expect("name"))
                    .collect::<Vec<_>>()
            }
        };
        // FTS5 keeps its index in shadow tables named after the virtual table.
        let virtual_tables = names(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL%'",
        )
        .await;
        let tables: Vec<String> = names(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
             ORDER BY name",
        )
        .await
        .into_iter()
        .filter(|t| {
            !virtual_tables
                .iter()
                .any(|v| t.starts_with(&format!("{v}_")))
        })
        .collect();
        let mut expected: Vec<&str> = expected_tables().collect();
        expected.sort_unstable();
        assert_eq!(tables, expected);
    }
}
