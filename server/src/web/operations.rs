//! The Operations page (`/ui/operations`, write scope): the queue (what waits, what runs,
//! whether workers claim), the runs that failed in the last day by error code, and the
//! counters an operator looks at first. Metrics are this API process's own (workers keep
//! theirs; `/metrics/prometheus` of each process has the full set).

use axum::Extension;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use maud::{Markup, html};
use serde_json::Value;

use crate::state::AppState;
use crate::web::layout::{PageError, PageResult, render, size, time};
use crate::web::session::Viewer;

/// The window of "recent" failures.
const FAILURE_WINDOW_HOURS: i64 = 24;

/// The metric families shown, in order, with what each tells an operator.
const SHOWN: &[(&str, &str)] = &[
    (
        "shelf_runs_finished_total",
        "Runs finished by this process, by status",
    ),
    ("shelf_queue_claims_total", "Runs claimed from the queue"),
    (
        "shelf_queue_reclaims_total",
        "Runs taken over from an executor that stopped",
    ),
    ("shelf_queue_claim_failures_total", "Claims that failed"),
    (
        "shelf_worker_claims_paused",
        "1 while claims are paused (low disk space)",
    ),
    ("shelf_storage_free_bytes", "Free space of each volume"),
    (
        "shelf_storage_refusals_total",
        "Writes refused for lack of space",
    ),
    ("shelf_llm_calls_total", "Language-model calls, by outcome"),
    ("shelf_llm_in_flight", "Language-model calls in flight"),
    (
        "shelf_llm_concurrency_limit",
        "Calls the model server is given at once",
    ),
    (
        "shelf_llm_estimated_cost_usd",
        "Estimated language-model cost (USD)",
    ),
    (
        "shelf_http_requests_total",
        "API requests, by route and status",
    ),
];

pub async fn page(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
) -> PageResult<Response> {
    viewer.require_write("/ui/operations")?;
    let queue = state
        .shelf
        .queue_report()
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    let failures = state
        .shelf
        .failures_by_code(Utc::now(), chrono::Duration::hours(FAILURE_WINDOW_HOURS))
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    let metrics = state.shelf.metrics.json();
    let body = html! {
        h1 { "Operations" }
        @if let Some(warning) = &queue.warning {
            div class="banner error" role="alert" { (warning) }
        }
        section id="queue" {
            h2 { "Queue" }
            dl class="facts" {
                dt { "Queued" } dd { (queue.queued) " (" (queue.due) " due now)" }
                dt { "Running" } dd { (queue.running) }
                dt { "Leases expired" } dd { (queue.expired_leases) }
                dt { "Oldest due run waiting" } dd { @match queue.oldest_due_age_seconds { Some(s) => { (s) " s" }, None => "—" } }
                dt { "Last claim" } dd { @match &queue.last_claim_at { Some(t) => (time(t)), None => "never" } }
                dt { "Workers seen recently" } dd { @if queue.workers_seen_recently { "yes" } @else { "no" } }
            }
        }
        section id="failures" {
            h2 { "Failures in the last " (FAILURE_WINDOW_HOURS) " hours" }
            @if failures.is_empty() {
                p { "None." }
            } @else {
                div class="table-wrap" {
                    table {
                        thead { tr { th scope="col" { "Code" } th scope="col" { "Runs" } th scope="col" { "Latest" } } }
                        tbody {
                            @for f in &failures {
                                tr {
                                    td { code { (f.code) } }
                                    td { (f.count) }
                                    td { a href=(format!("/ui/runs/{}", f.latest_run_id)) { (f.latest_run_id) } " " (time(&f.latest_at)) }
                                }
                            }
                        }
                    }
                }
                p { "What each code means and what to do: docs/errors.md." }
            }
        }
        section id="metrics" {
            h2 { "Metrics of this process" }
            dl {
                @for (name, what) in SHOWN {
                    @if let Some(family) = metrics["metrics"].get(*name) {
                        dt { (what) " " code { (name) } }
                        dd { (samples(name, family)) }
                    }
                }
            }
            p { "Every metric: " a href="/metrics" { "/metrics" } " (JSON) and " a href="/metrics/prometheus" { "/metrics/prometheus" } "." }
        }
    };
    Ok(render("Operations", &viewer, body).into_response())
}

/// One family's samples as `label=value …: value` lines.
fn samples(name: &str, family: &Value) -> Markup {
    let empty = Vec::new();
    let samples = family["samples"].as_array().unwrap_or(&empty);
    html! {
        @if samples.is_empty() { "—" }
        ul class="samples" {
            @for s in samples {
                li {
                    @let labels = s["labels"].as_object().map(|m| m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>().join(" ")).unwrap_or_default();
                    @if !labels.is_empty() { (labels) ": " }
                    @let value = s["value"].as_f64().or_else(|| s["count"].as_f64()).unwrap_or(0.0);
                    @if name.ends_with("_bytes") { (size(value.max(0.0) as u64)) }
                    @else if value.fract() == 0.0 { (value as i64) }
                    @else { (format!("{value:.4}")) }
                }
            }
        }
    }
}
