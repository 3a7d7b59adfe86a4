//! A ranked page, the same in both dialects: its statement's shape (rank and cut in a CTE,
//! then the ids, or the hit columns with snippets for the page rows only) and its rows read
//! back as hits. Each dialect supplies only its score, snippet and joins.

use std::borrow::Cow;

use sea_orm::{DbBackend, QueryResult};

use crate::dewey;
use crate::error::{DocumentsError, Result};
use crate::model::DocumentStatus;

use super::postgres;
use super::request::{SearchHit, SearchScope};
use super::snippets::render_snippet;

/// The ranking CTE over `source` (a dialect's `FROM … WHERE …` with the filters): `score`
/// is named `bm25_score` (lower is better in both dialects), ties go to the newest document,
/// then the smallest id. Values: the source's, then limit and offset.
pub(super) fn ranked_cte(table: &str, score: &str, source: &str) -> String {
    format!(
        "WITH page AS (SELECT {table}.rowid AS rid, {score} AS bm25_score, \
         d.created_at AS created_at, d.id AS id {source} \
         ORDER BY bm25_score ASC, d.created_at DESC, d.id ASC LIMIT ? OFFSET ?) "
    )
}

/// The page's document ids in ranked order.
pub(super) fn select_ids(ranked: &str) -> String {
    format!(
        "{ranked}SELECT id AS document_id, bm25_score FROM page \
         ORDER BY bm25_score ASC, created_at DESC, id ASC"
    )
}

/// The page's hits in ranked order, the columns [`hit_from_row`] reads: `snippet` is the
/// dialect's snippet expression, `joins` what follows `FROM page` to reach the index row,
/// its document and the query.
pub(super) fn select_hits(
    ranked: &str,
    table: &str,
    scope: SearchScope,
    snippet: &str,
    joins: &str,
) -> String {
    let run_id = match scope {
        SearchScope::Cleaned => format!("{table}.run_id"),
        SearchScope::Raw => "NULL".to_string(),
    };
    format!(
        "{ranked}SELECT d.id AS document_id, d.filename, d.status, d.created_at, \
         d.classification, d.classification_label, {run_id} AS run_id, \
         page.bm25_score AS bm25_score, {snippet} AS snippet, \
         EXISTS (SELECT 1 FROM document_segments s WHERE s.document_id = d.id) \
         AS has_transcript \
         FROM page {joins} \
         ORDER BY page.bm25_score ASC, page.created_at DESC, page.id ASC"
    )
}

/// A hit row's document status and classification (code, and label: the stored one, else
/// the Dewey table's), as every kind of hit reads them.
pub(super) fn status_and_classification(
    row: &QueryResult,
    document_id: &str,
) -> Result<(DocumentStatus, Option<String>, Option<String>)> {
    let status_text: String = row.try_get("", "status")?;
    let document_status = DocumentStatus::parse(&status_text).map_err(|_| {
        DocumentsError::corrupt(format!("document {document_id} has status {status_text}"))
    })?;
    let classification_code: Option<String> = row.try_get("", "classification")?;
    let stored_label: Option<String> = row.try_get("", "classification_label")?;
    let classification_label = stored_label.or_else(|| {
        classification_code
            .as_deref()
            .and_then(dewey::label)
            .map(str::to_string)
    });
    Ok((document_status, classification_code, classification_label))
}

/// A row of [`select_hits`] as a hit of `scope`, its snippet rendered.
pub(super) fn hit_from_row(
    row: &QueryResult,
    backend: DbBackend,
    scope: SearchScope,
) -> Result<SearchHit> {
    let document_id: String = row.try_get("", "document_id")?;
    let (document_status, classification_code, classification_label) =
        status_and_classification(row, &document_id)?;
    let bm25: f64 = row.try_get("", "bm25_score")?;
    let snippet: Option<String> = row.try_get("", "snippet")?;
    let snippet = snippet.unwrap_or_default();
    let snippet = match backend {
        DbBackend::Postgres => postgres::restore_angles(&snippet),
        _ => Cow::Borrowed(snippet.as_str()),
    };
    Ok(SearchHit {
        run_id: row.try_get("", "run_id")?,
        source: scope,
        filename: row.try_get("", "filename")?,
        document_status,
        created_at: row.try_get("", "created_at")?,
        snippet: render_snippet(&snippet),
        score: -bm25,
        classification_code,
        classification_label,
        has_transcript: row.try_get::<bool>("", "has_transcript")?,
        document_id,
    })
}
