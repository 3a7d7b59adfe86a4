//! Authentication, scopes and the rate limit, in one middleware that runs before routing.
//! A credential comes in `x-api-key` or `Authorization: Bearer`; it is hashed and compared in
//! constant time with every configured digest. Denials are audited without key material.

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

/// The middleware.
pub async fn authorize(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let access = required_access(req.method(), req.uri().path());
    // Probes and /version are never authenticated, and not counted here: a load balancer's
    // health checks must not use up a client's window. `/ready`, which costs a database open
    // and two fsyncs, counts itself under an identity of its own (`routes::service`).
    if access == Access::Open {
        return next.run(req).await;
    }
    let client = client_ip(&req, &state.shelf.settings.api.trusted_proxy_cidrs);
    let presented = presented_credential(req.headers());
    let scope = if state.auth_enabled() {
        presented
            .as_deref()
            .and_then(|key| match_credential(&state.credentials, key))
    } else {
        None
    };
    let v6_prefix = state.shelf.settings.api.client_ipv6_prefix;
    let client_name = client.map_or_else(|| "unknown".to_string(), |ip| client_key(ip, v6_prefix));
    let identity = match (&scope, presented.as_deref()) {
        (Some(_), Some(key)) => format!("key:{}", hex::encode(Sha256::digest(key))),
        _ => format!("ip:{client_name}"),
    };
    let denial = |reason: DenialReason, retry_after: Option<u64>| DenialEvent {
        method: req.method().as_str().to_string(),
        path: req.uri().path().chars().take(MAX_PATH_CHARS).collect(),
        client_host: client.map(|ip| ip.to_string()),
        client_key: client_name.clone(),
        credential_present: presented.is_some(),
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

    if state.auth_enabled()
        && let Some((reason, error)) = refusal(presented.is_some(), scope, access)
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
        _ if access == Access::Open => None,
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
