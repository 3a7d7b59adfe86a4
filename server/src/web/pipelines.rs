//! The Pipelines page (`/ui/pipelines`): every installed pipeline (the operator's directory and
//! the built-in ones) drawn as its stage graph, rendered here as SVG (nothing fetched), beside
//! its YAML. A file that does not compile is shown with its error.

use axum::Extension;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::error::ApiError;
use crate::state::AppState;
use crate::web::graph::pipeline_svg;
use crate::web::layout::{PageResult, render};
use crate::web::session::Viewer;

pub async fn page(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
) -> PageResult<Response> {
    viewer.require_read("/ui/pipelines")?;
    let settings = &state.shelf.settings.pipeline;
    let names = shelf_app::pipelines::names(settings.dir.as_deref());
    let body = html! {
        h1 { "Pipelines" }
        p { "Runs use " code { (settings.name) } " unless a request names another. "
            "Each stage runs once every stage it needs has succeeded." }
        nav aria-label="Pipelines" {
            ul { @for name in &names { li { a href=(format!("#pipeline-{name}")) { (name) } } } }
        }
        @for name in &names {
            section class="pipeline" id=(format!("pipeline-{name}")) {
                h2 { (name) @if *name == settings.name { " (default)" } }
                @match state.shelf.load_pipeline(name) {
                    Ok(p) => {
                        @if !p.description.is_empty() { p { (p.description) } }
                        figure { (pipeline_svg(&p)) }
                        details {
                            summary { (p.file) " · sha256 " code { (p.sha256.get(..12).unwrap_or(&p.sha256)) } }
                            pre class="yaml" { (p.source) }
                        }
                    }
                    Err(e) => {
                        @let shown = ApiError::from(e).body();
                        div class="banner error" role="alert" {
                            "This pipeline does not compile (" (shown.code) "). "
                            @if let crate::error::ErrorDetail::Message(m) = &shown.detail { (m) }
                        }
                        @if let Ok(source) = state.shelf.pipeline_source(name) {
                            pre class="yaml" { (source.text) }
                        }
                    }
                }
            }
        }
    };
    Ok(render("Pipelines", &viewer, body).into_response())
}
