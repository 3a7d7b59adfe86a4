//! Sessions of the web pages: a person signs in with an API key once and the browser holds a
//! random token in a cookie instead of the key. Only the token's SHA-256 (hex) is stored, so a
//! copy of the database cannot be replayed as a cookie. `credential_tag` names the configured
//! key the session was opened with (a tag the server derives from the key's digest), so removing
//! that key from the configuration ends its sessions; `expires_at` is the server-side expiry
//! (RFC 3339 UTC with milliseconds, like every time column, so text order is time order).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const UP: &[&str] = &[
    r#"CREATE TABLE web_sessions (
        token_sha256 TEXT PRIMARY KEY NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('read', 'write')),
        credential_tag TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
    )"#,
    "CREATE INDEX web_sessions_expires ON web_sessions (expires_at)",
];

// The same statements on PostgreSQL (every column is TEXT).
const UP_POSTGRES: &[&str] = UP;

const DOWN: &[&str] = &["DROP TABLE web_sessions"];

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
