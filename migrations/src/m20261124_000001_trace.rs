//! The W3C `traceparent` of the request that created a run, so the worker that executes it
//! continues that trace. NULL when tracing was off (or for runs made before this migration).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const UP: &[&str] = &["ALTER TABLE runs ADD COLUMN trace_parent TEXT"];

const DOWN: &[&str] = &["ALTER TABLE runs DROP COLUMN trace_parent"];

// Both statements are PostgreSQL as written.
const UP_POSTGRES: &[&str] = UP;
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
