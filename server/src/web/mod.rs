//! The web pages `shelf api` serves under `/ui/`: server-rendered HTML (maud, every value
//! escaped at compile time) over the same application calls as the API, a sign-in that
//! exchanges an API key for a session cookie, and the static assets compiled into the binary.
//! The auth middleware attaches a [`session::Viewer`] to every page request; each page checks
//! the scope it needs. See docs/web.md.

pub mod assets;
pub mod document;
pub mod graph;
pub mod layout;
pub mod library;
pub mod operations;
pub mod pipelines;
pub mod run;
pub mod search;
pub mod session;
pub mod signin;
pub mod upload;

use axum::Router;
use axum::response::Redirect;
use axum::routing::{get, post};

use crate::state::AppState;

/// Every page. Paths are written out (not nested) so that `/ui/` itself is the library.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/") }))
        .route("/ui", get(|| async { Redirect::to("/ui/") }))
        .route("/ui/", get(library::page))
        .route("/ui/upload", post(upload::upload))
        .route("/ui/documents/{id}", get(document::page))
        .route(
            "/ui/documents/{id}/delete",
            get(document::confirm_delete).post(document::delete),
        )
        .route("/ui/documents/{id}/reprocess", post(document::reprocess))
        .route("/ui/runs/{id}", get(run::page))
        .route("/ui/runs/{id}/cancel", post(run::cancel))
        .route("/ui/runs/{id}/retry", post(run::retry))
        .route("/ui/search", get(search::page))
        .route("/ui/pipelines", get(pipelines::page))
        .route("/ui/operations", get(operations::page))
        .route(
            "/ui/sign-in",
            get(signin::sign_in_page).post(signin::sign_in),
        )
        .route("/ui/sign-out", post(signin::sign_out))
        .route("/ui/static/{file}", get(assets::asset))
        // As the API's routes: the template labels the request metrics and the request span.
        .route_layer(axum::middleware::from_fn(crate::metrics::mark_route))
        .route_layer(axum::middleware::from_fn(crate::request_span::record_route))
}
