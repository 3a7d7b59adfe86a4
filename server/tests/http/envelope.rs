//! What every response shares: security headers, request ids, JSON error bodies (also for
//! the framework's own 404/405 and for 5xx, which show no internal text), and the request
//! size limit by Content-Length and by streamed bytes.

use axum::body::Body;
use axum::http::Method;
use serde_json::json;

use crate::common::*;

const SECURITY: &[(&str, &str)] = &[
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
];

fn assert_security_headers(reply: &Reply, what: &str) {
    for (name, value) in SECURITY {
        assert_eq!(reply.header(name), Some(*value), "{name} on {what}");
    }
    assert!(
        reply
            .header("permissions-policy")
            .is_some_and(|p| p.contains("camera=()")),
        "permissions-policy on {what}"
    );
}

#[tokio::test]
async fn security_headers_on_every_kind_of_response() {
    let app = TestApp::with(auth_vars()).await;
    let replies = [
        ("ok", app.get("/health").await),
        ("401", app.get("/documents").await),
        (
            "403",
            app.call(Call::new(Method::GET, "/config").key(READ_KEY))
                .await,
        ),
        (
            "404",
            app.call(Call::new(Method::GET, "/x").key(READ_KEY)).await,
        ),
        ("405", app.call(Call::new(Method::PUT, "/health")).await),
        (
            "openapi",
            app.call(Call::new(Method::GET, "/openapi.json").key(READ_KEY))
                .await,
        ),
    ];
    for (what, reply) in &replies {
        assert_security_headers(reply, what);
    }
}

#[tokio::test]
async fn request_ids_are_echoed_or_made() {
    let app = TestApp::new().await;
    let echoed = app
        .call(Call::new(Method::GET, "/health").header("x-request-id", "abc-123"))
        .await;
    assert_eq!(echoed.header("x-request-id"), Some("abc-123"));
    let made = app.get("/health").await;
    assert!(
        made.header("x-request-id")
            .is_some_and(|v| v.starts_with("req_"))
    );
    let replaced = app
        .call(Call::new(Method::GET, "/health").header("x-request-id", "bad id with spaces"))
        .await;
    assert!(
        replaced
            .header("x-request-id")
            .is_some_and(|v| v.starts_with("req_"))
    );
    let on_error = app.get("/nope").await;
    assert!(on_error.header("x-request-id").is_some());
}

#[tokio::test]
async fn framework_errors_have_json_bodies() {
    let app = TestApp::new().await;
    app.get("/nope").await.assert_error(404, "not_found");
    let wrong = app.call(Call::new(Method::DELETE, "/runs")).await;
    wrong.assert_error(405, "method_not_allowed");
    assert!(wrong.header("allow").is_some_and(|a| a.contains("GET")));
    app.call(Call::new(Method::PATCH, "/documents/doc_0000000000000000"))
        .await
        .assert_error(405, "method_not_allowed");
}

#[tokio::test]
async fn server_errors_hide_their_cause() {
    let app = TestApp::new().await;
    app.sql("ALTER TABLE documents RENAME TO documents_elsewhere")
        .await;
    let body = app
        .get("/documents")
        .await
        .assert_error(500, "server_error");
    assert_eq!(body["detail"], "Internal server error");
}

#[tokio::test]
async fn request_size_is_limited_by_header_and_by_stream() {
    let app = TestApp::with([("SHELF_API_MAX_REQUEST_BYTES", "2000")]).await;
    // Declared too large: refused before routing, whatever the route.
    for path in ["/documents", "/runs", "/nowhere"] {
        app.call(
            Call::new(Method::POST, path)
                .header("content-length", "5000")
                .raw("application/json", vec![b' '; 5000]),
        )
        .await
        .assert_error(413, "request_too_large");
    }
    // Streamed without a length: refused when the bytes pass the limit.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..10).map(|_| Ok(vec![b'a'; 500])).collect();
    let mut body = multipart_body(&[("file", Some("a.txt"), &[])]);
    body.truncate(body.len() - BOUNDARY.len() - 10);
    let mut parts = vec![Ok(body)];
    parts.extend(chunks);
    let streamed = Body::from_stream(futures::stream::iter(parts));
    app.call(Call::new(Method::POST, "/documents").raw(
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        streamed,
    ))
    .await
    .assert_error(413, "request_too_large");
    assert!(files_under(&app.data_dir().join("uploads")).is_empty());
    assert_eq!(app.count("documents").await, 0);

    let json_chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![
        Ok(b"{\"query\": \"".to_vec()),
        Ok(vec![b'a'; 3000]),
        Ok(b"\"}".to_vec()),
    ];
    app.call(Call::new(Method::POST, "/search").raw(
        "application/json",
        Body::from_stream(futures::stream::iter(json_chunks)),
    ))
    .await
    .assert_error(413, "request_too_large");
    // Under the limit, all is well.
    assert_eq!(
        app.post_json("/search", json!({"query": "nothing"}))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn json_bodies_have_their_own_cap() {
    let app = TestApp::new().await;
    let huge = json!({"query": "a".repeat(2 << 20)});
    app.post_json("/search", huge)
        .await
        .assert_error(413, "request_too_large");
}
