//! The API's own counters (requests by route template, method and status, and request latency),
//! the middleware that feeds them, and the two metrics endpoints, which a worker also serves
//! on its `--metrics-port` ([`bind_worker_metrics`]). Routes are labeled with the router's
//! template (`/documents/{id}`), never the raw path, so ids cannot grow the label set.

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::extract::{FromRef, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use serde_json::Value;
use shelf_app::Shelf;
use shelf_app::metrics::{Metrics, PROMETHEUS_CONTENT_TYPE};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::{
    Credentials, credential_digests, match_credential, presented_credential, refusal,
};
use crate::policy::{Access, Policy};
use crate::serve::{BindError, NEEDS_A_KEY, listen};
use crate::state::AppState;

/// The route label of requests no route answered: refused before routing (authentication,
/// rate limit, size), unknown paths, and framework rejections.
pub const UNMATCHED: &str = "unmatched";

struct HttpMetrics {
    requests: IntCounterVec,
    duration: HistogramVec,
}

static HTTP: LazyLock<HttpMetrics> = LazyLock::new(|| {
    HttpMetrics {
    requests: IntCounterVec::new(
        Opts::new(
            "shelf_http_requests_total",
            "HTTP requests answered, by route template, method and status.",
        ),
        &["route", "method", "status"],
    )
    .expect("valid metric"),
    duration: HistogramVec::new(
        HistogramOpts::new(
            "shelf_http_request_duration_seconds",
            "Time to answer an HTTP request (to its headers, for streams), by route template and method.",
        ),
        &["route", "method"],
    )
    .expect("valid metric"),
}
});

/// Adds the request counters to the process's registry. They are process-wide: a second API on
/// the same `Shelf` (tests) shares them, and finding them registered is not an error.
pub fn register(metrics: &Metrics) {
    for collector in [
        Box::new(HTTP.requests.clone()) as Box<dyn prometheus::core::Collector>,
        Box::new(HTTP.duration.clone()),
    ] {
        if let Err(error) = metrics.register(collector)
            && !error.is_already_registered()
        {
            tracing::error!(%error, "request metrics not registered");
        }
    }
}

/// The route template a request matched, carried from the router to [`record`].
#[derive(Clone)]
struct RouteTemplate(MatchedPath);

/// Inside the router (a route layer): remembers the matched template on the response.
pub async fn mark_route(req: Request, next: Next) -> Response {
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let mut response = next.run(req).await;
    if let Some(path) = matched {
        response.extensions_mut().insert(RouteTemplate(path));
    }
    response
}

/// The label of a method: the standard ones by name, anything else `other` (methods are
/// client-chosen strings).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Outside the router: counts every answered request and its latency.
pub async fn record(req: Request, next: Next) -> Response {
    let method = method_label(req.method());
    let started = Instant::now();
    let response = next.run(req).await;
    let route = response
        .extensions()
        .get::<RouteTemplate>()
        .map_or(UNMATCHED, |r| r.0.as_str());
    HTTP.requests
        .with_label_values(&[route, method, response.status().as_str()])
        .inc();
    HTTP.duration
        .with_label_values(&[route, method])
        .observe(started.elapsed().as_secs_f64());
    response
}

impl FromRef<AppState> for Arc<Metrics> {
    fn from_ref(state: &AppState) -> Arc<Metrics> {
        state.shelf.metrics.clone()
    }
}

/// The two metrics routes of the API. The same handlers serve a worker's metrics listener
/// ([`bind_worker_metrics`]) with its own key check.
pub fn routes() -> crate::routes::Resource {
    // Metrics describe the deployment (paths, volumes, failure counts): not for read keys.
    crate::routes::Resource::new()
        .route(Policy::WriteOnly, utoipa_axum::routes!(json))
        .route(Policy::WriteOnly, utoipa_axum::routes!(prometheus))
}

/// Metrics (JSON)
///
/// This process's counters, histograms and derived gauges, the same as
/// `/metrics/prometheus`: `{"metrics": {name: {type, help, samples}}}`. Write scope.
#[utoipa::path(
    get, path = "/metrics", operation_id = "get_metrics", tag = "service",
    responses((status = 200, description = "Metric families by name", body = Object))
)]
pub async fn json(State(metrics): State<Arc<Metrics>>) -> Json<Value> {
    Json(metrics.json())
}

/// Metrics (Prometheus)
///
/// The same metrics in the Prometheus text exposition format (0.0.4). Write scope.
#[utoipa::path(
    get, path = "/metrics/prometheus", operation_id = "get_metrics_prometheus", tag = "service",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain; version=0.0.4", body = String))
)]
pub async fn prometheus(State(metrics): State<Arc<Metrics>>) -> Response {
    let mut response = metrics.prometheus_text().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(PROMETHEUS_CONTENT_TYPE),
    );
    response
}

/// A worker's metrics listener, bound and not yet serving.
pub struct WorkerMetrics {
    listener: TcpListener,
    router: Router,
}

/// Binds a worker's metrics endpoints. Like the API, a non-loopback address needs an API key;
/// when keys are configured, a write-scope key is required (as for the API's `/metrics`).
pub async fn bind_worker_metrics(
    shelf: &Shelf,
    host: &str,
    port: u16,
) -> Result<WorkerMetrics, BindError> {
    // Only the key is needed: a worker's metrics serve no imports.
    let public_missing = if shelf.settings.auth_enabled() {
        Vec::new()
    } else {
        vec![NEEDS_A_KEY]
    };
    let listener = listen(host, port, public_missing).await?;
    let credentials = Arc::new(credential_digests(&shelf.settings));
    let router = Router::new()
        .route("/metrics", get(json))
        .route("/metrics/prometheus", get(prometheus))
        .with_state(shelf.metrics.clone())
        .layer(axum::middleware::from_fn_with_state(
            credentials,
            require_write_key,
        ));
    Ok(WorkerMetrics { listener, router })
}

impl WorkerMetrics {
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` trips.
    pub async fn serve(self, shutdown: CancellationToken) -> std::io::Result<()> {
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
    }
}

async fn require_write_key(
    State(credentials): State<Arc<Credentials>>,
    req: Request,
    next: Next,
) -> Response {
    if credentials.is_empty() {
        return next.run(req).await;
    }
    let presented = presented_credential(req.headers());
    let scope = presented
        .as_deref()
        .and_then(|key| match_credential(&credentials, key));
    match refusal(presented.is_some(), scope, Access::Write) {
        Some((_, error)) => error.into_response(),
        None => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_outside_the_standard_set_share_one_label() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::DELETE), "DELETE");
        let custom = Method::from_bytes(b"BREW").expect("method");
        assert_eq!(method_label(&custom), "other");
    }
}
