//! `POST /ui/upload`: the drop zone's form without JavaScript. The same batch upload as
//! `POST /documents/batch` (same caps, same per-file refusals), then a queued run for each
//! document not processed before (what `shelf.js` does after its batches); the outcome is shown
//! as a page.

use axum::Extension;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::error::ErrorDetail;
use crate::model::runs::RunProcessingMode;
use crate::routes::documents::read_batch;
use crate::routes::runs::start_run;
use crate::state::AppState;
use crate::web::layout::{PageError, PageResult, render};
use crate::web::session::Viewer;

pub async fn upload(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> PageResult<Response> {
    viewer.require_write("/ui/")?;
    let out = read_batch(&state, &headers, multipart)
        .await
        .map_err(|e| PageError::from_api(&viewer, e))?;
    // A file already stored and processed is not processed again by uploading it twice.
    let mut runs = Vec::new();
    for item in &out.documents {
        let run = match &item.document {
            Some(d) if d.duplicate != Some(true) || d.status == "ingested" => {
                start_run(&state, &d.id, None, RunProcessingMode::default())
                    .await
                    .map(|r| Some(r.id))
                    .map_err(|e| PageError::from_api(&viewer, e))?
            }
            _ => None,
        };
        runs.push(run);
    }
    let body = html! {
        h1 { "Upload" }
        p id="upload-done" { (out.ingested) " uploaded, " (out.failed) " refused" }
        ol id="upload-progress" {
            @for (item, run) in out.documents.iter().zip(&runs) {
                @if let Some(d) = &item.document {
                    li class="upload-item ingested" data-name=(item.filename) {
                        a href=(format!("/ui/documents/{}", d.id)) { (item.filename) }
                        @if d.duplicate == Some(true) { " (already in the library)" }
                        @if let Some(run) = run {
                            " · " a class="run-link" href=(format!("/ui/runs/{run}")) { "processing" }
                        }
                    }
                } @else {
                    li class="upload-item failed" data-name=(item.filename) {
                        (item.filename) " "
                        @if let Some(error) = &item.error {
                            span class="reason" {
                                @match &error.detail {
                                    ErrorDetail::Message(text) => (text),
                                    ErrorDetail::Issues(_) => "refused",
                                }
                                " (" (error.code) ")"
                            }
                        }
                    }
                }
            }
        }
        p { a href="/ui/" { "Back to the library" } }
    };
    Ok(render("Upload", &viewer, body).into_response())
}
