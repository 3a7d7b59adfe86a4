//! Full-text search over cleaned outputs or raw sources: request validation, query
//! normalization into safe FTS5 expressions, filters, BM25 ranking, escaped snippets with
//! `<mark>` highlights, id-only results and facets.
//!
//! On PostgreSQL the same rules run over `tsvector` columns instead of FTS5 (`postgres`):
//! only matching, ranking and snippets differ, chosen by the connection's backend.

mod postgres;

use shelf_engine::sql::SqlExt;
use std::borrow::Cow;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Value};
use serde::{Deserialize, Serialize};

use crate::dewey;
use crate::error::{DocumentsError, Result};
use crate::model::DocumentStatus;
use crate::sql::{format_timestamp, get_u64, stmt, to_i64};

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
/// Deepest page (`offset + limit`) ranked on the FTS index alone before the join.
const MAX_CANDIDATES: u64 = 1000;
/// Tokens of context in a snippet.
pub const SNIPPET_TOKENS: u32 = 24;

/// Private-use characters FTS5 puts around highlights before escaping; they are stripped
/// from indexed bodies so source text can never forge a highlight.
const MARK_OPEN_SENTINEL: char = '\u{E000}';
const MARK_CLOSE_SENTINEL: char = '\u{E001}';
const SNIPPET_ELLIPSIS: &str = "…";

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

    fn table(self) -> &'static str {
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
}

impl SearchBody {
    /// Validates the loose fields. Empty strings mean "no filter".
    pub fn into_request(self) -> Result<SearchRequest> {
        let non_empty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let scope = match non_empty(self.scope) {
            Some(scope) => SearchScope::parse(scope.trim())?,
            None => SearchScope::Cleaned,
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
        })
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

/// One facet bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// Words of a query that match nearly every English document. Unquoted single words on this
/// list are dropped from the matching expression of `auto` and `any` searches (they make the
/// any-term match select the whole index and cost the most), unless nothing else is left.
/// Phrases (quoted text, hyphenated words, `phrase: true`) keep every word. The list is the
/// common English list of the NLTK/Snowball family, lower case.
pub const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Whether `word` is on [`STOP_WORDS`] (ASCII case-insensitive).
pub fn is_stop_word(word: &str) -> bool {
    word.len() <= 10
        && word.is_ascii()
        && STOP_WORDS
            .binary_search(&word.to_ascii_lowercase().as_str())
            .is_ok()
}

/// Queries with at most this many content terms (terms left after stop words) are keyword
/// queries: `auto` requires all of them first. Longer queries are natural-language
/// questions, matched on any content term and ranked by BM25, which finds more relevant
/// documents (measured on Cranfield, docs/search.md).
pub const KEYWORD_QUERY_TERMS: usize = 3;

/// A query normalized into quoted FTS5 terms (single tokens or phrases).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizedQuery {
    /// Each term as an FTS5 string literal, e.g. `"mail"` or `"e mail"`.
    pub terms: Vec<String>,
    /// The terms without stop words (unquoted single words on [`STOP_WORDS`]); every term
    /// when all are stop words.
    pub content_terms: Vec<String>,
    /// The text each term came from, as typed (a word with its punctuation, the text between
    /// quotes, or the whole query in phrase mode), parallel to `terms`. PostgreSQL splits it
    /// with the parser that split the documents (which keeps `U.S.A.` or `e-mail` whole).
    pub sources: Vec<String>,
    /// [`Self::sources`] of the content terms, parallel to `content_terms`.
    pub content_sources: Vec<String>,
    /// Every term is a stop word ("to be or not to be"): searched like a keyword query.
    pub stop_words_only: bool,
}

impl NormalizedQuery {
    /// All terms must match.
    pub fn all_expression(&self) -> String {
        self.terms.join(" AND ")
    }

    /// Any term may match.
    pub fn any_expression(&self) -> String {
        self.terms.join(" OR ")
    }

    /// All content terms must match (stop words dropped).
    pub fn all_content_expression(&self) -> String {
        self.content_terms.join(" AND ")
    }

    /// Any content term may match (stop words dropped).
    pub fn any_content_expression(&self) -> String {
        self.content_terms.join(" OR ")
    }

    /// A keyword query: few content terms (or only stop words), so `auto` tries all of
    /// them first.
    pub fn is_keyword_query(&self) -> bool {
        self.stop_words_only || self.content_terms.len() <= KEYWORD_QUERY_TERMS
    }
}

/// Turns user text into FTS5 terms so that no user syntax reaches `MATCH`.
///
/// Words are split on whitespace; a word is split further on ASCII punctuation and its parts
/// form one phrase (`e-mail` → `"e mail"`, `c++` → `"c"`); text between double quotes is one
/// phrase; with `phrase` the whole query is one phrase. Parts with no letter or digit are
/// dropped. `InvalidSearchQuery` when nothing is left.
pub fn normalize_query(query: &str, phrase: bool) -> Result<NormalizedQuery> {
    // (words, quoted): a quoted group is a phrase even when it holds one word.
    let mut groups: Vec<(Vec<String>, bool, &str)> = Vec::new();
    if phrase {
        groups.push((words_of(query), true, query));
    } else {
        let segments: Vec<&str> = query.split('"').collect();
        let unmatched_last = segments.len().is_multiple_of(2);
        for (index, segment) in segments.iter().enumerate() {
            let quoted = index % 2 == 1 && !(unmatched_last && index + 1 == segments.len());
            if quoted {
                groups.push((words_of(segment), true, segment));
            } else {
                groups.extend(segment.split_whitespace().map(|w| (words_of(w), false, w)));
            }
        }
    }
    let mut terms = Vec::new();
    let mut content_terms = Vec::new();
    let mut sources = Vec::new();
    let mut content_sources = Vec::new();
    for (words, quoted, source) in groups.into_iter().filter(|(words, ..)| !words.is_empty()) {
        let stop = !quoted && words.len() == 1 && words.iter().all(|w| is_stop_word(w));
        let term = format!("\"{}\"", words.join(" ").replace('"', "\"\""));
        if !stop {
            content_terms.push(term.clone());
            content_sources.push(source.to_string());
        }
        terms.push(term);
        sources.push(source.to_string());
    }
    if terms.is_empty() {
        return Err(DocumentsError::InvalidSearchQuery);
    }
    let stop_words_only = content_terms.is_empty();
    if stop_words_only {
        content_terms = terms.clone();
        content_sources = sources.clone();
    }
    Ok(NormalizedQuery {
        terms,
        content_terms,
        sources,
        content_sources,
        stop_words_only,
    })
}

/// The searchable parts of a text, in order.
fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c.is_ascii_punctuation() || c.is_control())
        .filter(|part| part.chars().any(char::is_alphanumeric))
        .map(str::to_string)
        .collect()
}

/// Removes the snippet sentinel characters from text about to be indexed.
pub fn strip_snippet_sentinels(text: &str) -> Cow<'_, str> {
    if text.contains([MARK_OPEN_SENTINEL, MARK_CLOSE_SENTINEL]) {
        Cow::Owned(
            text.chars()
                .filter(|c| *c != MARK_OPEN_SENTINEL && *c != MARK_CLOSE_SENTINEL)
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
    }
}

/// HTML-escapes a raw FTS5 snippet and turns the sentinels into `<mark>` tags.
pub fn render_snippet(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 16);
    for c in raw.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            MARK_OPEN_SENTINEL => out.push_str("<mark>"),
            MARK_CLOSE_SENTINEL => out.push_str("</mark>"),
            other => out.push(other),
        }
    }
    out
}

/// A plan's matching expression in the connection's dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expression {
    /// An FTS5 query over quoted terms (SQLite).
    Fts5(String),
    /// A `tsquery` over the same terms (PostgreSQL).
    Ts(postgres::TsQuery),
}

impl Expression {
    /// The values of the match in a source clause, in order.
    fn values(&self) -> Vec<Value> {
        match self {
            Expression::Fts5(text) => vec![text.clone().into()],
            Expression::Ts(query) => query.values(),
        }
    }
}

/// Everything checked before the database is touched.
struct Prepared {
    backend: DbBackend,
    table: &'static str,
    scope: SearchScope,
    query: NormalizedQuery,
    filter_sql: String,
    filter_values: Vec<Value>,
    limit: u64,
    offset: u64,
}

/// Validates a request and builds its filters for `backend` (the few functions that differ:
/// `instr` is `strpos` on PostgreSQL).
fn prepare(req: &SearchRequest, backend: DbBackend) -> Result<Prepared> {
    if req.query.chars().nth(MAX_QUERY_CHARS).is_some() {
        return Err(DocumentsError::SearchQueryTooLarge {
            max: MAX_QUERY_CHARS,
        });
    }
    if let (Some(after), Some(before)) = (req.created_after, req.created_before)
        && after > before
    {
        return Err(DocumentsError::InvalidSearchWindow);
    }
    let query = normalize_query(&req.query, req.phrase)?;

    let mut filter_sql = String::new();
    let mut filter_values: Vec<Value> = Vec::new();
    let present = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    if let Some(code) = present(&req.classification_code) {
        filter_sql.push_str(" AND d.classification = ?");
        filter_values.push(code.into());
    }
    if let Some(prefix) = present(&req.classification_prefix) {
        filter_sql.push_str(" AND substr(d.classification, 1, ?) = ?");
        // An INTEGER length: PostgreSQL has no substr(text, int, bigint).
        let length = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
        filter_values.push(length.into());
        filter_values.push(prefix.into());
    }
    if let Some(status) = req.document_status {
        filter_sql.push_str(" AND d.status = ?");
        filter_values.push(status.as_str().into());
    }
    if let Some(needle) = present(&req.filename_contains) {
        filter_sql.push_str(if backend == DbBackend::Postgres {
            " AND strpos(lower(d.filename), lower(?)) > 0"
        } else {
            " AND instr(lower(d.filename), lower(?)) > 0"
        });
        filter_values.push(needle.into());
    }
    if let Some(after) = req.created_after {
        filter_sql.push_str(" AND d.created_at >= ?");
        filter_values.push(format_timestamp(after).into());
    }
    if let Some(before) = req.created_before {
        filter_sql.push_str(" AND d.created_at <= ?");
        filter_values.push(format_timestamp(before).into());
    }
    Ok(Prepared {
        backend,
        table: req.scope.table(),
        scope: req.scope,
        query,
        filter_sql,
        filter_values,
        limit: req.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT),
        offset: req.offset,
    })
}

impl Prepared {
    /// `FROM … WHERE … MATCH ?` with the filters. Every index row has its document (rows are
    /// written for an existing document and deleted with it), so the join only filters.
    fn source_clause(&self, expression: &Expression) -> String {
        let table = self.table;
        match expression {
            Expression::Fts5(_) => format!(
                "FROM {table} JOIN documents d ON d.pk = {table}.rowid \
                 WHERE {table} MATCH ?{}",
                self.filter_sql
            ),
            Expression::Ts(query) => query.source_clause(table, &self.filter_sql),
        }
    }

    /// The values of [`Self::source_clause`]: the match, then the filters.
    fn values_with(&self, expression: &Expression) -> Vec<Value> {
        let mut values = expression.values();
        values.extend(self.filter_values.iter().cloned());
        values
    }

    /// Counts the matching documents once. Without filters the index alone answers (no join).
    async fn count(&self, conn: &impl ConnectionTrait, expression: &Expression) -> Result<u64> {
        let table = self.table;
        let sql = match expression {
            _ if !self.filter_sql.is_empty() => {
                format!("SELECT count(*) AS n {}", self.source_clause(expression))
            }
            Expression::Fts5(_) => {
                format!("SELECT count(*) AS n FROM {table} WHERE {table} MATCH ?")
            }
            Expression::Ts(query) => query.count_sql(table),
        };
        let row = conn
            .query_one_sql(stmt(&sql, self.values_with(expression)))
            .await?;
        match row {
            Some(row) => Ok(get_u64(&row, "n")?),
            None => Ok(0),
        }
    }

    /// The expressions to try in order, each with the mode it reports: the first that
    /// matches anything is used (the last one also when nothing matches).
    fn plans(&self, requested: MatchMode) -> Vec<(Expression, MatchMode)> {
        let q = &self.query;
        match requested {
            MatchMode::All => vec![(self.expression(false, false), MatchMode::All)],
            MatchMode::Any => vec![(self.expression(true, true), MatchMode::Any)],
            MatchMode::Auto if !q.is_keyword_query() => {
                vec![(self.expression(true, true), MatchMode::Any)]
            }
            MatchMode::Auto => {
                let mut plans = vec![(self.expression(true, false), MatchMode::All)];
                if q.content_terms.len() > 1 {
                    plans.push((self.expression(true, true), MatchMode::Any));
                }
                plans
            }
        }
    }

    /// Every term (or the content terms) joined by AND (or OR when `any`) in the connection's
    /// dialect.
    fn expression(&self, content: bool, any: bool) -> Expression {
        let q = &self.query;
        let (terms, sources) = if content {
            (&q.content_terms, &q.content_sources)
        } else {
            (&q.terms, &q.sources)
        };
        if self.backend == DbBackend::Postgres {
            Expression::Ts(postgres::TsQuery::new(terms, sources, any))
        } else {
            Expression::Fts5(terms.join(if any { " OR " } else { " AND " }))
        }
    }

    /// The total when a page already tells it: a partial page is the last one.
    fn total_from_page(&self, rows: usize) -> Option<u64> {
        let rows = rows as u64;
        if self.limit == 0 {
            None
        } else if rows > 0 && rows < self.limit {
            Some(self.offset.saturating_add(rows))
        } else if rows == 0 && self.offset == 0 {
            Some(0)
        } else {
            None
        }
    }

    /// Ranks and pages first (the CTE reads only rowids, BM25 scores and the tie-break
    /// columns), then joins the page rows back to the index for their snippets, so SQLite
    /// builds at most `limit` snippets instead of one per matching row.
    fn page_sql(&self, expression: &Expression, with_snippets: bool, candidates: usize) -> String {
        let table = self.table;
        if let Expression::Ts(query) = expression {
            return query.page_sql(table, self.scope, &self.filter_sql, with_snippets);
        }
        let ranked = if candidates == 0 {
            format!(
                "WITH page AS (SELECT {table}.rowid AS rid, bm25({table}) AS bm25_score, \
                 d.created_at AS created_at, d.id AS id {} \
                 ORDER BY bm25_score ASC, d.created_at DESC, d.id ASC LIMIT ? OFFSET ?) ",
                self.source_clause(expression)
            )
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
            return format!(
                "{ranked}SELECT id AS document_id, bm25_score FROM page \
                 ORDER BY bm25_score ASC, created_at DESC, id ASC"
            );
        }
        let run_id = match self.scope {
            SearchScope::Cleaned => format!("{table}.run_id"),
            SearchScope::Raw => "NULL".to_string(),
        };
        // CROSS JOIN keeps the page as the outer loop: the index is then probed by rowid
        // for each page row, never scanned again.
        format!(
            "{ranked}SELECT d.id AS document_id, d.filename, d.status, d.created_at, \
             d.classification, d.classification_label, {run_id} AS run_id, \
             page.bm25_score AS bm25_score, snippet({table}, 0, ?, ?, ?, ?) AS snippet, \
             EXISTS (SELECT 1 FROM document_segments s WHERE s.document_id = d.id) \
             AS has_transcript \
             FROM page CROSS JOIN {table} ON {table}.rowid = page.rid \
             CROSS JOIN documents d ON d.pk = page.rid \
             WHERE {table} MATCH ? \
             ORDER BY page.bm25_score ASC, page.created_at DESC, page.id ASC"
        )
    }

    /// Without filters, the top `offset + limit + 1` rows are ranked on the FTS index alone
    /// (no join per matching row, which is what stops concurrent searches of a large index
    /// from scaling: every connection would walk the documents table for every match). When
    /// the row after the cut has a different score, no tie crosses the cut and those rows
    /// are exactly the candidates; the page query then orders them by the full key. With
    /// filters, a tie across the cut, or a deep page, the page query ranks every match.
    ///
    /// PostgreSQL always takes the page query: its planner joins the matches to the documents
    /// by hash, so there is no per-row join to save.
    async fn candidates(
        &self,
        conn: &impl ConnectionTrait,
        expression: &Expression,
    ) -> Result<Option<Vec<(i64, f64)>>> {
        let wanted = self.offset.saturating_add(self.limit);
        let Expression::Fts5(expression) = expression else {
            return Ok(None);
        };
        if !self.filter_sql.is_empty() || wanted > MAX_CANDIDATES {
            return Ok(None);
        }
        let table = self.table;
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

    async fn page(
        &self,
        conn: &impl ConnectionTrait,
        expression: &Expression,
        with_snippets: bool,
    ) -> Result<Vec<QueryResult>> {
        if self.limit == 0 {
            return Ok(Vec::new());
        }
        let candidates = self.candidates(conn, expression).await?;
        if candidates.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let candidates = candidates.unwrap_or_default();
        let mut values: Vec<Value> = Vec::new();
        if candidates.is_empty() {
            values.extend(self.values_with(expression));
        }
        for (rid, score) in &candidates {
            values.push((*rid).into());
            values.push((*score).into());
        }
        values.push(to_i64(self.limit).into());
        values.push(to_i64(self.offset).into());
        if with_snippets {
            match expression {
                Expression::Fts5(text) => {
                    values.push(MARK_OPEN_SENTINEL.to_string().into());
                    values.push(MARK_CLOSE_SENTINEL.to_string().into());
                    values.push(SNIPPET_ELLIPSIS.into());
                    values.push(i64::from(SNIPPET_TOKENS).into());
                    values.push(text.clone().into());
                }
                Expression::Ts(query) => values.extend(query.snippet_values()),
            }
        }
        Ok(conn
            .query_all_sql(stmt(
                &self.page_sql(expression, with_snippets, candidates.len()),
                values,
            ))
            .await?)
    }

    /// Runs the plans in order: a page, and the total (the page tells it when partial, else
    /// the count). Returns the rows, the mode used and the total.
    async fn ranked(
        &self,
        conn: &impl ConnectionTrait,
        requested: MatchMode,
        with_snippets: bool,
    ) -> Result<(Vec<QueryResult>, MatchMode, u64)> {
        let plans = self.plans(requested);
        let last = plans.len().saturating_sub(1);
        let mut answer = (Vec::new(), requested, 0);
        for (index, (expression, mode)) in plans.into_iter().enumerate() {
            // The count runs beside the page on another pooled connection (a reader of its
            // own under WAL), so a lone search waits for the slower of the two, not both; it
            // is wasted only when the page turns out partial and tells the total itself.
            let (rows, counted) = tokio::join!(
                self.page(conn, &expression, with_snippets),
                self.count(conn, &expression)
            );
            let rows = rows?;
            let total = match self.total_from_page(rows.len()) {
                Some(total) => total,
                None => counted?,
            };
            answer = (rows, mode, total);
            if total > 0 || index == last {
                break;
            }
        }
        Ok(answer)
    }

    /// Picks the expression by counting, for facets.
    async fn resolve(
        &self,
        conn: &impl ConnectionTrait,
        requested: MatchMode,
    ) -> Result<(Expression, MatchMode, u64)> {
        let plans = self.plans(requested);
        let last = plans.len().saturating_sub(1);
        let mut answer = (Expression::Fts5(String::new()), requested, 0);
        for (index, (expression, mode)) in plans.into_iter().enumerate() {
            let total = self.count(conn, &expression).await?;
            answer = (expression, mode, total);
            if total > 0 || index == last {
                break;
            }
        }
        Ok(answer)
    }
}

fn effective_mode(req: &SearchRequest) -> MatchMode {
    if req.phrase {
        MatchMode::All
    } else {
        req.match_mode
    }
}

/// Ranked results with snippets. Validation errors (`SearchQueryTooLarge`,
/// `InvalidSearchWindow`, `InvalidSearchQuery`) come before any database access.
pub async fn search_results(
    conn: &impl ConnectionTrait,
    req: &SearchRequest,
) -> Result<SearchPage> {
    let prepared = prepare(req, conn.get_database_backend())?;
    let (rows, match_mode, total) = prepared.ranked(conn, effective_mode(req), true).await?;
    let results = rows
        .iter()
        .map(|row| hit_from_row(row, &prepared))
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
    let prepared = prepare(req, conn.get_database_backend())?;
    let (rows, match_mode, total) = prepared.ranked(conn, effective_mode(req), false).await?;
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

/// Facet counts under the same query and filters: classifications and filenames (at most
/// `facet_limit` buckets each, default 50, at most 500), statuses, and the searched source
/// with the full matching count.
pub async fn search_facets(
    conn: &impl ConnectionTrait,
    req: &SearchRequest,
    facet_limit: Option<u64>,
) -> Result<SearchFacets> {
    let prepared = prepare(req, conn.get_database_backend())?;
    let bucket_limit = facet_limit
        .unwrap_or(DEFAULT_FACET_LIMIT)
        .min(MAX_FACET_LIMIT);
    let (expression, match_mode, total) = prepared.resolve(conn, effective_mode(req)).await?;
    let group = |column: &str, with_limit: bool| {
        // Byte order on PostgreSQL too, as SQLite's BINARY collation sorts the values.
        let value_order = if prepared.backend == DbBackend::Postgres {
            format!("{column} COLLATE \"C\"")
        } else {
            "value".to_string()
        };
        format!(
            "SELECT {column} AS value, count(*) AS n, max(d.classification_label) AS label {} \
             AND {column} IS NOT NULL GROUP BY {column} ORDER BY n DESC, {value_order} ASC{}",
            prepared.source_clause(&expression),
            if with_limit { " LIMIT ?" } else { "" }
        )
    };
    let mut classifications = Vec::new();
    let mut statuses = Vec::new();
    let mut filenames = Vec::new();
    if total > 0 {
        let mut limited = prepared.values_with(&expression);
        limited.push(to_i64(bucket_limit).into());
        for row in conn
            .query_all_sql(stmt(&group("d.classification", true), limited.clone()))
            .await?
        {
            let value: String = row.try_get("", "value")?;
            let stored: Option<String> = row.try_get("", "label")?;
            let label = stored.or_else(|| dewey::label(&value).map(str::to_string));
            classifications.push(FacetCount {
                count: get_u64(&row, "n")?,
                value,
                label,
            });
        }
        for row in conn
            .query_all_sql(stmt(
                &group("d.status", false),
                prepared.values_with(&expression),
            ))
            .await?
        {
            statuses.push(FacetCount {
                value: row.try_get("", "value")?,
                count: get_u64(&row, "n")?,
                label: None,
            });
        }
        for row in conn
            .query_all_sql(stmt(&group("d.filename", true), limited))
            .await?
        {
            filenames.push(FacetCount {
                value: row.try_get("", "value")?,
                count: get_u64(&row, "n")?,
                label: None,
            });
        }
    }
    Ok(SearchFacets {
        classifications,
        statuses,
        sources: vec![FacetCount {
            value: prepared.scope.as_str().to_string(),
            count: total,
            label: None,
        }],
        filenames,
        match_mode,
    })
}

fn hit_from_row(row: &QueryResult, prepared: &Prepared) -> Result<SearchHit> {
    let document_id: String = row.try_get("", "document_id")?;
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
    let bm25: f64 = row.try_get("", "bm25_score")?;
    let snippet: Option<String> = row.try_get("", "snippet")?;
    let snippet = snippet.unwrap_or_default();
    let snippet = match prepared.backend {
        DbBackend::Postgres => postgres::restore_angles(&snippet),
        _ => Cow::Borrowed(snippet.as_str()),
    };
    Ok(SearchHit {
        run_id: row.try_get("", "run_id")?,
        source: prepared.scope,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(query: &str, phrase: bool) -> Vec<String> {
        normalize_query(query, phrase)
            .map(|q| q.terms)
            .unwrap_or_default()
    }

    #[test]
    fn words_are_quoted_and_anded() {
        assert_eq!(
            terms("horse saddle", false),
            vec!["\"horse\"", "\"saddle\""]
        );
        let q = normalize_query("horse saddle", false).expect("query");
        assert_eq!(q.all_expression(), "\"horse\" AND \"saddle\"");
        assert_eq!(q.any_expression(), "\"horse\" OR \"saddle\"");
    }

    #[test]
    fn punctuation_and_operators_are_neutralized() {
        assert_eq!(terms("e-mail", false), vec!["\"e mail\""]);
        assert_eq!(terms("c++", false), vec!["\"c\""]);
        assert_eq!(terms("AND", false), vec!["\"AND\""]);
        assert_eq!(terms("NEAR(a b)", false), vec!["\"NEAR a\"", "\"b\""]);
        assert_eq!(terms("body:x* ^y", false), vec!["\"body x\"", "\"y\""]);
        assert_eq!(terms("-- && || ()", false), Vec::<String>::new());
        assert_eq!(terms("naïve — café", false), vec!["\"naïve\"", "\"café\""]);
    }

    #[test]
    fn quoted_phrases_and_phrase_mode() {
        assert_eq!(
            terms("\"wing slipstream\" lift", false),
            vec!["\"wing slipstream\"", "\"lift\""]
        );
        assert_eq!(terms("say \"it's", false), vec!["\"say\"", "\"it s\""]);
        assert_eq!(terms("a \"\" b", false), vec!["\"a\"", "\"b\""]);
        assert_eq!(
            terms("wing \"in a\" slip-stream", true),
            vec!["\"wing in a slip stream\""]
        );
    }

    #[test]
    fn stop_words_leave_content_terms_but_never_phrases() {
        assert!(
            STOP_WORDS.windows(2).all(|w| w[0] < w[1]),
            "sorted for binary search"
        );
        let q = normalize_query("What is the lift of a wing", false).expect("query");
        assert_eq!(q.terms.len(), 7);
        assert_eq!(q.content_terms, vec!["\"lift\"", "\"wing\""]);
        assert_eq!(q.any_content_expression(), "\"lift\" OR \"wing\"");
        assert_eq!(q.all_content_expression(), "\"lift\" AND \"wing\"");
        assert!(q.is_keyword_query());
        // Only stop words: every term stays.
        let q = normalize_query("to be or NOT to be", false).expect("query");
        assert_eq!(q.content_terms, q.terms);
        assert!(q.stop_words_only && q.is_keyword_query());
        // Quoted text, hyphenated words and phrase mode keep their stop words.
        let q = normalize_query("\"the wing\" state-of-the-art \"of\"", false).expect("q");
        assert_eq!(
            q.content_terms,
            vec!["\"the wing\"", "\"state of the art\"", "\"of\""]
        );
        let q = normalize_query("of the wing", true).expect("phrase");
        assert_eq!(q.content_terms, vec!["\"of the wing\""]);
        assert!(
            !normalize_query("lift drag wing slipstream", false)
                .expect("q")
                .is_keyword_query()
        );
        assert!(is_stop_word("The") && !is_stop_word("théâtre") && !is_stop_word("wing"));
    }

    #[test]
    fn empty_queries_are_invalid() {
        for q in ["", "   ", "\"\"", "!!!", "- - -", "\u{E000}"] {
            assert!(
                matches!(
                    normalize_query(q, false),
                    Err(DocumentsError::InvalidSearchQuery)
                ),
                "{q:?}"
            );
        }
    }

    #[test]
    fn snippets_escape_markup_and_keep_marks() {
        let raw = format!(
            "<script>alert(\"x\")</script> {MARK_OPEN_SENTINEL}horse{MARK_CLOSE_SENTINEL} & 'co'"
        );
        assert_eq!(
            render_snippet(&raw),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; <mark>horse</mark> &amp; &#x27;co&#x27;"
        );
        assert_eq!(strip_snippet_sentinels("a\u{E000}b\u{E001}c"), "abc");
        assert!(matches!(strip_snippet_sentinels("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn validation_happens_before_the_database() {
        let long = SearchRequest {
            query: "a".repeat(MAX_QUERY_CHARS + 1),
            ..Default::default()
        };
        assert!(matches!(
            prepare(&long, DbBackend::Sqlite),
            Err(DocumentsError::SearchQueryTooLarge { .. })
        ));
        let exact = SearchRequest {
            query: "é".repeat(MAX_QUERY_CHARS),
            ..Default::default()
        };
        assert!(prepare(&exact, DbBackend::Sqlite).is_ok());
        let window = SearchRequest {
            query: "x".into(),
            created_after: parse_timestamp("created_after", "2026-02-01").ok(),
            created_before: parse_timestamp("created_before", "2026-01-01").ok(),
            ..Default::default()
        };
        assert!(matches!(
            prepare(&window, DbBackend::Sqlite),
            Err(DocumentsError::InvalidSearchWindow)
        ));
        let limit = SearchRequest {
            query: "x".into(),
            limit: Some(10_000),
            ..Default::default()
        };
        assert_eq!(
            prepare(&limit, DbBackend::Sqlite).map(|p| p.limit).ok(),
            Some(MAX_LIMIT)
        );
    }

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
