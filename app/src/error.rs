//! The application layer's error: every failure of a service call, with the stable code that
//! both front ends show (a code of the one table, `shelf_documents::codes`).

use shelf_documents::{DocumentsError, ErrorCode, ErrorKind};
use shelf_engine::{EngineError, PipelineError};

use crate::admin::AdminError;
use crate::settings::ConfigError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Database and workspace administration (`shelf admin db-*`, `workspace-*`).
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error(transparent)]
    Documents(#[from] DocumentsError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("run {id} is already {status}; terminal runs never change")]
    RunTerminal { id: String, status: String },
    #[error("run {id} is {status}; only failed runs can be retried")]
    RunNotFailed { id: String, status: String },
    #[error("the database was written by a newer shelf (unknown migrations: {}); upgrade shelf", .unknown.join(", "))]
    SchemaTooNew { unknown: Vec<String> },
    #[error("storage problem: {detail}")]
    Storage { detail: String },
    /// SQLite reported `SQLITE_CORRUPT` or `SQLITE_NOTADB` (PostgreSQL `XX001`/`XX002`), or
    /// refused a write after that: the process writes nothing more (`db::mark_damaged`).
    #[error(
        "the database is damaged ({detail}); restore the last backup: `shelf admin db-restore FILE --yes` (docs/operations.md, Backup and restore)"
    )]
    DatabaseCorrupt { detail: String },
    /// A volume Shelf writes to is below `SHELF_MIN_FREE_BYTES`: new work (uploads, imports)
    /// is refused before it starts. (A write that met a full disk keeps its own variant; its
    /// code is `insufficient_storage` all the same.)
    #[error("Insufficient storage: {detail}")]
    InsufficientStorage { detail: String },
    #[error("run could not be submitted: {0}")]
    RunSubmission(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<sea_orm::DbErr> for AppError {
    fn from(e: sea_orm::DbErr) -> Self {
        if shelf_db::note_if_corrupt(&e) {
            return AppError::DatabaseCorrupt {
                detail: e.to_string(),
            };
        }
        AppError::Internal(format!("database: {e}"))
    }
}

impl From<crate::disk::LowSpace> for AppError {
    fn from(low: crate::disk::LowSpace) -> Self {
        AppError::InsufficientStorage {
            detail: format!("{low}; nothing was stored. Retry once space is freed"),
        }
    }
}

impl From<EngineError> for AppError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Pipeline(p) => AppError::Pipeline(p),
            EngineError::RunNotFound(id) => AppError::NotFound(format!("Run not found: {id}")),
            // Shelf's runs are of documents (see `DocumentHooks::subject_guard`).
            EngineError::SubjectNotFound(id) => {
                AppError::Documents(DocumentsError::NotFound { id })
            }
            EngineError::RunTerminal { id, status } => AppError::RunTerminal { id, status },
            EngineError::RunNotFailed { id, status } => AppError::RunNotFailed { id, status },
            EngineError::Db(e) if shelf_db::note_if_corrupt(&e) => AppError::DatabaseCorrupt {
                detail: e.to_string(),
            },
            other @ (EngineError::LeaseLost(_)
            | EngineError::Corrupt { .. }
            | EngineError::Db(_)) => AppError::Internal(other.to_string()),
        }
    }
}

impl AppError {
    /// The code of the table (`shelf_documents::codes`) this error answers with over HTTP.
    /// Exhaustive, so a new variant cannot ship without one. Configuration and administration
    /// errors stop commands and never reach the API: their table code is `server_error`, and
    /// [`code`](Self::code) shows their own command-line codes.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            AppError::Config(_) | AppError::Admin(_) => ErrorCode::ServerError,
            // A write that met a full disk (`ENOSPC`, `SQLITE_FULL`), known by its words once
            // it is text: the operator's to fix, not an internal error.
            AppError::Internal(text)
            | AppError::RunSubmission(text)
            | AppError::Storage { detail: text }
                if shelf_db::is_storage_full_text(text) =>
            {
                ErrorCode::InsufficientStorage
            }
            // A write that gave up on another process's lock (`SQLITE_BUSY` past the busy
            // timeout): passing, not internal.
            AppError::Internal(text)
            | AppError::RunSubmission(text)
            | AppError::Storage { detail: text }
                if shelf_db::is_busy_text(text) =>
            {
                ErrorCode::ServiceUnavailable
            }
            AppError::Documents(e)
                if e.error_code() == ErrorCode::ServerError
                    && shelf_db::is_busy_text(&e.to_string()) =>
            {
                ErrorCode::ServiceUnavailable
            }
            AppError::Documents(e) => e.error_code(),
            AppError::Pipeline(PipelineError::NotFound { .. }) => ErrorCode::PipelineNotFound,
            AppError::Pipeline(
                PipelineError::Invalid { .. } | PipelineError::Unreadable { .. },
            ) => ErrorCode::InvalidPipeline,
            AppError::NotFound(_) => ErrorCode::NotFound,
            AppError::BadRequest(_) => ErrorCode::BadRequest,
            AppError::RunTerminal { .. } => ErrorCode::RunTerminal,
            AppError::RunNotFailed { .. } => ErrorCode::RunNotFailed,
            AppError::SchemaTooNew { .. } => ErrorCode::SchemaMismatch,
            AppError::Storage { .. } => ErrorCode::ServiceUnavailable,
            AppError::DatabaseCorrupt { .. } => ErrorCode::DatabaseCorrupt,
            // A damaged database's error that reached here as text only.
            AppError::Internal(text) if shelf_db::is_corrupt_text(text) => {
                ErrorCode::DatabaseCorrupt
            }
            AppError::InsufficientStorage { .. } => ErrorCode::InsufficientStorage,
            AppError::RunSubmission(_) => ErrorCode::RunSubmissionFailed,
            AppError::Internal(_) => ErrorCode::ServerError,
        }
    }

    /// The code the CLI prints (`--json`) and exits by: the table's, except for the two
    /// families only commands meet (`invalid_configuration`, the administration codes).
    pub fn code(&self) -> &'static str {
        match self {
            AppError::Config(_) => "invalid_configuration",
            AppError::Admin(e) => e.code(),
            other => other.error_code().as_str(),
        }
    }

    /// Whether the message may be shown to a client as is. Internal errors are logged and
    /// answered with a generic message.
    pub fn is_user_error(&self) -> bool {
        match self {
            AppError::Documents(e) => e.kind() == ErrorKind::User,
            AppError::Internal(_)
            | AppError::Storage { .. }
            | AppError::DatabaseCorrupt { .. }
            | AppError::RunSubmission(_)
            | AppError::Admin(_) => false,
            AppError::Config(_)
            | AppError::Pipeline(_)
            | AppError::NotFound(_)
            | AppError::BadRequest(_)
            | AppError::RunTerminal { .. }
            | AppError::RunNotFailed { .. }
            | AppError::SchemaTooNew { .. }
            | AppError::InsufficientStorage { .. } => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_insufficient_storage_however_it_arrives() {
        let refused = AppError::from(crate::disk::LowSpace {
            free: 1 << 20,
            floor: 8 << 20,
        });
        assert_eq!(refused.code(), "insufficient_storage");
        assert!(refused.is_user_error());
        assert!(
            refused
                .to_string()
                .starts_with("Insufficient storage: 1.0 MiB free"),
            "{refused}"
        );
        let full_db = AppError::from(sea_orm::DbErr::Custom(
            "error returned from database: (code: 13) database or disk is full".into(),
        ));
        assert_eq!(full_db.code(), "insufficient_storage");
        assert!(!full_db.is_user_error(), "its text stays in the log");
        let enospc = AppError::Documents(DocumentsError::Io(std::io::Error::from_raw_os_error(28)));
        assert_eq!(enospc.code(), "insufficient_storage");
        let submission = AppError::RunSubmission("database error: database or disk is full".into());
        assert_eq!(submission.code(), "insufficient_storage");
        assert_eq!(
            AppError::RunSubmission("pool timed out".into()).code(),
            "run_submission_failed"
        );
        assert_eq!(AppError::Internal("boom".into()).code(), "server_error");
    }

    #[test]
    fn a_write_that_gave_up_on_a_held_lock_is_service_unavailable() {
        let locked = "error returned from database: (code: 5) database is locked";
        let busy = AppError::from(sea_orm::DbErr::Custom(locked.into()));
        assert_eq!(busy.code(), "service_unavailable");
        assert!(!busy.is_user_error(), "its text stays in the log");
        let documents =
            AppError::Documents(DocumentsError::Db(sea_orm::DbErr::Custom(locked.into())));
        assert_eq!(documents.code(), "service_unavailable");
        assert_eq!(
            AppError::RunSubmission(format!("database error: {locked}")).code(),
            "service_unavailable"
        );
        // A user's error never turns into another code by what its text says.
        let named = AppError::Documents(DocumentsError::NotFound {
            id: "database is locked".into(),
        });
        assert_eq!(named.code(), "not_found");
    }
}
