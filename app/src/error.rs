//! The application layer's error: every failure of a service call, with the stable code that
//! both front ends show (the HTTP status table lives in the server).

use shelf_documents::{DocumentsError, ErrorKind};
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
    #[error("run could not be submitted: {0}")]
    RunSubmission(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<sea_orm::DbErr> for AppError {
    fn from(e: sea_orm::DbErr) -> Self {
        AppError::Internal(format!("database: {e}"))
    }
}

impl From<EngineError> for AppError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Pipeline(p) => AppError::Pipeline(p),
            EngineError::RunNotFound(id) => AppError::NotFound(format!("Run not found: {id}")),
            EngineError::RunTerminal { id, status } => AppError::RunTerminal { id, status },
            EngineError::RunNotFailed { id, status } => AppError::RunNotFailed { id, status },
            other @ (EngineError::LeaseLost(_)
            | EngineError::Corrupt { .. }
            | EngineError::Db(_)) => AppError::Internal(other.to_string()),
        }
    }
}

impl AppError {
    /// The stable machine-readable code. Exhaustive, so a new variant cannot ship without one.
    pub fn code(&self) -> &'static str {
        match self {
            AppError::Config(_) => "invalid_configuration",
            AppError::Admin(e) => e.code(),
            AppError::Documents(e) => e.code(),
            AppError::Pipeline(PipelineError::NotFound { .. }) => "pipeline_not_found",
            AppError::Pipeline(
                PipelineError::Invalid { .. } | PipelineError::Unreadable { .. },
            ) => "invalid_pipeline",
            AppError::NotFound(_) => "not_found",
            AppError::BadRequest(_) => "bad_request",
            AppError::RunTerminal { .. } => "run_terminal",
            AppError::RunNotFailed { .. } => "run_not_failed",
            AppError::SchemaTooNew { .. } => "schema_mismatch",
            AppError::Storage { .. } => "service_unavailable",
            AppError::RunSubmission(_) => "run_submission_failed",
            AppError::Internal(_) => "server_error",
        }
    }

    /// Whether the message may be shown to a client as is. Internal errors are logged and
    /// answered with a generic message.
    pub fn is_user_error(&self) -> bool {
        match self {
            AppError::Documents(e) => e.kind() == ErrorKind::User,
            AppError::Internal(_)
            | AppError::Storage { .. }
            | AppError::RunSubmission(_)
            | AppError::Admin(_) => false,
            AppError::Config(_)
            | AppError::Pipeline(_)
            | AppError::NotFound(_)
            | AppError::BadRequest(_)
            | AppError::RunTerminal { .. }
            | AppError::RunNotFailed { .. }
            | AppError::SchemaTooNew { .. } => true,
        }
    }
}
