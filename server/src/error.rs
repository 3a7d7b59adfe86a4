//! The one table of API error codes with their HTTP statuses ([`ErrorCode`], its code strings
//! and statuses) and [`ApiError`], the body `{detail, code}` every failure answers with. Which
//! code a library error gets is decided twice: by each library's own `code()` (documents,
//! app, admin, imports; what the CLI prints and exits by) and here, by exhaustive matches that
//! map library errors to [`ErrorCode`]s, so a new variant cannot ship without one;
//! `library_codes_agree_with_the_table` checks, on samples of app and document errors, that the
//! two agree.
//! A 5xx never carries internal text: the cause rides in a response extension that the logging
//! middleware writes once, then drops.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use shelf_app::AppError;
use shelf_app::documents::DocumentsError;
use shelf_app::engine::PipelineError;
use shelf_app::readiness::NotReady;
use shelf_app::uploads::UploadError;
use utoipa::ToSchema;

/// Every code the API answers with. Codes are API: never renamed, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidApiKey,
    InsufficientScope,
    NotFound,
    MethodNotAllowed,
    RequestTooLarge,
    UploadTooLarge,
    BatchTooLarge,
    ImportTooLarge,
    ImportManifestTooLarge,
    UnsupportedFileType,
    ArchiveNotSupported,
    EmptyFile,
    InvalidImportPath,
    InvalidManifestPath,
    InvalidOutputDir,
    BadRequest,
    InvalidSearchWindow,
    SearchQueryTooLarge,
    InvalidSearchQuery,
    InvalidSearchScope,
    InvalidDocumentStatus,
    RunTerminal,
    RunNotFailed,
    PipelineNotFound,
    InvalidPipeline,
    SourceChanged,
    ValidationError,
    RateLimited,
    TooManyStreams,
    IngestFailed,
    RunSubmissionFailed,
    ServiceUnavailable,
    SchemaMismatch,
    DatabaseCorrupt,
    InsufficientStorage,
    ServerError,
}

impl ErrorCode {
    /// Every code, for the docs test and the OpenAPI description.
    pub const ALL: [ErrorCode; 36] = [
        ErrorCode::InvalidApiKey,
        ErrorCode::InsufficientScope,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RequestTooLarge,
        ErrorCode::UploadTooLarge,
        ErrorCode::BatchTooLarge,
        ErrorCode::ImportTooLarge,
        ErrorCode::ImportManifestTooLarge,
        ErrorCode::UnsupportedFileType,
        ErrorCode::ArchiveNotSupported,
        ErrorCode::EmptyFile,
        ErrorCode::InvalidImportPath,
        ErrorCode::InvalidManifestPath,
        ErrorCode::InvalidOutputDir,
        ErrorCode::BadRequest,
        ErrorCode::InvalidSearchWindow,
        ErrorCode::SearchQueryTooLarge,
        ErrorCode::InvalidSearchQuery,
        ErrorCode::InvalidSearchScope,
        ErrorCode::InvalidDocumentStatus,
        ErrorCode::RunTerminal,
        ErrorCode::RunNotFailed,
        ErrorCode::PipelineNotFound,
        ErrorCode::InvalidPipeline,
        ErrorCode::SourceChanged,
        ErrorCode::ValidationError,
        ErrorCode::RateLimited,
        ErrorCode::TooManyStreams,
        ErrorCode::IngestFailed,
        ErrorCode::RunSubmissionFailed,
        ErrorCode::ServiceUnavailable,
        ErrorCode::SchemaMismatch,
        ErrorCode::DatabaseCorrupt,
        ErrorCode::InsufficientStorage,
        ErrorCode::ServerError,
    ];

    /// The table: machine-readable code and HTTP status.
    pub fn row(self) -> (&'static str, StatusCode) {
        use StatusCode as S;
        match self {
            ErrorCode::InvalidApiKey => ("invalid_api_key", S::UNAUTHORIZED),
            ErrorCode::InsufficientScope => ("insufficient_scope", S::FORBIDDEN),
            ErrorCode::NotFound => ("not_found", S::NOT_FOUND),
            ErrorCode::MethodNotAllowed => ("method_not_allowed", S::METHOD_NOT_ALLOWED),
            ErrorCode::RequestTooLarge => ("request_too_large", S::PAYLOAD_TOO_LARGE),
            ErrorCode::UploadTooLarge => ("upload_too_large", S::PAYLOAD_TOO_LARGE),
            ErrorCode::BatchTooLarge => ("batch_too_large", S::PAYLOAD_TOO_LARGE),
            ErrorCode::ImportTooLarge => ("import_too_large", S::PAYLOAD_TOO_LARGE),
            ErrorCode::ImportManifestTooLarge => {
                ("import_manifest_too_large", S::PAYLOAD_TOO_LARGE)
            }
            ErrorCode::UnsupportedFileType => ("unsupported_file_type", S::BAD_REQUEST),
            ErrorCode::ArchiveNotSupported => ("archive_not_supported", S::BAD_REQUEST),
            ErrorCode::EmptyFile => ("empty_file", S::BAD_REQUEST),
            ErrorCode::InvalidImportPath => ("invalid_import_path", S::BAD_REQUEST),
            ErrorCode::InvalidManifestPath => ("invalid_manifest_path", S::BAD_REQUEST),
            ErrorCode::InvalidOutputDir => ("invalid_output_dir", S::BAD_REQUEST),
            ErrorCode::BadRequest => ("bad_request", S::BAD_REQUEST),
            ErrorCode::InvalidSearchWindow => ("invalid_search_window", S::BAD_REQUEST),
            ErrorCode::SearchQueryTooLarge => ("search_query_too_large", S::BAD_REQUEST),
            ErrorCode::InvalidSearchQuery => ("invalid_search_query", S::BAD_REQUEST),
            ErrorCode::InvalidSearchScope => ("invalid_search_scope", S::BAD_REQUEST),
            ErrorCode::InvalidDocumentStatus => ("invalid_document_status", S::BAD_REQUEST),
            ErrorCode::RunTerminal => ("run_terminal", S::BAD_REQUEST),
            ErrorCode::RunNotFailed => ("run_not_failed", S::BAD_REQUEST),
            ErrorCode::PipelineNotFound => ("pipeline_not_found", S::BAD_REQUEST),
            ErrorCode::InvalidPipeline => ("invalid_pipeline", S::BAD_REQUEST),
            ErrorCode::SourceChanged => ("source_changed", S::CONFLICT),
            ErrorCode::ValidationError => ("validation_error", S::UNPROCESSABLE_ENTITY),
            ErrorCode::RateLimited => ("rate_limited", S::TOO_MANY_REQUESTS),
            ErrorCode::TooManyStreams => ("too_many_streams", S::TOO_MANY_REQUESTS),
            ErrorCode::IngestFailed => ("ingest_failed", S::BAD_REQUEST),
            ErrorCode::RunSubmissionFailed => ("run_submission_failed", S::SERVICE_UNAVAILABLE),
            ErrorCode::ServiceUnavailable => ("service_unavailable", S::SERVICE_UNAVAILABLE),
            ErrorCode::SchemaMismatch => ("schema_mismatch", S::SERVICE_UNAVAILABLE),
            ErrorCode::DatabaseCorrupt => ("database_corrupt", S::SERVICE_UNAVAILABLE),
            ErrorCode::InsufficientStorage => ("insufficient_storage", S::INSUFFICIENT_STORAGE),
            ErrorCode::ServerError => ("server_error", S::INTERNAL_SERVER_ERROR),
        }
    }

    pub fn as_str(self) -> &'static str {
        self.row().0
    }

    pub fn status(self) -> StatusCode {
        self.row().1
    }

    /// The detail every response with this code shows, whatever the cause: these codes never
    /// show internal text.
    fn fixed_detail(self) -> Option<&'static str> {
        match self {
            ErrorCode::ServerError => Some("Internal server error"),
            ErrorCode::DatabaseCorrupt => {
                Some("The database is damaged; the operator must restore it from a backup")
            }
            ErrorCode::IngestFailed => Some("Document ingest failed"),
            ErrorCode::RunSubmissionFailed => Some("Run could not be submitted; try again later"),
            _ => None,
        }
    }

    /// The code a bare status stands for, when something other than [`ApiError`] produced an
    /// error response (the framework's 405, a layer's 413, ...).
    pub fn for_status(status: StatusCode) -> ErrorCode {
        match status {
            StatusCode::UNAUTHORIZED => ErrorCode::InvalidApiKey,
            StatusCode::FORBIDDEN => ErrorCode::InsufficientScope,
            StatusCode::NOT_FOUND => ErrorCode::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::RequestTooLarge,
            StatusCode::UNPROCESSABLE_ENTITY | StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ErrorCode::ValidationError
            }
            StatusCode::TOO_MANY_REQUESTS => ErrorCode::RateLimited,
            StatusCode::INSUFFICIENT_STORAGE => ErrorCode::InsufficientStorage,
            StatusCode::SERVICE_UNAVAILABLE => ErrorCode::ServiceUnavailable,
            s if s.is_server_error() => ErrorCode::ServerError,
            _ => ErrorCode::BadRequest,
        }
    }
}

/// One step of a validation issue's `loc`: a field name or a list index. Only the schema
/// uses it; `loc` itself is built from JSON values.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum LocSegment {
    Name(String),
    Index(u64),
}

/// One problem in a request, in the shape FastAPI clients know.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ValidationIssue {
    /// Where: `["body", "document_id"]`, `["query", "limit"]`, `["header", "last-event-id"]`.
    #[schema(value_type = Vec<LocSegment>)]
    pub loc: Vec<Value>,
    pub msg: String,
    /// `missing`, `json_invalid`, `type_error`, `value_error`, `less_than_equal`, ...
    #[serde(rename = "type")]
    pub kind: String,
}

impl ValidationIssue {
    pub fn new(loc: &[&str], msg: impl Into<String>, kind: &str) -> Self {
        ValidationIssue {
            loc: loc.iter().map(|s| Value::from(*s)).collect(),
            msg: msg.into(),
            kind: kind.to_string(),
        }
    }
}

/// `detail`: a message, or the list of validation issues.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(untagged)]
pub enum ErrorDetail {
    Message(String),
    Issues(Vec<ValidationIssue>),
}

/// The error body.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    pub detail: ErrorDetail,
    /// A stable code of docs/errors.md.
    pub code: String,
}

/// The detail of `insufficient_storage` when a write met a full disk.
pub const DISK_FULL: &str =
    "Insufficient storage: the disk holding Shelf's data is full. Retry once space is freed";

/// The cause of an error response, for the logging middleware only (never serialized).
#[derive(Debug, Clone)]
pub struct ErrorCause(pub String);

/// A failed request.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub detail: ErrorDetail,
    pub cause: Option<String>,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        ApiError {
            code,
            detail: ErrorDetail::Message(detail.into()),
            cause: None,
            retry_after: None,
        }
    }

    /// A failure whose text must not reach the client: `server_error`, cause logged; or
    /// `database_corrupt` when the cause says the database is damaged.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        let cause = cause.to_string();
        if shelf_app::engine::db::is_corrupt_text(&cause) {
            return Self::database_corrupt(cause);
        }
        Self::new(ErrorCode::ServerError, "").with_cause(cause)
    }

    /// `database_corrupt`: the database is damaged (the error that said so has latched the
    /// damage where it was met, `shelf_engine::db::note_if_corrupt`, which logs the recovery
    /// steps once and stops this process's writes).
    pub fn database_corrupt(cause: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::DatabaseCorrupt, "").with_cause(cause)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, detail)
    }

    pub fn validation(issues: Vec<ValidationIssue>) -> Self {
        ApiError {
            code: ErrorCode::ValidationError,
            detail: ErrorDetail::Issues(issues),
            cause: None,
            retry_after: None,
        }
    }

    pub fn invalid(loc: &[&str], msg: impl Into<String>, kind: &str) -> Self {
        Self::validation(vec![ValidationIssue::new(loc, msg, kind)])
    }

    /// Attaches the cause, which only the log sees. A generic failure (`server_error`,
    /// `ingest_failed`, `run_submission_failed`, `service_unavailable`) caused by a full disk
    /// (`ENOSPC`, `SQLITE_FULL`, in whatever error it arrived) becomes 507
    /// `insufficient_storage` here, once for every route: a full disk is the operator's to
    /// fix, not an internal error.
    pub fn with_cause(mut self, cause: impl std::fmt::Display) -> Self {
        let cause = cause.to_string();
        if matches!(
            self.code,
            ErrorCode::ServerError
                | ErrorCode::IngestFailed
                | ErrorCode::RunSubmissionFailed
                | ErrorCode::ServiceUnavailable
        ) && shelf_app::engine::db::is_storage_full_text(&cause)
        {
            self.code = ErrorCode::InsufficientStorage;
            self.detail = ErrorDetail::Message(DISK_FULL.to_string());
        }
        self.cause = Some(cause);
        self
    }

    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// The body as clients see it.
    pub fn body(&self) -> ErrorBody {
        let detail = match self.code.fixed_detail() {
            Some(fixed) => ErrorDetail::Message(fixed.to_string()),
            None => self.detail.clone(),
        };
        ErrorBody {
            detail,
            code: self.code.as_str().to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.code.status(), axum::Json(self.body())).into_response();
        let headers = response.headers_mut();
        if self.code == ErrorCode::InvalidApiKey {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(cause) = self.cause {
            response.extensions_mut().insert(ErrorCause(cause));
        }
        response
    }
}

impl From<DocumentsError> for ApiError {
    fn from(e: DocumentsError) -> Self {
        let code = match &e {
            DocumentsError::NotFound { .. } | DocumentsError::NoContent { .. } => {
                ErrorCode::NotFound
            }
            DocumentsError::UnsupportedFileType { .. } | DocumentsError::BinaryContent => {
                ErrorCode::UnsupportedFileType
            }
            DocumentsError::ArchiveNotSupported { .. } => ErrorCode::ArchiveNotSupported,
            DocumentsError::EmptyFile => ErrorCode::EmptyFile,
            DocumentsError::InvalidPath { .. } => ErrorCode::InvalidImportPath,
            DocumentsError::SourceChanged { .. } => ErrorCode::SourceChanged,
            DocumentsError::SearchQueryTooLarge { .. } => ErrorCode::SearchQueryTooLarge,
            DocumentsError::InvalidSearchQuery => ErrorCode::InvalidSearchQuery,
            DocumentsError::InvalidSearchWindow => ErrorCode::InvalidSearchWindow,
            DocumentsError::InvalidTimestamp { field, .. } => {
                return ApiError::invalid(&["body", field], e.to_string(), "value_error");
            }
            DocumentsError::InvalidDocumentStatus { .. } => ErrorCode::InvalidDocumentStatus,
            DocumentsError::InvalidSearchScope { .. } => ErrorCode::InvalidSearchScope,
            DocumentsError::Io(_) | DocumentsError::Db(_) | DocumentsError::Corrupt { .. } => {
                return ApiError::internal(&e);
            }
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        let detail = e.to_string();
        let code = match e {
            AppError::Documents(inner) => return inner.into(),
            AppError::Pipeline(PipelineError::NotFound { name, .. }) => {
                // The searched directories are server paths: name only the pipeline.
                let shown: String = name.chars().take(64).collect();
                return ApiError::new(
                    ErrorCode::PipelineNotFound,
                    format!("Pipeline not found: {shown}"),
                );
            }
            AppError::Pipeline(
                PipelineError::Invalid { .. } | PipelineError::Unreadable { .. },
            ) => ErrorCode::InvalidPipeline,
            AppError::NotFound(_) => ErrorCode::NotFound,
            AppError::BadRequest(_) => ErrorCode::BadRequest,
            AppError::RunTerminal { .. } => ErrorCode::RunTerminal,
            AppError::RunNotFailed { .. } => ErrorCode::RunNotFailed,
            AppError::SchemaTooNew { .. } => ErrorCode::SchemaMismatch,
            AppError::Storage { .. } => {
                return ApiError::new(ErrorCode::ServiceUnavailable, "Storage is not available")
                    .with_cause(detail);
            }
            AppError::RunSubmission(_) => {
                return ApiError::new(ErrorCode::RunSubmissionFailed, "").with_cause(detail);
            }
            AppError::DatabaseCorrupt { .. } => return ApiError::database_corrupt(detail),
            AppError::InsufficientStorage { .. } => ErrorCode::InsufficientStorage,
            // Administration runs from the CLI only; the API never reaches these.
            AppError::Config(_) | AppError::Admin(_) | AppError::Internal(_) => {
                return ApiError::internal(detail);
            }
        };
        ApiError::new(code, detail)
    }
}

impl From<UploadError> for ApiError {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::TooLarge { .. } => ApiError::new(ErrorCode::UploadTooLarge, e.to_string()),
            UploadError::BatchTooLarge { .. } => {
                ApiError::new(ErrorCode::BatchTooLarge, e.to_string())
            }
            UploadError::InsufficientStorage(_) => {
                ApiError::new(ErrorCode::InsufficientStorage, e.to_string())
            }
            UploadError::Documents(inner) if inner.is_user_error() => inner.into(),
            UploadError::Documents(inner) if inner.code() == "database_corrupt" => {
                ApiError::database_corrupt(&inner)
            }
            // Extractor, storage and database text never reaches the client.
            UploadError::Documents(inner) => {
                ApiError::new(ErrorCode::IngestFailed, "").with_cause(&inner)
            }
        }
    }
}

impl From<NotReady> for ApiError {
    fn from(e: NotReady) -> Self {
        ApiError::new(ErrorCode::ServiceUnavailable, e.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_and_statuses_are_errors() {
        let mut seen = HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{} twice", code.as_str());
            assert!(code.status().is_client_error() || code.status().is_server_error());
        }
    }

    #[test]
    fn library_codes_agree_with_the_table() {
        let samples = [
            AppError::NotFound("x".into()),
            AppError::BadRequest("x".into()),
            AppError::RunTerminal {
                id: "r".into(),
                status: "succeeded".into(),
            },
            AppError::RunNotFailed {
                id: "r".into(),
                status: "queued".into(),
            },
            AppError::SchemaTooNew { unknown: vec![] },
            AppError::Storage { detail: "x".into() },
            AppError::DatabaseCorrupt { detail: "x".into() },
            AppError::InsufficientStorage { detail: "x".into() },
            AppError::RunSubmission("database error: database or disk is full".into()),
            AppError::Internal("database: (code: 13) database or disk is full".into()),
            AppError::Documents(DocumentsError::Io(std::io::Error::from_raw_os_error(28))),
            AppError::RunSubmission("x".into()),
            AppError::Internal("x".into()),
            AppError::Documents(DocumentsError::InvalidSearchWindow),
            AppError::Documents(DocumentsError::BinaryContent),
            AppError::Documents(DocumentsError::EmptyFile),
            AppError::Documents(DocumentsError::InvalidSearchQuery),
            AppError::Documents(DocumentsError::NoContent { id: "d".into() }),
            AppError::Documents(DocumentsError::InvalidPath { detail: "x".into() }),
            AppError::Documents(DocumentsError::InvalidTimestamp {
                field: "created_after",
                value: "x".into(),
            }),
            AppError::Pipeline(PipelineError::NotFound {
                name: "p".into(),
                searched: "/secret/dir".into(),
            }),
        ];
        for e in samples {
            let library = e.code();
            let api = ApiError::from(e);
            assert_eq!(api.code.as_str(), library);
            assert!(!format!("{:?}", api.body()).contains("/secret/dir"));
        }
    }

    #[test]
    fn internal_failures_show_no_internal_text() {
        let e = ApiError::from(AppError::Internal(
            "database: disk I/O error at /data".into(),
        ));
        let body = serde_json::to_value(e.body()).expect("json");
        assert_eq!(body["detail"], "Internal server error");
        assert_eq!(body["code"], "server_error");
        let upload = ApiError::from(UploadError::Documents(DocumentsError::Io(
            std::io::Error::other("extractor said: secret"),
        )));
        let body = serde_json::to_value(upload.body()).expect("json");
        assert_eq!(body["detail"], "Document ingest failed");
        assert_eq!(body["code"], "ingest_failed");
        assert!(upload.cause.is_some_and(|c| c.contains("secret")));
    }

    /// Every way a damaged database's error reaches the edge answers 503 `database_corrupt`,
    /// never 500, and shows no internal text.
    #[test]
    fn a_damaged_database_answers_503_database_corrupt() {
        let malformed = || {
            sea_orm::DbErr::Custom(
                "error returned from database: (code: 11) database disk image is malformed at /data"
                    .into(),
            )
        };
        let samples = [
            ApiError::from(DocumentsError::Db(malformed())),
            ApiError::from(AppError::from(malformed())),
            ApiError::from(AppError::Internal(format!("database: {}", malformed()))),
            ApiError::from(UploadError::Documents(DocumentsError::Db(
                sea_orm::DbErr::Custom(
                    "error returned from database: (26) file is not a database".into(),
                ),
            ))),
            ApiError::internal(
                "error returned from database: (code: 267) vtable constructor failed",
            ),
        ];
        for e in samples {
            assert_eq!(e.code, ErrorCode::DatabaseCorrupt, "{:?}", e.cause);
            assert_eq!(e.code.status(), StatusCode::SERVICE_UNAVAILABLE);
            let body = serde_json::to_value(e.body()).expect("json");
            assert_eq!(body["code"], "database_corrupt");
            assert!(!body.to_string().contains("/data"), "{body}");
        }
        // Other database errors stay 500 `server_error`.
        let busy = ApiError::internal("error returned from database: (code: 5) database is locked");
        assert_eq!(busy.code, ErrorCode::ServerError);
    }

    /// A full disk answers 507 `insufficient_storage` whichever error carried it to the edge
    /// (a delete's database write, an upload's staging write, a run submission), with a fixed
    /// detail and the cause kept for the log; a refusal below `SHELF_MIN_FREE_BYTES` keeps its
    /// own detail.
    #[test]
    fn a_full_disk_answers_507_insufficient_storage() {
        let full = || {
            sea_orm::DbErr::Custom(
                "error returned from database: (code: 13) database or disk is full".into(),
            )
        };
        let enospc = || std::io::Error::from_raw_os_error(28);
        let samples = [
            ApiError::from(DocumentsError::Db(full())),
            ApiError::from(DocumentsError::Io(enospc())),
            ApiError::from(AppError::from(full())),
            ApiError::from(AppError::RunSubmission(full().to_string())),
            ApiError::from(AppError::Storage {
                detail: enospc().to_string(),
            }),
            ApiError::from(UploadError::Documents(DocumentsError::Io(enospc()))),
            ApiError::internal(format!("writing /data/uploads/x: {}", enospc())),
        ];
        for e in samples {
            assert_eq!(e.code, ErrorCode::InsufficientStorage, "{:?}", e.cause);
            assert_eq!(e.code.status(), StatusCode::INSUFFICIENT_STORAGE);
            assert!(e.cause.is_some());
            let body = serde_json::to_value(e.body()).expect("json");
            assert_eq!(body["code"], "insufficient_storage");
            assert_eq!(body["detail"], DISK_FULL);
        }
        let refused = ApiError::from(UploadError::InsufficientStorage(
            shelf_app::disk::LowSpace {
                free: 1 << 20,
                floor: 8 << 20,
            },
        ));
        assert_eq!(refused.code, ErrorCode::InsufficientStorage);
        let body = serde_json::to_value(refused.body()).expect("json");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("SHELF_MIN_FREE_BYTES")),
            "{body}"
        );
        // A client's own words cannot turn a 400 into a 507.
        let bad = ApiError::new(ErrorCode::BadRequest, "x").with_cause("No space left on device");
        assert_eq!(bad.code, ErrorCode::BadRequest);
        assert_eq!(
            ErrorCode::for_status(StatusCode::INSUFFICIENT_STORAGE),
            ErrorCode::InsufficientStorage
        );
    }
}
