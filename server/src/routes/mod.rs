//! The routes of the API, one module per resource.

pub mod documents;
pub mod events;
pub mod imports;
pub mod okf;
pub mod queue;
pub mod runs;
pub mod search;
pub mod service;

use axum::Router;
use axum::routing::{get, post};

use crate::metrics;
use crate::middleware::not_found;
use crate::state::AppState;

/// Every route. Unknown paths answer `not_found`, known paths with another method
/// `method_not_allowed` (the error middleware gives that one its JSON body).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/documents", post(documents::upload).get(documents::list))
        .route("/documents/batch", post(documents::batch))
        .route(
            "/documents/{id}",
            get(documents::get).delete(documents::delete),
        )
        .route("/documents/{id}/reprocess", post(documents::reprocess))
        .route("/documents/{id}/content", get(documents::content))
        .route("/documents/{id}/pages", get(documents::pages))
        .route("/documents/{id}/okf", get(okf::concept))
        .route("/export/okf", get(okf::bundle))
        .route("/documents/{id}/export", get(documents::export))
        .route("/runs", post(runs::create).get(runs::list))
        .route("/runs/{id}", get(runs::get))
        .route("/runs/{id}/cancel", post(runs::cancel))
        .route("/runs/{id}/retry", post(runs::retry))
        .route("/queue", get(queue::get))
        .route("/runs/{id}/events", get(events::lines))
        .route("/runs/{id}/events/records", get(events::records))
        .route("/runs/{id}/events/stream", get(events::stream_lines))
        .route(
            "/runs/{id}/events/records/stream",
            get(events::stream_records),
        )
        .route("/imports", post(imports::create))
        .route("/imports/status", get(imports::status))
        .route("/imports/page-manifest", get(imports::page_manifest))
        .route("/search", post(search::ids))
        .route("/search/results", post(search::results))
        .route("/search/facets", post(search::facets))
        .route("/health", get(service::health))
        .route("/ready", get(service::ready))
        .route("/version", get(service::version))
        .route("/classifications", get(service::classifications))
        .route("/config", get(service::config))
        .route("/openapi.json", get(service::openapi))
        .route("/metrics", get(metrics::json))
        .route("/metrics/prometheus", get(metrics::prometheus))
        // Every route above: the response carries the matched template for the metrics.
        .route_layer(axum::middleware::from_fn(metrics::mark_route))
        .route_layer(axum::middleware::from_fn(crate::request_span::record_route))
        .fallback(not_found)
}
