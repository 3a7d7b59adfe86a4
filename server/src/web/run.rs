//! The Run page (`/ui/runs/{id}`): its stages with status, attempts and timings, the warnings
//! of a run that succeeded without a stage continued past (`on_failure: continue`), and its
//! event log, which `shelf.js` follows live over `/runs/{id}/events/records/stream` (the browser's
//! `EventSource` resumes with `Last-Event-ID` after a reconnect); cancel and retry buttons.

use axum::Extension;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use shelf_engine::RunWarning;

use crate::state::AppState;
use crate::web::layout::{PageError, PageResult, render, status_badge, time};
use crate::web::session::Viewer;

/// Events the page renders; the stream sends the rest.
const EVENTS_SHOWN: u64 = 500;

pub async fn page(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Response> {
    let here = format!("/ui/runs/{id}");
    viewer.require_read(&here)?;
    let detail = state
        .shelf
        .run_detail(&id, EVENTS_SHOWN)
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    let run = &detail.run;
    let last_seq = detail.events.last().map_or(0, |e| e.sequence);
    let live = matches!(run.status.as_str(), "queued" | "running");
    let stages = run.stages.as_deref().unwrap_or_default();
    let body = html! {
        h1 { "Run " (run.id) }
        section id="run" data-run-id=(run.id)
            data-events-url=(format!("/runs/{}/events/records/stream", run.id))
            data-status=(run.status) data-last-seq=(last_seq) {
            p { "Status: " span id="run-status" class=(format!("status status-{}", run.status)) { (run.status) } }
            @if !run.warnings.is_empty() {
                div id="warnings" class="banner notice" role="status" {
                    p { (warnings_note(&run.warnings)) ": the run went on without these stages." }
                    ul {
                        @for w in &run.warnings {
                            li { (w.stage) " failed: " code { (w.code) } " " (w.message) }
                        }
                    }
                }
            }
            p id="live" aria-live="polite" {}
            dl class="facts" {
                dt { "Document" } dd { a href=(format!("/ui/documents/{}", run.document_id)) { (run.document_id) } }
                dt { "Pipeline" } dd { a href=(format!("/ui/pipelines#pipeline-{}", run.pipeline)) { (run.pipeline) } }
                dt { "Attempt" } dd { (run.attempt) }
                dt { "Created" } dd { (time(&run.created_at)) }
                @if let Some(t) = &run.started_at { dt { "Started" } dd { (time(t)) } }
                @if let Some(t) = &run.finished_at { dt { "Finished" } dd { (time(t)) } }
                @if let Some(r) = &run.retry_of { dt { "Retry of" } dd { a href=(format!("/ui/runs/{r}")) { (r) } } }
                @if let Some(e) = &run.error {
                    dt { "Error" }
                    dd { @if let Some(code) = &run.error_code { code { (code) } ": " } (e) }
                }
            }
            @if viewer.can_write() {
                @if live && !run.cancel_requested {
                    form id="cancel" method="post" action=(format!("{here}/cancel")) {
                        button type="submit" { "Cancel" }
                    }
                }
                @if run.status == "failed" {
                    form id="retry" method="post" action=(format!("{here}/retry")) {
                        button type="submit" { "Retry" }
                    }
                }
            }
            h2 { "Stages" }
            div class="table-wrap" {
                table id="stages" {
                    thead { tr {
                        th scope="col" { "Stage" } th scope="col" { "Status" } th scope="col" { "Attempts" }
                        th scope="col" { "Started" } th scope="col" { "Finished" } th scope="col" { "Duration" }
                    } }
                    tbody {
                        @for s in stages {
                            tr {
                                td { (s.name) " " span class="kind" { "(" (s.kind) ")" } }
                                td {
                                    (status_badge(&s.status))
                                    @if let Some(e) = &s.error { div class="error" { (e) } }
                                    @if let Some(r) = &s.reused_from { div { "reused from " a href=(format!("/ui/runs/{r}")) { (r) } } }
                                }
                                td { (s.attempts) }
                                td { @if let Some(t) = &s.started_at { (time(t)) } }
                                td { @if let Some(t) = &s.finished_at { (time(t)) } }
                                td { @if let Some(ms) = s.duration_ms { (duration(ms)) } }
                            }
                        }
                    }
                }
            }
            h2 { "Events" }
            ol id="events" {
                @for e in &detail.events {
                    li data-seq=(e.sequence) {
                        (time(&e.created_at)) " "
                        span class="stage" { (e.stage) } " "
                        span class="kind" { (e.kind) } " "
                        (e.message)
                    }
                }
            }
            @if detail.events.len() as u64 >= EVENTS_SHOWN {
                p { "The first " (EVENTS_SHOWN) " events; the rest follow live, or read "
                    a href=(format!("/runs/{}/events/records?offset={EVENTS_SHOWN}", run.id)) { "the event records" } "." }
            }
        }
    };
    Ok(render(&format!("Run {}", run.id), &viewer, body).into_response())
}

/// `1 warning: classify failed: invalid_response`, for a run's warnings (none: nothing).
pub(crate) fn warnings_note(warnings: &[RunWarning]) -> Markup {
    let list: Vec<String> = warnings.iter().map(RunWarning::short).collect();
    html! {
        @if !warnings.is_empty() {
            span class="warnings" {
                (warnings.len()) @if warnings.len() == 1 { " warning: " } @else { " warnings: " }
                (list.join("; "))
            }
        }
    }
}

pub async fn cancel(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Response> {
    viewer.require_write(&format!("/ui/runs/{id}"))?;
    state
        .shelf
        .cancel(&id)
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    Ok(Redirect::to(&format!("/ui/runs/{id}")).into_response())
}

pub async fn retry(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Response> {
    viewer.require_write(&format!("/ui/runs/{id}"))?;
    let run = state
        .shelf
        .retry(&id)
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    Ok(Redirect::to(&format!("/ui/runs/{}", run.id)).into_response())
}

/// `22 ms`, `1.5 s`, `2 min 5 s`.
fn duration(ms: i64) -> String {
    if ms < 1_000 {
        format!("{} ms", ms.max(0))
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_their_scale() {
        assert_eq!(duration(22), "22 ms");
        assert_eq!(duration(1_500), "1.5 s");
        assert_eq!(duration(125_000), "2 min 5 s");
    }
}
