//! The first schema: documents, runs (with the durable queue's lease columns), stage
//! checkpoints, run events, document texts, the FTS5 search indexes and the API audit trail.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Plain SQL keeps the schema readable next to the queries that use it. Times that the queue
/// compares are integer milliseconds since the epoch; times shown to users are RFC 3339 text.
const UP: &[&str] = &[
    r#"CREATE TABLE documents (
        pk INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        filename TEXT NOT NULL,
        extension TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        byte_size INTEGER NOT NULL,
        storage_path TEXT NOT NULL,
        source_kind TEXT NOT NULL,
        source_path TEXT,
        status TEXT NOT NULL,
        classification TEXT,
        classification_label TEXT,
        classification_confidence REAL,
        title TEXT,
        summary TEXT,
        tags TEXT NOT NULL DEFAULT '[]',
        suggested_stem TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )"#,
    "CREATE INDEX documents_created ON documents (created_at, id)",
    "CREATE INDEX documents_classification ON documents (classification)",
    r#"CREATE TABLE runs (
        id TEXT PRIMARY KEY NOT NULL,
        subject TEXT NOT NULL,
        pipeline TEXT NOT NULL,
        pipeline_yaml TEXT NOT NULL,
        pipeline_sha256 TEXT NOT NULL,
        input TEXT NOT NULL DEFAULT '{}',
        status TEXT NOT NULL,
        stage TEXT,
        error TEXT,
        attempt INTEGER NOT NULL DEFAULT 1,
        retry_of TEXT,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        due_at INTEGER NOT NULL,
        lease_owner TEXT,
        lease_token INTEGER NOT NULL DEFAULT 0,
        claims INTEGER NOT NULL DEFAULT 0,
        reclaims INTEGER NOT NULL DEFAULT 0,
        last_claim_reclaimed INTEGER NOT NULL DEFAULT 0,
        last_event_seq INTEGER NOT NULL DEFAULT 0,
        enqueued_at INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT
    )"#,
    // Only runs a worker may take are in this index, so a claim is one short index walk in
    // due order however many finished runs the table holds.
    "CREATE INDEX runs_due ON runs (due_at) WHERE status IN ('queued', 'running')",
    "CREATE INDEX runs_subject ON runs (subject, created_at)",
    "CREATE INDEX runs_created ON runs (created_at, id)",
    r#"CREATE TABLE run_stages (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        position INTEGER NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        output TEXT,
        error TEXT,
        reused_from TEXT,
        started_at TEXT,
        finished_at TEXT,
        duration_ms INTEGER,
        PRIMARY KEY (run_id, name)
    )"#,
    r#"CREATE TABLE run_stage_parts (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        stage TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (run_id, stage, key)
    )"#,
    r#"CREATE TABLE run_events (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        sequence INTEGER NOT NULL,
        stage TEXT NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, sequence)
    )"#,
    r#"CREATE TABLE document_texts (
        id TEXT PRIMARY KEY NOT NULL,
        document_id TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        chars INTEGER NOT NULL,
        created_at TEXT NOT NULL
    )"#,
    "CREATE INDEX document_texts_document ON document_texts (document_id, kind, created_at)",
    r#"CREATE VIRTUAL TABLE search_cleaned USING fts5 (
        body, run_id UNINDEXED, tokenize = 'porter unicode61 remove_diacritics 2'
    )"#,
    r#"CREATE VIRTUAL TABLE search_raw USING fts5 (
        body, tokenize = 'porter unicode61 remove_diacritics 2'
    )"#,
    r#"CREATE TABLE api_audit_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        created_at TEXT NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        client_host TEXT,
        credential_present INTEGER NOT NULL,
        scope TEXT,
        reason TEXT NOT NULL,
        retry_after_seconds INTEGER
    )"#,
    "CREATE INDEX api_audit_events_created ON api_audit_events (created_at)",
];

const DOWN: &[&str] = &[
    "DROP TABLE api_audit_events",
    "DROP TABLE search_raw",
    "DROP TABLE search_cleaned",
    "DROP TABLE document_texts",
    "DROP TABLE run_events",
    "DROP TABLE run_stage_parts",
    "DROP TABLE run_stages",
    "DROP TABLE runs",
    "DROP TABLE documents",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::execute_all(manager, UP).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::execute_all(manager, DOWN).await
    }
}
