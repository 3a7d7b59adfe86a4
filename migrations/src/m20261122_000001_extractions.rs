//! The extraction cache (results keyed by the file's SHA-256 and the extractor's version) and
//! the timed segments of transcripts, stored with their document.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const UP: &[&str] = &[
    r#"CREATE TABLE extraction_cache (
        sha256 TEXT NOT NULL,
        extractor_version TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (sha256, extractor_version)
    )"#,
    r#"CREATE TABLE document_segments (
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        start_seconds REAL NOT NULL,
        end_seconds REAL NOT NULL,
        speaker TEXT,
        text TEXT NOT NULL,
        PRIMARY KEY (document_id, seq)
    )"#,
];

/// The same tables in PostgreSQL's types (`BIGINT` for SQLite's 64-bit `INTEGER`).
const UP_POSTGRES: &[&str] = &[
    r#"CREATE TABLE extraction_cache (
        sha256 TEXT NOT NULL,
        extractor_version TEXT NOT NULL,
        result TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (sha256, extractor_version)
    )"#,
    r#"CREATE TABLE document_segments (
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
        start_seconds DOUBLE PRECISION NOT NULL,
        end_seconds DOUBLE PRECISION NOT NULL,
        speaker TEXT,
        text TEXT NOT NULL,
        PRIMARY KEY (document_id, seq)
    )"#,
];

const DOWN: &[&str] = &[
    "DROP TABLE document_segments",
    "DROP TABLE extraction_cache",
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
