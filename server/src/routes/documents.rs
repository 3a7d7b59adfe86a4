//! `/documents`: streamed uploads (one file, or a batch), listing, lookup, deletion, reprocessing, content pages and
//! page records.

use axum::Json;
use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Deserializer};
use shelf_app::ExportFormat;
use shelf_app::RunView;
use shelf_documents::citations::MAX_QUOTE_CHARS;
use shelf_documents::{ContentPage, DocumentFilterText, DocumentsError};
use utoipa::IntoParams;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiPath, ApiQuery, OptionalJson, page_limit, page_offset, request_too_large};
use crate::model::documents::{
    BatchItemOut, BatchOut, BatchUploadForm, DeletedOut, DocumentExportOut, DocumentList,
    DocumentOut, ExportFormatIn, PageListingOut, Reprocess, UploadForm,
};
use crate::model::runs::check_pipeline_name;
use crate::model::search::{SearchHitOut, SimilarOut};
use crate::policy::Policy;
use crate::routes::Resource;
use crate::routes::runs::start_run;
use crate::state::AppState;

pub fn routes() -> Resource {
    Resource::new()
        .route(Policy::Write, routes!(upload))
        .route(Policy::Read, routes!(list))
        .route(Policy::Write, routes!(batch))
        .route(Policy::Read, routes!(get))
        .route(Policy::Write, routes!(delete))
        .route(Policy::Write, routes!(reprocess))
        .route(Policy::Read, routes!(content))
        .route(Policy::Read, routes!(similar))
        .route(Policy::Read, routes!(pages))
        .route(Policy::Read, routes!(export))
        // The `format` parameter is written inline; the document also names its values.
        .schemas([super::schema::<ExportFormatIn>()])
}

/// The multipart part that carries the upload.
pub const FILE_PART: &str = "file";
/// The repeated multipart part that carries a batch's files.
pub const FILES_PART: &str = "files";

fn multipart_error(e: MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        request_too_large()
    } else {
        ApiError::new(ErrorCode::BadRequest, "Malformed multipart body").with_cause(e.body_text())
    }
}

fn multipart_body(multipart: Result<Multipart, MultipartRejection>) -> Result<Multipart, ApiError> {
    multipart.map_err(|e| {
        ApiError::invalid(
            &["body"],
            format!("Expected a multipart/form-data body: {}", e.body_text()),
            "value_error",
        )
    })
}

/// Reads and discards a part that is not the upload (the request size limit bounds it).
async fn skip(mut field: Field<'_>) -> Result<(), ApiError> {
    while field.chunk().await.map_err(multipart_error)?.is_some() {}
    Ok(())
}

/// Upload one document
///
/// Streams the part named `file` to disk while hashing it. Archive extensions are refused
/// before any byte is written, archive signatures and binary text on the first bytes. Identical
/// bytes return the stored document with `duplicate: true` (status 200).
#[utoipa::path(
    post, path = "/documents", operation_id = "upload_document", tag = "documents",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "Stored", body = DocumentOut),
        (status = 200, description = "Already stored (`duplicate: true`)", body = DocumentOut),
        (status = 400, description = "`unsupported_file_type` (an extension Shelf does not read, none, or binary bytes in a text file), `archive_not_supported`, `empty_file` (0 bytes), `invalid_import_path`, `ingest_failed`, `bad_request` (malformed multipart)", body = ErrorBody),
        (status = 422, description = "`validation_error`: no `file` part, two `file` parts, or not a multipart body", body = ErrorBody),
        (status = 413, description = "`upload_too_large` or `request_too_large`", body = ErrorBody),
        (status = 507, description = "`insufficient_storage`: free disk space is below `SHELF_MIN_FREE_BYTES` (nothing was read or stored), or a write met a full disk", body = ErrorBody),
    )
)]
pub async fn upload(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<(StatusCode, Json<DocumentOut>), ApiError> {
    let mut multipart = multipart_body(multipart)?;
    let mut sink = None;
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        if field.name() != Some(FILE_PART) {
            skip(field).await?;
            continue;
        }
        if sink.is_some() {
            // Dropping the first sink removes its staged bytes: nothing is kept.
            return Err(ApiError::invalid(
                &["body", FILE_PART],
                "Expected exactly one `file` part; send one file per request",
                "value_error",
            ));
        }
        let filename = field.file_name().unwrap_or_default().to_string();
        let mut upload = state.shelf.begin_upload(&filename)?;
        while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
            upload.push(&chunk).await?;
        }
        sink = Some(upload);
    }
    // The whole body is read before anything is stored, so a second `file` part is refused
    // instead of silently ignored.
    if let Some(sink) = sink {
        let ingested = sink.finish().await?;
        tracing::info!(
            document_id = %ingested.document.id,
            byte_size = ingested.document.byte_size,
            duplicate = ingested.duplicate,
            "document_uploaded"
        );
        let status = if ingested.duplicate {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        let mut out = DocumentOut::from(ingested.document);
        out.duplicate = Some(ingested.duplicate);
        return Ok((status, Json(out)));
    }
    Err(ApiError::invalid(
        &["body", FILE_PART],
        "Field required",
        "missing",
    ))
}

/// Upload many documents
///
/// Streams every part named `files` to the staging directory like a single upload, and
/// ingests them only once the whole request was read within `SHELF_API_MAX_BATCH_FILES` and
/// `SHELF_API_MAX_BATCH_BYTES` (the bytes of all `files` parts); over either cap nothing is
/// kept (413 `batch_too_large`, also at once when a `Content-Length` cannot fit the caps plus
/// 16 KiB of multipart framing per file). Each file then succeeds or fails on its own: an
/// archive, an unsupported or binary file, an empty one or one over `SHELF_API_MAX_UPLOAD_BYTES`
/// is a `failed` entry with the error a single upload would have answered, and never rolls
/// back the others. Entries keep the request's order and carry normalized filenames; a file
/// whose bytes are already stored (also earlier in the same batch) is `ingested` with
/// `document.duplicate: true`.
#[utoipa::path(
    post, path = "/documents/batch", operation_id = "upload_documents", tag = "documents",
    request_body(content = BatchUploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 200, description = "One entry per `files` part, in order; `error.code` is `unsupported_file_type`, `archive_not_supported`, `empty_file`, `upload_too_large`, `invalid_import_path`, `insufficient_storage`, `service_unavailable` (the database was busy) or `ingest_failed` (detail `Document ingest failed`)", body = BatchOut),
        (status = 400, description = "`bad_request` (malformed multipart)", body = ErrorBody),
        (status = 413, description = "`batch_too_large` (nothing kept) or `request_too_large`", body = ErrorBody),
        (status = 507, description = "`insufficient_storage`: free disk space is below `SHELF_MIN_FREE_BYTES` (nothing was read or stored), or a write met a full disk", body = ErrorBody),
        (status = 422, description = "`validation_error`: no `files` part, or not a multipart body", body = ErrorBody),
    )
)]
pub async fn batch(
    State(state): State<AppState>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Json<BatchOut>, ApiError> {
    read_batch(&state, &headers, multipart).await.map(Json)
}

/// A batch upload's request read and committed: the entries `POST /documents/batch` answers
/// (also what the web page's form posts, `web::upload`).
pub async fn read_batch(
    state: &AppState,
    headers: &HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<BatchOut, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut batch = state.shelf.begin_batch(declared)?;
    let mut multipart = multipart_body(multipart)?;
    // A cap error returns here and drops the batch, which removes every staged file.
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        if field.name() != Some(FILES_PART) {
            skip(field).await?;
            continue;
        }
        batch
            .start_file(field.file_name().unwrap_or_default())
            .await?;
        while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
            batch.push(&chunk).await?;
        }
        batch.end_file().await;
    }
    if batch.files() == 0 {
        return Err(ApiError::invalid(
            &["body", FILES_PART],
            "Field required",
            "missing",
        ));
    }
    let mut out = BatchOut {
        documents: Vec::new(),
        ingested: 0,
        failed: 0,
    };
    for outcome in batch.commit().await {
        let item = match outcome.result {
            Ok(ingested) => {
                out.ingested += 1;
                let mut document = DocumentOut::from(ingested.document);
                document.duplicate = Some(ingested.duplicate);
                BatchItemOut {
                    filename: outcome.filename,
                    status: "ingested".into(),
                    document: Some(document),
                    error: None,
                }
            }
            Err(e) => {
                out.failed += 1;
                let error = ApiError::from(e);
                if let Some(cause) = &error.cause {
                    // The entry shows only the generic detail: the cause is logged here, once.
                    tracing::error!(filename = %outcome.filename, cause = %cause, "batch_item_failed");
                }
                BatchItemOut {
                    filename: outcome.filename,
                    status: "failed".into(),
                    document: None,
                    error: Some(error.body()),
                }
            }
        };
        out.documents.push(item);
    }
    tracing::info!(
        ingested = out.ingested,
        failed = out.failed,
        "documents_batch_uploaded"
    );
    Ok(out)
}

/// A page of the list and its filters. The filters mean what search's filters of the same
/// names mean, and are checked by the same code (`DocumentFilterText::parse`); an empty value
/// filters nothing.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Default 100, at most 1000.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// Default 0.
    #[param(minimum = 0, maximum = 9_007_199_254_740_991_u64)]
    pub offset: Option<u64>,
    /// Only documents of this status: `ingested`, `processing`, `ready` or `failed`
    /// (anything else: `400 invalid_document_status`).
    #[param(example = "ready")]
    pub status: Option<String>,
    /// Dewey code prefix: `636` matches `636` and `636.1…`, `6` the whole class;
    /// unclassified documents never match.
    #[param(example = "636")]
    pub classification_prefix: Option<String>,
    /// Only documents with exactly this tag (one element of `tags`, case-sensitive).
    pub tag: Option<String>,
    /// Created at or after: RFC 3339, a date-time without offset (UTC) or a date (midnight
    /// UTC). Not a time: `422 validation_error`.
    #[param(example = "2026-11-01")]
    pub created_after: Option<String>,
    /// Created at or before, in the same forms; before `created_after`:
    /// `400 invalid_search_window`.
    #[param(example = "2026-11-30T23:59:59Z")]
    pub created_before: Option<String>,
}

/// List documents
///
/// Newest first, optionally filtered by status, classification prefix, tag and creation
/// window (all inclusive); `total` counts the documents the filters let through.
#[utoipa::path(
    get, path = "/documents", operation_id = "list_documents", tag = "documents", params(PageQuery),
    responses(
        (status = 200, body = DocumentList),
        (status = 400, description = "`invalid_document_status`, `invalid_search_window` (`created_after` later than `created_before`)", body = ErrorBody),
        (status = 422, description = "`validation_error`: a page size out of range, or a time that is not one", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<Json<DocumentList>, ApiError> {
    let limit = page_limit("limit", q.limit, 100, 1000)?;
    let offset = page_offset(&["query", "offset"], q.offset)?;
    let filter = DocumentFilterText {
        status: q.status.as_deref(),
        classification_prefix: q.classification_prefix.as_deref(),
        tag: q.tag.as_deref(),
        created_after: q.created_after.as_deref(),
        created_before: q.created_before.as_deref(),
    }
    .parse()
    .map_err(|e| match e {
        // Search names the body's field; here the field is in the query string.
        DocumentsError::InvalidTimestamp { field, .. } => {
            ApiError::invalid(&["query", field], e.to_string(), "value_error")
        }
        other => other.into(),
    })?;
    let (documents, total) = state.shelf.list_documents(&filter, limit, offset).await?;
    Ok(Json(DocumentList {
        documents: documents.into_iter().map(DocumentOut::from).collect(),
        total,
        limit,
        offset,
    }))
}

/// Get a document
#[utoipa::path(
    get, path = "/documents/{id}", operation_id = "get_document", tag = "documents",
    params(("id" = String, Path, description = "Document id")),
    responses((status = 200, body = DocumentOut), (status = 404, body = ErrorBody))
)]
pub async fn get(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<DocumentOut>, ApiError> {
    Ok(Json(state.shelf.document(&id).await?.into()))
}

/// Delete a document
///
/// Removes its runs, texts and index rows, and the upload files it owns. Refused with
/// `invalid_import_path` when the upload directory is a symlink.
#[utoipa::path(
    delete, path = "/documents/{id}", operation_id = "delete_document", tag = "documents",
    params(("id" = String, Path, description = "Document id")),
    responses(
        (status = 200, body = DeletedOut),
        (status = 404, body = ErrorBody),
        (status = 400, description = "`invalid_import_path`", body = ErrorBody),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<DeletedOut>, ApiError> {
    let deleted = state.shelf.delete_document(&id).await?;
    tracing::info!(document_id = %deleted.id, removed_files = deleted.removed_files, "document_deleted");
    Ok(Json(DeletedOut::from(deleted)))
}

/// Reprocess a document
///
/// Creates a fresh run on the current pipeline file. The body is optional.
#[utoipa::path(
    post, path = "/documents/{id}/reprocess", operation_id = "reprocess_document", tag = "documents",
    params(("id" = String, Path, description = "Document id")),
    request_body(content = Option<Reprocess>, content_type = "application/json"),
    responses(
        (status = 201, body = RunView),
        (status = 404, body = ErrorBody),
        (status = 400, description = "`pipeline_not_found` (a well-formed name without a pipeline file), `invalid_pipeline`", body = ErrorBody),
    )
)]
pub async fn reprocess(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    OptionalJson(body): OptionalJson<Reprocess>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    let body = body.unwrap_or_default();
    check_pipeline_name(body.pipeline.as_deref())?;
    let run = start_run(
        &state,
        &id,
        body.pipeline.as_deref(),
        body.processing_mode.unwrap_or_default(),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(run)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ContentQuery {
    /// Characters to skip (default 0).
    #[param(minimum = 0, maximum = 9_007_199_254_740_991_u64)]
    pub offset: Option<u64>,
    /// Characters to return: default and maximum `SHELF_API_MAX_CONTENT_CHARS` (larger values
    /// are cut to it).
    #[param(minimum = 1, maximum = 9_007_199_254_740_991_u64)]
    pub limit: Option<u64>,
}

/// Page of the cleaned output
///
/// The latest cleaned output, `limit` characters from `offset`. 404 when the document has no
/// cleaned output yet.
#[utoipa::path(
    get, path = "/documents/{id}/content", operation_id = "get_document_content", tag = "documents",
    params(("id" = String, Path, description = "Document id"), ContentQuery),
    responses((status = 200, body = ContentPage), (status = 404, body = ErrorBody))
)]
pub async fn content(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<ContentQuery>,
) -> Result<Json<ContentPage>, ApiError> {
    if q.limit == Some(0) {
        return Err(ApiError::invalid(
            &["query", "limit"],
            "Input should be greater than or equal to 1",
            "greater_than_equal",
        ));
    }
    let offset = page_offset(&["query", "offset"], q.offset)?;
    page_offset(&["query", "limit"], q.limit)?;
    Ok(Json(state.shelf.content(&id, offset, q.limit).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SimilarQuery {
    /// Default 10, at most 100.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u64>,
}

/// Documents like this one
///
/// The documents nearest to this one by meaning ("more like this"): each other document
/// scored by its best passage against this document's passages (their mean vector), with the
/// local embedding model, nearest first; the document itself is never listed. A document
/// without passages of the current model (not embedded yet) has none. `503
/// embedding_unavailable` without `SHELF_EMBEDDING_MODEL_DIR`.
#[utoipa::path(
    get, path = "/documents/{id}/similar", operation_id = "similar_documents", tag = "documents",
    params(("id" = String, Path, description = "Document id"), SimilarQuery),
    responses(
        (status = 200, body = SimilarOut),
        (status = 404, body = ErrorBody),
        (status = 503, description = "`embedding_unavailable`: no embedding model is configured", body = ErrorBody),
    )
)]
pub async fn similar(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<SimilarQuery>,
) -> Result<Json<SimilarOut>, ApiError> {
    let limit = page_limit("limit", q.limit, 10, 100)?;
    let hits = state.shelf.similar_documents(&id, limit).await?;
    Ok(Json(SimilarOut {
        document_id: id,
        results: hits.into_iter().map(SearchHitOut::from).collect(),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PagesQuery {
    /// Default 100, at most 1000.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// Default 0.
    #[param(minimum = 0, maximum = 9_007_199_254_740_991_u64)]
    pub offset: Option<u64>,
    /// Only failed pages and pages with an error or warnings (default false). `true`/`false`,
    /// also `1`/`0`, `yes`/`no`, `on`/`off`.
    #[serde(default, deserialize_with = "query_bool")]
    #[param(value_type = Option<bool>)]
    pub failures_only: Option<bool>,
}

/// A boolean query parameter, read the way the original service's clients send them.
pub(crate) fn query_bool<'de, D: Deserializer<'de>>(de: D) -> Result<Option<bool>, D::Error> {
    let text = String::deserialize(de)?;
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(Some(true)),
        "false" | "0" | "no" | "off" => Ok(Some(false)),
        _ => Err(serde::de::Error::custom(
            "Input should be a valid boolean (true or false)",
        )),
    }
}

/// Page records of a document
///
/// What happened to each page of a paged document (PDF, image) in its latest run that
/// recorded pages: the text's source (`text_layer`, `ocr`, `failed`, `pending`), OCR
/// confidence, rotation, attempts, correction, warnings and error, with a summary over all
/// the run's pages. Texts are not included; `chars` gives their length. A document without
/// pages answers an empty listing with `run_id: null`.
#[utoipa::path(
    get, path = "/documents/{id}/pages", operation_id = "get_document_pages", tag = "documents",
    params(("id" = String, Path, description = "Document id"), PagesQuery),
    responses(
        (status = 200, body = PageListingOut),
        (status = 404, description = "`not_found`: no such document", body = ErrorBody),
        (status = 422, description = "`validation_error`: `limit` outside 1 to 1000, a negative or non-numeric `offset`, a `failures_only` that is not a boolean", body = ErrorBody),
    )
)]
pub async fn pages(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PagesQuery>,
) -> Result<Json<PageListingOut>, ApiError> {
    let limit = page_limit("limit", q.limit, 100, 1000)?;
    let offset = page_offset(&["query", "offset"], q.offset)?;
    let listing = state
        .shelf
        .pages(&id, limit, offset, q.failures_only.unwrap_or(false))
        .await?;
    Ok(Json(listing.into()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// `json`, `txt` or `md`. Checked before the document is looked up: anything else, or
    /// none, is `bad_request`.
    #[param(value_type = ExportFormatIn, required = true, example = "md")]
    pub format: Option<String>,
    /// A passage to find in the document's transcript (SRT, WebVTT, SBV sources). When found,
    /// JSON and Markdown exports carry `transcript_citation`; at most 4,096 characters.
    #[param(max_length = 4096)]
    pub citation_quote: Option<String>,
}

/// Export a document
///
/// The cleaned text of the document's latest succeeded run: `json` (the document's fields,
/// the text, and `transcript_citation` when `citation_quote` is found in a transcript), `txt`
/// (the cleaned text verbatim) or `md` (the synopsis, classification and tags, a citation block
/// when found, then the cleaned text). `Content-Disposition: attachment` carries an ASCII
/// `filename` and a UTF-8 `filename*`; `X-Shelf-Export-Stem` the percent-encoded stem (the
/// Dewey code and title, or the source filename's stem).
#[utoipa::path(
    get, path = "/documents/{id}/export", operation_id = "export_document", tag = "documents",
    params(("id" = String, Path, description = "Document id"), ExportQuery),
    responses(
        (status = 200, description = "The export, as an attachment",
            headers(
                ("Content-Disposition" = String, description = "`attachment; filename=\"...\"; filename*=UTF-8''...`"),
                ("X-Shelf-Export-Stem" = String, description = "The file name stem, percent-encoded UTF-8"),
            ),
            content(
                (DocumentExportOut = "application/json"),
                (String = "text/plain"),
                (String = "text/markdown"),
            )
        ),
        (status = 400, description = "`bad_request`: `format` missing or not `json`, `txt` or `md` (checked before the lookup)", body = ErrorBody),
        (status = 404, description = "`not_found`: no such document, or no succeeded run with cleaned output", body = ErrorBody),
        (status = 422, description = "`validation_error`: `citation_quote` over 4,096 characters", body = ErrorBody),
    )
)]
pub async fn export(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<ExportQuery>,
) -> Result<Response, ApiError> {
    let format = ExportFormat::parse(q.format.as_deref().unwrap_or_default())?;
    if q.citation_quote
        .as_deref()
        .is_some_and(|quote| quote.chars().count() > MAX_QUOTE_CHARS)
    {
        return Err(ApiError::invalid(
            &["query", "citation_quote"],
            format!("String should have at most {MAX_QUOTE_CHARS} characters"),
            "string_too_long",
        ));
    }
    let export = state
        .shelf
        .export(&id, format, q.citation_quote.as_deref())
        .await?;
    let header = |value: String| {
        HeaderValue::from_str(&value).map_err(|e| ApiError::internal(format!("export header: {e}")))
    };
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static(format.content_type()),
        ),
        (
            header::CONTENT_DISPOSITION,
            header(export.content_disposition())?,
        ),
        (EXPORT_STEM_HEADER, header(export.encoded_stem())?),
    ];
    Ok((headers, export.body).into_response())
}

/// The header that carries the export's stem, percent-encoded.
pub const EXPORT_STEM_HEADER: HeaderName = HeaderName::from_static("x-shelf-export-stem");
