//! The JSON shapes of `/documents`: documents, listings, content and page records, upload
//! forms and batch answers, and the JSON export.

use serde::{Deserialize, Serialize};
use shelf_documents::{ContentPage, Document, ListedPage, PageListing, PageSummary};
use utoipa::ToSchema;

use crate::error::ErrorBody;
use crate::model::runs::RunProcessingMode;
use crate::model::search::TranscriptCitationOut;

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

/// The export formats (schema only; [`shelf_app::ExportFormat`] parses them).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ExportFormatIn {
    Json,
    Txt,
    Md,
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
