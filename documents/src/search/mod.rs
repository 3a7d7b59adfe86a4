//! Full-text search over cleaned outputs or raw sources: request validation, query
//! normalization into safe FTS5 expressions, filters, BM25 ranking, escaped snippets with
//! `<mark>` highlights, id-only results and facets.
//!
//! On PostgreSQL the same rules run over `tsvector` columns instead of FTS5 (`postgres`):
//! only matching, ranking and snippets differ, chosen by the connection's backend.
//!
//! The rooms: `request` (what is asked and answered), `stop_words` (the workspace's one
//! list), `query` (user text into terms), `plan` (validation, filters, match-mode plans and
//! their running), `page` (the ranked page's statement and hits, shared by both dialects),
//! `sqlite` and `postgres` (each dialect's matching, ranking and snippets), `snippets`
//! (highlight sentinels and rendering), `facets`, `vectors` (the passage vectors' in-memory
//! matrix and its exact scan) and `semantic` (semantic and hybrid modes, their fusion with
//! BM25, similar documents); this file holds the entry points, which dispatch on the mode.

mod facets;
mod page;
mod plan;
mod postgres;
mod query;
mod request;
mod semantic;
mod snippets;
mod sqlite;
mod stop_words;
pub mod vectors;

use sea_orm::ConnectionTrait;

use crate::error::Result;

pub use facets::search_facets;
pub use query::{KEYWORD_QUERY_TERMS, NormalizedQuery, normalize_query};
pub use request::{
    DEFAULT_FACET_LIMIT, DEFAULT_LIMIT, FacetCount, MAX_FACET_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS,
    MatchMode, QueryVector, SearchBody, SearchFacets, SearchHit, SearchIds, SearchMode, SearchPage,
    SearchRequest, SearchScope, parse_timestamp,
};
pub use semantic::{FUSION_DEPTH, RRF_K, SEMANTIC_CANDIDATES, similar_documents};
pub use snippets::{SNIPPET_TOKENS, render_snippet, strip_snippet_sentinels};
pub use stop_words::{STOP_WORDS, is_stop_word};

/// Ranked results with snippets. Validation errors (`SearchQueryTooLarge`,
/// `InvalidSearchWindow`, `InvalidSearchQuery`, and `EmbeddingUnavailable` for a semantic or
/// hybrid request without its query vector) come before any database access.
pub async fn search_results(
    conn: &impl ConnectionTrait,
    req: &SearchRequest,
) -> Result<SearchPage> {
    if req.mode.is_dense() {
        return semantic::results(conn, req).await;
    }
    let prepared = plan::prepare(req, conn.get_database_backend())?;
    let (rows, match_mode, total) = prepared.ranked(conn, req.effective_mode(), true).await?;
    let results = rows
        .iter()
        .map(|row| page::hit_from_row(row, prepared.backend, prepared.scope))
        .collect::<Result<Vec<_>>>()?;
    Ok(SearchPage {
        results,
        total,
        limit: prepared.limit,
        offset: prepared.offset,
        match_mode,
    })
}

/// Matching document ids in ranked order, with the total.
pub async fn search_ids(conn: &impl ConnectionTrait, req: &SearchRequest) -> Result<SearchIds> {
    if req.mode.is_dense() {
        return semantic::ids(conn, req).await;
    }
    let prepared = plan::prepare(req, conn.get_database_backend())?;
    let (rows, match_mode, total) = prepared.ranked(conn, req.effective_mode(), false).await?;
    let document_ids = rows
        .iter()
        .map(|row| row.try_get::<String>("", "document_id"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SearchIds {
        document_ids,
        total,
        limit: prepared.limit,
        offset: prepared.offset,
        match_mode,
    })
}
