//! Authentication, scopes and the rate limit, in one middleware that runs before routing.
//! A credential comes in `x-api-key` or `Authorization: Bearer`; it is hashed and compared in
//! constant time with every configured digest. Without one, a browser's web session cookie
//! (`web::session`) stands for the key it was made with; changes it authenticates need this
//! server's `Origin`. Page requests (`/`, `/ui/…`) pass with their [`Viewer`] attached. Denials are audited without key material.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use shelf_app::Settings;
use shelf_app::audit::{DenialEvent, DenialReason, MAX_PATH_CHARS};
use shelf_app::settings::Scope;
use subtle::{Choice, ConstantTimeEq};

use crate::client_ip::{client_ip, client_key};
use crate::error::{ApiError, ErrorCode};
use crate::policy::{Access, required_access};
use crate::rate_limit::Verdict;
use crate::state::AppState;
use crate::web::session::{
    Viewer, cookie_token, is_unsafe, same_origin, session_identity, session_scope,
};

/// The credential a request presents: `x-api-key` first, else a Bearer token. A header that
/// is present but unusable (empty, another scheme) still counts as presented, so it is denied
/// as invalid rather than as missing.
pub fn presented_credential(headers: &HeaderMap) -> Option<Vec<u8>> {
    if let Some(key) = headers.get("x-api-key") {
        return Some(key.as_bytes().trim_ascii().to_vec());
    }
    let auth = headers.get(axum::http::header::AUTHORIZATION)?;
    let value = auth.as_bytes().trim_ascii();
    let token = match value.split_at_checked(7) {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case(b"bearer ") => rest.trim_ascii(),
        _ => &[],
    };
    Some(token.to_vec())
}

/// Each configured credential as its SHA-256 digest, with its scope.
pub type Credentials = Vec<([u8; 32], Scope)>;

/// Hashes the configured credentials once, for [`match_credential`].
pub fn credential_digests(settings: &Settings) -> Credentials {
    settings
        .api
        .credentials
        .iter()
        .map(|c| (c.digest(), c.scope()))
        .collect()
}

/// The highest scope among configured digests equal to the key's digest. Every digest is
/// compared, with no early exit, so timing reveals nothing about which (or whether one) matched.
pub fn match_credential(configured: &[([u8; 32], Scope)], key: &[u8]) -> Option<Scope> {
    if key.is_empty() {
        return None;
    }
    let digest: [u8; 32] = Sha256::digest(key).into();
    let mut read = Choice::from(0);
    let mut write = Choice::from(0);
    for (candidate, scope) in configured {
        let equal = candidate.ct_eq(&digest);
        match scope {
            Scope::Read => read |= equal,
            Scope::Write => write |= equal,
        }
    }
    if bool::from(write) {
        Some(Scope::Write)
    } else if bool::from(read) {
        Some(Scope::Read)
    } else {
        None
    }
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Read => "read",
        Scope::Write => "write",
    }
}

/// Who a request counts as for the rate limit and the stream cap: its credential when it
/// authenticated, else its client (an IPv6 network as one), so guessing keys from one address
/// is limited like any other traffic from it. Handlers find it in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity(pub String);

/// How a request authenticated, when it did.
enum Presented {
    /// Nothing usable.
    Nothing,
    /// A key in a header (`x-api-key`, Bearer): scripts and the CLI.
    Key(Vec<u8>),
    /// The web session cookie (no key header): a browser signed in through `/ui/sign-in`.
    Session(String),
}

/// The middleware. A key in a header wins over a session cookie; a cookie is only looked up
/// when there is no key, so API clients never pay for a session lookup.
pub async fn authorize(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let access = required_access(req.method(), req.uri().path());
    // Probes and /version are never authenticated, and not counted here: a load balancer's
    // health checks must not use up a client's window. `/ready`, which costs a database open
    // and two fsyncs, counts itself under an identity of its own (`routes::service`).
    if access == Access::Open {
        return next.run(req).await;
    }
    let client = client_ip(&req, &state.shelf.settings.api.trusted_proxy_cidrs);
    let presented = match presented_credential(req.headers()) {
        Some(key) => Presented::Key(key),
        None => match cookie_token(req.headers()) {
            Some(token) if state.auth_enabled() => Presented::Session(token.to_string()),
            _ => Presented::Nothing,
        },
    };
    let scope = match &presented {
        _ if !state.auth_enabled() => None,
        Presented::Key(key) => match_credential(&state.credentials, key),
        Presented::Session(token) => match session_scope(&state, token).await {
            Ok(scope) => scope,
            Err(e) => return ApiError::from(e).into_response(),
        },
        Presented::Nothing => None,
    };
    let v6_prefix = state.shelf.settings.api.client_ipv6_prefix;
    let client_name = client.map_or_else(|| "unknown".to_string(), |ip| client_key(ip, v6_prefix));
    let identity = match (&scope, &presented) {
        (Some(_), Presented::Key(key)) => format!("key:{}", hex::encode(Sha256::digest(key))),
        (Some(_), Presented::Session(token)) => session_identity(token),
        _ => format!("ip:{client_name}"),
    };
    // A session that expired or whose key was removed counts as no credential: the browser is
    // sent to sign in again rather than told its key is wrong.
    let credential_present = matches!(presented, Presented::Key(_))
        || (matches!(presented, Presented::Session(_)) && scope.is_some());
    let denial = |reason: DenialReason, retry_after: Option<u64>| DenialEvent {
        method: req.method().as_str().to_string(),
        path: req.uri().path().chars().take(MAX_PATH_CHARS).collect(),
        client_host: client.map(|ip| ip.to_string()),
        client_key: client_name.clone(),
        credential_present,
        scope: scope.map(|s| scope_name(s).to_string()),
        reason,
        retry_after_seconds: retry_after,
    };

    // A disabled limit allows everything.
    if let Verdict::Limited { retry_after } = state.limiter.check(&identity) {
        state
            .audit
            .deny(denial(DenialReason::RateLimited, Some(retry_after)));
        return ApiError::new(ErrorCode::RateLimited, "Rate limit exceeded; retry later")
            .retry_after(retry_after)
            .into_response();
    }

    // What a cookie authenticates (and a sign-in, which has no cookie yet) may only be changed
    // from this server's own pages: SameSite keeps other sites' requests from carrying the
    // cookie, and this refuses those that would anyway (an old browser, a sibling subdomain).
    let by_cookie = matches!(presented, Presented::Session(_)) && scope.is_some();
    let needs_origin = is_unsafe(req.method()) && (by_cookie || access == Access::Page);
    if needs_origin && !same_origin(req.headers()) {
        state.audit.deny(denial(DenialReason::CrossOrigin, None));
        return ApiError::new(
            ErrorCode::CrossOriginRequest,
            "This change must come from Shelf's own pages (the Origin header is missing or \
             names another site); scripts send x-api-key instead of the session cookie",
        )
        .into_response();
    }

    if access == Access::Page {
        let viewer = Viewer {
            scope: if state.auth_enabled() {
                scope
            } else {
                Some(Scope::Write)
            },
            session: by_cookie,
            auth_enabled: state.auth_enabled(),
        };
        req.extensions_mut().insert(viewer);
        req.extensions_mut().insert(Identity(identity));
        return next.run(req).await;
    }

    if state.auth_enabled()
        && let Some((reason, error)) = refusal(credential_present, scope, access)
    {
        state.audit.deny(denial(reason, None));
        return error.into_response();
    }
    req.extensions_mut().insert(Identity(identity));
    next.run(req).await
}

/// Why a request that needs `access` is refused when credentials are configured, given
/// whether it presented one and the scope that matched; `None` lets it through.
pub fn refusal(
    presented: bool,
    scope: Option<Scope>,
    access: Access,
) -> Option<(DenialReason, ApiError)> {
    match (presented, scope) {
        _ if matches!(access, Access::Open | Access::Page) => None,
        (false, _) => Some((
            DenialReason::MissingCredential,
            ApiError::new(
                ErrorCode::InvalidApiKey,
                "Missing API key: send x-api-key or Authorization: Bearer",
            ),
        )),
        (true, None) => Some((
            DenialReason::InvalidCredential,
            ApiError::new(ErrorCode::InvalidApiKey, "Invalid API key"),
        )),
        (true, Some(Scope::Read)) if access == Access::Write => Some((
            DenialReason::InsufficientScope,
            ApiError::new(
                ErrorCode::InsufficientScope,
                "This API key has read scope; this request needs write scope",
            ),
        )),
        (true, Some(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn configured() -> Vec<([u8; 32], Scope)> {
        vec![
            (Sha256::digest(b"reader").into(), Scope::Read),
            (Sha256::digest(b"writer").into(), Scope::Write),
            (Sha256::digest(b"both").into(), Scope::Read),
            (Sha256::digest(b"both").into(), Scope::Write),
        ]
    }

    #[test]
    fn keys_match_by_digest_with_the_highest_scope() {
        let c = configured();
        assert_eq!(match_credential(&c, b"reader"), Some(Scope::Read));
        assert_eq!(match_credential(&c, b"writer"), Some(Scope::Write));
        assert_eq!(match_credential(&c, b"both"), Some(Scope::Write));
        assert_eq!(match_credential(&c, b"writer2"), None);
        assert_eq!(match_credential(&c, b""), None);
    }

    #[test]
    fn credentials_come_from_either_header() {
        let mut h = HeaderMap::new();
        assert_eq!(presented_credential(&h), None);
        h.insert("authorization", HeaderValue::from_static("bearer  tok "));
        assert_eq!(presented_credential(&h), Some(b"tok".to_vec()));
        h.insert("authorization", HeaderValue::from_static("Basic dXNlcg=="));
        assert_eq!(presented_credential(&h), Some(Vec::new()));
        h.insert("x-api-key", HeaderValue::from_static("k1"));
        assert_eq!(presented_credential(&h), Some(b"k1".to_vec()));
    }
}
