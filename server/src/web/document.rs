//! The Document page (`/ui/documents/{id}`): its synopsis and classification, the cleaned text
//! (paged), the page records of scans (low confidence marked), transcript cues with their times,
//! its runs, and the actions: reprocess, export, delete (after a confirmation page).

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use shelf_app::AppError;
use shelf_documents::{Document, DocumentsError, ListedPage, PageListing, Segment};

use crate::model::runs::RunProcessingMode;
use crate::routes::runs::start_run;
use crate::state::AppState;
use crate::web::layout::{
    PageError, PageResult, page_number, pager, render, size, status_badge, time,
};
use crate::web::session::Viewer;

/// Characters of cleaned text per page (never more than `SHELF_API_MAX_CONTENT_CHARS`).
const TEXT_PAGE_CHARS: u64 = 20_000;
/// Page records per page.
const PAGES_PER_PAGE: u64 = 100;
/// Transcript cues shown per page.
const CUES_PER_PAGE: usize = 500;
/// Runs listed.
const RUNS_SHOWN: u64 = 20;

#[derive(Debug, Default, Deserialize)]
pub struct DocumentQuery {
    pub text_page: Option<String>,
    pub pages_page: Option<String>,
    pub cues_page: Option<String>,
}

/// The document, or the page saying it does not exist.
async fn find(state: &AppState, viewer: &Viewer, id: &str) -> PageResult<Document> {
    state
        .shelf
        .document(id)
        .await
        .map_err(|e| PageError::app(viewer, e))
}

fn is_missing(e: &AppError) -> bool {
    matches!(
        e,
        AppError::Documents(DocumentsError::NotFound { .. } | DocumentsError::NoContent { .. })
            | AppError::NotFound(_)
    )
}

pub async fn page(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Query(q): Query<DocumentQuery>,
) -> PageResult<Response> {
    let here = format!("/ui/documents/{id}");
    viewer.require_read(&here)?;
    let d = find(&state, &viewer, &id).await?;
    let text_page = page_number(q.text_page.as_deref());
    let chars = TEXT_PAGE_CHARS.min(state.shelf.settings.api.max_content_chars as u64);
    let text = match state
        .shelf
        .content(&id, (text_page - 1) * chars, Some(chars))
        .await
    {
        Ok(page) => Some(page),
        Err(e) if is_missing(&e) => None,
        Err(e) => return Err(PageError::app(&viewer, e)),
    };
    let pages_page = page_number(q.pages_page.as_deref());
    let pages = state
        .shelf
        .pages(
            &id,
            PAGES_PER_PAGE,
            (pages_page - 1) * PAGES_PER_PAGE,
            false,
        )
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    let cues = state
        .shelf
        .transcript(&id)
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    let (runs, runs_total) = state
        .shelf
        .list_runs(Some(&id), RUNS_SHOWN, 0)
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    let low = state.shelf.settings.ocr.low_confidence_threshold;
    let title = d.title.clone().unwrap_or_else(|| d.filename.clone());
    let href = |param: &str, n: u64| format!("{here}?{param}={n}");

    let body = html! {
        h1 { (title) }
        p class="filename" { (d.filename) }
        (metadata(&d))
        section id="actions" aria-label="Actions" {
            h2 class="visually-hidden" { "Actions" }
            ul class="actions" {
                @if viewer.can_write() {
                    li {
                        form id="reprocess" method="post" action=(format!("{here}/reprocess")) {
                            button type="submit" { "Reprocess" }
                        }
                    }
                }
                li { a id="export-md" href=(format!("/documents/{id}/export?format=md")) download { "Export Markdown" } }
                li { a id="export-txt" href=(format!("/documents/{id}/export?format=txt")) download { "Export text" } }
                li { a id="export-json" href=(format!("/documents/{id}/export?format=json")) download { "Export JSON" } }
                @if viewer.can_write() {
                    li { a id="delete" class="danger" href=(format!("{here}/delete")) { "Delete…" } }
                }
            }
        }
        section id="text" {
            h2 { "Cleaned text" }
            @match &text {
                Some(t) if !t.text.is_empty() => {
                    pre class="text" { (t.text) }
                    (pager(text_page, chars, t.total_chars, |n| href("text_page", n)))
                }
                _ => p class="banner notice" role="status" { "No cleaned text yet: it appears once a run succeeds." },
            }
        }
        @if !pages.pages.is_empty() {
            (page_records(&pages, low, pages_page, |n| href("pages_page", n)))
        }
        @if !cues.is_empty() {
            (transcript(&cues, page_number(q.cues_page.as_deref()), |n| href("cues_page", n)))
        }
        section id="runs" {
            h2 { "Runs" }
            @if runs.is_empty() {
                p { "Not processed yet." }
            } @else {
                div class="table-wrap" {
                    table {
                        thead { tr {
                            th scope="col" { "Run" } th scope="col" { "Status" } th scope="col" { "Pipeline" }
                            th scope="col" { "Created" } th scope="col" { "Error" }
                        } }
                        tbody {
                            @for r in &runs {
                                tr {
                                    td { a href=(format!("/ui/runs/{}", r.id)) { (r.id) } }
                                    td { (status_badge(&r.status)) " " (crate::web::run::warnings_note(&r.warnings)) }
                                    td { (r.pipeline) }
                                    td { (time(&r.created_at)) }
                                    td { @if let Some(code) = &r.error_code { code { (code) } } }
                                }
                            }
                        }
                    }
                }
                @if runs_total > RUNS_SHOWN { p { "The " (RUNS_SHOWN) " newest of " (runs_total) " runs." } }
            }
        }
    };
    Ok(render(&title, &viewer, body).into_response())
}

fn metadata(d: &Document) -> Markup {
    html! {
        dl id="metadata" class="facts" {
            dt { "Summary" } dd { (d.summary.as_deref().unwrap_or("—")) }
            dt { "Tags" }
            dd {
                @if d.tags.is_empty() { "—" }
                @for tag in &d.tags {
                    a class="tag" href=(format!("/ui/?{}", crate::web::layout::query(&[("tag", tag)]))) { (tag) } " "
                }
            }
            dt { "Classification" }
            dd {
                @if let Some(code) = &d.classification {
                    (code) @if let Some(label) = &d.classification_label { " " (label) }
                    @if let Some(c) = d.classification_confidence { " (confidence " (format!("{c:.2}")) ")" }
                } @else { "—" }
            }
            dt { "Status" } dd { (status_badge(d.status.as_str())) }
            dt { "Suggested file name" } dd { (d.suggested_stem.as_deref().unwrap_or("—")) }
            dt { "Size" } dd { (size(d.byte_size)) " · " (d.extension) }
            dt { "Added" } dd { (time(&d.created_at)) }
            dt { "Id" } dd { code { (d.id) } }
        }
    }
}

fn page_records(
    listing: &PageListing,
    low: f64,
    number: u64,
    href: impl Fn(u64) -> String,
) -> Markup {
    let s = &listing.summary;
    html! {
        section id="pages" {
            h2 { "Pages" }
            p {
                (s.pages) " pages: " (s.text_layer) " with a text layer, " (s.ocr) " read by OCR, "
                (s.failed) " failed, " (s.pending) " pending"
                @if let Some(avg) = s.average_confidence { "; mean OCR confidence " (format!("{avg:.1}")) }
            }
            div class="table-wrap" {
                table {
                    thead { tr {
                        th scope="col" { "Page" } th scope="col" { "Source" } th scope="col" { "Confidence" }
                        th scope="col" { "Rotation" } th scope="col" { "Characters" } th scope="col" { "Problems" }
                    } }
                    tbody {
                        @for p in &listing.pages { (page_row(p, low)) }
                    }
                }
            }
            (pager(number, PAGES_PER_PAGE, listing.total, href))
        }
    }
}

fn page_row(p: &ListedPage, low: f64) -> Markup {
    let is_low = p.confidence.is_some_and(|c| c < low);
    html! {
        tr class=[is_low.then_some("low-confidence")] {
            td { (p.number) }
            td { (p.source.as_str()) }
            td {
                @match p.confidence {
                    Some(c) => { (format!("{c:.1}")) @if is_low { " " strong { "low" } } },
                    None => "—",
                }
            }
            td { @match p.rotation_degrees { Some(r) => { (r) "°" }, None => "—" } }
            td { (p.chars) }
            td {
                @if let Some(e) = &p.error { span class="error" { (e) } }
                @for w in &p.warnings { div { (w) } }
            }
        }
    }
}

/// `1:02:03` (or `2:03`) for a cue's start.
fn clock(seconds: f64) -> String {
    let total = seconds.max(0.0) as u64;
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// The anchor of the cue starting at `seconds` (search hits link to it).
pub fn cue_anchor(seconds: f64) -> String {
    format!("t-{}", (seconds.max(0.0) * 1000.0).round() as u64)
}

fn transcript(cues: &[Segment], number: u64, href: impl Fn(u64) -> String) -> Markup {
    let start = usize::try_from(number - 1)
        .unwrap_or(usize::MAX)
        .saturating_mul(CUES_PER_PAGE);
    html! {
        section id="cues" {
            h2 { "Transcript" }
            ol class="cues" {
                @for cue in cues.iter().skip(start).take(CUES_PER_PAGE) {
                    li id=(cue_anchor(cue.start_seconds)) {
                        time { (clock(cue.start_seconds)) "–" (clock(cue.end_seconds)) }
                        " "
                        @if let Some(speaker) = &cue.speaker { strong { (speaker) ": " } }
                        (cue.text)
                    }
                }
            }
            (pager(number, CUES_PER_PAGE as u64, cues.len() as u64, href))
        }
    }
}

pub async fn reprocess(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Response> {
    viewer.require_write(&format!("/ui/documents/{id}"))?;
    let run = start_run(&state, &id, None, RunProcessingMode::default())
        .await
        .map_err(|e| PageError::from_api(&viewer, e))?;
    Ok(Redirect::to(&format!("/ui/runs/{}", run.id)).into_response())
}

pub async fn confirm_delete(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Response> {
    viewer.require_write(&format!("/ui/documents/{id}"))?;
    let d = find(&state, &viewer, &id).await?;
    let body = html! {
        h1 { "Delete " (d.title.as_deref().unwrap_or(&d.filename)) "?" }
        p { "This removes the document, its texts, runs and search entries"
            @if d.source_kind.as_str() == "upload" { ", and the uploaded file" } ". It cannot be undone." }
        form id="confirm-delete" method="post" action=(format!("/ui/documents/{id}/delete")) {
            button type="submit" class="danger" { "Delete" }
            " "
            a href=(format!("/ui/documents/{id}")) { "Keep it" }
        }
    };
    Ok(render("Delete", &viewer, body).into_response())
}

pub async fn delete(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Response> {
    viewer.require_write(&format!("/ui/documents/{id}"))?;
    state
        .shelf
        .delete_document(&id)
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    Ok(Redirect::to("/ui/").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cue_times_read_like_players() {
        assert_eq!(clock(0.0), "0:00");
        assert_eq!(clock(62.5), "1:02");
        assert_eq!(clock(3723.0), "1:02:03");
        assert_eq!(cue_anchor(1.2345), "t-1235");
    }
}
