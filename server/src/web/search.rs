//! The Search page (`/ui/search`): the query with its modes (all/any/auto terms, exact phrase,
//! cleaned or raw text), ranked hits with highlighted snippets, facets by classification and
//! status as links that filter, and paging. A transcript hit links to the cue where the query
//! was found. The query is checked by the same code as `POST /search` (`SearchBody`).

use axum::Extension;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use shelf_documents::{FacetCount, MatchMode, SearchBody};

use crate::error::ApiError;
use crate::state::AppState;
use crate::web::document::cue_anchor;
use crate::web::layout::{PageError, PageResult, page_number, pager, query, render, status_badge};
use crate::web::session::Viewer;

/// Hits per page.
const PER_PAGE: u64 = 20;
/// Buckets per facet.
const FACET_LIMIT: u64 = 20;

#[derive(Debug, Default, Clone, Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    pub q: String,
    pub mode: Option<String>,
    pub phrase: Option<String>,
    pub scope: Option<String>,
    /// `keyword`, `semantic` or `hybrid` (the last two with an embedding model).
    pub find: Option<String>,
    pub class: Option<String>,
    pub status: Option<String>,
    pub page: Option<String>,
}

fn value(field: &Option<String>) -> &str {
    field.as_deref().map_or("", str::trim)
}

impl SearchQuery {
    fn phrase(&self) -> bool {
        matches!(value(&self.phrase), "on" | "true" | "1")
    }

    /// This search's URL with `page`, and with `class`/`status` replaced when given.
    fn href(&self, page: u64, class: Option<&str>, status: Option<&str>) -> String {
        let page = if page <= 1 {
            String::new()
        } else {
            page.to_string()
        };
        format!(
            "/ui/search?{}",
            query(&[
                ("q", self.q.trim()),
                ("mode", value(&self.mode)),
                ("phrase", if self.phrase() { "on" } else { "" }),
                ("scope", value(&self.scope)),
                ("find", value(&self.find)),
                ("class", class.unwrap_or(value(&self.class))),
                ("status", status.unwrap_or(value(&self.status))),
                ("page", &page),
            ])
        )
    }
}

pub async fn page(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Query(sq): Query<SearchQuery>,
) -> PageResult<Response> {
    viewer.require_read(&sq.href(1, None, None))?;
    let number = page_number(sq.page.as_deref());
    let semantic = state.shelf.embeddings.is_some();
    let body = if sq.q.trim().is_empty() {
        html! { (form(&sq, semantic)) p { "Search the cleaned text of every document, or the raw extracted text." } }
    } else {
        let match_mode = match value(&sq.mode) {
            "all" => Some(MatchMode::All),
            "any" => Some(MatchMode::Any),
            _ => None,
        };
        let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.is_empty());
        let request = SearchBody {
            query: sq.q.clone(),
            limit: Some(PER_PAGE),
            offset: Some((number - 1) * PER_PAGE),
            classification_prefix: non_empty(value(&sq.class)),
            document_status: non_empty(value(&sq.status)),
            phrase: sq.phrase(),
            scope: non_empty(value(&sq.scope)),
            mode: non_empty(value(&sq.find)),
            match_mode,
            ..SearchBody::default()
        }
        .into_request()
        .map_err(|e| PageError::from_api(&viewer, ApiError::from(e)))?;
        let results = state
            .shelf
            .search_results_cited(&request)
            .await
            .map_err(|e| PageError::app(&viewer, e))?;
        let facets = state
            .shelf
            .search_facets(&request, Some(FACET_LIMIT))
            .await
            .map_err(|e| PageError::app(&viewer, e))?;
        html! {
            (form(&sq, semantic))
            div class="search-layout" {
                nav id="facets" aria-label="Filters" {
                    h2 { "Filter" }
                    (facet("Classification", "classification", &facets.classifications, value(&sq.class),
                        |v| sq.href(1, Some(v), None)))
                    (facet("Status", "status", &facets.statuses, value(&sq.status),
                        |v| sq.href(1, None, Some(v))))
                }
                section id="hits" aria-label="Results" {
                    p class="count" {
                        (results.total) " documents match"
                        @if results.match_mode == MatchMode::Any && match_mode.is_none() {
                            " some of the words (none matched all of them)"
                        }
                    }
                    ol id="results" {
                        @for cited in &results.results {
                            @let hit = &cited.hit;
                            @let href = match &cited.transcript_citation {
                                Some(c) => format!("/ui/documents/{}#{}", hit.document_id, cue_anchor(c.start_seconds)),
                                None => format!("/ui/documents/{}", hit.document_id),
                            };
                            li class="hit" {
                                h3 { a href=(href) { (hit.filename) } }
                                p class="meta" {
                                    (status_badge(hit.document_status.as_str()))
                                    @if let Some(code) = &hit.classification_code {
                                        " " (code) @if let Some(l) = &hit.classification_label { " " (l) }
                                    }
                                    @if let Some(c) = &cited.transcript_citation {
                                        " · at " (format!("{:.0}", c.start_seconds)) " s"
                                    }
                                }
                                // Escaped by the search itself, with only <mark> added.
                                p class="snippet" { (PreEscaped(&hit.snippet)) }
                            }
                        }
                    }
                    (pager(number, PER_PAGE, results.total, |p| sq.href(p, None, None)))
                }
            }
        }
    };
    Ok(render("Search", &viewer, body).into_response())
}

fn form(sq: &SearchQuery, semantic: bool) -> Markup {
    let mode = value(&sq.mode);
    let scope = value(&sq.scope);
    let find = value(&sq.find);
    html! {
        h1 { "Search" }
        form id="search" role="search" method="get" action="/ui/search" {
            p {
                label for="q" { "Search for" }
                input type="search" id="q" name="q" value=(sq.q) required;
                " "
                button type="submit" { "Search" }
            }
            p class="options" {
                @if semantic {
                    (choice("find", "Find by", find, &[
                        ("keyword", "words"),
                        ("hybrid", "words and meaning"),
                        ("semantic", "meaning"),
                    ]))
                    " "
                }
                (choice("mode", "Words", mode, &[
                    ("auto", "all, else any"),
                    ("all", "all of them"),
                    ("any", "any of them"),
                ]))
                " "
                span class="field" {
                    input type="checkbox" id="phrase" name="phrase" checked[sq.phrase()];
                    label for="phrase" { "Exact phrase" }
                }
                " "
                (choice("scope", "Text", scope, &[
                    ("cleaned", "cleaned"),
                    ("raw", "raw (as extracted)"),
                ]))
                @if !value(&sq.class).is_empty() { input type="hidden" name="class" value=(value(&sq.class)); }
                @if !value(&sq.status).is_empty() { input type="hidden" name="status" value=(value(&sq.status)); }
            }
        }
    }
}

/// A labelled `<select>` named `name`: the option whose value is `current` is selected, the
/// first one when `current` is none of them (unset or unknown: the default).
fn choice(name: &str, label: &str, current: &str, options: &[(&str, &str)]) -> Markup {
    let known = options.iter().any(|(value, _)| *value == current);
    html! {
        span class="field" {
            label for=(name) { (label) }
            select id=(name) name=(name) {
                @for (i, (value, text)) in options.iter().enumerate() {
                    option value=(value) selected[*value == current || (i == 0 && !known)] { (text) }
                }
            }
        }
    }
}

fn facet(
    title: &str,
    name: &str,
    buckets: &[FacetCount],
    active: &str,
    href: impl Fn(&str) -> String,
) -> Markup {
    html! {
        h3 { (title) }
        ul class="facet" data-facet=(name) {
            @for b in buckets {
                li {
                    a href=(href(&b.value)) aria-current=[(b.value == active).then_some("true")] {
                        (b.value) @if let Some(l) = &b.label { " " (l) } " (" (b.count) ")"
                    }
                }
            }
            @if !active.is_empty() {
                li { a class="clear" href=(href("")) { "clear" } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the option a rendered `<select>` has selected.
    fn selected(markup: &Markup) -> Vec<String> {
        markup
            .0
            .split("<option ")
            .filter(|o| o.contains(" selected"))
            .filter_map(|o| o.split('"').nth(1).map(str::to_string))
            .collect()
    }

    #[test]
    fn a_choice_selects_the_current_value_else_the_first() {
        let options = [("auto", "all, else any"), ("all", "all"), ("any", "any")];
        for (current, expected) in [
            ("any", "any"),
            ("all", "all"),
            ("", "auto"),
            ("x\"y", "auto"),
        ] {
            let markup = choice("mode", "Words", current, &options);
            assert_eq!(selected(&markup), [expected], "{current:?}: {}", markup.0);
        }
        let markup = choice("mode", "Words", "any", &options);
        assert!(
            markup.0.contains(r#"<label for="mode">Words</label>"#),
            "{}",
            markup.0
        );
        assert!(
            markup.0.contains(r#"<select id="mode" name="mode">"#),
            "{}",
            markup.0
        );
    }
}
