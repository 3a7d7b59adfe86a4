//! The engine's error type. Callers map each variant to a stable code at their edge.

use crate::pipeline::PipelineError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error("run {0} not found")]
    RunNotFound(String),
    #[error("run {id} is already {status}; terminal runs never change")]
    RunTerminal { id: String, status: String },
    #[error("run {id} is {status}, only failed runs can be retried")]
    RunNotFailed { id: String, status: String },
    /// The worker's lease token no longer matches: another worker owns the run now.
    #[error("lease on run {0} was lost")]
    LeaseLost(String),
    #[error("stored run {id} is corrupt: {detail}")]
    Corrupt { id: String, detail: String },
    #[error("database error: {0}")]
    Db(#[from] sea_orm::DbErr),
}
