//! Page records: one row per page of a paged document (PDF, image) per run, saying where its
//! text came from and what OCR and correction made of it. Rows go with their document.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const UP: &[&str] = &[
    r#"CREATE TABLE document_pages (
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        run_id TEXT NOT NULL,
        number INTEGER NOT NULL,
        source TEXT NOT NULL,
        text TEXT NOT NULL,
        confidence REAL,
        rotation_degrees INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0,
        corrected INTEGER NOT NULL DEFAULT 0,
        warnings TEXT NOT NULL DEFAULT '[]',
        error TEXT,
        image_path TEXT,
        PRIMARY KEY (document_id, run_id, number)
    )"#,
    "CREATE INDEX document_pages_document ON document_pages (document_id)",
];

/// The same table in PostgreSQL's types (`BIGINT` for SQLite's 64-bit `INTEGER`).
const UP_POSTGRES: &[&str] = &[
    r#"CREATE TABLE document_pages (
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        run_id TEXT NOT NULL,
        number BIGINT NOT NULL,
        source TEXT NOT NULL,
        text TEXT NOT NULL,
        confidence DOUBLE PRECISION,
        rotation_degrees BIGINT,
        attempts BIGINT NOT NULL DEFAULT 0,
        corrected BIGINT NOT NULL DEFAULT 0,
        warnings TEXT NOT NULL DEFAULT '[]',
        error TEXT,
        image_path TEXT,
        PRIMARY KEY (document_id, run_id, number)
    )"#,
    "CREATE INDEX document_pages_document ON document_pages (document_id)",
];

const DOWN: &[&str] = &["DROP TABLE document_pages"];

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
