//! `/runs`: create (queued for a worker, or processed here in the background), list, get,
//! cancel and retry.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use shelf_app::{ProcessingMode, RunView};
use shelf_engine::store::CancelOutcome;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, ApiPath, ApiQuery, OptionalJson, page_limit, page_offset};
use crate::model::runs::{CancelOut, CreateRun, RunList, RunProcessingMode, check_pipeline_name};
use crate::policy::Policy;
use crate::routes::Resource;
use crate::state::AppState;

pub fn routes() -> Resource {
    Resource::new()
        .route(Policy::Write, routes!(create))
        .route(Policy::Read, routes!(list))
        .route(Policy::Read, routes!(get))
        .route(Policy::Write, routes!(cancel))
        .route(Policy::Write, routes!(retry))
}

/// Creates a queued run for a document; with `process`, this API process then executes it in
/// the background, detached from the request. On shutdown that execution stops and the run
/// goes back to the queue with its checkpoints, where only a worker takes it up again: `shelf
/// worker`, or an API started with `--workers N`. An API without workers never resumes a run.
pub async fn start_run(
    state: &AppState,
    document_id: &str,
    pipeline: Option<&str>,
    mode: RunProcessingMode,
) -> Result<RunView, ApiError> {
    let run = state
        .shelf
        .process(document_id, pipeline, ProcessingMode::Queue)
        .await?
        .ok_or_else(|| ApiError::internal("queue mode created no run"))?;
    if mode == RunProcessingMode::Process {
        process_in_background(state, run.id.clone());
    }
    match state.shelf.run_view(&run.id).await {
        Ok(view) => Ok(view),
        // The run was created, then its document deleted (which removes its runs) before it
        // was read back: it did exist, so the answer is still the new run, as created.
        Err(shelf_app::AppError::NotFound(_)) => Ok(RunView::summary(&run, Vec::new())),
        Err(e) => Err(e.into()),
    }
}

fn process_in_background(state: &AppState, run_id: String) {
    if state.shutdown.is_cancelled() {
        // Shutting down: leave the run queued for a worker.
        return;
    }
    let shelf = state.shelf.clone();
    let shutdown = state.shutdown.clone();
    state.tasks.spawn(async move {
        match shelf.run_here_until(&run_id, shutdown).await {
            Ok(run) => tracing::info!(run_id = %run.id, status = run.status.as_str(), "in-process run stopped"),
            Err(e) => tracing::error!(run_id = %run_id, error = %e, "in-process run failed"),
        }
    });
}

/// Create a run
///
/// `processing_mode`: `queue` (default) leaves the run to a worker (`shelf worker`, or an API
/// started with `--workers N`; `GET /queue` warns when none claims it); `process` executes it
/// in this API process in the background, detached from the request. Either way the response
/// is the new run.
#[utoipa::path(
    post, path = "/runs", operation_id = "create_run", tag = "runs",
    request_body = CreateRun,
    responses(
        (status = 201, body = RunView),
        (status = 404, description = "Unknown document, also one deleted while the run was being created (nothing is written)", body = ErrorBody),
        (status = 400, description = "`pipeline_not_found` (a well-formed name without a pipeline file), `invalid_pipeline`", body = ErrorBody),
        (status = 503, description = "`run_submission_failed`", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateRun>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    check_pipeline_name(body.pipeline.as_deref())?;
    let run = start_run(
        &state,
        &body.document_id,
        body.pipeline.as_deref(),
        body.processing_mode.unwrap_or_default(),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(run)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunsQuery {
    /// Default 100, at most 1000.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// Default 0.
    #[param(minimum = 0, maximum = 9_007_199_254_740_991_u64)]
    pub offset: Option<u64>,
    /// Only the runs of this document.
    pub document_id: Option<String>,
}

/// List runs
///
/// Newest first, without their stages.
#[utoipa::path(
    get, path = "/runs", operation_id = "list_runs", tag = "runs", params(RunsQuery),
    responses((status = 200, body = RunList))
)]
pub async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RunsQuery>,
) -> Result<Json<RunList>, ApiError> {
    let limit = page_limit("limit", q.limit, 100, 1000)?;
    let offset = page_offset(&["query", "offset"], q.offset)?;
    let document = q.document_id.as_deref().filter(|d| !d.is_empty());
    let (runs, total) = state.shelf.list_runs(document, limit, offset).await?;
    Ok(Json(RunList {
        runs,
        total,
        limit,
        offset,
    }))
}

/// Get a run
///
/// With its stages and chunk progress.
#[utoipa::path(
    get, path = "/runs/{id}", operation_id = "get_run", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = RunView), (status = 404, body = ErrorBody))
)]
pub async fn get(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RunView>, ApiError> {
    Ok(Json(state.shelf.run_view(&id).await?))
}

/// Cancel a run
///
/// A queued run is canceled at once (`outcome: canceled`); a running one is flagged and its
/// worker stops it (`outcome: requested`). A terminal run answers `run_terminal`.
#[utoipa::path(
    post, path = "/runs/{id}/cancel", operation_id = "cancel_run", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses(
        (status = 200, body = CancelOut),
        (status = 400, description = "`run_terminal`", body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<CancelOut>, ApiError> {
    let (outcome, _) = state.shelf.cancel(&id).await?;
    let outcome = match outcome {
        CancelOutcome::Canceled => "canceled",
        CancelOutcome::Requested => "requested",
    };
    tracing::info!(run_id = %id, outcome, "run_cancel");
    Ok(Json(CancelOut {
        run: state.shelf.run_view(&id).await?,
        outcome: outcome.to_string(),
    }))
}

/// `POST /runs/{id}/retry` (the body is optional).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct RetryIn {
    #[serde(default)]
    pub processing_mode: Option<RunProcessingMode>,
}

/// Retry a failed run
///
/// A new run replays the failed one on the same pipeline snapshot, reusing the checkpoints of
/// its succeeded stages. Any other status answers `run_not_failed`.
#[utoipa::path(
    post, path = "/runs/{id}/retry", operation_id = "retry_run", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    request_body(content = Option<RetryIn>, content_type = "application/json"),
    responses(
        (status = 201, body = RunView),
        (status = 400, description = "`run_not_failed`", body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn retry(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    OptionalJson(body): OptionalJson<RetryIn>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    let run = state.shelf.retry(&id).await?;
    if body.and_then(|b| b.processing_mode) == Some(RunProcessingMode::Process) {
        process_in_background(&state, run.id.clone());
    }
    Ok((
        StatusCode::CREATED,
        Json(state.shelf.run_view(&run.id).await?),
    ))
}
