//! Denied requests aggregated: one `api_audit_events` row per client, minute and reason, with
//! the number of denials it stands for, instead of one row per denial (a stranger's flood of
//! unauthenticated requests grew the table by a row each). `client_key` is the client as the
//! rate limit counts it (an IPv4 address, or an IPv6 network); `minute` is the UTC minute of
//! the denials (`YYYY-MM-DDTHH:MM`); `last_at` the latest of them. Rows written before this
//! migration keep NULL in both keys (NULLs never collide in a unique index) and a count of 1.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const UP: &[&str] = &[
    "ALTER TABLE api_audit_events ADD COLUMN client_key TEXT",
    "ALTER TABLE api_audit_events ADD COLUMN minute TEXT",
    "ALTER TABLE api_audit_events ADD COLUMN denial_count INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE api_audit_events ADD COLUMN last_at TEXT",
    "CREATE UNIQUE INDEX api_audit_events_client_minute \
     ON api_audit_events (minute, client_key, reason)",
];

const UP_POSTGRES: &[&str] = &[
    "ALTER TABLE api_audit_events ADD COLUMN client_key TEXT",
    "ALTER TABLE api_audit_events ADD COLUMN minute TEXT",
    "ALTER TABLE api_audit_events ADD COLUMN denial_count BIGINT NOT NULL DEFAULT 1",
    "ALTER TABLE api_audit_events ADD COLUMN last_at TEXT",
    "CREATE UNIQUE INDEX api_audit_events_client_minute \
     ON api_audit_events (minute, client_key, reason)",
];

const DOWN: &[&str] = &[
    "DROP INDEX api_audit_events_client_minute",
    "ALTER TABLE api_audit_events DROP COLUMN last_at",
    "ALTER TABLE api_audit_events DROP COLUMN denial_count",
    "ALTER TABLE api_audit_events DROP COLUMN minute",
    "ALTER TABLE api_audit_events DROP COLUMN client_key",
];

// The same statements on PostgreSQL.
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
