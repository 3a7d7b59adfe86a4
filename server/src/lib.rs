//! Shelf's HTTP API: the axum router and its security envelope (authentication, scopes, rate
//! limit, audit, request limits, security headers, request ids), the `{detail, code}` error
//! body (codes from `shelf_documents::codes`), the OpenAPI document, and serving with graceful
//! shutdown. Business rules live in `shelf-app`; this crate only translates HTTP to those calls
//! and back.

pub mod audit;
pub mod auth;
pub mod client_ip;
pub mod error;
pub mod extract;
pub mod linger;
pub mod metrics;
pub mod middleware;
pub mod model;
pub mod openapi;
pub mod policy;
pub mod rate_limit;
pub mod request_span;
pub mod routes;
pub mod serve;
pub mod state;
pub mod web;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;

pub use error::{ApiError, ErrorCode};
pub use serve::{BindError, BoundServer, Listener, bind};
pub use state::{AppState, ServerOptions};

/// The whole application. The layers wrap the router itself (rather than each route), so they
/// run before routing: an unknown path still needs a credential, and an oversized body is
/// refused whatever route it was sent to. Outermost first:
///
/// 1. request id, then the request span (`request_span`; the route template is recorded
///    by a route layer once routing has matched);
/// 2. security headers, on every response;
/// 3. error bodies: JSON for every error, causes logged once;
/// 4. request metrics (inside the error bodies, so a route's template reaches them);
/// 5. the rest of a refused request's body is read (bounded) so the client sees the refusal;
/// 6. panics become `server_error`;
/// 7. authentication, scope and rate limit (denials audited);
/// 8. `SHELF_API_MAX_REQUEST_BYTES`.
pub fn router(state: AppState) -> Router {
    let max_request_bytes = state.shelf.settings.api.max_request_bytes;
    let inner = routes::routes()
        .merge(web::routes())
        .with_state(state.clone());
    Router::new().fallback_service(inner).layer(
        ServiceBuilder::new()
            .layer(axum::middleware::from_fn(middleware::request_id))
            .layer(axum::middleware::from_fn(request_span::request_span))
            .layer(axum::middleware::from_fn(middleware::security_headers))
            .layer(axum::middleware::from_fn(middleware::errors))
            .layer(axum::middleware::from_fn(metrics::record))
            .layer(axum::middleware::from_fn(linger::linger_on_error))
            .layer(CatchPanicLayer::custom(middleware::panic_response))
            .layer(axum::middleware::from_fn_with_state(state, auth::authorize))
            .layer(axum::middleware::from_fn_with_state(
                max_request_bytes,
                middleware::limit_request_size,
            ))
            // Our own limit above replaces axum's 2 MB default (uploads stream far more).
            .layer(DefaultBodyLimit::disable()),
    )
}
