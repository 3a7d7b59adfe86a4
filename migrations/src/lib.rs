//! Append-only schema history of the Shelf database: one file per migration, never edited once
//! released. The migration name is its file name. Each migration holds its SQL twice, for SQLite
//! (the released history, unchanged) and for PostgreSQL, under the same name, so both backends
//! record the same list of migrations and `known_migrations` means the same on either.

pub use sea_orm_migration::prelude::*;

mod m20261121_000001_init;
mod m20261122_000001_extractions;
mod m20261123_000001_pages;
mod m20261124_000001_trace;
mod m20261125_000001_run_lifecycle;
mod m20261126_000001_one_text_copy;
mod m20261126_000002_audit_aggregate;
mod m20261127_000001_web_sessions;
mod m20261127_000002_failed_runs_index;
mod m20261127_000003_passages;

pub struct Migrator;

/// Every table the full schema holds besides the migrator's own (`seaql_migrations`), by name,
/// the same on both backends. `tests/schema.rs` checks it against what the migrations create;
/// `shelf admin db-check` on PostgreSQL reports any that is missing.
pub const TABLES: &[&str] = &[
    "api_audit_events",
    "document_pages",
    "document_passages",
    "document_segments",
    "document_texts",
    "documents",
    "extraction_cache",
    "run_events",
    "run_stage_parts",
    "run_stages",
    "runs",
    "search_cleaned",
    "search_documents",
    "search_raw",
    "web_sessions",
];

/// Runs, in order, the statements written for the connection's backend (every migration here is
/// plain SQL, one variant per dialect).
pub(crate) async fn execute_all(
    manager: &SchemaManager<'_>,
    sqlite: &[&str],
    postgres: &[&str],
) -> Result<(), DbErr> {
    let statements = match manager.get_database_backend() {
        sea_orm::DbBackend::Sqlite => sqlite,
        sea_orm::DbBackend::Postgres => postgres,
        _ => {
            return Err(DbErr::BackendNotSupported {
                db: "this backend",
                ctx: "Shelf's schema exists for SQLite and PostgreSQL only",
            });
        }
    };
    let db = manager.get_connection();
    for sql in statements {
        db.execute_unprepared(sql).await?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261121_000001_init::Migration),
            Box::new(m20261122_000001_extractions::Migration),
            Box::new(m20261123_000001_pages::Migration),
            Box::new(m20261124_000001_trace::Migration),
            Box::new(m20261125_000001_run_lifecycle::Migration),
            Box::new(m20261126_000001_one_text_copy::Migration),
            Box::new(m20261126_000002_audit_aggregate::Migration),
            Box::new(m20261127_000001_web_sessions::Migration),
            Box::new(m20261127_000002_failed_runs_index::Migration),
            Box::new(m20261127_000003_passages::Migration),
        ]
    }
}

/// Names of every migration this binary knows, oldest first. A database that recorded a name
/// not in this list was written by a newer Shelf and is refused.
pub fn known_migrations() -> Vec<String> {
    Migrator::migrations()
        .iter()
        .map(|m| m.name().to_string())
        .collect()
}
