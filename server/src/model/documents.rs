//! The JSON shapes of `/documents`: documents, listings, content and page records, upload
//! forms and batch answers, and the JSON export.

use serde::{Deserialize, Serialize};
use shelf_documents::{Deleted, Document, ListedPage, PageListing, PageSummary};
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
    /// The format Shelf reads the file as, by its accepted extension (`docx`, `txt`, ...):
    /// the filename's own extension, or what the content is when that does not fit.
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

impl From<Deleted> for DeletedOut {
    fn from(d: Deleted) -> Self {
        DeletedOut {
            id: d.id,
            deleted: true,
            removed_files: d.removed_files,
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
    pub summary: PageSummary,
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
            summary: l.summary,
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

#[cfg(test)]
mod tests {
    use shelf_app::export::JsonExport;
    use shelf_documents::{Ingested, PageSource};

    use super::*;
    use crate::model::mirror::{assert_mirrors, citation, document, keys, schema_fields};

    fn listed_page() -> ListedPage {
        ListedPage {
            number: 1,
            source: PageSource::Ocr,
            confidence: Some(91.5),
            rotation_degrees: Some(90),
            chars: 10,
            attempts: 2,
            corrected: true,
            warnings: vec!["low contrast".into()],
            error: Some("ocr_failed: unreadable".into()),
            image_path: Some("pages/doc_0123456789abcdef/1.png".into()),
        }
    }

    /// `DocumentOut` writes the status and source kind as strings and adds `duplicate` on
    /// ingest answers; `pk` and `storage_path` never serialize on either side.
    #[test]
    fn document_out_mirrors_document() {
        assert_mirrors(
            "Document",
            keys(&document()),
            keys(&DocumentOut::from(document())),
            &[],
            &[],
        );
        let ingested = Ingested {
            document: document(),
            duplicate: true,
        };
        let mut out = DocumentOut::from(ingested.document.clone());
        out.duplicate = Some(ingested.duplicate);
        assert_mirrors("Ingested", keys(&ingested), keys(&out), &[], &[]);
    }

    /// `DeletedOut` adds `deleted` (always true) to the domain's answer.
    #[test]
    fn deleted_out_mirrors_deleted() {
        let deleted = Deleted {
            id: "doc_0123456789abcdef".into(),
            removed_files: true,
        };
        assert_mirrors(
            "Deleted",
            keys(&deleted),
            keys(&DeletedOut::from(deleted.clone())),
            &[],
            &["deleted"],
        );
    }

    /// `PageOut` writes the page source as a string.
    #[test]
    fn page_out_mirrors_listed_page() {
        assert_mirrors(
            "ListedPage",
            keys(&listed_page()),
            keys(&PageOut::from(listed_page())),
            &[],
            &[],
        );
    }

    /// `PageListingOut` holds `PageOut`s.
    #[test]
    fn page_listing_out_mirrors_page_listing() {
        let listing = PageListing {
            document_id: "doc_0123456789abcdef".into(),
            run_id: Some("run_1".into()),
            summary: PageSummary {
                average_confidence: Some(91.5),
                ..PageSummary::default()
            },
            total: 1,
            limit: 100,
            offset: 0,
            pages: vec![listed_page()],
        };
        assert_mirrors(
            "PageListing",
            keys(&listing),
            keys(&PageListingOut::from(listing.clone())),
            &[],
            &[],
        );
    }

    /// `DocumentExportOut` only describes the JSON export, which the application writes: its
    /// schema must declare exactly the keys of a real export (every optional field set).
    #[test]
    fn document_export_schema_declares_the_written_json() {
        let d = document();
        let export = JsonExport {
            document_id: d.id,
            filename: d.filename,
            classification: d.classification,
            classification_label: d.classification_label,
            title: d.title,
            summary: d.summary,
            tags: d.tags,
            suggested_stem: d.suggested_stem,
            run_id: "run_1".into(),
            text: "On goats.".into(),
            transcript_citation: Some(citation()),
        };
        assert_mirrors(
            "JsonExport",
            keys(&export),
            schema_fields::<DocumentExportOut>(),
            &[],
            &[],
        );
    }
}
