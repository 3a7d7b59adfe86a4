//! Append-only schema history of the Shelf database: one file per migration, never edited once
//! released. The migration name is its file name.

pub use sea_orm_migration::prelude::*;

mod m20261121_000001_init;
mod m20261122_000001_extractions;
mod m20261123_000001_pages;
mod m20261124_000001_trace;

pub struct Migrator;

/// Runs a migration's SQL statements in order (every migration here is plain SQL).
pub(crate) async fn execute_all(
    manager: &SchemaManager<'_>,
    statements: &[&str],
) -> Result<(), DbErr> {
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
