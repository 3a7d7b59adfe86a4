//! Search's SQLite dialect: the normalized terms as an FTS5 `MATCH` over the external-content
//! indexes, ranked by `bm25()`, with `snippet()` excerpts; and the top candidates ranked on the
//! index alone before any join.
//!
//! The rules (terms, match modes, stop words, filters, paging, ties) stay in `query` and `plan`;
//! this one only says how a plan's FTS5 expression is matched, ranked and highlighted.

use shelf_db::sql::SqlExt;

use sea_orm::{ConnectionTrait, Value};

use crate::error::Result;
use crate::sql::{stmt, to_i64};

use super::page;
use super::request::SearchScope;
use super::snippets::{MARK_CLOSE_SENTINEL, MARK_OPEN_SENTINEL, SNIPPET_ELLIPSIS, SNIPPET_TOKENS};

/// Deepest page (`offset + limit`) ranked on the FTS index alone before the join.
pub(super) const MAX_CANDIDATES: u64 = 1000;

/// `FROM … WHERE … MATCH ?` with the filters. Every index row has its document (rows are
/// written for an existing document and deleted with it), so the join only filters.
pub(super) fn source_clause(table: &str, filter_sql: &str) -> String {
    format!(
        "FROM {table} JOIN documents d ON d.pk = {table}.rowid \
         WHERE {table} MATCH ?{filter_sql}"
    )
}

/// Counts matches on the index alone (no filters, so no join).
pub(super) fn count_sql(table: &str) -> String {
    format!("SELECT count(*) AS n FROM {table} WHERE {table} MATCH ?")
}

/// Ranks and pages first (the CTE reads only rowids, BM25 scores and the tie-break
/// columns), then joins the page rows back to the index for their snippets, so SQLite
/// builds at most `limit` snippets instead of one per matching row. With `candidates`, the
/// CTE starts from that many `(rowid, score)` value pairs (see [`candidates`]) instead of
/// `source_clause`. Values: the candidates' or the source clause's, limit, offset, then
/// [`snippet_values`] when `with_snippets`.
pub(super) fn page_sql(
    table: &str,
    scope: SearchScope,
    source_clause: &str,
    with_snippets: bool,
    candidates: usize,
) -> String {
    let ranked = if candidates == 0 {
        page::ranked_cte(table, &format!("bm25({table})"), source_clause)
    } else {
        // The candidates and their scores come from the index alone; only they meet
        // the documents table, for the tie-break columns.
        let rows = vec!["(?, ?)"; candidates].join(", ");
        format!(
            "WITH cand(rid, bm25_score) AS (VALUES {rows}), \
             page AS MATERIALIZED (SELECT cand.rid AS rid, cand.bm25_score AS bm25_score, \
             d.created_at AS created_at, d.id AS id \
             FROM cand JOIN documents d ON d.pk = cand.rid \
             ORDER BY cand.bm25_score ASC, d.created_at DESC, d.id ASC LIMIT ? OFFSET ?) "
        )
    };
    if !with_snippets {
        return page::select_ids(&ranked);
    }
    // CROSS JOIN keeps the page as the outer loop: the index is then probed by rowid
    // for each page row, never scanned again.
    page::select_hits(
        &ranked,
        table,
        scope,
        &format!("snippet({table}, 0, ?, ?, ?, ?)"),
        &format!(
            "CROSS JOIN {table} ON {table}.rowid = page.rid \
             CROSS JOIN documents d ON d.pk = page.rid \
             WHERE {table} MATCH ?"
        ),
    )
}

/// The snippet values of [`page_sql`]: the highlight sentinels, the ellipsis, the tokens of
/// context, and the expression again.
pub(super) fn snippet_values(expression: &str) -> Vec<Value> {
    vec![
        MARK_OPEN_SENTINEL.to_string().into(),
        MARK_CLOSE_SENTINEL.to_string().into(),
        SNIPPET_ELLIPSIS.into(),
        i64::from(SNIPPET_TOKENS).into(),
        expression.to_string().into(),
    ]
}

/// The top `wanted` rows of `table` for `expression`, ranked on the FTS index alone, or
/// `None` when a tie crosses the cut: the row after it (`wanted + 1` are read) has the score
/// of the last one, so which of them belong to the page depends on the documents' tie-break
/// columns.
pub(super) async fn candidates(
    conn: &impl ConnectionTrait,
    table: &str,
    expression: &str,
    wanted: u64,
) -> Result<Option<Vec<(i64, f64)>>> {
    let sql = format!(
        "SELECT rowid AS rid, bm25({table}) AS bm25_score FROM {table} \
         WHERE {table} MATCH ? ORDER BY bm25_score ASC LIMIT ?"
    );
    let rows = conn
        .query_all_sql(stmt(
            &sql,
            [
                expression.to_string().into(),
                to_i64(wanted.saturating_add(1)).into(),
            ],
        ))
        .await?;
    let mut top = Vec::with_capacity(rows.len());
    for row in &rows {
        top.push((
            row.try_get::<i64>("", "rid")?,
            row.try_get::<f64>("", "bm25_score")?,
        ));
    }
    let wanted = usize::try_from(wanted).unwrap_or(usize::MAX);
    if top.len() > wanted && wanted > 0 && top[wanted].1 == top[wanted - 1].1 {
        return Ok(None);
    }
    top.truncate(wanted);
    Ok(Some(top))
}
