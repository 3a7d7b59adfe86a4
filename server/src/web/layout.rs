//! The frame every page shares (head, navigation, banners), the page-level errors (sign-in
//! redirects, refusals, failures shown as a page with their code), and the small pieces pages
//! repeat: status badges, pagers, times and sizes.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{DOCTYPE, Markup, html};
use shelf_app::AppError;

use crate::error::{ApiError, ErrorCause, ErrorCode, ErrorDetail, http_status};
use crate::web::assets;
use crate::web::session::Viewer;

/// The pages' Content-Security-Policy: only this server's own files, no inline script or
/// style, no framing, forms post only here.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
                       img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; \
                       base-uri 'none'";

/// A rendered page with its status.
pub struct Page {
    pub status: StatusCode,
    pub html: Markup,
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.html.into_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
        // Not the API's `no-referrer`: under it a browser sends `Origin: null` with a form's
        // post, which the same-origin check must refuse. `same-origin` still sends nothing to
        // other sites.
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        );
        response
    }
}

/// A message above the page's content.
pub enum Banner {
    Error(String),
    Notice(String),
}

/// The whole document around `body`: `title` names the page (also its `<h1>` unless the body
/// has its own heading).
pub fn frame(title: &str, viewer: &Viewer, banner: Option<&Banner>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Shelf" }
                link rel="icon" href=(assets::url("favicon.svg")) type="image/svg+xml";
                link rel="stylesheet" href=(assets::url("shelf.css"));
                script src=(assets::url("shelf.js")) defer {}
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header class="site" {
                    a class="brand" href="/ui/" { "Shelf" }
                    @if viewer.scope.is_some() {
                        nav aria-label="Main" {
                            ul {
                                li { a href="/ui/" { "Library" } }
                                li { a href="/ui/search" { "Search" } }
                                li { a href="/ui/pipelines" { "Pipelines" } }
                                @if viewer.can_write() {
                                    li { a href="/ui/operations" { "Operations" } }
                                }
                            }
                        }
                    }
                    @if viewer.session {
                        form id="sign-out" method="post" action="/ui/sign-out" {
                            span class="scope" {
                                @if viewer.can_write() { "write access" } @else { "read-only" }
                            }
                            " "
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main id="main" {
                    @match banner {
                        Some(Banner::Error(text)) => div class="banner error" role="alert" { (text) },
                        Some(Banner::Notice(text)) => div class="banner notice" role="status" { (text) },
                        None => {},
                    }
                    (body)
                }
            }
        }
    }
}

/// A page answered `200`.
pub fn render(title: &str, viewer: &Viewer, body: Markup) -> Page {
    Page {
        status: StatusCode::OK,
        html: frame(title, viewer, None, body),
    }
}

/// Why a page is not shown.
pub enum PageError {
    /// Not signed in: to the sign-in page, coming back to `next` afterwards.
    SignIn { next: String },
    /// A refusal or failure, shown as a page with its code.
    Shown {
        viewer: Viewer,
        status: StatusCode,
        code: ErrorCode,
        detail: String,
        /// Logged once by the error middleware, never shown.
        cause: Option<String>,
    },
}

impl PageError {
    pub fn new(viewer: &Viewer, code: ErrorCode, detail: impl Into<String>) -> Self {
        PageError::Shown {
            viewer: viewer.clone(),
            status: http_status(code),
            code,
            detail: detail.into(),
            cause: None,
        }
    }

    pub fn not_found(viewer: &Viewer, what: &str) -> Self {
        Self::new(viewer, ErrorCode::NotFound, format!("{what} not found"))
    }

    /// What the API would answer, as a page.
    pub fn from_api(viewer: &Viewer, error: ApiError) -> Self {
        let body = error.body();
        let detail = match body.detail {
            ErrorDetail::Message(text) => text,
            ErrorDetail::Issues(issues) => issues
                .iter()
                .map(|i| i.msg.clone())
                .collect::<Vec<_>>()
                .join("; "),
        };
        PageError::Shown {
            viewer: viewer.clone(),
            status: http_status(error.code),
            code: error.code,
            detail,
            cause: error.cause,
        }
    }

    pub fn app(viewer: &Viewer, error: AppError) -> Self {
        Self::from_api(viewer, ApiError::from(error))
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::SignIn { next } => {
                let target = format!("/ui/sign-in?{}", query(&[("next", &next)]));
                Redirect::to(&target).into_response()
            }
            PageError::Shown {
                viewer,
                status,
                code,
                detail,
                cause,
            } => {
                let title = status.canonical_reason().unwrap_or("Error");
                let body = html! {
                    h1 { (title) }
                    p { "Code: " code { (code.as_str()) } }
                    p { a href="/ui/" { "Back to the library" } }
                };
                let banner = Banner::Error(detail);
                let mut response = Page {
                    status,
                    html: frame(title, &viewer, Some(&banner), body),
                }
                .into_response();
                if let Some(cause) = cause {
                    response.extensions_mut().insert(ErrorCause(cause));
                }
                response
            }
        }
    }
}

/// Pages of `Result<_, PageError>`.
pub type PageResult<T = Response> = Result<T, PageError>;

impl Viewer {
    /// Signed in with any scope, else off to sign in (coming back to `next`).
    pub fn require_read(&self, next: &str) -> PageResult<()> {
        match self.scope {
            Some(_) => Ok(()),
            None => Err(PageError::SignIn {
                next: next.to_string(),
            }),
        }
    }

    /// Signed in with write scope: a read-scope session is refused like a read key.
    pub fn require_write(&self, next: &str) -> PageResult<()> {
        self.require_read(next)?;
        if self.can_write() {
            Ok(())
        } else {
            Err(PageError::new(
                self,
                ErrorCode::InsufficientScope,
                "You are signed in with a read-scope key; this needs a write-scope key",
            ))
        }
    }
}

/// A status, as text in a badge (its class only adds colour).
pub fn status_badge(status: &str) -> Markup {
    let class = format!("status status-{status}");
    html! { span class=(class) { (status) } }
}

/// `2026-11-26T07:12:03.123Z` as `2026-11-26 07:12:03 UTC`, the full value in `datetime`.
pub fn time(value: &str) -> Markup {
    let shown = value.get(..19).map_or_else(
        || value.to_string(),
        |s| format!("{} UTC", s.replace('T', " ")),
    );
    html! { time datetime=(value) { (shown) } }
}

/// Bytes for people.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Previous/next links for page `page` (1-based) of `total` items, `per_page` each; `href`
/// makes a page's URL.
pub fn pager(page: u64, per_page: u64, total: u64, href: impl Fn(u64) -> String) -> Markup {
    let pages = total.div_ceil(per_page).max(1);
    html! {
        @if pages > 1 {
            nav class="pager" aria-label="Pages" {
                @if page > 1 {
                    a rel="prev" href=(href(page - 1)) { "← Previous" }
                }
                span { "Page " (page) " of " (pages) }
                @if page < pages {
                    a rel="next" href=(href(page + 1)) { "Next →" }
                }
            }
        }
    }
}

/// A query string from `pairs`, leaving out empty values.
pub fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        if !value.is_empty() {
            out.append_pair(name, value);
        }
    }
    out.finish()
}

/// The 1-based page a `page` parameter asks for (anything unusable is the first).
pub fn page_number(raw: Option<&str>) -> u64 {
    raw.and_then(|p| p.trim().parse::<u64>().ok())
        .filter(|p| *p >= 1)
        .map_or(1, |p| p.min(1_000_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_read_well() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(2048), "2.0 KB");
        assert_eq!(size(5 * 1024 * 1024), "5.0 MB");
        let t = time("2026-11-26T07:12:03.123Z").into_string();
        assert!(t.contains("2026-11-26 07:12:03 UTC"), "{t}");
        assert!(time("x").into_string().contains(">x<"));
    }

    #[test]
    fn pagers_link_only_existing_pages() {
        let href = |p: u64| format!("/ui/?page={p}");
        assert_eq!(pager(1, 50, 10, href).into_string(), "");
        let first = pager(1, 50, 120, href).into_string();
        assert!(first.contains("rel=\"next\"") && !first.contains("rel=\"prev\""));
        let last = pager(3, 50, 120, href).into_string();
        assert!(last.contains("rel=\"prev\"") && !last.contains("rel=\"next\""));
        assert_eq!(page_number(Some("0")), 1);
        assert_eq!(page_number(Some("x")), 1);
        assert_eq!(page_number(Some("3")), 3);
    }

    #[test]
    fn queries_leave_out_empty_values() {
        assert_eq!(
            query(&[("q", "a b"), ("class", ""), ("page", "2")]),
            "q=a+b&page=2"
        );
    }
}
