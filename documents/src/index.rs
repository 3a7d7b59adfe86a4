//! The full-text index: one `search_documents` row per indexed document (keyed by its integer
//! `pk`, the search tables' rowid) naming the stored texts that are its cleaned and raw bodies
//! and the run that indexed them. The index keeps no copy of those bodies: on SQLite the FTS5
//! tables are external-content tables over them, kept in step by triggers; on PostgreSQL the
//! `tsvector`s are computed from them. The same statements run on both backends.

use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use shelf_db::sql::SqlExt;

use crate::error::{DocumentsError, Result};
use crate::sql::{begin_immediate, stmt};
use crate::texts::{
    TEXT_KIND_INDEXED_CLEANED, TEXT_KIND_INDEXED_RAW, TextRecord, put_text_statement,
};

/// Indexes a document with the given cleaned and raw bodies, in one IMMEDIATE transaction:
/// the bodies are stored as texts of the index's own (kinds `indexed_cleaned` and
/// `indexed_raw`, one of each per document, replaced by the next call; one text when the two
/// bodies are the same), for callers that hold bodies rather than stored texts (tests,
/// benchmarks). `NotFound` for an unknown document.
pub async fn index_document(
    db: &DatabaseConnection,
    document_id: &str,
    run_id: &str,
    cleaned_body: &str,
    raw_body: &str,
) -> Result<()> {
    let txn = begin_immediate(db).await?;
    index_document_in(&txn, document_id, run_id, cleaned_body, raw_body).await?;
    txn.commit().await?;
    Ok(())
}

/// [`index_document`] inside a caller's transaction.
pub async fn index_document_in(
    conn: &impl ConnectionTrait,
    document_id: &str,
    run_id: &str,
    cleaned_body: &str,
    raw_body: &str,
) -> Result<()> {
    let pk = document_pk(conn, document_id).await?;
    let own = |kind: &str, body: &str| {
        let id = format!(
            "index:{document_id}:{}",
            kind.trim_start_matches("indexed_")
        );
        let statement = put_text_statement(&TextRecord {
            id: id.clone(),
            document_id: document_id.to_string(),
            run_id: run_id.to_string(),
            kind: kind.to_string(),
            body: body.to_string(),
        });
        (id, statement)
    };
    let (cleaned_id, put_cleaned) = own(TEXT_KIND_INDEXED_CLEANED, cleaned_body);
    let mut statements = vec![put_cleaned];
    // The same body twice (a benchmark indexes a text as both) is stored once.
    let raw_id = if raw_body == cleaned_body {
        cleaned_id.clone()
    } else {
        let (raw_id, put_raw) = own(TEXT_KIND_INDEXED_RAW, raw_body);
        statements.push(put_raw);
        raw_id
    };
    statements.extend(index_statements(
        pk,
        document_id,
        run_id,
        &cleaned_id,
        &raw_id,
    ));
    conn.execute_all_sql(statements).await?;
    Ok(())
}

/// The statements that make the stored texts `cleaned_text_id` and `raw_text_id` (texts of
/// the document) its index bodies, replacing what it had, for a caller that runs them in its
/// own transaction (or hands them to the engine). The index reads the texts where they are, so
/// they must be written before these statements run (or in the same transaction, before).
///
/// One upsert: under PostgreSQL's READ COMMITTED two runs indexing one document may both find
/// no row; the second then replaces the first instead of failing on the key. On SQLite the
/// upsert's update fires the triggers that take the old bodies out of FTS5 and put the new
/// ones in. Then the document's own index texts that no longer serve go (see
/// [`index_document`]).
pub fn index_statements(
    pk: i64,
    document_id: &str,
    run_id: &str,
    cleaned_text_id: &str,
    raw_text_id: &str,
) -> Vec<Statement> {
    vec![
        stmt(
            "INSERT INTO search_documents (pk, run_id, cleaned_text_id, raw_text_id) \
             VALUES (?, ?, ?, ?) ON CONFLICT (pk) DO UPDATE SET run_id = excluded.run_id, \
             cleaned_text_id = excluded.cleaned_text_id, raw_text_id = excluded.raw_text_id",
            [
                pk.into(),
                run_id.to_string().into(),
                cleaned_text_id.to_string().into(),
                raw_text_id.to_string().into(),
            ],
        ),
        stmt(
            "DELETE FROM document_texts WHERE document_id = ? AND kind IN (?, ?) \
             AND id NOT IN (?, ?)",
            [
                document_id.to_string().into(),
                TEXT_KIND_INDEXED_CLEANED.into(),
                TEXT_KIND_INDEXED_RAW.into(),
                cleaned_text_id.to_string().into(),
                raw_text_id.to_string().into(),
            ],
        ),
    ]
}

/// Removes a document from the index (no-op when it is not indexed). The texts stay.
pub async fn remove_from_index(conn: &impl ConnectionTrait, document_id: &str) -> Result<()> {
    let pk = document_pk(conn, document_id).await?;
    conn.execute_sql(remove_statement(pk)).await?;
    Ok(())
}

/// The statement that takes the document whose `pk` is given out of the index (its triggers
/// remove the FTS5 rows on SQLite; on PostgreSQL the views follow the table).
pub fn remove_statement(pk: i64) -> Statement {
    stmt("DELETE FROM search_documents WHERE pk = ?", [pk.into()])
}

/// A document's integer key (the search tables' rowid). `NotFound` for an unknown id.
pub async fn document_pk(conn: &impl ConnectionTrait, document_id: &str) -> Result<i64> {
    let row = conn
        .query_one_sql(stmt(
            "SELECT pk FROM documents WHERE id = ?",
            [document_id.to_string().into()],
        ))
        .await?;
    match row {
        Some(row) => Ok(row.try_get("", "pk")?),
        None => Err(DocumentsError::NotFound {
            id: document_id.to_string(),
        }),
    }
}
