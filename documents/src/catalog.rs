//! What readers of the whole collection ask of the documents table, answered here so that only
//! this crate names it: whether a document row exists, the classification codes in use, and
//! what an OKF bundle reads (the processed documents under a code, the codes, the documents
//! left out, how many concepts a filter matches). "Processed" means a cleaned text written by
//! a run whose work stands and a classification; whether a run's work stands is the engine's
//! to say, so it comes in as `run_stands` (the engine's `subject_sql::run_succeeded_or_replayed`).

use sea_orm::{ConnectionTrait, QueryResult, Value};
use shelf_db::SqlFragment;
use shelf_db::sql::{SqlExt, is_postgres};

use crate::error::Result;
use crate::sql::{stmt, to_i64};
use crate::texts::TEXT_KIND_CLEANED;

/// Whether a document row with this id exists.
pub async fn document_exists(conn: &impl ConnectionTrait, id: &str) -> Result<bool> {
    let found = conn
        .query_one_sql(stmt(
            "SELECT 1 FROM documents WHERE id = ?",
            [id.to_string().into()],
        ))
        .await?;
    Ok(found.is_some())
}

/// Every distinct code a classifier wrote to a document, with the label stored beside it
/// (any one of them when documents disagree).
pub async fn stored_classifications(
    conn: &impl ConnectionTrait,
) -> Result<Vec<(String, Option<String>)>> {
    let rows = conn
        .query_all_sql(stmt(
            "SELECT DISTINCT classification AS code, classification_label AS label \
             FROM documents WHERE classification IS NOT NULL",
            [],
        ))
        .await?;
    rows.iter()
        .map(|row| Ok((row.try_get("", "code")?, row.try_get("", "label")?)))
        .collect()
}

/// Which documents an OKF bundle holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConceptFilter<'a> {
    /// Plain string prefix of the code; unclassified documents never match one.
    pub classification_prefix: Option<&'a str>,
    /// Only documents carrying this tag (ASCII case-insensitive).
    pub tag: Option<&'a str>,
}

/// A processed document filed under a code: what a concept's slug and links need (no text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConceptMember {
    pub id: String,
    pub filename: String,
    pub title: Option<String>,
    pub tags: Vec<String>,
}

/// A document a filter matches that is not a concept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unprocessed {
    pub id: String,
    pub filename: String,
    pub created_at: String,
    /// It has a cleaned text (so what it lacks is a classification).
    pub cleaned: bool,
}

/// `EXISTS` a cleaned text of `d` written by a run whose work stands.
fn has_cleaned(run_stands: &dyn Fn(&str) -> SqlFragment) -> SqlFragment {
    let mut sql = SqlFragment::new(
        format!(
            "EXISTS (SELECT 1 FROM document_texts t WHERE t.document_id = d.id \
             AND t.kind = '{TEXT_KIND_CLEANED}' AND "
        ),
        [],
    );
    sql.push_fragment(&run_stands("t.run_id")).push(")", []);
    sql
}

/// `AND …` clauses of the filter on `documents d`.
fn filter_sql(filter: &ConceptFilter<'_>, postgres: bool) -> SqlFragment {
    let mut sql = SqlFragment::new("", []);
    if let Some(prefix) = filter.classification_prefix {
        // The cast: PostgreSQL has no `substr(text, int, bigint)` for the i64 bound here.
        sql.push(
            " AND substr(d.classification, 1, CAST(? AS INTEGER)) = ?",
            [
                i64::try_from(prefix.chars().count())
                    .unwrap_or(i64::MAX)
                    .into(),
                prefix.to_string().into(),
            ],
        );
    }
    if let Some(tag) = filter.tag {
        let tag: Value = tag.to_string().into();
        if postgres {
            // Shelf writes `tags` as a JSON array (serde); anything else counts as no tags,
            // as `json_valid` makes it on SQLite.
            sql.push(
                " AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE WHEN d.tags LIKE '[%' \
                 THEN CAST(d.tags AS jsonb) ELSE CAST('[]' AS jsonb) END) j(value) \
                 WHERE lower(j.value) = lower(?))",
                [tag],
            );
        } else {
            sql.push(
                " AND EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(d.tags) THEN d.tags ELSE '[]' END) j \
                 WHERE lower(j.value) = lower(?))",
                [tag],
            );
        }
    }
    sql
}

fn tags_of(row: &QueryResult) -> Vec<String> {
    row.try_get::<String>("", "tags")
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Every processed document filed under `code` (whatever a filter would say), newest first.
pub async fn concept_members(
    conn: &impl ConnectionTrait,
    code: &str,
    run_stands: impl Fn(&str) -> SqlFragment,
) -> Result<Vec<ConceptMember>> {
    let mut query = SqlFragment::new(
        "SELECT d.id, d.filename, d.title, d.tags FROM documents d \
         WHERE d.classification = ? AND ",
        [code.to_string().into()],
    );
    query
        .push_fragment(&has_cleaned(&run_stands))
        .push(" ORDER BY d.created_at DESC, d.id ASC", []);
    let rows = conn.query_all_sql(query.into_statement()).await?;
    rows.iter()
        .map(|row| {
            Ok(ConceptMember {
                id: row.try_get("", "id")?,
                filename: row.try_get("", "filename")?,
                title: row.try_get("", "title")?,
                tags: tags_of(row),
            })
        })
        .collect()
}

/// Up to `limit` distinct codes of processed documents the filter matches, in order, after
/// `after`.
pub async fn concept_codes(
    conn: &impl ConnectionTrait,
    filter: &ConceptFilter<'_>,
    after: Option<&str>,
    limit: u64,
    run_stands: impl Fn(&str) -> SqlFragment,
) -> Result<Vec<String>> {
    let mut query = SqlFragment::new(
        "SELECT DISTINCT d.classification AS code FROM documents d \
         WHERE d.classification IS NOT NULL AND ",
        [],
    );
    query.push_fragment(&has_cleaned(&run_stands));
    if let Some(after) = after {
        query.push(" AND d.classification > ?", [after.to_string().into()]);
    }
    query
        .push_fragment(&filter_sql(filter, is_postgres(conn)))
        .push(&format!(" ORDER BY d.classification LIMIT {limit}"), []);
    let rows = conn.query_all_sql(query.into_statement()).await?;
    rows.iter()
        .map(|row| Ok(row.try_get("", "code")?))
        .collect()
}

/// A page of the documents the filter matches that lack a cleaned text or a classification,
/// newest first (then by id), after the keyset position `after` (`created_at`, `id`).
pub async fn unprocessed_page(
    conn: &impl ConnectionTrait,
    filter: &ConceptFilter<'_>,
    after: Option<(&str, &str)>,
    limit: u64,
    run_stands: impl Fn(&str) -> SqlFragment,
) -> Result<Vec<Unprocessed>> {
    let cleaned = has_cleaned(&run_stands);
    let mut query = SqlFragment::new(
        "SELECT d.id, d.filename, d.created_at, d.classification IS NOT NULL AS classified, ",
        [],
    );
    query
        .push_fragment(&cleaned)
        .push(
            " AS cleaned FROM documents d WHERE (d.classification IS NULL OR NOT ",
            [],
        )
        .push_fragment(&cleaned)
        .push(")", []);
    if let Some((created_at, id)) = after {
        query.push(
            " AND (d.created_at < ? OR (d.created_at = ? AND d.id > ?))",
            [
                created_at.to_string().into(),
                created_at.to_string().into(),
                id.to_string().into(),
            ],
        );
    }
    query
        .push_fragment(&filter_sql(filter, is_postgres(conn)))
        .push(
            " ORDER BY d.created_at DESC, d.id ASC LIMIT ?",
            [to_i64(limit).into()],
        );
    let rows = conn.query_all_sql(query.into_statement()).await?;
    rows.iter()
        .map(|row| {
            Ok(Unprocessed {
                id: row.try_get("", "id")?,
                filename: row.try_get("", "filename")?,
                created_at: row.try_get("", "created_at")?,
                cleaned: row.try_get("", "cleaned")?,
            })
        })
        .collect()
}

/// How many processed documents the filter matches.
pub async fn concept_count(
    conn: &impl ConnectionTrait,
    filter: &ConceptFilter<'_>,
    run_stands: impl Fn(&str) -> SqlFragment,
) -> Result<u64> {
    let mut query = SqlFragment::new(
        "SELECT count(*) AS n FROM documents d WHERE d.classification IS NOT NULL AND ",
        [],
    );
    query
        .push_fragment(&has_cleaned(&run_stands))
        .push_fragment(&filter_sql(filter, is_postgres(conn)));
    let row = conn.query_one_sql(query.into_statement()).await?;
    let n: i64 = match row {
        Some(row) => row.try_get("", "n")?,
        None => 0,
    };
    Ok(u64::try_from(n).unwrap_or(0))
}
