//! What a search asks and answers: the request (strict and loose JSON forms, validated with
//! the specific errors of docs/errors.md), its limits, and the result shapes.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{DocumentsError, Result};
use crate::model::DocumentStatus;

/// Longest accepted query, in characters.
pub const MAX_QUERY_CHARS: usize = 4096;
/// Page size when the request names none.
pub const DEFAULT_LIMIT: u64 = 20;
/// Largest page size.
pub const MAX_LIMIT: u64 = 500;
/// Facet bucket count when the request names none.
pub const DEFAULT_FACET_LIMIT: u64 = 50;
/// Largest facet bucket count.
pub const MAX_FACET_LIMIT: u64 = 500;

/// Which index a search reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchScope {
    /// Cleaned outputs (default).
    #[default]
    Cleaned,
    /// Raw extracted sources.
    Raw,
}

impl SearchScope {
    /// The serialized name, also a hit's `source`.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchScope::Cleaned => "cleaned",
            SearchScope::Raw => "raw",
        }
    }

    /// Parses a scope name; unknown values are `InvalidSearchScope`.
    pub fn parse(value: &str) -> Result<Self> {
        match value {
            "cleaned" => Ok(SearchScope::Cleaned),
            "raw" => Ok(SearchScope::Raw),
            other => Err(DocumentsError::InvalidSearchScope {
                value: other.chars().take(64).collect(),
            }),
        }
    }

    /// The index table (or view) this scope reads.
    pub(super) fn table(self) -> &'static str {
        match self {
            SearchScope::Cleaned => "search_cleaned",
            SearchScope::Raw => "search_raw",
        }
    }
}

/// How the terms of a query combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchMode {
    /// Every term must match; when that finds nothing and the query has several terms, any
    /// term may match (ranked by BM25, so documents matching more terms come first).
    #[default]
    Auto,
    /// Every term (and phrase) must match.
    All,
    /// Any term may match.
    Any,
}

/// How a search ranks: by its words (BM25), by meaning (the passages' vectors nearest the
/// query's), or both fused by reciprocal rank (docs/search.md, "Modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// BM25 over the full-text index (the default).
    #[default]
    Keyword,
    /// Documents by their best passage's cosine similarity to the query's vector.
    Semantic,
    /// Reciprocal rank fusion (k = 60) of the top 100 of each of the two.
    Hybrid,
}

impl SearchMode {
    /// The serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Keyword => "keyword",
            SearchMode::Semantic => "semantic",
            SearchMode::Hybrid => "hybrid",
        }
    }

    /// Parses a mode name; unknown values are `InvalidSearchMode`.
    pub fn parse(value: &str) -> Result<Self> {
        match value {
            "keyword" => Ok(SearchMode::Keyword),
            "semantic" => Ok(SearchMode::Semantic),
            "hybrid" => Ok(SearchMode::Hybrid),
            other => Err(DocumentsError::InvalidSearchMode {
                value: other.chars().take(64).collect(),
            }),
        }
    }

    /// Whether the mode needs the query's vector.
    pub fn is_dense(self) -> bool {
        self != SearchMode::Keyword
    }
}

/// The query's embedding, computed by the caller with the configured model (this crate never
/// embeds), and that model's identity: only passages embedded by the same model are compared
/// with it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryVector {
    /// The embedder's identity string, as stored with each passage (`document_passages.model`).
    pub model: String,
    /// L2-normalised.
    pub values: Vec<f32>,
}

/// A validated search request (see [`SearchBody`] for the loose JSON form).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchRequest {
    pub query: String,
    /// Default [`DEFAULT_LIMIT`], capped at [`MAX_LIMIT`].
    pub limit: Option<u64>,
    pub offset: u64,
    /// Exact Dewey code.
    pub classification_code: Option<String>,
    /// Code prefix: `636` matches `636` and `636.1…`; `6` the whole class.
    pub classification_prefix: Option<String>,
    pub document_status: Option<DocumentStatus>,
    /// Case-insensitive (ASCII) substring of the filename.
    pub filename_contains: Option<String>,
    /// Inclusive lower bound of the document's `created_at`.
    pub created_after: Option<DateTime<Utc>>,
    /// Inclusive upper bound of the document's `created_at`.
    pub created_before: Option<DateTime<Utc>>,
    /// Treat the whole query as one phrase.
    pub phrase: bool,
    pub scope: SearchScope,
    pub match_mode: MatchMode,
    /// Keyword (default), semantic or hybrid.
    pub mode: SearchMode,
    /// The query's vector, which semantic and hybrid need (`EmbeddingUnavailable` without
    /// it); set by the application, never by the client.
    pub query_vector: Option<QueryVector>,
}

/// The JSON body of the search endpoints, as clients send it. [`SearchBody::into_request`]
/// turns it into a [`SearchRequest`] with the specific errors of docs/errors.md
/// (`invalid_search_scope`, `invalid_document_status`, ...).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SearchBody {
    pub query: String,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    pub classification_code: Option<String>,
    pub classification_prefix: Option<String>,
    pub document_status: Option<String>,
    pub filename_contains: Option<String>,
    pub created_after: Option<String>,
    pub created_before: Option<String>,
    pub phrase: bool,
    pub scope: Option<String>,
    pub match_mode: Option<MatchMode>,
    /// `keyword`, `semantic` or `hybrid` (`invalid_search_mode` otherwise).
    pub mode: Option<String>,
}

impl SearchBody {
    /// Validates the loose fields. Empty strings mean "no filter".
    pub fn into_request(self) -> Result<SearchRequest> {
        let non_empty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let scope = match non_empty(self.scope) {
            Some(scope) => SearchScope::parse(scope.trim())?,
            None => SearchScope::Cleaned,
        };
        let mode = match non_empty(self.mode) {
            Some(mode) => SearchMode::parse(mode.trim())?,
            None => SearchMode::Keyword,
        };
        let document_status = non_empty(self.document_status)
            .map(|s| DocumentStatus::parse(s.trim()))
            .transpose()?;
        let created_after = non_empty(self.created_after)
            .map(|s| parse_timestamp("created_after", &s))
            .transpose()?;
        let created_before = non_empty(self.created_before)
            .map(|s| parse_timestamp("created_before", &s))
            .transpose()?;
        Ok(SearchRequest {
            query: self.query,
            limit: self.limit,
            offset: self.offset.unwrap_or(0),
            classification_code: non_empty(self.classification_code),
            classification_prefix: non_empty(self.classification_prefix),
            document_status,
            filename_contains: non_empty(self.filename_contains),
            created_after,
            created_before,
            phrase: self.phrase,
            scope,
            match_mode: self.match_mode.unwrap_or_default(),
            mode,
            query_vector: None,
        })
    }
}

impl SearchRequest {
    /// The match mode the plans follow: a phrase is one term, so it never relaxes.
    pub(super) fn effective_mode(&self) -> MatchMode {
        if self.phrase {
            MatchMode::All
        } else {
            self.match_mode
        }
    }
}

/// Parses an ISO-8601 timestamp filter: RFC 3339 (`2026-11-21T10:00:00Z`, offsets allowed),
/// a date-time without offset (read as UTC), or a date (midnight UTC).
pub fn parse_timestamp(field: &'static str, value: &str) -> Result<DateTime<Utc>> {
    let text = value.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(naive.and_utc());
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d")
        && let Some(midnight) = date.and_hms_opt(0, 0, 0)
    {
        return Ok(midnight.and_utc());
    }
    Err(DocumentsError::InvalidTimestamp {
        field,
        value: value.chars().take(64).collect(),
    })
}

/// One ranked result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub document_id: String,
    /// The run that produced the indexed cleaned text; null for raw hits.
    pub run_id: Option<String>,
    /// `cleaned` or `raw`.
    pub source: SearchScope,
    pub filename: String,
    pub document_status: DocumentStatus,
    pub created_at: String,
    /// HTML-escaped excerpt with `<mark>…</mark>` around matches.
    pub snippet: String,
    /// Higher is better (negated FTS5 BM25 on SQLite, `ts_rank_cd` on PostgreSQL).
    pub score: f64,
    pub classification_code: Option<String>,
    pub classification_label: Option<String>,
    /// The document has transcript segments (its source is SRT, WebVTT or SBV), so a
    /// citation can be looked for; read with the page rather than by one more query.
    #[serde(skip)]
    pub has_transcript: bool,
}

/// A page of ranked results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchPage {
    pub results: Vec<SearchHit>,
    /// Matching documents before limit/offset.
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    /// How the terms were combined (`all`, or `any` after an empty all-terms match).
    pub match_mode: MatchMode,
}

/// A page of matching document ids.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchIds {
    pub document_ids: Vec<String>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub match_mode: MatchMode,
}

// One facet bucket. The API serves it as it is, as the `FacetCountOut` schema, so its doc
// comments are that schema's text: this one is a plain comment because the published schema
// has no description.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = FacetCountOut)]
pub struct FacetCount {
    pub value: String,
    pub count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// Facet counts of a search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchFacets {
    pub classifications: Vec<FacetCount>,
    pub statuses: Vec<FacetCount>,
    /// One bucket for the searched source, counting every matching document.
    pub sources: Vec<FacetCount>,
    pub filenames: Vec<FacetCount>,
    pub match_mode: MatchMode,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::format_timestamp;

    #[test]
    fn bodies_are_validated_with_specific_errors() {
        let body = |json: serde_json::Value| {
            serde_json::from_value::<SearchBody>(json)
                .map_err(|e| e.to_string())
                .and_then(|b| b.into_request().map_err(|e| e.code().to_string()))
        };
        assert_eq!(
            body(serde_json::json!({"query": "x", "scope": "everything"}))
                .err()
                .as_deref(),
            Some("invalid_search_scope")
        );
        assert_eq!(
            body(serde_json::json!({"query": "x", "document_status": "done"}))
                .err()
                .as_deref(),
            Some("invalid_document_status")
        );
        assert_eq!(
            body(serde_json::json!({"query": "x", "mode": "fuzzy"}))
                .err()
                .as_deref(),
            Some("invalid_search_mode")
        );
        assert_eq!(
            body(serde_json::json!({"query": "x", "mode": "hybrid"}))
                .ok()
                .map(|r| r.mode),
            Some(SearchMode::Hybrid)
        );
        assert_eq!(
            body(serde_json::json!({"query": "x", "created_after": "yesterday"}))
                .err()
                .as_deref(),
            Some("validation_error")
        );
        let ok = body(serde_json::json!({
            "query": "x", "scope": "raw", "document_status": "ready",
            "created_after": "2026-01-01T10:00:00+02:00", "created_before": "2026-01-02",
            "classification_code": ""
        }))
        .expect("valid body");
        assert_eq!(ok.scope, SearchScope::Raw);
        assert_eq!(ok.document_status, Some(DocumentStatus::Ready));
        assert_eq!(ok.classification_code, None);
        assert_eq!(
            ok.created_after.map(format_timestamp).as_deref(),
            Some("2026-01-01T08:00:00.000Z")
        );
    }
}
