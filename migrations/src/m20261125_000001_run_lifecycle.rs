//! The run lifecycle's invariants, held by the database: at most one running run per subject (a
//! unique partial index, so no read-then-write race can start two runs of one document), the
//! index the claim walks to find the earliest unfinished run of a subject, the index that finds
//! a failed run's retry, and the time of each run's latest claim (what `GET /queue` reads to
//! tell whether any worker is claiming).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const UP: &[&str] = &[
    "ALTER TABLE runs ADD COLUMN claimed_at INTEGER",
    "CREATE INDEX runs_claimed_at ON runs (claimed_at)",
    // A database written before this migration may hold two running runs of one subject: the
    // later ones go back to the queue (their checkpoints kept), so the index can be built.
    "UPDATE runs SET status = 'queued', lease_owner = NULL \
     WHERE status = 'running' AND EXISTS (SELECT 1 FROM runs o WHERE o.subject = runs.subject \
       AND o.status = 'running' AND o.rowid < runs.rowid)",
    "CREATE UNIQUE INDEX runs_one_running_per_subject ON runs (subject) WHERE status = 'running'",
    // SQLite's index entries end with the rowid, the creation order the claim compares.
    "CREATE INDEX runs_active_subject ON runs (subject) WHERE status IN ('queued', 'running')",
    "CREATE INDEX runs_retry_of ON runs (retry_of) WHERE retry_of IS NOT NULL",
];

const DOWN: &[&str] = &[
    "DROP INDEX runs_retry_of",
    "DROP INDEX runs_active_subject",
    "DROP INDEX runs_one_running_per_subject",
    "DROP INDEX runs_claimed_at",
    "ALTER TABLE runs DROP COLUMN claimed_at",
];

const UP_POSTGRES: &[&str] = &[
    "ALTER TABLE runs ADD COLUMN claimed_at BIGINT",
    "CREATE INDEX runs_claimed_at ON runs (claimed_at)",
    "UPDATE runs SET status = 'queued', lease_owner = NULL \
     WHERE status = 'running' AND EXISTS (SELECT 1 FROM runs o WHERE o.subject = runs.subject \
       AND o.status = 'running' AND o.rowid < runs.rowid)",
    "CREATE UNIQUE INDEX runs_one_running_per_subject ON runs (subject) WHERE status = 'running'",
    "CREATE INDEX runs_active_subject ON runs (subject, rowid) WHERE status IN ('queued', 'running')",
    "CREATE INDEX runs_retry_of ON runs (retry_of) WHERE retry_of IS NOT NULL",
];
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
