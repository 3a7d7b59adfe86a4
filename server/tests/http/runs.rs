//! `/runs`: create (queue and process), list, get, cancel, retry, and the run errors.

use axum::http::Method;
use serde_json::json;

use crate::common::*;

const TEXT: &[u8] = b"Horses are large domesticated mammals.\nThey are kept for riding.\n";

#[tokio::test]
async fn queued_runs_are_listed_and_shown() {
    let app = TestApp::new().await;
    let doc = app.upload_ok("horses.txt", TEXT).await;
    let created = app.post_json("/runs", json!({"document_id": doc})).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let run = created.json();
    let id = run["id"].as_str().expect("id").to_string();
    assert!(id.starts_with("run_") && id.len() == 20);
    assert_eq!(run["status"], "queued");
    assert_eq!(run["document_id"], doc.as_str());
    assert_eq!(run["pipeline"], "default");
    for field in [
        "stage",
        "total_chunks",
        "completed_chunks",
        "failed_chunks",
        "error",
        "pipeline_sha256",
        "attempt",
        "retry_of",
        "created_at",
        "started_at",
        "finished_at",
    ] {
        assert!(run.get(field).is_some(), "{field} missing: {run}");
    }
    let stages = run["stages"].as_array().expect("stages");
    assert!(stages.iter().any(|s| s["name"] == "clean"));
    for field in [
        "name",
        "status",
        "attempts",
        "started_at",
        "finished_at",
        "duration_ms",
        "error",
    ] {
        assert!(stages[0].get(field).is_some(), "stage {field} missing");
    }

    let list = app.get("/runs").await.json();
    assert_eq!(list["total"], 1);
    assert_eq!(list["limit"], 100);
    assert_eq!(list["offset"], 0);
    assert_eq!(list["runs"][0]["id"], id.as_str());
    assert!(list["runs"][0].get("stages").is_none());
    let filtered = app
        .get("/runs?document_id=doc_0000000000000000&limit=5")
        .await
        .json();
    assert_eq!(filtered["total"], 0);
    app.get("/runs?limit=0")
        .await
        .assert_error(422, "validation_error");

    assert_eq!(
        app.get(&format!("/runs/{id}")).await.json()["id"],
        id.as_str()
    );
    app.get("/runs/run_0000000000000000")
        .await
        .assert_error(404, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_mode_runs_in_the_background() {
    let app = TestApp::new().await;
    let doc = app.upload_ok("horses.txt", TEXT).await;
    let created = app
        .post_json(
            "/runs",
            json!({"document_id": doc, "processing_mode": "process", "pipeline": "default"}),
        )
        .await;
    assert_eq!(created.status, 201);
    let id = created.json()["id"].as_str().expect("id").to_string();
    let done = app.wait_terminal(&id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert!(done["total_chunks"].as_i64().unwrap_or(0) >= 1);
    assert_eq!(
        app.get(&format!("/documents/{doc}")).await.json()["status"],
        "ready"
    );
}

#[tokio::test]
async fn bad_run_requests_are_validation_errors() {
    let app = TestApp::new().await;
    let missing = app
        .post_json("/runs", json!({}))
        .await
        .assert_error(422, "validation_error");
    assert_eq!(missing["detail"][0]["loc"], json!(["body", "document_id"]));
    let mode = app
        .post_json(
            "/runs",
            json!({"document_id": "doc_0000000000000000", "processing_mode": "none"}),
        )
        .await
        .assert_error(422, "validation_error");
    assert_eq!(mode["detail"][0]["loc"], json!(["body", "processing_mode"]));
    app.call(Call::new(Method::POST, "/runs").raw("application/json", "{not json"))
        .await
        .assert_error(422, "validation_error");
    app.call(Call::new(Method::POST, "/runs"))
        .await
        .assert_error(422, "validation_error");
    app.post_json("/runs", json!({"document_id": "doc_0000000000000000"}))
        .await
        .assert_error(404, "not_found");
}

#[tokio::test]
async fn cancel_then_terminal() {
    let app = TestApp::new().await;
    let doc = app.upload_ok("horses.txt", TEXT).await;
    let id = app
        .post_json("/runs", json!({"document_id": doc}))
        .await
        .json()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let canceled = app
        .call(Call::new(Method::POST, &format!("/runs/{id}/cancel")))
        .await;
    assert_eq!(canceled.status, 200);
    assert_eq!(canceled.json()["status"], "canceled");
    assert_eq!(canceled.json()["outcome"], "canceled");
    app.call(Call::new(Method::POST, &format!("/runs/{id}/cancel")))
        .await
        .assert_error(400, "run_terminal");
    app.call(Call::new(Method::POST, &format!("/runs/{id}/retry")))
        .await
        .assert_error(400, "run_not_failed");
    app.call(Call::new(Method::POST, "/runs/run_0000000000000000/cancel"))
        .await
        .assert_error(404, "not_found");
    app.call(Call::new(Method::POST, "/runs/run_0000000000000000/retry"))
        .await
        .assert_error(404, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_runs_can_be_retried() {
    let app = TestApp::new().await;
    let doc = app.upload_ok("horses.txt", TEXT).await;
    // Change the stored bytes behind Shelf's back: extraction refuses a changed source.
    let stored = files_under(&app.data_dir().join("uploads"));
    assert_eq!(stored.len(), 1);
    std::fs::write(&stored[0], b"tampered").expect("tamper");
    let id = app
        .post_json(
            "/runs",
            json!({"document_id": doc, "processing_mode": "process"}),
        )
        .await
        .json()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let failed = app.wait_terminal(&id).await;
    assert_eq!(failed["status"], "failed", "{failed}");

    let retried = app
        .call(Call::new(Method::POST, &format!("/runs/{id}/retry")))
        .await;
    assert_eq!(retried.status, 201, "{}", retried.text());
    let retried = retried.json();
    assert_eq!(retried["retry_of"], id.as_str());
    assert_eq!(retried["status"], "queued");
    assert_eq!(retried["attempt"], 2);
}

#[tokio::test]
async fn broken_pipelines_and_failed_submissions() {
    let app = TestApp::new().await;
    let dir = app.dir.path().join("pipelines");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("broken.yaml"),
        "version: 1\nstages:\n  a: { uses: nope }\n",
    )
    .expect("write");
    let app = TestApp::with([("SHELF_PIPELINES_DIR", dir.display().to_string())]).await;
    let doc = app.upload_ok("horses.txt", TEXT).await;
    app.post_json("/runs", json!({"document_id": doc, "pipeline": "broken"}))
        .await
        .assert_error(400, "invalid_pipeline");

    app.sql("CREATE TRIGGER refuse_runs BEFORE INSERT ON runs BEGIN SELECT RAISE(FAIL, 'disk on fire'); END")
        .await;
    let body = app
        .post_json("/runs", json!({"document_id": doc}))
        .await
        .assert_error(503, "run_submission_failed");
    assert!(!body["detail"].as_str().unwrap_or("").contains("fire"));
}
