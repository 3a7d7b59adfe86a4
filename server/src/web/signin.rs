//! Signing in and out: a form exchanges an API key for a session cookie (the key itself is
//! never stored, never put in a URL, never handed to scripts); signing out ends the session on
//! the server and clears the cookie. A wrong key is audited like a wrong API key.

use std::net::SocketAddr;

use axum::Form;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Utc;
use maud::html;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use shelf_app::audit::{DenialEvent, DenialReason};

use crate::auth::match_credential;
use crate::client_ip::{client_key, forwarded_https};
use crate::state::AppState;
use crate::web::layout::{Banner, Page, PageError, PageResult, frame};
use crate::web::session::{Viewer, clear_cookie, cookie_token, credential_tag, set_cookie};

#[derive(Debug, Default, Deserialize)]
pub struct NextQuery {
    pub next: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub next: String,
}

/// Where to go after signing in: one of our pages, never another site (`//host`) or a
/// non-page path.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with("/ui") && !n.starts_with("//") && !n.contains('\\') => {
            n.to_string()
        }
        _ => "/ui/".to_string(),
    }
}

fn form_page(viewer: &Viewer, next: &str, banner: Option<&Banner>, status: StatusCode) -> Page {
    let body = html! {
        h1 { "Sign in" }
        p { "Sign in with one of this server's API keys. A read-scope key can read and search; a write-scope key can also upload, reprocess and delete." }
        form id="sign-in" method="post" action="/ui/sign-in" {
            input type="hidden" name="next" value=(next);
            p {
                label for="key" { "API key" }
                input type="password" id="key" name="key" autocomplete="current-password" required;
            }
            p { button type="submit" { "Sign in" } }
        }
    };
    Page {
        status,
        html: frame("Sign in", viewer, banner, body),
    }
}

pub async fn sign_in_page(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    Query(query): Query<NextQuery>,
) -> Response {
    let next = safe_next(query.next.as_deref());
    // Nothing to sign in to (auth off, loopback only), or signed in already.
    if !state.auth_enabled() || viewer.scope.is_some() {
        return Redirect::to(&next).into_response();
    }
    form_page(&viewer, &next, None, StatusCode::OK).into_response()
}

pub async fn sign_in(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    connect: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> PageResult {
    let next = safe_next(Some(&form.next));
    if !state.auth_enabled() {
        return Ok(Redirect::to(&next).into_response());
    }
    let key = form.key.trim().as_bytes();
    let Some(scope) = match_credential(&state.credentials, key) else {
        let trusted = &state.shelf.settings.api.trusted_proxy_cidrs;
        let peer = connect.map(|axum::Extension(ConnectInfo(addr))| addr.ip());
        let client = peer.map(|ip| crate::client_ip::resolve(ip, &headers, trusted));
        state.audit.deny(DenialEvent {
            method: "POST".to_string(),
            path: "/ui/sign-in".to_string(),
            client_host: client.map(|ip| ip.to_string()),
            client_key: client.map_or_else(
                || "unknown".to_string(),
                |ip| client_key(ip, state.shelf.settings.api.client_ipv6_prefix),
            ),
            credential_present: !key.is_empty(),
            scope: None,
            reason: DenialReason::InvalidCredential,
            retry_after_seconds: None,
        });
        let banner = Banner::Error("That key is not valid".to_string());
        return Ok(
            form_page(&viewer, &next, Some(&banner), StatusCode::UNAUTHORIZED).into_response(),
        );
    };
    let digest: [u8; 32] = Sha256::digest(key).into();
    let token = state
        .shelf
        .create_web_session(scope, &credential_tag(&digest), Utc::now())
        .await
        .map_err(|e| PageError::app(&viewer, e))?;
    let secure = forwarded_https(
        connect.map(|axum::Extension(ConnectInfo(addr))| addr.ip()),
        &headers,
        &state.shelf.settings.api.trusted_proxy_cidrs,
    );
    let max_age = u64::from(state.shelf.settings.api.session_hours) * 3600;
    let mut response = Redirect::to(&next).into_response();
    if let Some(cookie) = set_cookie(&token, max_age, secure) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    Ok(response)
}

pub async fn sign_out(
    State(state): State<AppState>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    connect: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
) -> PageResult {
    if let Some(token) = cookie_token(&headers) {
        state
            .shelf
            .end_web_session(token)
            .await
            .map_err(|e| PageError::app(&viewer, e))?;
    }
    let secure = forwarded_https(
        connect.map(|axum::Extension(ConnectInfo(addr))| addr.ip()),
        &headers,
        &state.shelf.settings.api.trusted_proxy_cidrs,
    );
    let target = if state.auth_enabled() {
        "/ui/sign-in"
    } else {
        "/ui/"
    };
    let mut response = Redirect::to(target).into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, clear_cookie(secure));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_in_only_returns_to_our_pages() {
        assert_eq!(
            safe_next(Some("/ui/documents/doc_1")),
            "/ui/documents/doc_1"
        );
        assert_eq!(safe_next(Some("//evil.example/ui")), "/ui/");
        assert_eq!(safe_next(Some("https://evil.example")), "/ui/");
        assert_eq!(safe_next(Some("/documents")), "/ui/");
        assert_eq!(safe_next(Some("/ui\\..\\x")), "/ui/");
        assert_eq!(safe_next(None), "/ui/");
    }
}
