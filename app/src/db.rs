//! Opening Shelf's database: connection pragmas, migrations, and the check that refuses a
//! database written by a newer Shelf.

use std::path::Path;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
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

pub async fn connect(path: &Path, max_connections: u32) -> Result<DatabaseConnection, AppError> {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(|e| AppError::Storage {
            detail: format!("cannot create {}: {e}", parent.display()),
        })?;
    }
    shelf_engine::db::connect(path, max_connections)
        .await
        .map_err(|e| AppError::Storage {
            detail: format!("cannot open database {}: {e}", path.display()),
        })
}

pub async fn schema_status(db: &DatabaseConnection) -> Result<SchemaStatus, AppError> {
    let table = db
        .query_one_raw(Statement::from_string(
            DbBackend::Sqlite,
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'seaql_migrations'",
        ))
        .await?;
    let mut applied = Vec::new();
    if table.is_some() {
        for row in db
            .query_all_raw(Statement::from_string(
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

/// Applies pending migrations. Refuses a database that a newer Shelf migrated.
pub async fn migrate(db: &DatabaseConnection) -> Result<SchemaStatus, AppError> {
    let status = schema_status(db).await?;
    refuse_newer(&status)?;
    Migrator::up(db, None).await?;
    schema_status(db).await
}

/// Services refuse to start on a database that is not exactly at this binary's schema.
pub async fn check_current(db: &DatabaseConnection) -> Result<SchemaStatus, AppError> {
    let status = schema_status(db).await?;
    refuse_newer(&status)?;
    if !status.pending.is_empty() {
        return Err(AppError::SchemaOutdated {
            pending: status.pending.clone(),
        });
    }
    Ok(status)
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
