//! Passages and their vectors: the document's current cleaned text cut into passages of about
//! 256 tokens, each with the embedding the `embed` stage computed and the identity of the
//! model that computed it (a row of another model is stale). One set per document, replaced
//! whole by the next run that embeds it; rows go with their document.
//!
//! `id` only ever grows (AUTOINCREMENT, an identity column on PostgreSQL) and rows are never
//! updated, only deleted and inserted: so `(count(*), max(id))` changes with every write, which
//! is how a process's in-memory matrix of the vectors knows it is out of date.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const UP: &[&str] = &[
    r#"CREATE TABLE document_passages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        run_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        text TEXT NOT NULL,
        start_seconds REAL,
        char_start INTEGER NOT NULL,
        char_end INTEGER NOT NULL,
        model TEXT NOT NULL,
        dims INTEGER NOT NULL,
        vector BLOB NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (document_id, position)
    )"#,
    "CREATE INDEX document_passages_model ON document_passages (model, document_id)",
    "CREATE INDEX document_passages_run ON document_passages (run_id)",
];

/// The same table in PostgreSQL's types (`BIGINT` for SQLite's 64-bit `INTEGER`, `BYTEA` for
/// `BLOB`).
const UP_POSTGRES: &[&str] = &[
    r#"CREATE TABLE document_passages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        run_id TEXT NOT NULL,
        position BIGINT NOT NULL,
        text TEXT NOT NULL,
        start_seconds DOUBLE PRECISION,
        char_start BIGINT NOT NULL,
        char_end BIGINT NOT NULL,
        model TEXT NOT NULL,
        dims BIGINT NOT NULL,
        vector BYTEA NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (document_id, position)
    )"#,
    "CREATE INDEX document_passages_model ON document_passages (model, document_id)",
    "CREATE INDEX document_passages_run ON document_passages (run_id)",
];

const DOWN: &[&str] = &["DROP TABLE document_passages"];

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
