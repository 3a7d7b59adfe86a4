//! `/imports`: server-side imports of files under `SHELF_API_IMPORT_ROOT`, their status from
//! the manifest, and the page-level progress of their PDFs and images. The rules live in
//! `shelf_app::imports`; these handlers only translate.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use shelf_app::imports::{Boundary, ImportError, ImportRequest};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiQuery, page_limit, page_offset};
use crate::model::documents::PageOut;
use crate::policy::Policy;
use crate::routes::Resource;
use crate::routes::documents::query_bool;
use crate::state::AppState;

pub fn routes() -> Resource {
    Resource::new()
        .route(Policy::Write, routes!(create))
        .route(Policy::Read, routes!(status))
        // Page manifests list files under the import root: not for read keys.
        .route(Policy::WriteOnly, routes!(page_manifest))
}

impl From<ImportError> for ApiError {
    /// The code is the import error's own (`ImportError::error_code`, the one table); only
    /// what the client sees differs: a field error names its field, an I/O error's detail
    /// stays in the log, and an application error answers as itself.
    fn from(e: ImportError) -> Self {
        match e {
            ImportError::Invalid { field, detail } => {
                ApiError::invalid(&["body", field], detail, "value_error")
            }
            ImportError::Io(_) => ApiError::internal(e.to_string()),
            ImportError::App(inner) => inner.into(),
            other => ApiError::new(other.error_code(), other.to_string()),
        }
    }
}

/// The `POST /imports` body (fields and defaults: docs/imports.md, "Fields").
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportIn {
    /// A file or a directory under `SHELF_API_IMPORT_ROOT` (relative paths are taken from the
    /// root). The name is kept for compatibility: a single file is fine.
    #[schema(min_length = 1)]
    pub source_dir: String,
    /// `md` (default) or `txt` (`markdown` and `text` are read as the same).
    #[schema(value_type = Option<ImportFormatIn>)]
    pub format: Option<String>,
    /// `workspace` (default: `<data_dir>/converted`), `new-directory`, `original` (beside
    /// each source) or `subdirectory` (`shelf-converted/` beside the sources).
    #[schema(value_type = Option<OutputModeIn>)]
    pub output_mode: Option<String>,
    /// Required with `new-directory`, refused otherwise; under the root.
    #[schema(min_length = 1)]
    pub output_dir: Option<String>,
    /// Descend into subdirectories (default false).
    pub recursive: Option<bool>,
    /// Replace existing outputs (default false: such files are `skipped`).
    pub overwrite: Option<bool>,
    /// `process` (default: runs here, the response waits; a client that disconnects does not
    /// stop it), `queue` (for a worker: `shelf worker` or `shelf api --workers N`) or
    /// `none` (ingest and convert only).
    #[schema(value_type = Option<ImportProcessingModeIn>)]
    pub processing_mode: Option<String>,
    /// JSON file under the root where the report is written after every file. An existing
    /// file must be an import report. Required with `resume: true`.
    #[schema(min_length = 1)]
    pub manifest_path: Option<String>,
    /// Take over the manifest's converted records and do only the rest (default false).
    pub resume: Option<bool>,
}

/// The output formats of an import (schema only; `shelf_app::imports` parses them).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ImportFormatIn {
    Md,
    Markdown,
    Txt,
    Text,
}

/// Where an import writes its outputs (schema only).
#[derive(ToSchema)]
#[schema(rename_all = "kebab-case")]
#[allow(dead_code)]
pub enum OutputModeIn {
    Workspace,
    NewDirectory,
    Original,
    Subdirectory,
}

/// What an import does with each document after ingesting it (schema only).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum ImportProcessingModeIn {
    Process,
    Queue,
    #[schema(rename = "none")]
    Nothing,
}

/// The rules of `ImportIn` that tie two fields together, in JSON Schema (`if`/`then`/`else`):
/// `resume: true` needs a `manifest_path`; `output_dir` is required with `output_mode:
/// new-directory` and refused (absent or `null`) with any other mode. utoipa has no type for
/// these keywords, so [`crate::openapi`] adds them to the schema as it is served.
pub fn import_in_conditions() -> serde_json::Value {
    serde_json::json!([
        {
            "if": {"properties": {"resume": {"const": true}}, "required": ["resume"]},
            "then": {"required": ["manifest_path"], "properties": {"manifest_path": {"type": "string"}}}
        },
        {
            "if": {"properties": {"output_mode": {"const": "new-directory"}}, "required": ["output_mode"]},
            "then": {"required": ["output_dir"], "properties": {"output_dir": {"type": "string"}}},
            "else": {"properties": {"output_dir": {"type": "null"}}}
        }
    ])
}

impl From<ImportIn> for ImportRequest {
    fn from(b: ImportIn) -> Self {
        ImportRequest {
            source_dir: b.source_dir,
            format: b.format,
            output_mode: b.output_mode,
            output_dir: b.output_dir,
            recursive: b.recursive,
            overwrite: b.overwrite,
            processing_mode: b.processing_mode,
            manifest_path: b.manifest_path,
            resume: b.resume,
            pipeline: None,
        }
    }
}

/// Import files
///
/// Ingests a file or the files of a directory in place (the document's source is the file),
/// processes or queues each as asked, and writes each one's extracted text (`md` or `txt`) to
/// its output, plus a `<output>.pages.json` page manifest for PDFs and images. Directory
/// imports are capped by `SHELF_API_MAX_IMPORT_FILES` and `SHELF_API_MAX_IMPORT_BYTES` before
/// any conversion. Answers the import report once every file has its record; a file's
/// failure is a record, not an error. The import does not hang on the request: a client that
/// disconnects leaves it going to the end (its runs finish; on shutdown they go back to the
/// queue), and the manifest, if any, follows its progress.
#[utoipa::path(
    post, path = "/imports", operation_id = "create_import", tag = "imports",
    request_body = ImportIn,
    responses(
        (status = 200, description = "The import report", body = ImportReportOut),
        (status = 400, description = "`invalid_import_path` (no import root configured, outside the root, `..`, a symlink or a symlinked parent, missing), `invalid_manifest_path` (same rules, or an existing file that is not an import report: it is left untouched), `invalid_output_dir`", body = ErrorBody),
        (status = 413, description = "`import_too_large` (file or byte cap), `import_manifest_too_large`", body = ErrorBody),
        (status = 507, description = "`insufficient_storage`: free disk space is below `SHELF_MIN_FREE_BYTES` (nothing was read or stored), or a write met a full disk", body = ErrorBody),
        (status = 422, description = "`validation_error`: an unknown `format`, `output_mode` or `processing_mode`, `output_dir` missing for `new-directory` or given for another mode, `resume` without `manifest_path`", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<ImportIn>,
) -> Result<Json<shelf_app::imports::ImportReport>, ApiError> {
    let boundary = Boundary::root(state.shelf.settings.api.import_root.as_deref())?;
    let request = ImportRequest::from(body);
    let shelf = state.shelf.clone();
    let shutdown = state.shutdown.clone();
    // The import runs on a task of its own, not in this request's future: axum drops the
    // future of a request whose client went away, which would drop the import mid-run and
    // leave its run `running` with nothing to finish it. Detached, the import goes through its
    // files whether or not anyone waits for the report, and on shutdown releases its run to
    // the queue (the server waits for tracked tasks).
    let import = state.tasks.spawn(async move {
        let limits = shelf.api_import_limits();
        shelf
            .import(&request, &boundary, limits, &shutdown, &mut |_| {})
            .await
    });
    let report = import.await.map_err(ApiError::internal)??;
    Ok(Json(report))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatusQuery {
    /// The import's manifest, under the import root.
    #[param(min_length = 1)]
    pub manifest_path: String,
    /// Default 500, at most 1000.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// Default 0.
    #[param(minimum = 0, maximum = 9_007_199_254_740_991_u64)]
    pub offset: Option<u64>,
}

/// Import status
///
/// The summary of an import's manifest and a page of its per-file records. Works while the
/// import runs (the manifest is replaced atomically after every file) and after it ended.
#[utoipa::path(
    get, path = "/imports/status", operation_id = "get_import_status", tag = "imports",
    params(StatusQuery),
    responses(
        (status = 200, body = ImportStatusOut),
        (status = 400, description = "`invalid_manifest_path` (path rules, no file, or not an import report), `invalid_import_path` (no import root configured)", body = ErrorBody),
        (status = 413, description = "`import_manifest_too_large`", body = ErrorBody),
        (status = 422, description = "`validation_error`: no `manifest_path`, `limit` outside 1 to 1000, a bad `offset`", body = ErrorBody),
    )
)]
pub async fn status(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<StatusQuery>,
) -> Result<Json<shelf_app::imports::StatusPage>, ApiError> {
    let limit = page_limit("limit", q.limit, 500, 1000)?;
    let offset = page_offset(&["query", "offset"], q.offset)?;
    let shelf = &state.shelf;
    let boundary = Boundary::root(shelf.settings.api.import_root.as_deref())?;
    Ok(Json(shelf.import_status(
        &boundary,
        &q.manifest_path,
        limit,
        offset,
    )?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageManifestQuery {
    /// The import's manifest, under the import root.
    #[param(min_length = 1)]
    pub manifest_path: String,
    /// Only failed pages and pages with an error or warnings, and the files that have any
    /// (default false).
    #[serde(default, deserialize_with = "query_bool")]
    #[param(value_type = Option<bool>)]
    pub failures_only: Option<bool>,
}

/// Page-level progress of an import
///
/// For each file of the import with a page manifest (PDFs and images): its page counts by
/// source, warnings, attempts, average OCR confidence, corrected pages and a bounded page
/// list, plus totals. Write scope when scoped keys are configured.
#[utoipa::path(
    get, path = "/imports/page-manifest", operation_id = "get_import_page_manifest", tag = "imports",
    params(PageManifestQuery),
    responses(
        (status = 200, body = PageProgressOut),
        (status = 400, description = "`invalid_manifest_path`, `invalid_import_path` (no import root configured)", body = ErrorBody),
        (status = 413, description = "`import_manifest_too_large`: the report and its page manifests together are over the cap", body = ErrorBody),
        (status = 422, description = "`validation_error`: no `manifest_path`, a `failures_only` that is not a boolean", body = ErrorBody),
    )
)]
pub async fn page_manifest(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<PageManifestQuery>,
) -> Result<Json<shelf_app::imports::PageProgress>, ApiError> {
    let shelf = &state.shelf;
    let boundary = Boundary::root(shelf.settings.api.import_root.as_deref())?;
    Ok(Json(shelf.import_page_progress(
        &boundary,
        &q.manifest_path,
        q.failures_only.unwrap_or(false),
    )?))
}

// ---- schemas: the shapes `shelf_app::imports` serializes (checked by the test below) ----

/// Counts over an import's records.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct ImportSummaryOut {
    /// Files planned.
    pub files: u64,
    /// Records so far.
    pub done: u64,
    pub converted: u64,
    /// Outputs that existed (no `overwrite`).
    pub skipped: u64,
    pub failed: u64,
    /// Converted records taken over by `resume`.
    pub reused: u64,
    pub ingested: u64,
    pub duplicates: u64,
    pub runs_succeeded: u64,
    pub runs_failed: u64,
    pub runs_queued: u64,
}

/// `{code, detail}` of a file that failed or was skipped.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct RecordErrorOut {
    pub code: String,
    pub detail: String,
}

/// Milliseconds by step.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct TimingsOut {
    pub ingest_ms: u64,
    pub process_ms: u64,
    pub convert_ms: u64,
    pub total_ms: u64,
}

/// One file of an import.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct FileRecordOut {
    /// The source file.
    pub path: String,
    /// `converted`, `skipped` or `failed`.
    pub status: String,
    pub output: Option<String>,
    /// The `<output>.pages.json` sidecar (PDFs and images).
    pub pages_manifest: Option<String>,
    pub document_id: Option<String>,
    pub filename: Option<String>,
    pub duplicate: Option<bool>,
    pub run_id: Option<String>,
    pub run_status: Option<String>,
    /// A succeeded run's warnings: the stages it went on without (`on_failure: continue`),
    /// each `{stage, code, message}`; absent when none.
    #[schema(value_type = Option<Vec<shelf_app::runs::RunWarningSchema>>)]
    pub run_warnings: Option<Vec<shelf_engine::RunWarning>>,
    pub error: Option<RecordErrorOut>,
    pub bytes: u64,
    /// Taken over from the manifest by `resume` (absent when false).
    pub reused: Option<bool>,
    pub finished_at: String,
    pub timings: TimingsOut,
}

/// The options an import ran with.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct ImportOptionsOut {
    pub format: String,
    pub output_mode: String,
    pub output_dir: Option<String>,
    pub recursive: bool,
    pub overwrite: bool,
    pub processing_mode: String,
}

/// The import report (also the manifest file's content).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct ImportReportOut {
    /// Always `shelf_import_report`.
    pub kind: String,
    pub version: u32,
    /// `running`, `completed`, `interrupted` or `watching`.
    pub status: String,
    pub source: String,
    pub options: ImportOptionsOut,
    pub started_at: String,
    pub updated_at: String,
    pub summary: ImportSummaryOut,
    pub files: Vec<FileRecordOut>,
}

/// A page of an import's records.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct ImportStatusOut {
    pub manifest_path: String,
    pub status: String,
    pub source: String,
    pub started_at: String,
    pub updated_at: String,
    pub summary: ImportSummaryOut,
    /// Records in the manifest.
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub files: Vec<FileRecordOut>,
}

/// Pages by the source of their text.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct PageSourcesOut {
    pub text_layer: u64,
    pub ocr: u64,
    pub failed: u64,
    pub pending: u64,
}

/// One file's page manifest.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct FilePagesOut {
    pub path: String,
    pub pages_manifest: String,
    /// Always `shelf_page_manifest`.
    pub kind: String,
    pub source: String,
    pub document_id: String,
    /// The run the records come from; null when they come from the extraction alone.
    pub run_id: Option<String>,
    /// `complete`, `pending` or `failed`.
    pub status: String,
    pub pages: u64,
    pub sources: PageSourcesOut,
    pub pages_with_warnings: u64,
    pub warnings: u64,
    pub attempts: u64,
    pub average_confidence: Option<f64>,
    pub corrected_pages: u64,
    /// At most 1000 pages (filtered by `failures_only`).
    pub page_list: Vec<PageOut>,
    pub page_list_truncated: bool,
}

/// Page totals over an import's files.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct PageTotalsOut {
    pub files: u64,
    pub pages: u64,
    pub sources: PageSourcesOut,
    pub pages_with_warnings: u64,
    pub corrected_pages: u64,
    pub attempts: u64,
}

/// Page-level progress of an import.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct PageProgressOut {
    pub manifest_path: String,
    pub failures_only: bool,
    pub totals: PageTotalsOut,
    pub files: Vec<FilePagesOut>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use serde_json::{Value, json};
    use shelf_app::imports::manifest::{RecordError, ReportOptions, Timings};
    use shelf_app::imports::page_manifest::{FilePages, PageProgress, PagesTotals};
    use shelf_app::imports::{
        FileRecord, FileStatus, ImportReport, PageManifest, ReportStatus, StatusPage, Summary,
    };
    use shelf_documents::PageRecord;

    /// The property names of a schema of the OpenAPI document.
    fn properties(schema: &str) -> BTreeSet<String> {
        let doc = serde_json::from_str::<serde_json::Value>(crate::openapi::document_json())
            .expect("openapi");
        doc["components"]["schemas"][schema]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("no schema {schema}"))
            .keys()
            .cloned()
            .collect()
    }

    fn keys(value: &Value) -> BTreeSet<String> {
        value.as_object().expect("object").keys().cloned().collect()
    }

    /// The schemas document exactly the fields the application serializes.
    #[test]
    fn schemas_match_what_is_served() {
        let record = FileRecord {
            path: "/r/a.pdf".into(),
            status: FileStatus::Converted,
            output: Some("/o/a.pdf.md".into()),
            pages_manifest: Some("/o/a.pdf.md.pages.json".into()),
            document_id: Some("doc_0123456789abcdef".into()),
            filename: Some("a.pdf".into()),
            duplicate: Some(false),
            run_id: Some("run_1".into()),
            run_status: Some("succeeded".into()),
            run_warnings: vec![shelf_engine::RunWarning {
                stage: "classify".into(),
                code: "invalid_response".into(),
                message: "m".into(),
            }],
            error: Some(RecordError {
                code: "x".into(),
                detail: "y".into(),
            }),
            bytes: 1,
            reused: true,
            finished_at: "t".into(),
            timings: Timings::default(),
        };
        let report = ImportReport {
            kind: "shelf_import_report".into(),
            version: 1,
            status: ReportStatus::Completed,
            source: "/r".into(),
            options: ReportOptions {
                format: "md".into(),
                output_mode: "new-directory".into(),
                output_dir: Some("/o".into()),
                recursive: true,
                overwrite: false,
                processing_mode: "none".into(),
            },
            started_at: "t".into(),
            updated_at: "t".into(),
            summary: Summary::default(),
            files: vec![record.clone()],
        };
        let served = serde_json::to_value(&report).expect("report");
        assert_eq!(keys(&served), properties("ImportReportOut"));
        assert_eq!(keys(&served["files"][0]), properties("FileRecordOut"));
        assert_eq!(keys(&served["summary"]), properties("ImportSummaryOut"));
        assert_eq!(keys(&served["options"]), properties("ImportOptionsOut"));
        assert_eq!(
            keys(&served["files"][0]["timings"]),
            properties("TimingsOut")
        );
        let page = StatusPage {
            manifest_path: "/r/m.json".into(),
            status: ReportStatus::Running,
            source: "/r".into(),
            started_at: "t".into(),
            updated_at: "t".into(),
            summary: Summary::default(),
            total: 1,
            limit: 500,
            offset: 0,
            files: vec![record],
        };
        assert_eq!(
            keys(&serde_json::to_value(&page).expect("page")),
            properties("ImportStatusOut")
        );

        let manifest = PageManifest::from_records(
            Path::new("/r/a.pdf"),
            "doc_0123456789abcdef",
            None,
            &[PageRecord::pending(1)],
        );
        let progress = PageProgress {
            manifest_path: "/r/m.json".into(),
            failures_only: false,
            totals: PagesTotals::default(),
            files: vec![FilePages {
                path: "/r/a.pdf".into(),
                pages_manifest: "/o/a.pdf.md.pages.json".into(),
                manifest,
            }],
        };
        let served = serde_json::to_value(&progress).expect("progress");
        assert_eq!(keys(&served), properties("PageProgressOut"));
        assert_eq!(keys(&served["totals"]), properties("PageTotalsOut"));
        assert_eq!(keys(&served["files"][0]), properties("FilePagesOut"));
        assert_eq!(
            keys(&served["files"][0]["sources"]),
            properties("PageSourcesOut")
        );
        assert_eq!(
            keys(&served["files"][0]["page_list"][0]),
            properties("PageOut")
        );
        assert_eq!(json!(served["files"][0]["status"]), json!("pending"));
    }
}
