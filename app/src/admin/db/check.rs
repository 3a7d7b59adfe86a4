//! `shelf admin db-check`: on SQLite `PRAGMA integrity_check`, `PRAGMA foreign_key_check`
//! and the migration history; on PostgreSQL that the server answers, every expected table
//! exists, and the migration history. Upload leftovers are reported beside the verdict.

use sea_orm::DatabaseConnection;
use serde::Serialize;

use super::{
    AdminError, Backend, Settings, integrity, live_database, open_file, open_server, rows, scalar,
};
use crate::db::{SchemaStatus, schema_status};

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
    match crate::uploads::find_leftovers(
        db,
        &settings.storage.data_dir,
        std::time::SystemTime::now(),
    )
    .await
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
