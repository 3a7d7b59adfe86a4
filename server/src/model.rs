//! The JSON shapes of the API (the objects docs/api.md describes), as types that both
//! serialize the responses and describe them in `/openapi.json`. Built from the application's
//! types with `From`, so the wire shape is owned here and the domain stays free of HTTP.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use shelf_app::documents::{
    ContentPage, Document, FacetCount, ListedPage, MatchMode, PageListing, PageSummary, SearchBody,
    SearchFacets, SearchHit, SearchIds, SearchPage, TranscriptCitation,
};
use shelf_app::engine::EventRecord;
use shelf_app::export::{CitedHit, CitedSearchPage};
use shelf_app::{RunView, StageView};
use utoipa::ToSchema;

use crate::error::ErrorBody;

/// A document.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DocumentOut {
    /// `doc_` + the first 16 hex digits of the SHA-256 of the bytes.
    pub id: String,
    /// Normalized filename.
    pub filename: String,
    /// `ingested`, `processing`, `ready` or `failed`.
    pub status: String,
    pub byte_size: u64,
    pub created_at: String,
    pub updated_at: String,
    /// Dewey code, or null.
    pub classification: Option<String>,
    pub classification_label: Option<String>,
    pub classification_confidence: Option<f64>,
    pub title: Option<String>,
    pub summary: Option<String>,
    pub tags: Vec<String>,
    pub suggested_stem: Option<String>,
    pub extension: String,
    /// `upload` or `import`.
    pub source_kind: String,
    pub sha256: String,
    /// On ingest responses: true when identical bytes were already stored (nothing was added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<bool>,
}

impl From<Document> for DocumentOut {
    fn from(d: Document) -> Self {
        DocumentOut {
            id: d.id,
            filename: d.filename,
            status: d.status.as_str().to_string(),
            byte_size: d.byte_size,
            created_at: d.created_at,
            updated_at: d.updated_at,
            classification: d.classification,
            classification_label: d.classification_label,
            classification_confidence: d.classification_confidence,
            title: d.title,
            summary: d.summary,
            tags: d.tags,
            suggested_stem: d.suggested_stem,
            extension: d.extension,
            source_kind: d.source_kind.as_str().to_string(),
            sha256: d.sha256,
            duplicate: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DocumentList {
    pub documents: Vec<DocumentOut>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeletedOut {
    pub id: String,
    pub deleted: bool,
    /// True when upload files owned by the document were removed (false for imports).
    pub removed_files: bool,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ContentPageOut {
    pub document_id: String,
    pub text: String,
    /// Characters in the whole cleaned output.
    pub total_chars: u64,
    pub offset: u64,
    pub limit: u64,
    /// True when characters follow this page.
    pub truncated: bool,
}

impl From<ContentPage> for ContentPageOut {
    fn from(p: ContentPage) -> Self {
        ContentPageOut {
            document_id: p.document_id,
            text: p.text,
            total_chars: p.total_chars,
            offset: p.offset,
            limit: p.limit,
            truncated: p.truncated,
        }
    }
}

/// Counts over every page record of the run, whatever the filter and the page.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PageSummaryOut {
    pub pages: u64,
    pub text_layer: u64,
    pub ocr: u64,
    pub failed: u64,
    pub pending: u64,
    /// Pages whose language-model correction was kept.
    pub corrected: u64,
    /// Pages with warnings.
    pub with_warnings: u64,
    /// Mean confidence of OCR pages (0 to 100, rounded to 0.1); null without any.
    pub average_confidence: Option<f64>,
    /// Recognition passes over all pages.
    pub attempts: u64,
}

impl From<PageSummary> for PageSummaryOut {
    fn from(s: PageSummary) -> Self {
        PageSummaryOut {
            pages: s.pages,
            text_layer: s.text_layer,
            ocr: s.ocr,
            failed: s.failed,
            pending: s.pending,
            corrected: s.corrected,
            with_warnings: s.with_warnings,
            average_confidence: s.average_confidence,
            attempts: s.attempts,
        }
    }
}

/// One page record, without its text.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PageOut {
    /// 1-based.
    pub number: u32,
    /// `text_layer`, `ocr`, `failed`, or `pending` (needs OCR, not read yet).
    pub source: String,
    /// Mean OCR word confidence, 0 to 100; null for text-layer and pending pages.
    pub confidence: Option<f64>,
    /// Clockwise rotation OCR applied to make the page upright (0, 90, 180, 270).
    pub rotation_degrees: Option<u32>,
    /// Characters of the page's current text.
    pub chars: u64,
    /// Recognition passes made on the page.
    pub attempts: u32,
    /// The language model's correction was kept.
    pub corrected: bool,
    pub warnings: Vec<String>,
    /// `code: detail` of a page OCR could not read.
    pub error: Option<String>,
    /// The kept page image, relative to the data directory.
    pub image_path: Option<String>,
}

impl From<ListedPage> for PageOut {
    fn from(p: ListedPage) -> Self {
        PageOut {
            number: p.number,
            source: p.source.as_str().to_string(),
            confidence: p.confidence,
            rotation_degrees: p.rotation_degrees,
            chars: p.chars,
            attempts: p.attempts,
            corrected: p.corrected,
            warnings: p.warnings,
            error: p.error,
            image_path: p.image_path,
        }
    }
}

/// The page records of a document's latest run that recorded pages.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PageListingOut {
    pub document_id: String,
    /// The run the records are from; null when no run recorded pages (not a paged document,
    /// or never processed).
    pub run_id: Option<String>,
    pub summary: PageSummaryOut,
    /// Records matching the filter (all, or failures only).
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub pages: Vec<PageOut>,
}

impl From<PageListing> for PageListingOut {
    fn from(l: PageListing) -> Self {
        PageListingOut {
            document_id: l.document_id,
            run_id: l.run_id,
            summary: l.summary.into(),
            total: l.total,
            limit: l.limit,
            offset: l.offset,
            pages: l.pages.into_iter().map(PageOut::from).collect(),
        }
    }
}

/// Multipart upload: one part named `file`.
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct UploadForm {
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
}

/// Multipart batch upload: repeated parts named `files`.
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct BatchUploadForm {
    #[schema(schema_with = batch_files)]
    pub files: Vec<Vec<u8>>,
}

/// The `files` parts: at least one, each any bytes. Neither the field nor its items have a
/// `type`: in a multipart body a field is its parts, so one value is a list of one part, and a
/// part is bytes whatever they hold; each file is judged on its own in the `200` answer (an
/// unsupported file is a `failed` entry). Only "no `files` part" (an empty list) is invalid.
fn batch_files() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::extensions::Extensions;
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType};
    // utoipa writes an array without a type as `"type": null`, which is no JSON Schema: the
    // array keywords go in through the extensions, which are written flat into the schema.
    let mut keywords = Extensions::default();
    keywords.insert("items".to_string(), serde_json::json!({"format": "binary"}));
    keywords.insert("minItems".to_string(), serde_json::json!(1));
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some(
            "One or more files (a batch without a `files` part is `422`).",
        ))
        .extensions(Some(keywords))
        .build()
}

/// What became of one file of a batch.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchItemOut {
    /// The normalized filename (as stored uploads are named), also for failed files.
    pub filename: String,
    /// `ingested` or `failed`.
    pub status: String,
    /// The stored document (`duplicate: true` when identical bytes were already stored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<DocumentOut>,
    /// Why the file was not ingested: the error body a single upload would have answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// The answer of a batch upload: one entry per `files` part, in request order.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchOut {
    pub documents: Vec<BatchItemOut>,
    /// Entries with `status: "ingested"` (duplicates included).
    pub ingested: u64,
    /// Entries with `status: "failed"`.
    pub failed: u64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StageOut {
    pub name: String,
    pub kind: String,
    /// `pending`, `running`, `succeeded`, `failed`, `skipped` or `canceled`.
    pub status: String,
    pub attempts: i64,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub duration_ms: Option<i64>,
    pub error: Option<String>,
    /// The run whose checkpoint this stage reused.
    pub reused_from: Option<String>,
}

impl From<StageView> for StageOut {
    fn from(s: StageView) -> Self {
        StageOut {
            name: s.name,
            kind: s.kind,
            status: s.status,
            attempts: s.attempts,
            started_at: s.started_at,
            finished_at: s.finished_at,
            duration_ms: s.duration_ms,
            error: s.error,
            reused_from: s.reused_from,
        }
    }
}

/// A run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunOut {
    /// `run_` + 16 hex digits.
    pub id: String,
    pub document_id: String,
    /// `queued`, `running`, `succeeded`, `failed` or `canceled`.
    pub status: String,
    /// The current or last stage.
    pub stage: Option<String>,
    pub total_chunks: i64,
    pub completed_chunks: i64,
    pub failed_chunks: i64,
    pub error: Option<String>,
    pub pipeline: String,
    pub pipeline_sha256: String,
    pub attempt: i64,
    pub retry_of: Option<String>,
    pub cancel_requested: bool,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// Present on single-run responses, absent from list items.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageOut>>,
}

impl From<RunView> for RunOut {
    fn from(r: RunView) -> Self {
        RunOut {
            id: r.id,
            document_id: r.document_id,
            status: r.status,
            stage: r.stage,
            total_chunks: r.total_chunks,
            completed_chunks: r.completed_chunks,
            failed_chunks: r.failed_chunks,
            error: r.error,
            pipeline: r.pipeline,
            pipeline_sha256: r.pipeline_sha256,
            attempt: r.attempt,
            retry_of: r.retry_of,
            cancel_requested: r.cancel_requested,
            created_at: r.created_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
            stages: r
                .stages
                .map(|stages| stages.into_iter().map(StageOut::from).collect()),
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<RunOut>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
}

/// `GET /queue`: runs waiting for a worker and whether any worker is taking them.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QueueOut {
    /// Queued runs, due or not.
    pub queued: u64,
    /// Queued runs whose due time has come (a delayed retry is queued but not yet due).
    pub due: u64,
    pub running: u64,
    /// Running runs whose lease lapsed (their executor died or was cut off); a worker reclaims
    /// them.
    pub expired_leases: u64,
    /// Age in whole seconds of the oldest due queued run or expired lease; null when none.
    pub oldest_due_age_seconds: Option<u64>,
    /// RFC 3339 time of the latest claim of a run by any worker or in-process execution; null
    /// if no run was ever claimed.
    pub last_claim_at: Option<String>,
    /// Whether a run was claimed within the last 60 s.
    pub workers_seen_recently: bool,
    /// Set when runs have been due for over 60 s and no run was claimed in that time; says
    /// what to start.
    pub warning: Option<String>,
}

impl From<shelf_app::QueueReport> for QueueOut {
    fn from(q: shelf_app::QueueReport) -> Self {
        QueueOut {
            queued: q.queued,
            due: q.due,
            running: q.running,
            expired_leases: q.expired_leases,
            oldest_due_age_seconds: q.oldest_due_age_seconds,
            last_claim_at: q.last_claim_at,
            workers_seen_recently: q.workers_seen_recently,
            warning: q.warning,
        }
    }
}

/// A cancel's result: the run, and whether it was canceled at once (`canceled`) or its worker
/// was asked to stop (`requested`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CancelOut {
    #[serde(flatten)]
    pub run: RunOut,
    pub outcome: String,
}

/// How a new run is processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunProcessingMode {
    /// Queued for `shelf worker` (default).
    #[default]
    Queue,
    /// Processed by the API process in the background; released to the queue on shutdown.
    Process,
}

/// `POST /runs`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct CreateRun {
    pub document_id: String,
    /// Pipeline name (default `SHELF_PIPELINE`): 1 to 64 of `A-Za-z0-9_-` (otherwise
    /// `validation_error`); a well-formed name without a pipeline file is `pipeline_not_found`.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")]
    pub pipeline: Option<String>,
    #[serde(default)]
    pub processing_mode: Option<RunProcessingMode>,
}

/// `POST /documents/{id}/reprocess` (the body is optional).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct Reprocess {
    /// Pipeline name, as for `POST /runs`.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")]
    pub pipeline: Option<String>,
    #[serde(default)]
    pub processing_mode: Option<RunProcessingMode>,
}

/// One run event.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EventRecordOut {
    /// Gap-free from 1 within a run; also the SSE `id`.
    pub sequence: i64,
    pub stage: String,
    pub kind: String,
    pub message: String,
    pub created_at: String,
}

impl From<EventRecord> for EventRecordOut {
    fn from(e: EventRecord) -> Self {
        EventRecordOut {
            sequence: e.sequence,
            stage: e.stage,
            kind: e.kind,
            message: e.message,
            created_at: e.created_at,
        }
    }
}

/// The text line `/events` and `/events/stream` show for an event.
pub fn event_line(e: &EventRecord) -> String {
    format!("[{}] {}: {}", e.created_at, e.stage, e.message)
}

/// `GET /runs/{id}/events`: event lines.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EventLines {
    pub events: Vec<String>,
    pub limit: u64,
    pub offset: u64,
    /// The run's status when the page was read (a terminal status means no more events).
    pub run_status: String,
}

/// `GET /runs/{id}/events/records`: structured events.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EventRecords {
    pub events: Vec<EventRecordOut>,
    pub limit: u64,
    pub offset: u64,
    pub run_status: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// Always `healthy` when the process answers.
    pub status: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Ready {
    pub status: String,
    pub database: String,
    pub storage: String,
    pub applied_migrations: Vec<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Version {
    pub version: String,
    /// The commit the binary was built from (`unknown` outside a git checkout).
    pub git_sha: String,
    /// The newest migration this binary knows.
    pub schema_version: String,
    /// Open Knowledge Format version of exports.
    pub okf_version: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Classifications {
    /// Dewey code to label: the ten classes, the hundred divisions, and finer codes in use.
    pub classifications: BTreeMap<String, String>,
}

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

/// The export formats (schema only; [`shelf_app::ExportFormat`] parses them).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ExportFormatIn {
    Json,
    Txt,
    Md,
}

/// The searchable texts (schema only).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum SearchScopeIn {
    Cleaned,
    Raw,
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

/// A `pipeline` field as its schema declares it: 1 to 64 of `A-Za-z0-9_-` (the names pipeline
/// files can have), otherwise 422. A well-formed name may still name no file (400).
pub fn check_pipeline_name(name: Option<&str>) -> Result<(), crate::error::ApiError> {
    match name {
        Some(n)
            if n.is_empty()
                || n.len() > 64
                || !n
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') =>
        {
            Err(crate::error::ApiError::invalid(
                &["body", "pipeline"],
                "Input should be 1 to 64 letters, digits, '_' or '-'",
                "string_pattern_mismatch",
            ))
        }
        _ => Ok(()),
    }
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

/// `GET /documents/{id}/export?format=json` (schema only: the application layer writes it).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DocumentExportOut {
    pub document_id: String,
    pub filename: String,
    /// Dewey code, or null.
    pub classification: Option<String>,
    pub classification_label: Option<String>,
    pub title: Option<String>,
    pub summary: Option<String>,
    pub tags: Vec<String>,
    pub suggested_stem: Option<String>,
    /// The run whose cleaned text this is (the latest succeeded one).
    pub run_id: String,
    /// The cleaned text, whole.
    pub text: String,
    /// With `citation_quote`, when the source is a transcript and the quote is found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_citation: Option<TranscriptCitationOut>,
}

impl From<SearchPage> for SearchResultsOut {
    fn from(p: SearchPage) -> Self {
        SearchResultsOut {
            results: p.results.into_iter().map(SearchHitOut::from).collect(),
            total: p.total,
            limit: p.limit,
            offset: p.offset,
            match_mode: match_mode_name(p.match_mode),
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FacetCountOut {
    pub value: String,
    pub count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl From<FacetCount> for FacetCountOut {
    fn from(f: FacetCount) -> Self {
        FacetCountOut {
            value: f.value,
            count: f.count,
            label: f.label,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FacetsOut {
    pub classifications: Vec<FacetCountOut>,
    pub statuses: Vec<FacetCountOut>,
    pub sources: Vec<FacetCountOut>,
    pub filenames: Vec<FacetCountOut>,
    pub match_mode: String,
}

impl From<SearchFacets> for FacetsOut {
    fn from(f: SearchFacets) -> Self {
        let list = |v: Vec<FacetCount>| v.into_iter().map(FacetCountOut::from).collect();
        FacetsOut {
            classifications: list(f.classifications),
            statuses: list(f.statuses),
            sources: list(f.sources),
            filenames: list(f.filenames),
            match_mode: match_mode_name(f.match_mode),
        }
    }
}

/// `GET /config`: the effective settings, secrets excluded (keys appear only as counts per
/// scope, the provider credential only as `api_key_set`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(value_type = Object)]
pub struct ConfigOut(pub Value);

/// One server-sent event as a client parses it from the stream: `event` (absent for the
/// plain `message` events of the line stream, `run-event` or `done` otherwise), `id` (the run
/// event's sequence, for `Last-Event-ID`) and `data` (a line, or a JSON record).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SseEvent {
    pub data: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}
