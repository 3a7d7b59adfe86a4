//! The engine's error type. Callers map each variant to a stable code at their edge.

use crate::pipeline::PipelineError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error("run {0} not found")]
    RunNotFound(String),
    /// A run was to be created for a subject that is gone (see `SubjectGuard`): nothing was
    /// written.
    #[error("subject {0} not found")]
    SubjectNotFound(String),
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
    Db(#[source] sea_orm::DbErr),
}

impl From<sea_orm::DbErr> for EngineError {
    /// The first corrupt error of the process latches its damage (`db::note_if_corrupt`).
    fn from(e: sea_orm::DbErr) -> Self {
        shelf_db::note_if_corrupt(&e);
        EngineError::Db(e)
    }
}
