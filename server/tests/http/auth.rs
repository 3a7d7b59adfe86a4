//! Authentication, scopes, rate limit and the audit trail: every route against every kind of
//! credential, and the denials stored without key material.

use axum::http::Method;
use serde_json::json;

use crate::common::*;

/// Every route of the API with a concrete path, and what it needs.
pub const ROUTES: &[(&str, &str, &str)] = &[
    // (method, path template, access)
    ("POST", "/documents", "write"),
    ("POST", "/documents/batch", "write"),
    ("GET", "/documents", "read"),
    ("GET", "/documents/{id}", "read"),
    ("DELETE", "/documents/{id}", "write"),
    ("POST", "/documents/{id}/reprocess", "write"),
    ("GET", "/documents/{id}/content", "read"),
    ("GET", "/documents/{id}/pages", "read"),
    ("GET", "/documents/{id}/similar", "read"),
    ("GET", "/documents/{id}/okf", "read"),
    ("GET", "/export/okf", "read"),
    ("GET", "/documents/{id}/export", "read"),
    ("POST", "/imports", "write"),
    ("GET", "/imports/status", "read"),
    ("GET", "/imports/page-manifest", "write"),
    ("POST", "/runs", "write"),
    ("GET", "/runs", "read"),
    ("GET", "/runs/{id}", "read"),
    ("POST", "/runs/{id}/cancel", "write"),
    ("POST", "/runs/{id}/retry", "write"),
    ("GET", "/queue", "read"),
    ("GET", "/runs/{id}/events", "read"),
    ("GET", "/runs/{id}/events/records", "read"),
    ("GET", "/runs/{id}/events/stream", "read"),
    ("GET", "/runs/{id}/events/records/stream", "read"),
    ("POST", "/search", "read"),
    ("POST", "/search/results", "read"),
    ("POST", "/search/facets", "read"),
    ("GET", "/health", "open"),
    ("GET", "/ready", "open"),
    ("GET", "/version", "open"),
    ("GET", "/classifications", "read"),
    ("GET", "/config", "write"),
    ("GET", "/metrics", "write"),
    ("GET", "/metrics/prometheus", "write"),
    ("GET", "/openapi.json", "read"),
];

fn concrete(path: &str) -> String {
    path.replace("{id}", "doc_0000000000000000")
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cred {
    None,
    Bad,
    ReadKey,
    ReadBearer,
    WriteKey,
    WriteBearer,
    HashedWrite,
    HashedRead,
}

fn with(call: Call, cred: Cred) -> Call {
    match cred {
        Cred::None => call,
        Cred::Bad => call.key("not-a-configured-key"),
        Cred::ReadKey => call.key(READ_KEY),
        Cred::ReadBearer => call.bearer(READ_KEY),
        Cred::WriteKey => call.key(WRITE_KEY),
        Cred::WriteBearer => call.bearer(WRITE_KEY),
        Cred::HashedWrite => call.bearer(HASHED_KEY),
        Cred::HashedRead => call.key(HASHED_READ_KEY),
    }
}

fn request(method: &str, path: &str) -> Call {
    let method: Method = method.parse().expect("method");
    let call = Call::new(method.clone(), &concrete(path));
    if method == Method::POST && path.starts_with("/search") {
        call.json(&json!({"query": "anything"}))
    } else if method == Method::POST && path == "/runs" {
        call.json(&json!({"document_id": "doc_0000000000000000"}))
    } else {
        call
    }
}

#[tokio::test]
async fn every_route_against_every_credential() {
    let app = TestApp::with(auth_vars()).await;
    let creds = [
        Cred::None,
        Cred::Bad,
        Cred::ReadKey,
        Cred::ReadBearer,
        Cred::WriteKey,
        Cred::WriteBearer,
        Cred::HashedWrite,
        Cred::HashedRead,
    ];
    for (method, path, access) in ROUTES {
        for cred in creds {
            let reply = app.call(with(request(method, path), cred)).await;
            let status = reply.status.as_u16();
            let is_read = matches!(cred, Cred::ReadKey | Cred::ReadBearer | Cred::HashedRead);
            let expected = match (*access, cred) {
                ("open", _) => None,
                (_, Cred::None | Cred::Bad) => Some((401, "invalid_api_key")),
                ("write", _) if is_read => Some((403, "insufficient_scope")),
                _ => None,
            };
            match expected {
                Some((status, code)) => {
                    reply.assert_error(status, code);
                    if status == 401 {
                        assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
                    }
                }
                None => assert!(
                    status != 401 && status != 403,
                    "{method} {path} with {cred:?}: {status} {}",
                    reply.text()
                ),
            }
        }
    }
}

#[tokio::test]
async fn unknown_routes_need_a_credential_too() {
    let app = TestApp::with(auth_vars()).await;
    app.get("/nowhere")
        .await
        .assert_error(401, "invalid_api_key");
    app.call(Call::new(Method::GET, "/nowhere").key(READ_KEY))
        .await
        .assert_error(404, "not_found");
    // Write-only prefixes hold for routes that do not exist yet.
    app.call(Call::new(Method::GET, "/metrics").key(READ_KEY))
        .await
        .assert_error(403, "insufficient_scope");
    app.call(Call::new(Method::GET, "/imports/page-manifest").key(READ_KEY))
        .await
        .assert_error(403, "insufficient_scope");
    app.call(Call::new(Method::GET, "/metrics/other").key(READ_KEY))
        .await
        .assert_error(403, "insufficient_scope");
    app.call(Call::new(Method::GET, "/metrics/other").key(WRITE_KEY))
        .await
        .assert_error(404, "not_found");
}

#[tokio::test]
async fn without_credentials_configured_everything_is_open() {
    let app = TestApp::new().await;
    assert_eq!(app.get("/config").await.status, 200);
    assert_eq!(app.get("/openapi.json").await.status, 200);
    assert_eq!(
        app.call(Call::new(Method::GET, "/documents").key("anything"))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn single_key_and_single_hash_settings() {
    let app = TestApp::with([
        ("SHELF_API_KEY", "solo-key".to_string()),
        ("SHELF_API_KEY_SHA256", sha256_hex("solo-hashed")),
    ])
    .await;
    for key in ["solo-key", "solo-hashed"] {
        assert_eq!(
            app.call(Call::new(Method::GET, "/config").key(key))
                .await
                .status,
            200,
            "{key} has write scope"
        );
    }
    // The configured hash itself is not a key.
    app.call(Call::new(Method::GET, "/documents").key(&sha256_hex("solo-hashed")))
        .await
        .assert_error(401, "invalid_api_key");
    // Another scheme is not a bearer token.
    app.call(Call::new(Method::GET, "/documents").header("authorization", "Basic solo-key"))
        .await
        .assert_error(401, "invalid_api_key");
}

#[tokio::test]
async fn denials_are_audited_without_key_material() {
    let app = TestApp::with(auth_vars()).await;
    app.get("/documents").await;
    app.call(Call::new(Method::GET, "/documents").key("secret-guess-123"))
        .await;
    app.call(Call::new(Method::GET, "/config").key(READ_KEY))
        .await;
    app.wait_audit(3).await;
    let page = app.shelf().audit_events(10, 0).await.expect("audit");
    let reasons: Vec<&str> = page.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "insufficient_scope",
            "invalid_credential",
            "missing_credential"
        ]
    );
    let scope = &page.events[0];
    assert_eq!(scope.scope.as_deref(), Some("read"));
    assert_eq!(scope.path, "/config");
    assert_eq!(scope.method, "GET");
    assert_eq!(scope.client_host.as_deref(), Some("127.0.0.1"));
    assert!(scope.credential_present);
    assert!(!page.events[2].credential_present);
    let dump = format!("{page:?}");
    assert!(!dump.contains("secret-guess") && !dump.contains(READ_KEY));
}

#[tokio::test]
async fn rate_limit_per_identity_with_retry_after() {
    let mut vars = auth_vars();
    vars.push(("SHELF_API_RATE_LIMIT_PER_MINUTE".into(), "2".into()));
    let app = TestApp::with(vars).await;
    for _ in 0..2 {
        assert_eq!(
            app.call(Call::new(Method::GET, "/documents").key(READ_KEY))
                .await
                .status,
            200
        );
    }
    let limited = app
        .call(Call::new(Method::GET, "/documents").key(READ_KEY))
        .await;
    limited.assert_error(429, "rate_limited");
    let retry: u64 = limited
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=60).contains(&retry));
    // Another key is another identity; probes are never limited.
    assert_eq!(
        app.call(Call::new(Method::GET, "/documents").key(WRITE_KEY))
            .await
            .status,
        200
    );
    for _ in 0..5 {
        assert_eq!(app.get("/health").await.status, 200);
    }
    // Unauthenticated requests count against the client address: key guessing is limited.
    for _ in 0..2 {
        app.call(
            Call::new(Method::GET, "/documents")
                .key("guess")
                .peer("192.0.2.7:1"),
        )
        .await
        .assert_error(401, "invalid_api_key");
    }
    app.call(
        Call::new(Method::GET, "/documents")
            .key("guess")
            .peer("192.0.2.7:1"),
    )
    .await
    .assert_error(429, "rate_limited");
    app.wait_audit(4).await;
    let page = app.shelf().audit_events(10, 0).await.expect("audit");
    let limited_rows: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.reason == "rate_limited")
        .collect();
    assert_eq!(limited_rows.len(), 2);
    assert!(limited_rows.iter().all(|e| e.retry_after_seconds.is_some()));
}

#[tokio::test]
async fn forwarded_for_is_believed_only_from_trusted_proxies() {
    let app = TestApp::with([
        ("SHELF_API_RATE_LIMIT_PER_MINUTE", "1"),
        ("SHELF_API_TRUSTED_PROXY_CIDRS", "10.0.0.0/8"),
    ])
    .await;
    let via_proxy = |client: &str| {
        Call::new(Method::GET, "/documents")
            .peer("10.1.1.1:5000")
            .header("x-forwarded-for", client)
    };
    assert_eq!(app.call(via_proxy("203.0.113.1")).await.status, 200);
    // Same proxy, another client: another window.
    assert_eq!(app.call(via_proxy("203.0.113.2")).await.status, 200);
    app.call(via_proxy("203.0.113.1"))
        .await
        .assert_error(429, "rate_limited");
    // An untrusted peer cannot pick its identity with the header.
    let direct = |client: &str| {
        Call::new(Method::GET, "/documents")
            .peer("198.51.100.9:5000")
            .header("x-forwarded-for", client)
    };
    assert_eq!(app.call(direct("203.0.113.50")).await.status, 200);
    app.call(direct("203.0.113.51"))
        .await
        .assert_error(429, "rate_limited");
    app.wait_audit(2).await;
    let page = app.shelf().audit_events(10, 0).await.expect("audit");
    let hosts: Vec<_> = page
        .events
        .iter()
        .filter_map(|e| e.client_host.clone())
        .collect();
    assert!(hosts.contains(&"203.0.113.1".to_string()), "{hosts:?}");
    assert!(hosts.contains(&"198.51.100.9".to_string()), "{hosts:?}");
}
