//! [`ApiError`], the body `{detail, code}` every failure answers with, and how library errors
//! become one. The codes and their HTTP statuses are not decided here: they are the table of
//! `shelf_documents::codes` ([`ErrorCode`], re-exported), and each library error names its own
//! code (`error_code()`); this module only chooses what the client is shown (its own words, or
//! a fixed detail with the cause kept for the log).
//! A 5xx never carries internal text: the cause rides in a response extension that the logging
//! middleware writes once, then drops.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use shelf_app::AppError;
use shelf_app::readiness::NotReady;
use shelf_app::uploads::UploadError;
use shelf_documents::DocumentsError;
pub use shelf_documents::ErrorCode;
use shelf_engine::PipelineError;
use utoipa::ToSchema;

/// The table's status of `code` as the framework's type.
pub fn http_status(code: ErrorCode) -> StatusCode {
    // Every status of the table is a valid one (`codes` tests that each is 4xx or 5xx).
    StatusCode::from_u16(code.status().as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The detail every response with this code shows, whatever the cause: these codes never
/// show internal text.
fn fixed_detail(code: ErrorCode) -> Option<&'static str> {
    match code {
        ErrorCode::ServerError => Some("Internal server error"),
        ErrorCode::DatabaseCorrupt => {
            Some("The database is damaged; the operator must restore it from a backup")
        }
        ErrorCode::IngestFailed => Some("Document ingest failed"),
        ErrorCode::RunSubmissionFailed => Some("Run could not be submitted; try again later"),
        _ => None,
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
pub const DISK_FULL: &str = shelf_db::STORAGE_FULL_DETAIL;

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
        if shelf_db::is_corrupt_text(&cause) {
            return Self::database_corrupt(cause);
        }
        Self::new(ErrorCode::ServerError, "").with_cause(cause)
    }

    /// `database_corrupt`: the database is damaged (the error that said so has latched the
    /// damage where it was met, `shelf_db::note_if_corrupt`, which logs the recovery
    /// steps once and stops this process's writes).
    pub fn database_corrupt(cause: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::DatabaseCorrupt, "").with_cause(cause)
    }

    /// A failure whose text must not reach the client, under the code its library gave it;
    /// the cause is kept for the log only.
    pub fn hidden(code: ErrorCode, cause: impl std::fmt::Display) -> Self {
        match code {
            ErrorCode::ServerError => Self::internal(cause),
            ErrorCode::DatabaseCorrupt => Self::database_corrupt(cause),
            // A write that met a full disk.
            ErrorCode::InsufficientStorage => Self::new(code, DISK_FULL).with_cause(cause),
            ErrorCode::ServiceUnavailable => {
                Self::new(code, "Storage is not available").with_cause(cause)
            }
            // `ingest_failed`, `run_submission_failed`: a fixed detail.
            _ => Self::new(code, "").with_cause(cause),
        }
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
    /// fix, not an internal error. One caused by a write that gave up on another process's
    /// lock (`SQLITE_BUSY` past the busy timeout: a backup holding the database) becomes 503
    /// `service_unavailable` with `Retry-After`: it passes by itself.
    pub fn with_cause(mut self, cause: impl std::fmt::Display) -> Self {
        let cause = cause.to_string();
        let generic = matches!(
            self.code,
            ErrorCode::ServerError
                | ErrorCode::IngestFailed
                | ErrorCode::RunSubmissionFailed
                | ErrorCode::ServiceUnavailable
        );
        if generic && shelf_db::is_storage_full_text(&cause) {
            self.code = ErrorCode::InsufficientStorage;
            self.detail = ErrorDetail::Message(DISK_FULL.to_string());
        } else if generic && shelf_db::is_busy_text(&cause) {
            self.code = ErrorCode::ServiceUnavailable;
            self.detail = ErrorDetail::Message(shelf_db::BUSY_DETAIL.to_string());
            self.retry_after = Some(shelf_db::BUSY_TIMEOUT.as_secs().max(1));
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
        let detail = match fixed_detail(self.code) {
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
        let mut response = (http_status(self.code), axum::Json(self.body())).into_response();
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
        match &e {
            _ if !e.is_user_error() => ApiError::internal(&e),
            // The one user error shown as a validation issue, naming its field.
            DocumentsError::InvalidTimestamp { field, .. } => {
                ApiError::invalid(&["body", field], e.to_string(), "value_error")
            }
            _ => ApiError::new(e.error_code(), e.to_string()),
        }
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        let code = e.error_code();
        match e {
            AppError::Documents(inner) => inner.into(),
            AppError::Pipeline(PipelineError::NotFound { name, .. }) => {
                // The searched directories are server paths: name only the pipeline.
                let shown: String = name.chars().take(64).collect();
                ApiError::new(code, format!("Pipeline not found: {shown}"))
            }
            // Configuration errors are the user's at the command line, not over HTTP (their
            // table code is `server_error`).
            e if e.is_user_error() && code != ErrorCode::ServerError => {
                ApiError::new(code, e.to_string())
            }
            e => ApiError::hidden(code, e),
        }
    }
}

impl From<UploadError> for ApiError {
    fn from(e: UploadError) -> Self {
        let code = e.error_code();
        match e {
            UploadError::Documents(inner) if inner.is_user_error() => inner.into(),
            // Extractor, storage and database text never reaches the client.
            UploadError::Documents(inner) => ApiError::hidden(code, inner),
            other => ApiError::new(code, other.to_string()),
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
    use shelf_app::imports::ImportError;

    /// A backup holding the database past the busy timeout: 503 with `Retry-After` and a
    /// detail that says what happened, however the error arrived; the driver's text stays in
    /// the log.
    #[test]
    fn a_write_that_gave_up_on_a_held_lock_answers_503_with_retry_after() {
        let locked = "error returned from database: (code: 5) database is locked";
        for api in [
            ApiError::from(AppError::Internal(format!("database: {locked}"))),
            ApiError::from(DocumentsError::Db(sea_orm::DbErr::Custom(locked.into()))),
            ApiError::hidden(ErrorCode::IngestFailed, locked),
        ] {
            assert_eq!(api.code, ErrorCode::ServiceUnavailable);
            assert_eq!(api.retry_after, Some(shelf_db::BUSY_TIMEOUT.as_secs()));
            let body = format!("{:?}", api.body());
            assert!(body.contains("The database is busy"), "{body}");
            assert!(!body.contains("code: 5"), "{body}");
            let response = api.into_response();
            assert_eq!(
                response.status(),
                axum::http::StatusCode::SERVICE_UNAVAILABLE
            );
            assert_eq!(response.headers()[header::RETRY_AFTER], "5");
        }
    }

    /// The server answers with the code each library error names (`error_code()`), which is
    /// also what the CLI prints (`code()`).
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
            AppError::Internal("database: (code: 5) database is locked".into()),
            AppError::Documents(DocumentsError::Db(sea_orm::DbErr::Custom(
                "(code: 5) database is locked".into(),
            ))),
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
        // `routes/imports.rs` answers imports' errors with the same codes.
        let imports = [
            ImportError::NoImportRoot,
            ImportError::Invalid {
                field: "format",
                detail: "x".into(),
            },
            ImportError::InvalidManifestPath("x".into()),
            ImportError::InvalidOutputDir("x".into()),
            ImportError::TooLarge("x".into()),
            ImportError::ManifestTooLarge { max: 1 },
            ImportError::Io(std::io::Error::from_raw_os_error(28)),
            ImportError::Io(std::io::Error::other("x")),
            ImportError::App(AppError::BadRequest("x".into())),
        ];
        for e in imports {
            let library = e.error_code();
            assert_eq!(library.as_str(), e.code());
            assert_eq!(ApiError::from(e).code, library);
        }
        // Administration errors keep their command-line code for the CLI; over HTTP (which
        // never meets them) they are internal.
        let admin = AppError::Admin(shelf_app::admin::AdminError::Db("at /data".into()));
        assert_eq!(admin.code(), "database_error");
        let api = ApiError::from(admin);
        assert_eq!(api.code, ErrorCode::ServerError);
        assert_eq!(http_status(api.code), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            serde_json::to_value(api.body()).expect("json")["detail"],
            "Internal server error"
        );
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
            assert_eq!(http_status(e.code), StatusCode::SERVICE_UNAVAILABLE);
            let body = serde_json::to_value(e.body()).expect("json");
            assert_eq!(body["code"], "database_corrupt");
            assert!(!body.to_string().contains("/data"), "{body}");
        }
        // Other database errors stay 500 `server_error` (a busy one is 503 with `Retry-After`,
        // `a_write_that_gave_up_on_a_held_lock_answers_503_with_retry_after`).
        let other = ApiError::internal("error returned from database: (code: 1) no such table: x");
        assert_eq!(other.code, ErrorCode::ServerError);
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
            assert_eq!(http_status(e.code), StatusCode::INSUFFICIENT_STORAGE);
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
            ErrorCode::for_status(StatusCode::INSUFFICIENT_STORAGE.as_u16()),
            ErrorCode::InsufficientStorage
        );
    }
}
