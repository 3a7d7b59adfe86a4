//! Web sessions: the `shelf_session` cookie a sign-in sets in exchange for an API key, how a
//! request's cookie is resolved to a scope (the session row, checked against the keys
//! configured now), the same-origin check that guards every change a cookie authenticates,
//! and what a page knows of its viewer ([`Viewer`]).

use axum::http::{HeaderMap, HeaderValue, Method, header};
use chrono::Utc;
use sha2::{Digest, Sha256};
use shelf_app::settings::Scope;

use crate::state::AppState;

/// The cookie's name.
pub const COOKIE: &str = "shelf_session";

/// Who is looking at a page, set by the auth middleware on every page request.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// `None`: not signed in (only the sign-in page and the assets answer).
    pub scope: Option<Scope>,
    /// Signed in with a session (there is something to sign out of); false with auth off.
    pub session: bool,
    pub auth_enabled: bool,
}

impl Viewer {
    pub fn can_write(&self) -> bool {
        self.scope == Some(Scope::Write)
    }
}

/// The session token in the request's `Cookie` headers, if any looks like one.
pub fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// What a session records of the key it was made with: a digest of the key's digest under a
/// label of its own (never the key, nor the digest the configuration compares). A session
/// lives only while a configured key has this tag, so removing a key ends its sessions.
pub fn credential_tag(key_digest: &[u8; 32]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"shelf web session\0");
    hasher.update(key_digest);
    hex::encode(hasher.finalize())
}

/// The scope a session cookie grants now: its session must exist and be unexpired, and a
/// configured key must still carry its tag; the scope is the lower of the session's and that
/// key's (a key moved from write to read scope downgrades its sessions).
pub async fn session_scope(
    state: &AppState,
    token: &str,
) -> Result<Option<Scope>, shelf_app::AppError> {
    let Some(session) = state.shelf.web_session(token, Utc::now()).await? else {
        return Ok(None);
    };
    let key_scope = state
        .credentials
        .iter()
        .filter(|(digest, _)| credential_tag(digest) == session.credential_tag)
        .map(|(_, scope)| *scope)
        .max_by_key(|scope| *scope == Scope::Write);
    Ok(key_scope.map(|key_scope| {
        if key_scope == Scope::Write && session.scope == Scope::Write {
            Scope::Write
        } else {
            Scope::Read
        }
    }))
}

/// Identity of a session for the rate limit and the stream cap (the token's digest).
pub fn session_identity(token: &str) -> String {
    format!("session:{}", hex::encode(Sha256::digest(token.as_bytes())))
}

/// Methods that change something.
pub fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether a request comes from this server's own pages: its `Origin` names the host the
/// request was sent to (scheme aside: a proxy may end TLS), and a `Sec-Fetch-Site` header, when
/// the browser sends one, says `same-origin`. No `Origin` at all counts as foreign: browsers
/// send it on every form post and `fetch` that changes something.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let fetch_site_ok = headers
        .get("sec-fetch-site")
        .is_none_or(|v| v.as_bytes() == b"same-origin");
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let origin_host = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .and_then(|o| {
            o.strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"))
        });
    fetch_site_ok && origin_host.is_some_and(|o| o.eq_ignore_ascii_case(host.trim()))
}

/// The `Set-Cookie` value of a new session: not readable by scripts, never sent by another
/// site's requests, `Secure` when the page was served over TLS (by a trusted proxy).
pub fn set_cookie(token: &str, max_age_seconds: u64, secure: bool) -> Option<HeaderValue> {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_seconds}{secure}"
    ))
    .ok()
}

/// The `Set-Cookie` value that removes the cookie.
pub fn clear_cookie(secure: bool) -> HeaderValue {
    if secure {
        HeaderValue::from_static(
            "shelf_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure",
        )
    } else {
        HeaderValue::from_static("shelf_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, HeaderValue::from_static(value));
        }
        h
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        assert_eq!(cookie_token(&headers(&[])), None);
        let h = headers(&[("cookie", "a=1; shelf_session=abc ; b=2")]);
        assert_eq!(cookie_token(&h), Some("abc"));
        let h = headers(&[("cookie", "a=1"), ("cookie", "shelf_session=xyz")]);
        assert_eq!(cookie_token(&h), Some("xyz"));
        assert_eq!(
            cookie_token(&headers(&[("cookie", "shelf_session=")])),
            None
        );
        assert_eq!(
            cookie_token(&headers(&[("cookie", "xshelf_session=1")])),
            None
        );
    }

    #[test]
    fn only_this_server_s_origin_may_change_things() {
        let ok = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ]);
        assert!(same_origin(&ok));
        let tls = headers(&[
            ("host", "shelf.example"),
            ("origin", "https://shelf.example"),
        ]);
        assert!(same_origin(&tls));
        let foreign = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
        ]);
        assert!(!same_origin(&foreign));
        let other_port = headers(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:9")]);
        assert!(!same_origin(&other_port));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8080")])));
        let null = headers(&[("host", "127.0.0.1:8080"), ("origin", "null")]);
        assert!(!same_origin(&null));
        let cross_site = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert!(!same_origin(&cross_site));
    }

    #[test]
    fn cookies_are_http_only_and_strict() {
        let c = set_cookie("tok", 3600, false).expect("cookie");
        let c = c.to_str().expect("ascii");
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Path=/"));
        assert!(!c.contains("Secure"));
        let c = set_cookie("tok", 3600, true).expect("cookie");
        assert!(c.to_str().expect("ascii").ends_with("; Secure"));
        assert!(
            clear_cookie(true)
                .to_str()
                .expect("ascii")
                .contains("Max-Age=0")
        );
    }

    #[test]
    fn tags_depend_on_the_key() {
        assert_ne!(credential_tag(&[0; 32]), credential_tag(&[1; 32]));
        assert_eq!(credential_tag(&[0; 32]).len(), 64);
    }
}
