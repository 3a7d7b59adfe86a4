//! The JSON shapes of `/search`, `/search/results` and `/search/facets`: the request body as
//! its schema declares it (and the checks that hold the API to that declaration), ids, hits
//! with snippets and transcript citations, and facet counts.

use serde::{Deserialize, Serialize};
use shelf_app::export::{CitedHit, CitedSearchPage};
use shelf_documents::{
    FacetCount, MatchMode, SearchBody, SearchFacets, SearchHit, SearchIds, TranscriptCitation,
};
use utoipa::ToSchema;

/// The body of the search endpoints. `query` is required; every other field is optional.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct SearchIn {
    /// The text to search: 1 to 4,096 characters, not only spaces, tabs and line breaks. The
    /// server also refuses, with `invalid_search_query`, a query with no letter or digit (only
    /// punctuation): "letter" is Unicode's, which regex dialects do not agree on, so the
    /// pattern states only what reads the same in all of them.
    #[schema(min_length = 1, max_length = 4096, pattern = r"[^\t\n\v\f\r ]")]
    pub query: String,
    /// Default 20, at most 500.
    #[schema(minimum = 1, maximum = 500)]
    #[serde(default, deserialize_with = "integral")]
    pub limit: Option<u64>,
    #[schema(minimum = 0, maximum = 9_007_199_254_740_991_u64)]
    #[serde(default, deserialize_with = "integral")]
    pub offset: Option<u64>,
    /// Exact Dewey code.
    pub classification_code: Option<String>,
    /// Code prefix: `636` matches `636` and `636.1`.
    pub classification_prefix: Option<String>,
    /// `ingested`, `processing`, `ready` or `failed`.
    #[schema(value_type = Option<DocumentStatusIn>)]
    pub document_status: Option<String>,
    pub filename_contains: Option<String>,
    /// RFC 3339 date-time with an offset (`2026-11-21T10:00:00Z`, `...+02:00`), inclusive;
    /// no leap second. The pattern spells the grammar out because `format` only annotates.
    #[schema(value_type = Option<String>, format = DateTime, pattern = r"^(?:[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|[0-9]{4}-(?:0[13-9]|1[0-2])-(?:29|30)|[0-9]{4}-(?:0[13578]|1[02])-31|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$")]
    pub created_after: Option<String>,
    /// RFC 3339 date-time with an offset (`2026-11-21T10:00:00Z`, `...+02:00`), inclusive;
    /// no leap second. The pattern spells the grammar out because `format` only annotates.
    #[schema(value_type = Option<String>, format = DateTime, pattern = r"^(?:[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|[0-9]{4}-(?:0[13-9]|1[0-2])-(?:29|30)|[0-9]{4}-(?:0[13578]|1[02])-31|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$")]
    pub created_before: Option<String>,
    /// Treat the whole query as one phrase.
    #[serde(default)]
    pub phrase: bool,
    /// `cleaned` (default) or `raw`.
    #[schema(value_type = Option<SearchScopeIn>)]
    pub scope: Option<String>,
    /// `auto` (default: a keyword query of up to three content words requires them all,
    /// then any; a longer question matches any content word), `all` or `any`.
    #[schema(value_type = Option<MatchModeIn>)]
    pub match_mode: Option<MatchMode>,
    /// `keyword` (default: BM25), `semantic` (nearest passages by the local embedding model)
    /// or `hybrid` (reciprocal rank fusion of both). The last two need
    /// `SHELF_EMBEDDING_MODEL_DIR` (`503 embedding_unavailable` otherwise).
    #[schema(value_type = Option<SearchModeIn>)]
    pub mode: Option<String>,
}

/// An optional non-negative integer that JSON may write as `5` or `5.0` (JSON Schema counts
/// both as integers, so generated clients send either).
fn integral<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<u64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(de)? else {
        return Ok(None);
    };
    if let Some(v) = n.as_u64() {
        return Ok(Some(v));
    }
    match n.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= 9_007_199_254_740_991.0 => {
            Ok(Some(f as u64))
        }
        _ => Err(serde::de::Error::custom(format!(
            "invalid value: {n}, expected a non-negative integer"
        ))),
    }
}

/// The document statuses a search can filter on (schema only; the domain parses them).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum DocumentStatusIn {
    Ingested,
    Processing,
    Ready,
    Failed,
}

/// The searchable texts (schema only).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum SearchScopeIn {
    Cleaned,
    Raw,
}

/// How documents are found (schema only; the domain parses the name).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum SearchModeIn {
    Keyword,
    Semantic,
    Hybrid,
}

/// How query terms combine (schema only; [`MatchMode`] is the domain's type).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum MatchModeIn {
    Auto,
    All,
    Any,
}

/// Whether `v` has the shape of the `created_after`/`created_before` pattern: RFC 3339's
/// `date-time` (`T` or `t`, `Z`, `z` or a `±hh:mm` offset, any fraction), with seconds to 59.
/// Whether the day exists in its month is the domain's parse (a 422 either way).
pub fn rfc3339_shape(v: &str) -> bool {
    let b = v.as_bytes();
    let num = |i: usize, max: u8| two_digits(b, i, max);
    let head = b.len() >= 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && num(5, 12)
        && b[5..7] != *b"00"
        && b[7] == b'-'
        && num(8, 31)
        && b[8..10] != *b"00"
        && matches!(b[10], b'T' | b't')
        && num(11, 23)
        && b[13] == b':'
        && num(14, 59)
        && b[16] == b':'
        && num(17, 59);
    if !head {
        return false;
    }
    let mut rest = &b[19..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        rest = &frac[digits..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', ..] => {
            rest.len() == 6 && two_digits(rest, 1, 23) && rest[3] == b':' && two_digits(rest, 4, 59)
        }
        _ => false,
    }
}

/// Two ASCII digits at `i` making at most `max`.
fn two_digits(b: &[u8], i: usize, max: u8) -> bool {
    b.get(i..i + 2).is_some_and(|d| {
        d.iter().all(u8::is_ascii_digit) && (d[0] - b'0') * 10 + (d[1] - b'0') <= max
    })
}

impl SearchIn {
    /// The HTTP API takes exactly the values its schema declares: the domain is lenient
    /// (trims, reads an empty string as "no filter") for the CLI, the API is not, so that a
    /// generated client and the server agree.
    pub fn check_declared(&self) -> Result<(), crate::error::ApiError> {
        use crate::error::{ApiError, ErrorCode};
        if let Some(limit) = self.limit
            && !(1..=500).contains(&limit)
        {
            return Err(ApiError::invalid(
                &["body", "limit"],
                "Input should be between 1 and 500",
                "value_error",
            ));
        }
        crate::extract::page_offset(&["body", "offset"], self.offset)?;
        if let Some(status) = &self.document_status
            && !["ingested", "processing", "ready", "failed"].contains(&status.as_str())
        {
            return Err(ApiError::new(
                ErrorCode::InvalidDocumentStatus,
                format!(
                    "Unknown document status: {} (expected ingested, processing, ready or failed)",
                    status.chars().take(64).collect::<String>()
                ),
            ));
        }
        if let Some(scope) = &self.scope
            && !["cleaned", "raw"].contains(&scope.as_str())
        {
            return Err(ApiError::new(
                ErrorCode::InvalidSearchScope,
                format!(
                    "Unknown search scope: {} (expected cleaned or raw)",
                    scope.chars().take(64).collect::<String>()
                ),
            ));
        }
        for (field, value) in [
            ("created_after", &self.created_after),
            ("created_before", &self.created_before),
        ] {
            // The shape here; the calendar (days of the month) when the domain parses it.
            if value.as_deref().is_some_and(|v| !rfc3339_shape(v)) {
                return Err(ApiError::invalid(
                    &["body", field],
                    "Input should be an RFC 3339 date-time with an offset, e.g. 2026-11-21T10:00:00Z",
                    "value_error",
                ));
            }
        }
        Ok(())
    }
}

impl From<SearchIn> for SearchBody {
    fn from(s: SearchIn) -> Self {
        SearchBody {
            query: s.query,
            limit: s.limit,
            offset: s.offset,
            classification_code: s.classification_code,
            classification_prefix: s.classification_prefix,
            document_status: s.document_status,
            filename_contains: s.filename_contains,
            created_after: s.created_after,
            created_before: s.created_before,
            phrase: s.phrase,
            scope: s.scope,
            match_mode: s.match_mode,
            mode: s.mode,
        }
    }
}

/// The body of `POST /search/facets`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct FacetsIn {
    #[serde(flatten)]
    pub search: SearchIn,
    /// Buckets per facet: default 50, at most 500.
    #[serde(default, deserialize_with = "integral")]
    #[schema(minimum = 1, maximum = 500)]
    pub facet_limit: Option<u64>,
}

fn match_mode_name(m: MatchMode) -> String {
    match m {
        MatchMode::Auto => "auto",
        MatchMode::All => "all",
        MatchMode::Any => "any",
    }
    .to_string()
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchIdsOut {
    pub document_ids: Vec<String>,
    /// Matching documents before limit/offset.
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    /// How terms were combined: `all`, or `any` after an all-terms search found nothing.
    pub match_mode: String,
}

impl From<SearchIds> for SearchIdsOut {
    fn from(s: SearchIds) -> Self {
        SearchIdsOut {
            document_ids: s.document_ids,
            total: s.total,
            limit: s.limit,
            offset: s.offset,
            match_mode: match_mode_name(s.match_mode),
        }
    }
}

/// `GET /documents/{id}/similar`: the documents nearest to one, nearest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SimilarOut {
    pub document_id: String,
    /// Search hits: `score` is the cosine similarity of the best passage; `snippet` that
    /// passage.
    pub results: Vec<SearchHitOut>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchHitOut {
    pub document_id: String,
    /// Null for raw-source hits.
    pub run_id: Option<String>,
    /// `cleaned` or `raw`.
    pub source: String,
    pub filename: String,
    pub document_status: String,
    pub created_at: String,
    /// HTML-escaped excerpt with `<mark>` highlights.
    pub snippet: String,
    pub score: f64,
    pub classification_code: Option<String>,
    pub classification_label: Option<String>,
    /// For transcript sources (SRT, WebVTT, SBV) where the query text is found in the
    /// transcript: where it is, with its times.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_citation: Option<TranscriptCitationOut>,
}

impl From<SearchHit> for SearchHitOut {
    fn from(h: SearchHit) -> Self {
        SearchHitOut {
            document_id: h.document_id,
            run_id: h.run_id,
            source: h.source.as_str().to_string(),
            filename: h.filename,
            document_status: h.document_status.as_str().to_string(),
            created_at: h.created_at,
            snippet: h.snippet,
            score: h.score,
            classification_code: h.classification_code,
            classification_label: h.classification_label,
            transcript_citation: None,
        }
    }
}

impl From<CitedHit> for SearchHitOut {
    fn from(h: CitedHit) -> Self {
        SearchHitOut {
            transcript_citation: h.transcript_citation.map(TranscriptCitationOut::from),
            ..SearchHitOut::from(h.hit)
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchResultsOut {
    pub results: Vec<SearchHitOut>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub match_mode: String,
}

impl From<CitedSearchPage> for SearchResultsOut {
    fn from(p: CitedSearchPage) -> Self {
        SearchResultsOut {
            results: p.results.into_iter().map(SearchHitOut::from).collect(),
            total: p.total,
            limit: p.limit,
            offset: p.offset,
            match_mode: match_mode_name(p.match_mode),
        }
    }
}

/// Where a quote is in a transcript. A match across several segments covers them all.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TranscriptCitationOut {
    /// The matched transcript text (segments joined by one space).
    pub text: String,
    /// Start of the first segment covered.
    pub start_seconds: f64,
    /// End of the last segment covered.
    pub end_seconds: f64,
    /// Index (0-based) of the first segment covered.
    pub segment_start: u32,
    /// Index of the last segment covered.
    pub segment_end: u32,
    /// `exact`, `normalized` (case, punctuation and spacing folded) or `fuzzy` (word
    /// alignment, similarity at least 0.8).
    pub strategy: String,
    /// 1.0 for `exact`, below 1 otherwise.
    pub confidence: f64,
}

impl From<TranscriptCitation> for TranscriptCitationOut {
    fn from(c: TranscriptCitation) -> Self {
        TranscriptCitationOut {
            text: c.text,
            start_seconds: c.start_seconds,
            end_seconds: c.end_seconds,
            segment_start: c.segment_start,
            segment_end: c.segment_end,
            strategy: c.strategy.as_str().to_string(),
            confidence: c.confidence,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FacetsOut {
    pub classifications: Vec<FacetCount>,
    pub statuses: Vec<FacetCount>,
    pub sources: Vec<FacetCount>,
    pub filenames: Vec<FacetCount>,
    pub match_mode: String,
}

impl From<SearchFacets> for FacetsOut {
    fn from(f: SearchFacets) -> Self {
        FacetsOut {
            classifications: f.classifications,
            statuses: f.statuses,
            sources: f.sources,
            filenames: f.filenames,
            match_mode: match_mode_name(f.match_mode),
        }
    }
}

#[cfg(test)]
mod tests {
    use shelf_documents::{DocumentStatus, SearchPage, SearchScope};

    use super::*;
    use crate::model::mirror::{assert_mirrors, citation, keys};

    fn cited_hit() -> CitedHit {
        CitedHit {
            hit: SearchHit {
                document_id: "doc_0123456789abcdef".into(),
                run_id: Some("run_1".into()),
                source: SearchScope::Cleaned,
                filename: "goats.srt".into(),
                document_status: DocumentStatus::Ready,
                created_at: "2026-11-21T10:00:00.000Z".into(),
                snippet: "the <mark>goats</mark>".into(),
                score: 1.5,
                classification_code: Some("636".into()),
                classification_label: Some("Animal husbandry".into()),
                has_transcript: true,
            },
            transcript_citation: Some(citation()),
        }
    }

    /// `SearchHitOut` writes the source and status as strings; `has_transcript` never
    /// serializes on the domain side.
    #[test]
    fn search_hit_out_mirrors_cited_hit() {
        assert_mirrors(
            "CitedHit",
            keys(&cited_hit()),
            keys(&SearchHitOut::from(cited_hit())),
            &[],
            &[],
        );
        assert_mirrors(
            "SearchHit",
            keys(&cited_hit().hit),
            keys(&SearchHitOut::from(cited_hit().hit)),
            &[],
            &[],
        );
    }

    /// `SearchResultsOut` writes the match mode as a string and holds `SearchHitOut`s; the
    /// domain's [`SearchPage`] is the same page before citations are looked for.
    #[test]
    fn search_results_out_mirrors_search_pages() {
        let cited = CitedSearchPage {
            results: vec![cited_hit()],
            total: 1,
            limit: 20,
            offset: 0,
            match_mode: MatchMode::All,
        };
        assert_mirrors(
            "CitedSearchPage",
            keys(&cited),
            keys(&SearchResultsOut::from(cited.clone())),
            &[],
            &[],
        );
        let page = SearchPage {
            results: vec![cited_hit().hit],
            total: 1,
            limit: 20,
            offset: 0,
            match_mode: MatchMode::Any,
        };
        assert_mirrors(
            "SearchPage",
            keys(&page),
            keys(&SearchResultsOut::from(cited)),
            &[],
            &[],
        );
    }

    /// `SearchIdsOut` writes the match mode as a string.
    #[test]
    fn search_ids_out_mirrors_search_ids() {
        let ids = SearchIds {
            document_ids: vec!["doc_0123456789abcdef".into()],
            total: 1,
            limit: 20,
            offset: 0,
            match_mode: MatchMode::All,
        };
        assert_mirrors(
            "SearchIds",
            keys(&ids),
            keys(&SearchIdsOut::from(ids.clone())),
            &[],
            &[],
        );
    }

    /// `TranscriptCitationOut` writes the strategy as a string.
    #[test]
    fn transcript_citation_out_mirrors_transcript_citation() {
        assert_mirrors(
            "TranscriptCitation",
            keys(&citation()),
            keys(&TranscriptCitationOut::from(citation())),
            &[],
            &[],
        );
    }

    /// `FacetsOut` writes the match mode as a string.
    #[test]
    fn facets_out_mirrors_search_facets() {
        let bucket = || {
            vec![FacetCount {
                value: "636".into(),
                count: 1,
                label: Some("Animal husbandry".into()),
            }]
        };
        let facets = SearchFacets {
            classifications: bucket(),
            statuses: bucket(),
            sources: bucket(),
            filenames: bucket(),
            match_mode: MatchMode::Auto,
        };
        assert_mirrors(
            "SearchFacets",
            keys(&facets),
            keys(&FacetsOut::from(facets.clone())),
            &[],
            &[],
        );
    }
}
