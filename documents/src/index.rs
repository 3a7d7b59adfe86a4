//! The full-text index: one row per document in `search_cleaned` (with the run that produced
//! it) and in `search_raw`, keyed by the document's integer `pk` as FTS rowid. On PostgreSQL
//! the same columns feed a generated `tsvector`, so the statements are the same.

use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use shelf_engine::sql::{SqlExt, is_postgres};

use crate::error::{DocumentsError, Result};
use crate::search::strip_snippet_sentinels;
use crate::sql::{begin_immediate, stmt};

/// Replaces a document's index rows with the given cleaned and raw bodies, in one IMMEDIATE
/// transaction. `NotFound` for an unknown document.
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
    conn.execute_all_sql(index_statements(
        is_postgres(conn),
        pk,
        run_id,
        cleaned_body,
        raw_body,
    ))
    .await?;
    Ok(())
}

/// The statements that replace the index rows of the document whose `pk` is given, for a
/// caller that runs them in its own transaction (or hands them to the engine).
pub fn index_statements(
    postgres: bool,
    pk: i64,
    run_id: &str,
    cleaned_body: &str,
    raw_body: &str,
) -> Vec<Statement> {
    // SQLite's single writer makes delete-then-insert safe. Under PostgreSQL's READ COMMITTED
    // two runs indexing one document may both find no row to delete and both insert: the
    // second replaces the first instead of failing on the key. (FTS5 tables take no upsert.)
    let (cleaned_conflict, raw_conflict) = if postgres {
        (
            " ON CONFLICT (rowid) DO UPDATE SET body = excluded.body, run_id = excluded.run_id",
            " ON CONFLICT (rowid) DO UPDATE SET body = excluded.body",
        )
    } else {
        ("", "")
    };
    let mut statements = remove_statements(pk);
    statements.push(stmt(
        &format!(
            "INSERT INTO search_cleaned (rowid, body, run_id) VALUES (?, ?, ?){cleaned_conflict}"
        ),
        [
            pk.into(),
            strip_snippet_sentinels(cleaned_body).into_owned().into(),
            run_id.to_string().into(),
        ],
    ));
    statements.push(stmt(
        &format!("INSERT INTO search_raw (rowid, body) VALUES (?, ?){raw_conflict}"),
        [
            pk.into(),
            strip_snippet_sentinels(raw_body).into_owned().into(),
        ],
    ));
    statements
}

/// Removes a document from both search tables (no-op when it is not indexed).
pub async fn remove_from_index(conn: &impl ConnectionTrait, document_id: &str) -> Result<()> {
    let pk = document_pk(conn, document_id).await?;
    remove_rows(conn, pk).await
}

async fn remove_rows(conn: &impl ConnectionTrait, pk: i64) -> Result<()> {
    conn.execute_all_sql(remove_statements(pk)).await?;
    Ok(())
}

fn remove_statements(pk: i64) -> Vec<Statement> {
    vec![
        stmt("DELETE FROM search_cleaned WHERE rowid = ?", [pk.into()]),
        stmt("DELETE FROM search_raw WHERE rowid = ?", [pk.into()]),
    ]
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
