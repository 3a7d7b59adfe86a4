//! The one table of the API's error codes, each stated once with its HTTP status and what it
//! means; it lives here because `documents` is the lowest crate whose errors carry these codes
//! (`app` and `server` sit above it, the engine's errors are mapped by `app`).
//!
//! [`make_error_codes!`] generates from the table the [`ErrorCode`] enum, its code string
//! ([`ErrorCode::as_str`]), its status ([`ErrorCode::status`]) and [`ErrorCode::ALL`], so a
//! code cannot exist without a status nor be missing from `ALL`. The library errors map their
//! variants to these codes (`DocumentsError::error_code`, `AppError::error_code`, ...) and the
//! server answers with them; docs/errors.md lists exactly these codes (a test of the server
//! checks it). Codes only the command line prints (administration, `invalid_configuration`)
//! are not HTTP codes and stay with their errors.
//!
//! The status is a bare number ([`HttpStatus`]) so that this domain crate does not depend on
//! an HTTP library; the server turns it into its framework's status.

use std::fmt;

/// An HTTP status of the table, as a number (the server converts it to its framework's type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HttpStatus(u16);

impl HttpStatus {
    pub const fn as_u16(self) -> u16 {
        self.0
    }

    /// 4xx.
    pub const fn is_client_error(self) -> bool {
        self.0 >= 400 && self.0 < 500
    }

    /// 5xx.
    pub const fn is_server_error(self) -> bool {
        self.0 >= 500 && self.0 < 600
    }
}

/// Declares every code once: `Variant = "code", status;`, with its doc line. In the style of
/// meilisearch's `make_error_codes!`: the enum, its strings, statuses and `ALL` come from the
/// same lines, so none of them is kept by hand.
macro_rules! make_error_codes {
    ($($(#[doc = $doc:literal])+ $variant:ident = $code:literal, $status:literal;)+) => {
        /// Every code the API answers with. Codes are API: never renamed, never reused.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[doc = $doc])+ $variant,)+
        }

        /// How many codes the table has (the length of [`ErrorCode::ALL`]).
        const COUNT: usize = [$($code),+].len();

        impl ErrorCode {
            /// Every code, in the table's order (the docs test, the OpenAPI description).
            pub const ALL: [ErrorCode; COUNT] = [$(ErrorCode::$variant),+];

            /// The machine-readable code of the `{detail, code}` body.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)+
                }
            }

            /// The HTTP status every answer with this code has.
            pub const fn status(self) -> HttpStatus {
                match self {
                    $(ErrorCode::$variant => HttpStatus($status),)+
                }
            }
        }
    };
}

make_error_codes! {
    /// No credential, or one that matches no configured key.
    InvalidApiKey = "invalid_api_key", 401;
    /// A read-scope key on a write route.
    InsufficientScope = "insufficient_scope", 403;
    /// A browser request authenticated by its session cookie that changes something came
    /// without an `Origin` of this server (cross-site request forgery is refused).
    CrossOriginRequest = "cross_origin_request", 403;
    /// Unknown document, run or route; a document without cleaned output yet.
    NotFound = "not_found", 404;
    /// The route exists with other methods.
    MethodNotAllowed = "method_not_allowed", 405;
    /// The body is over `SHELF_API_MAX_REQUEST_BYTES`, or a JSON body over 1 MiB.
    RequestTooLarge = "request_too_large", 413;
    /// One upload is over `SHELF_API_MAX_UPLOAD_BYTES`.
    UploadTooLarge = "upload_too_large", 413;
    /// A batch over `SHELF_API_MAX_BATCH_FILES` or `SHELF_API_MAX_BATCH_BYTES`.
    BatchTooLarge = "batch_too_large", 413;
    /// A directory import over `SHELF_API_MAX_IMPORT_FILES` or `SHELF_API_MAX_IMPORT_BYTES`.
    ImportTooLarge = "import_too_large", 413;
    /// An import manifest over `SHELF_API_MAX_IMPORT_MANIFEST_BYTES`.
    ImportManifestTooLarge = "import_manifest_too_large", 413;
    /// An extension Shelf does not read, or binary bytes in a text file.
    UnsupportedFileType = "unsupported_file_type", 400;
    /// An archive or container file.
    ArchiveNotSupported = "archive_not_supported", 400;
    /// A file of 0 bytes.
    EmptyFile = "empty_file", 400;
    /// A refused path: symlinked boundary, outside the import root, imports disabled.
    InvalidImportPath = "invalid_import_path", 400;
    /// An import `manifest_path` that breaks the path rules or is not an import report.
    InvalidManifestPath = "invalid_manifest_path", 400;
    /// The `new-directory` `output_dir` breaks the path rules.
    InvalidOutputDir = "invalid_output_dir", 400;
    /// A malformed request that no more specific code names.
    BadRequest = "bad_request", 400;
    /// `created_after` is later than `created_before`.
    InvalidSearchWindow = "invalid_search_window", 400;
    /// A search query over 4,096 characters.
    SearchQueryTooLarge = "search_query_too_large", 400;
    /// Nothing searchable is left after normalization.
    InvalidSearchQuery = "invalid_search_query", 400;
    /// `scope` is not `cleaned` or `raw`.
    InvalidSearchScope = "invalid_search_scope", 400;
    /// `mode` is not `keyword`, `semantic` or `hybrid`.
    InvalidSearchMode = "invalid_search_mode", 400;
    /// `document_status` is not one of the document states.
    InvalidDocumentStatus = "invalid_document_status", 400;
    /// Cancel of a run that already ended.
    RunTerminal = "run_terminal", 400;
    /// Retry of a run that is not `failed`.
    RunNotFailed = "run_not_failed", 400;
    /// A well-formed pipeline name that names no pipeline file.
    PipelineNotFound = "pipeline_not_found", 400;
    /// A pipeline file that does not parse or validate.
    InvalidPipeline = "invalid_pipeline", 400;
    /// A document's stored source is missing or changed size.
    SourceChanged = "source_changed", 409;
    /// The body, query or a header does not fit; `detail` lists `{loc, msg, type}`.
    ValidationError = "validation_error", 422;
    /// The identity's request window is used up.
    RateLimited = "rate_limited", 429;
    /// The client already holds `SHELF_API_MAX_STREAMS_PER_CLIENT` event streams.
    TooManyStreams = "too_many_streams", 429;
    /// An upload failed for an internal reason (detail fixed, cause logged).
    IngestFailed = "ingest_failed", 400;
    /// The run could not be written to the queue.
    RunSubmissionFailed = "run_submission_failed", 503;
    /// Not ready, or storage unavailable.
    ServiceUnavailable = "service_unavailable", 503;
    /// A semantic or hybrid search, or similar documents, without an embedding model
    /// configured.
    EmbeddingUnavailable = "embedding_unavailable", 503;
    /// The database was written by a newer Shelf.
    SchemaMismatch = "schema_mismatch", 503;
    /// The database is damaged; the operator restores a backup.
    DatabaseCorrupt = "database_corrupt", 503;
    /// Free space below `SHELF_MIN_FREE_BYTES`, or a write met a full disk.
    InsufficientStorage = "insufficient_storage", 507;
    /// Anything unexpected (detail fixed, cause logged).
    ServerError = "server_error", 500;
}

impl ErrorCode {
    /// The code a bare status stands for, when something other than the server's own error
    /// produced an error response (the framework's 405, a layer's 413, ...). Several codes
    /// share a status, so this picks the generic one of each.
    pub fn for_status(status: u16) -> ErrorCode {
        match status {
            401 => ErrorCode::InvalidApiKey,
            403 => ErrorCode::InsufficientScope,
            404 => ErrorCode::NotFound,
            405 => ErrorCode::MethodNotAllowed,
            413 => ErrorCode::RequestTooLarge,
            415 | 422 => ErrorCode::ValidationError,
            429 => ErrorCode::RateLimited,
            507 => ErrorCode::InsufficientStorage,
            503 => ErrorCode::ServiceUnavailable,
            500..=599 => ErrorCode::ServerError,
            _ => ErrorCode::BadRequest,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn error_codes_are_unique_snake_case_and_statuses_are_errors() {
        let mut seen = HashSet::new();
        for code in ErrorCode::ALL {
            let text = code.as_str();
            assert!(seen.insert(text), "{text} twice");
            assert!(
                text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{text}"
            );
            assert!(code.status().is_client_error() || code.status().is_server_error());
        }
    }

    #[test]
    fn error_code_for_a_status_has_that_status() {
        // 409 is left out: its one code, `source_changed`, is never a bare status's.
        for code in ErrorCode::ALL
            .into_iter()
            .filter(|c| c.status().as_u16() != 409)
        {
            let status = code.status().as_u16();
            assert_eq!(ErrorCode::for_status(status).status().as_u16(), status);
        }
        assert_eq!(ErrorCode::for_status(409), ErrorCode::BadRequest);
        assert_eq!(ErrorCode::for_status(415), ErrorCode::ValidationError);
        assert_eq!(ErrorCode::for_status(502), ErrorCode::ServerError);
        assert_eq!(ErrorCode::for_status(418), ErrorCode::BadRequest);
    }
}
