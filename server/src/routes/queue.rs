//! `/queue`: the queue's counts, the age of its oldest waiting run and its latest claim, so
//! that runs queued with nothing to take them are visible (`/ready` says nothing of workers).

use axum::Json;
use axum::extract::State;
use shelf_app::QueueReport;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::policy::Policy;
use crate::routes::Resource;
use crate::state::AppState;

pub fn routes() -> Resource {
    Resource::new().route(Policy::Read, routes!(get))
}

/// Queue health
///
/// Queued, due and running runs, expired leases, how long the oldest due run has waited, and
/// when any worker last claimed a run. `warning` is set when runs have been due for over 60 s
/// and nothing claimed a run in that time: start `shelf worker`, or `shelf api --workers N`.
/// The counts cover the whole database, whichever API process answers.
#[utoipa::path(
    get, path = "/queue", operation_id = "get_queue", tag = "runs",
    responses((status = 200, body = QueueReport))
)]
pub async fn get(State(state): State<AppState>) -> Result<Json<QueueReport>, ApiError> {
    Ok(Json(state.shelf.queue_report().await?))
}
