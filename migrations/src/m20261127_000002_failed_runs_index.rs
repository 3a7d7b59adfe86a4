//! The index the operations page's "recent failures" reads: failed runs by the time they
//! finished, partial so that it costs nothing for the runs that succeed and the page never scans
//! the whole `runs` table (whose rows carry their pipeline's YAML).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const UP: &[&str] =
    &["CREATE INDEX runs_failed_finished ON runs (finished_at) WHERE status = 'failed'"];

// The same statement on PostgreSQL.
const UP_POSTGRES: &[&str] = UP;

const DOWN: &[&str] = &["DROP INDEX runs_failed_finished"];

// The same statement on PostgreSQL.
const DOWN_POSTGRES: &[&str] = DOWN;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::execute_all(manager, UP, UP_POSTGRES).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::execute_all(manager, DOWN, DOWN_POSTGRES).await
    }
}
