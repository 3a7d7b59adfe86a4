//! The Library page (`/ui/`): documents newest first with their status, classification and
//! tags, filters (status, classification prefix, tag, date window) and paging, and the upload
//! drop zone (files and folders, through the batch endpoint; `shelf.js` adds per-file progress,
//! the form alone still uploads without JavaScript).

use axum::Extension;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;
use shelf_documents::{Document, DocumentFilter, DocumentStatus};

use crate::error::ErrorCode;
use crate::state::AppState;
use crate::web::layout::{
    PageError, PageResult, page_number, pager, query, render, status_badge, time,
};
use crate::web::session::Viewer;

/// Documents per page.
pub const PER_PAGE: u64 = 50;

#[derive(Debug, Default, Deserialize)]
pub struct LibraryQuery {
    pub status: Option<String>,
    pub class: Option<String>,
    pub tag: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub page: Option<String>,
}

impl LibraryQuery {
    fn value(field: &Option<String>) -> &str {
        field.as_deref().map_or("", str::trim)
    }

    /// This query's URL at `page`.
    fn href(&self, page: u64) -> String {
        let page = page.to_string();
        let q = query(&[
            ("status", Self::value(&self.status)),
            ("class", Self::value(&self.class)),
            ("tag", Self::value(&self.tag)),
            ("from", Self::value(&self.from)),
            ("to", Self::value(&self.to)),
            ("page", if page == "1" { "" } else { &page }),
        ]);
        if q.is_empty() {
            "/ui/".to_string()
        } else {
            format!("/ui/?{q}")
        }
    }
}

/// A status named in a query (`""`: none).
pub fn parse_status(viewer: &Viewer, raw: &str) -> PageResult<Option<DocumentStatus>> {
    if raw.is_empty() {
        return Ok(None);
    }
    DocumentStatus::ALL
        .into_iter()
        .find(|s| s.as_str() == raw)
        .map(Some)
        .ok_or_else(|| {
            PageError::new(
                viewer,
                ErrorCode::InvalidDocumentStatus,
                "Unknown status: choose ingested, processing, ready or failed",
            )
        })
}

/// A `YYYY-MM-DD` day as its first (or last) instant in UTC.
pub fn parse_day(viewer: &Viewer, raw: &str, end: bool) -> PageResult<Option<DateTime<Utc>>> {
    if raw.is_empty() {
        return Ok(None);
    }
    let day = NaiveDate::parse_from_str(raw, "%Y-%m-%d").map_err(|_| {
        PageError::new(
            viewer,
            ErrorCode::BadRequest,
            "Dates are written YYYY-MM-DD",
        )
    })?;
    let at = if end {
        NaiveTime::from_hms_milli_opt(23, 59, 59, 999)
    } else {
        NaiveTime::from_hms_opt(0, 0, 0)
    };
    Ok(at.map(|t| day.and_time(t).and_utc()))
}

pub async fn page(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<LibraryQuery>,
) -> PageResult<Response> {
    viewer.require_read(&q.href(1))?;
    let number = page_number(q.page.as_deref());
    let filter = DocumentFilter {
        status: parse_status(&viewer, LibraryQuery::value(&q.status))?,
        classification_prefix: Some(LibraryQuery::value(&q.class).to_string())
            .filter(|s| !s.is_empty()),
        tag: Some(LibraryQuery::value(&q.tag).to_string()).filter(|s| !s.is_empty()),
        created_after: parse_day(&viewer, LibraryQuery::value(&q.from), false)?,
        created_before: parse_day(&viewer, LibraryQuery::value(&q.to), true)?,
    };
    if let (Some(a), Some(b)) = (filter.created_after, filter.created_before)
        && a > b
    {
        return Err(PageError::new(
            &viewer,
            ErrorCode::InvalidSearchWindow,
            "The window's start is after its end",
        ));
    }
    let (documents, total) = state
        .shelf
        .list_documents(&filter, PER_PAGE, (number - 1) * PER_PAGE)
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    let settings = &state.shelf.settings.api;
    let body = html! {
        h1 { "Library" }
        @if viewer.can_write() {
            (upload_form(settings.max_batch_files, settings.max_batch_bytes))
        }
        (filters(&q))
        p class="count" { (total) " documents" @if filtered(&q) { " match the filters" } }
        @if documents.is_empty() {
            p { "Nothing here yet." }
        } @else {
            div class="table-wrap" {
                table id="documents" {
                    caption class="visually-hidden" { "Documents, newest first" }
                    thead { tr {
                        th scope="col" { "Document" }
                        th scope="col" { "Status" }
                        th scope="col" { "Classification" }
                        th scope="col" { "Tags" }
                        th scope="col" { "Added" }
                    } }
                    tbody {
                        @for d in &documents { (row(d)) }
                    }
                }
            }
        }
        (pager(number, PER_PAGE, total, |p| q.href(p)))
    };
    Ok(render("Library", &viewer, body).into_response())
}

fn filtered(q: &LibraryQuery) -> bool {
    [&q.status, &q.class, &q.tag, &q.from, &q.to]
        .iter()
        .any(|f| !LibraryQuery::value(f).is_empty())
}

fn row(d: &Document) -> Markup {
    let href = format!("/ui/documents/{}", d.id);
    html! {
        tr data-id=(d.id) {
            td {
                a href=(href) { (d.title.as_deref().unwrap_or(&d.filename)) }
                @if d.title.is_some() {
                    br; span class="filename" { (d.filename) }
                }
            }
            td { (status_badge(d.status.as_str())) }
            td {
                @if let Some(code) = &d.classification {
                    a href=(format!("/ui/?{}", query(&[("class", code)]))) { (code) }
                    @if let Some(label) = &d.classification_label { " " (label) }
                } @else { "—" }
            }
            td {
                @for tag in &d.tags {
                    a class="tag" href=(format!("/ui/?{}", query(&[("tag", tag)]))) { (tag) } " "
                }
            }
            td { (time(&d.created_at)) }
        }
    }
}

fn filters(q: &LibraryQuery) -> Markup {
    let status = LibraryQuery::value(&q.status);
    html! {
        form id="filters" method="get" action="/ui/" {
            fieldset {
                legend { "Filter" }
                p {
                    label for="f-status" { "Status" }
                    select id="f-status" name="status" {
                        option value="" selected[status.is_empty()] { "any" }
                        @for s in DocumentStatus::ALL {
                            option value=(s.as_str()) selected[status == s.as_str()] { (s.as_str()) }
                        }
                    }
                }
                p {
                    label for="f-class" { "Classification starts with" }
                    input id="f-class" name="class" inputmode="decimal" placeholder="e.g. 636" value=(LibraryQuery::value(&q.class));
                }
                p {
                    label for="f-tag" { "Tag" }
                    input id="f-tag" name="tag" value=(LibraryQuery::value(&q.tag));
                }
                p {
                    label for="f-from" { "Added from" }
                    input id="f-from" name="from" type="date" value=(LibraryQuery::value(&q.from));
                }
                p {
                    label for="f-to" { "Added until" }
                    input id="f-to" name="to" type="date" value=(LibraryQuery::value(&q.to));
                }
                p {
                    button type="submit" { "Filter" }
                    " "
                    a href="/ui/" { "Clear" }
                }
            }
        }
    }
}

/// The drop zone. Without JavaScript it is a plain multipart form posting to `/ui/upload`.
fn upload_form(max_files: usize, max_bytes: u64) -> Markup {
    html! {
        form id="upload" method="post" action="/ui/upload" enctype="multipart/form-data"
            data-batch-url="/documents/batch" data-max-files=(max_files) data-max-bytes=(max_bytes) {
            fieldset {
                legend { "Add documents" }
                div id="drop-zone" tabindex="0" {
                    p { "Drop files or folders here, or choose them:" }
                    p {
                        label for="upload-files" { "Files" }
                        input type="file" id="upload-files" name="files" multiple;
                    }
                    p {
                        label for="upload-folder" { "A folder" }
                        input type="file" id="upload-folder" webkitdirectory multiple;
                    }
                    p { button type="submit" { "Upload" } }
                }
                ol id="upload-progress" aria-live="polite" {}
            }
        }
    }
}
