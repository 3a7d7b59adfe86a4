//! The cross-cutting layers every request passes: request ids, security
//! headers, the request size limit, JSON bodies for every error (also the framework's own), the
//! one log line per error cause, and panics turned into `server_error`.

use std::any::Any;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorCause, ErrorCode};
use crate::extract::request_too_large;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The id of the request being served, for handlers that log.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// A client-supplied id is kept when it is short and plain (it ends up in logs); otherwise a
/// new one is made.
fn acceptable_request_id(value: &HeaderValue) -> Option<String> {
    let text = value.to_str().ok()?;
    let ok = (1..=128).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    ok.then(|| text.to_string())
}

fn new_request_id() -> String {
    format!("req_{:016x}", fastrand::u64(..))
}

/// Echoes or assigns `x-request-id` (the request span, a layer inside this one, carries it).
pub async fn request_id(mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(acceptable_request_id)
        .unwrap_or_else(new_request_id);
    let header_value = HeaderValue::from_str(&id).ok();
    if let Some(value) = &header_value {
        req.headers_mut().insert(REQUEST_ID, value.clone());
    }
    req.extensions_mut().insert(RequestId(id));
    let mut response = next.run(req).await;
    if let Some(value) = header_value {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

const SECURITY_HEADERS: &[(&str, &str)] = &[
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    (
        "permissions-policy",
        "accelerometer=(), camera=(), geolocation=(), gyroscope=(), magnetometer=(), \
         microphone=(), payment=(), usb=(), interest-cohort=()",
    ),
    ("cache-control", "no-store"),
    (
        "content-security-policy",
        "default-src 'none'; frame-ancestors 'none'",
    ),
];

/// The response headers of docs/api.md ("Every response") on every response: JSON, text, event
/// streams and errors alike. A web page sets its own `Content-Security-Policy` (it loads the
/// server's own stylesheet and script) and `Referrer-Policy` (`web::layout`), an asset its own
/// `Cache-Control`; those are kept.
pub async fn security_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let cacheable = response.extensions().get::<Cacheable>().is_some();
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        let own = match *name {
            "content-security-policy" | "referrer-policy" => headers.contains_key(*name),
            "cache-control" => cacheable,
            _ => false,
        };
        if !own {
            headers.insert(*name, HeaderValue::from_static(value));
        }
    }
    response
}

/// Marks a response whose own `Cache-Control` stands (the web assets, named by digest).
#[derive(Debug, Clone, Copy)]
pub struct Cacheable;

/// `SHELF_API_MAX_REQUEST_BYTES`, before routing: a declared `Content-Length` over the limit is
/// refused without reading a byte; otherwise the body is wrapped so that streaming past the
/// limit fails the read (extractors turn that failure into `request_too_large`).
pub async fn limit_request_size(State(max): State<u64>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|len| len > max) {
        return request_too_large().into_response();
    }
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    let req = req.map(|body| Body::new(http_body_util::Limited::new(body, limit)));
    next.run(req).await
}

/// Every error response leaves with a JSON `{detail, code}` body: responses that arrive
/// without one (the router's 405, a layer's rejection) get the body of their status. The cause
/// an [`ApiError`] attached is logged here, once, and never sent.
pub async fn errors(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let mut response = next.run(req).await;
    let status = response.status();
    if let Some(ErrorCause(cause)) = response.extensions_mut().remove::<ErrorCause>() {
        if status.is_server_error() {
            tracing::error!(%method, %path, status = status.as_u16(), cause = %cause, "request failed");
        } else {
            tracing::warn!(%method, %path, status = status.as_u16(), cause = %cause, "request refused");
        }
    }
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    // A web page's error is a page (with its banner), not JSON.
    let has_body = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    if has_body {
        return response;
    }
    let code = ErrorCode::for_status(status.as_u16());
    let detail = match code {
        ErrorCode::NotFound => "Not Found",
        ErrorCode::MethodNotAllowed => "Method Not Allowed",
        ErrorCode::RequestTooLarge => "Request body exceeds the configured limit",
        _ => status.canonical_reason().unwrap_or("Request failed"),
    };
    let mut replaced = ApiError::new(code, detail).into_response();
    *replaced.status_mut() = status;
    // Keep what the original said beyond its body (e.g. `Allow` on a 405).
    let (parts, _) = response.into_parts();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            replaced.headers_mut().insert(name.clone(), value.clone());
        }
    }
    replaced
}

/// The fallback for unknown routes: JSON, or a page under `/ui` (where a browser is).
pub async fn not_found(viewer: Option<axum::Extension<crate::web::session::Viewer>>) -> Response {
    match viewer {
        Some(axum::Extension(viewer)) => {
            crate::web::layout::PageError::not_found(&viewer, "Page").into_response()
        }
        None => ApiError::not_found("Not Found").into_response(),
    }
}

/// `CatchPanicLayer`'s handler: the panic text is a cause, never a detail.
pub fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let text = if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    };
    ApiError::internal(format!("handler panicked: {text}")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_plain_and_bounded() {
        assert_eq!(
            acceptable_request_id(&HeaderValue::from_static("abc-123_x.y:z")),
            Some("abc-123_x.y:z".into())
        );
        assert_eq!(
            acceptable_request_id(&HeaderValue::from_static("has space")),
            None
        );
        let long = "a".repeat(129);
        assert_eq!(
            acceptable_request_id(&HeaderValue::from_str(&long).expect("header")),
            None
        );
        assert!(new_request_id().starts_with("req_"));
    }
}
