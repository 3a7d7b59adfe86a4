//! The INFO span every request is served in (tower-http's are DEBUG, which OpenTelemetry setups
//! filter out): method, route template and status, named `METHOD /route/{param}` for the trace
//! backend, continuing a client's W3C `traceparent` when it sends one. A separate layer from the
//! request id and the counters so each can change alone.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use shelf_app::telemetry;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::middleware::RequestId;

/// Outer layer (after the request id): opens the span, records the status when the response
/// leaves. The route is recorded by [`record_route`], which runs once routing has matched.
pub async fn request_span(req: Request, next: Next) -> Response {
    let request_id = req
        .extensions()
        .get::<RequestId>()
        .map(|id| id.0.clone())
        .unwrap_or_default();
    let method = req.method().clone();
    let span = tracing::info_span!(
        "request",
        otel.name = %method,
        otel.kind = "server",
        otel.status_code = Empty,
        request_id = %request_id,
        method = %method,
        route = Empty,
        status = Empty,
    );
    telemetry::continue_trace(
        &span,
        req.headers()
            .get("traceparent")
            .and_then(|v| v.to_str().ok()),
    );
    let started = Instant::now();
    let response = next.run(req).instrument(span.clone()).await;
    let status = response.status();
    span.record("status", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    span.in_scope(|| {
        tracing::debug!(
            status = status.as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "request_finished"
        );
    });
    response
}

/// Route layer: the matched route's template (`/documents/{id}`, never the ids themselves)
/// goes on the request span and into its name.
pub async fn record_route(req: Request, next: Next) -> Response {
    if let Some(route) = req.extensions().get::<MatchedPath>() {
        let span = Span::current();
        span.record("route", route.as_str());
        telemetry::rename(&span, format!("{} {}", req.method(), route.as_str()));
    }
    next.run(req).await
}
