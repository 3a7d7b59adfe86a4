//! The JSON shapes of `/runs` beyond the run itself (the run and its stages are
//! [`shelf_app::RunView`] and [`shelf_app::StageView`], served as they are): lists, cancels
//! and the bodies that create runs.

use serde::{Deserialize, Serialize};
use shelf_app::RunView;
use utoipa::ToSchema;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<RunView>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
}

/// A cancel's result: the run, and whether it was canceled at once (`canceled`) or its worker
/// was asked to stop (`requested`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CancelOut {
    #[serde(flatten)]
    pub run: RunView,
    pub outcome: String,
}

/// How a new run is processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunProcessingMode {
    /// Queued for `shelf worker` (default).
    #[default]
    Queue,
    /// Processed by the API process in the background; released to the queue on shutdown.
    Process,
}

/// `POST /runs`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct CreateRun {
    pub document_id: String,
    /// Pipeline name (default `SHELF_PIPELINE`): 1 to 64 of `A-Za-z0-9_-` (otherwise
    /// `validation_error`); a well-formed name without a pipeline file is `pipeline_not_found`.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")]
    pub pipeline: Option<String>,
    #[serde(default)]
    pub processing_mode: Option<RunProcessingMode>,
}

/// A `pipeline` field as its schema declares it: 1 to 64 of `A-Za-z0-9_-` (the names pipeline
/// files can have), otherwise 422. A well-formed name may still name no file (400).
pub fn check_pipeline_name(name: Option<&str>) -> Result<(), crate::error::ApiError> {
    match name {
        Some(n)
            if n.is_empty()
                || n.len() > 64
                || !n
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') =>
        {
            Err(crate::error::ApiError::invalid(
                &["body", "pipeline"],
                "Input should be 1 to 64 letters, digits, '_' or '-'",
                "string_pattern_mismatch",
            ))
        }
        _ => Ok(()),
    }
}
