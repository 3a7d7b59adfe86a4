//! Service routes: health, readiness (and its failures), version, classifications, config,
//! and the OpenAPI document (validated as OpenAPI 3 by `openapi-spec-validator`).

use std::collections::BTreeSet;

use axum::http::Method;
use serde_json::Value;

use crate::auth::ROUTES;
use crate::common::*;

#[tokio::test]
async fn health_version_and_classifications() {
    let app = TestApp::new().await;
    assert_eq!(
        app.get("/health").await.json(),
        serde_json::json!({"status": "healthy"})
    );
    let version = app.get("/version").await.json();
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(version["okf_version"], "0.1");
    assert_eq!(
        Some(version["schema_version"].clone()),
        shelf_migrations::known_migrations()
            .last()
            .map(|m| serde_json::json!(m))
    );
    assert!(version["git_sha"].as_str().is_some_and(|s| !s.is_empty()));

    let classes = app.get("/classifications").await.json();
    let map = classes["classifications"].as_object().expect("map");
    assert!(map.len() >= 100);
    for code in ["000", "100", "600", "630", "990"] {
        assert!(map.contains_key(code), "{code}");
    }
    // A finer code written by a classifier shows up with its label.
    let id = app.upload_ok("horse.txt", b"horses\n").await;
    app.sql(&format!(
        "UPDATE documents SET classification = '636.1', classification_label = 'Horses' WHERE id = '{id}'"
    ))
    .await;
    let classes = app.get("/classifications").await.json();
    assert_eq!(classes["classifications"]["636.1"], "Horses");
}

#[tokio::test]
async fn ready_checks_storage_database_and_migrations() {
    let app = TestApp::new().await;
    let ready = app.get("/ready").await;
    assert_eq!(ready.status, 200, "{}", ready.text());
    let body = ready.json();
    assert_eq!(body["status"], "ready");
    assert_eq!(body["database"], "ok");
    assert_eq!(body["storage"], "ok");
    assert_eq!(
        body["applied_migrations"],
        serde_json::json!(shelf_migrations::known_migrations())
    );

    app.sql(
        "INSERT INTO seaql_migrations (version, applied_at) VALUES ('m29990101_000001_future', 0)",
    )
    .await;
    let newer = app
        .get("/ready")
        .await
        .assert_error(503, "service_unavailable");
    assert!(newer["detail"].as_str().unwrap_or("").contains("newer"));
    app.sql("DELETE FROM seaql_migrations WHERE version = 'm29990101_000001_future'")
        .await;
    assert_eq!(app.get("/ready").await.status, 200);

    std::fs::remove_file(app.data_dir().join("shelf.sqlite")).expect("remove db");
    let missing = app
        .get("/ready")
        .await
        .assert_error(503, "service_unavailable");
    assert_eq!(missing["detail"], "database is missing");
}

#[tokio::test]
async fn ready_fails_when_the_data_directory_is_gone() {
    // The database lives outside the data directory (in a directory of this test's own), so
    // only the data directory's writability fails the check.
    let db_dir = tempfile::tempdir().expect("tempdir");
    let db_path = db_dir.path().join("shelf.sqlite");
    let app = TestApp::with([(
        "SHELF_DATABASE_PATH",
        db_path.to_str().expect("utf-8 temp path"),
    )])
    .await;
    std::fs::remove_dir_all(app.data_dir()).ok();
    // A file where the data directory should be: nothing can be created in it.
    std::fs::write(app.data_dir(), b"not a directory").expect("write");
    let body = app
        .get("/ready")
        .await
        .assert_error(503, "service_unavailable");
    assert_eq!(body["detail"], "data directory is not writable");
}

/// `/ready` checks the database on a connection of its own: with the pool's only connection
/// held (a long transaction, a burst of requests), it still answers at once. Before, its
/// `quick_check` waited for a pooled connection, and a burst of probes held the whole pool.
#[tokio::test]
async fn ready_does_not_need_a_pooled_connection() {
    let app = TestApp::with([("SHELF_DATABASE_MAX_CONNECTIONS", "1")]).await;
    let held = sea_orm::TransactionTrait::begin(&app.shelf().db)
        .await
        .expect("hold the pool's connection");
    let probes = (0..8).map(|_| app.get("/ready"));
    for ready in futures::future::join_all(probes).await {
        assert_eq!(ready.status, 200, "{}", ready.text());
    }
    held.rollback().await.expect("release");
}

/// Below `SHELF_MIN_FREE_BYTES` (here an impossible floor, so the test needs no full disk):
/// `/ready` says why with 503, and uploads and batches are refused with 507
/// `insufficient_storage` before anything is stored. 0 turns the floor off.
#[tokio::test]
async fn below_the_free_space_floor_ready_fails_and_uploads_are_refused() {
    let app = TestApp::with([("SHELF_MIN_FREE_BYTES", u64::MAX.to_string())]).await;
    let ready = app
        .get("/ready")
        .await
        .assert_error(503, "service_unavailable");
    assert_eq!(ready["detail"], shelf_app::readiness::LOW_SPACE);
    let refused = app
        .upload("horse.txt", b"horses\n")
        .await
        .assert_error(507, "insufficient_storage");
    let detail = refused["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("SHELF_MIN_FREE_BYTES"), "{detail}");
    assert!(
        !detail.contains(&app.data_dir().display().to_string()),
        "{detail}"
    );
    let batch = Call::new(Method::POST, "/documents/batch").raw(
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        multipart_body(&[("files", Some("a.txt"), b"a\n")]),
    );
    app.call(batch)
        .await
        .assert_error(507, "insufficient_storage");
    assert_eq!(app.count("documents").await, 0);
    let metrics = app.shelf().metrics.json();
    assert_eq!(
        metrics["metrics"]["shelf_storage_refusals_total"]["samples"][0]["value"],
        2.0
    );

    let off = TestApp::with([("SHELF_MIN_FREE_BYTES", "0")]).await;
    assert_eq!(off.get("/ready").await.status, 200);
    off.upload_ok("horse.txt", b"horses\n").await;
}

/// `/ready` needs no key but counts against `SHELF_API_RATE_LIMIT_PER_MINUTE`, per client and
/// apart from the client's other requests: probes neither use up its window nor ride on it.
#[tokio::test]
async fn ready_is_rate_limited_apart_from_other_requests() {
    let app = TestApp::with([("SHELF_API_RATE_LIMIT_PER_MINUTE", "2")]).await;
    assert_eq!(app.get("/ready").await.status, 200);
    assert_eq!(app.get("/ready").await.status, 200);
    let limited = app.get("/ready").await;
    assert!(limited.header("retry-after").is_some());
    limited.assert_error(429, "rate_limited");
    // Another client still gets its probes, and this client its other requests.
    let other = app
        .call(Call::new(Method::GET, "/ready").peer("127.0.0.2:40000"))
        .await;
    assert_eq!(other.status, 200, "{}", other.text());
    assert_eq!(app.get("/documents").await.status, 200);
}

#[tokio::test]
async fn config_is_redacted() {
    let mut vars = auth_vars();
    vars.push(("OPENAI_API_KEY".into(), "sk-provider-secret".into()));
    let app = TestApp::with(vars).await;
    let reply = app
        .call(Call::new(Method::GET, "/config").key(WRITE_KEY))
        .await;
    assert_eq!(reply.status, 200);
    let text = reply.text();
    for secret in [
        READ_KEY,
        WRITE_KEY,
        "sk-provider-secret",
        &sha256_hex(HASHED_KEY),
    ] {
        assert!(!text.contains(secret), "{secret} leaked");
    }
    let config = reply.json();
    assert_eq!(config["api"]["credentials"]["read"], 2);
    assert_eq!(config["api"]["credentials"]["write"], 2);
    assert_eq!(config["llm"]["api_key_set"], true);
    assert!(config["api"]["max_upload_bytes"].is_u64());
    // The extraction engines of every accepted extension, and the cache setting.
    assert_eq!(config["extraction"]["cache"], true);
    assert_eq!(config["extraction"]["engines"]["pdf"], "poppler pdftotext");
    assert_eq!(
        config["extraction"]["engines"]["doc"],
        "LibreOffice headless"
    );
    assert_eq!(config["extraction"]["engines"]["xlsx"], "calamine");
}

/// Paths and methods the document lists.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, _) in item.as_object().expect("item") {
            out.insert((method.to_uppercase(), path.clone()));
        }
    }
    out
}

#[tokio::test]
async fn openapi_lists_every_route_with_its_security() {
    let app = TestApp::with(auth_vars()).await;
    app.get("/openapi.json")
        .await
        .assert_error(401, "invalid_api_key");
    let doc = app
        .call(Call::new(Method::GET, "/openapi.json").key(READ_KEY))
        .await
        .json();
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
    let expected: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented(&doc), expected);

    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["api_key"]["type"], "apiKey");
    assert_eq!(schemes["api_key"]["in"], "header");
    assert_eq!(schemes["api_key"]["name"], "x-api-key");
    assert_eq!(schemes["bearer"]["type"], "http");
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
    for (method, path, access) in ROUTES {
        let op = &doc["paths"][path][method.to_lowercase()];
        let security = &op["security"];
        if *access == "open" {
            assert!(security.is_null(), "{path} must be open");
        } else {
            assert_eq!(
                security,
                &serde_json::json!([{"api_key": []}, {"bearer": []}]),
                "{method} {path}"
            );
            assert!(op["responses"]["401"].is_object(), "{method} {path}");
        }
        if *access == "write" {
            assert!(op["responses"]["403"].is_object(), "{method} {path}");
        }
    }
}

#[tokio::test]
async fn openapi_validates_as_openapi_3() {
    let app = TestApp::new().await;
    let reply = app.get("/openapi.json").await;
    let path = app.dir.path().join("openapi.json");
    std::fs::write(&path, &reply.body).expect("write");
    let out = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator"])
        .arg(&path)
        .output()
        .expect(
            "python3 with openapi-spec-validator is needed (pip install openapi-spec-validator)",
        );
    assert!(
        out.status.success(),
        "openapi.json is not valid OpenAPI:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
