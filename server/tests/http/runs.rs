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

/// `GET /queue`: counts, the age of the oldest due run and the latest claim, and a warning
/// once runs have been due for over a minute with no claim in that time. Times are moved in
/// the database instead of waited for, so nothing depends on how fast the test runs.
#[tokio::test]
async fn the_queue_tells_waiting_runs_and_whether_anything_claims_them() {
    let app = TestApp::new().await;
    let empty = app.get("/queue").await;
    assert_eq!(empty.status, 200, "{}", empty.text());
    assert_eq!(
        empty.json(),
        json!({
            "queued": 0, "due": 0, "running": 0, "expired_leases": 0,
            "oldest_due_age_seconds": null, "last_claim_at": null,
            "workers_seen_recently": false, "warning": null,
        })
    );

    let doc = app.upload_ok("horses.txt", TEXT).await;
    let run = app
        .post_json("/runs", json!({"document_id": doc}))
        .await
        .json();
    let id = run["id"].as_str().expect("id").to_string();
    let queue = app.get("/queue").await.json();
    assert_eq!(
        (queue["queued"].as_u64(), queue["due"].as_u64()),
        (Some(1), Some(1)),
        "{queue}"
    );
    assert!(queue["oldest_due_age_seconds"].is_u64(), "{queue}");
    assert_eq!(queue["last_claim_at"], serde_json::Value::Null, "{queue}");

    // Due two minutes ago, never claimed: the warning says what to start.
    app.sql(&format!(
        "UPDATE runs SET due_at = due_at - 120000 WHERE id = '{id}'"
    ))
    .await;
    let queue = app.get("/queue").await.json();
    assert!(
        queue["oldest_due_age_seconds"].as_u64() >= Some(120),
        "{queue}"
    );
    let warning = queue["warning"]
        .as_str()
        .unwrap_or_else(|| panic!("{queue}"));
    assert!(
        warning.starts_with("1 run is waiting, the oldest for ")
            && warning.contains("no worker has ever claimed a run")
            && warning.ends_with("start `shelf worker` or `shelf api --workers N`"),
        "{warning}"
    );

    // A claim long ago is no better than none; one stamped ahead of this clock (another host's)
    // counts as recent.
    app.sql("UPDATE runs SET claimed_at = 1000").await;
    let queue = app.get("/queue").await.json();
    assert_eq!(
        queue["last_claim_at"], "1970-01-01T00:00:01.000Z",
        "{queue}"
    );
    assert_eq!(queue["workers_seen_recently"], false, "{queue}");
    assert!(
        queue["warning"]
            .as_str()
            .is_some_and(|w| w.starts_with("1 run is waiting and no worker has claimed a run for ")),
        "{queue}"
    );
    app.sql("UPDATE runs SET claimed_at = 4102444800000").await;
    let queue = app.get("/queue").await.json();
    assert_eq!(queue["workers_seen_recently"], true, "{queue}");
    assert_eq!(queue["warning"], serde_json::Value::Null, "{queue}");

    // A lapsed lease waits for a worker to reclaim it, like a due run.
    app.sql(&format!(
        "UPDATE runs SET status = 'running', lease_owner = 'gone', due_at = 1000, claimed_at = 1000 \
         WHERE id = '{id}'"
    ))
    .await;
    let queue = app.get("/queue").await.json();
    assert_eq!(
        (
            queue["queued"].as_u64(),
            queue["running"].as_u64(),
            queue["expired_leases"].as_u64()
        ),
        (Some(0), Some(1), Some(1)),
        "{queue}"
    );
    assert!(queue["warning"].as_str().is_some(), "{queue}");
}

/// A run this process executes is claimed like a worker's: `last_claim_at` is set.
#[tokio::test]
async fn an_in_process_run_is_a_claim() {
    let app = TestApp::new().await;
    let doc = app.upload_ok("horses.txt", TEXT).await;
    let run = app
        .post_json(
            "/runs",
            json!({"document_id": doc, "processing_mode": "process"}),
        )
        .await
        .json();
    let done = app.wait_terminal(run["id"].as_str().expect("id")).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let queue = app.get("/queue").await.json();
    assert!(queue["last_claim_at"].is_string(), "{queue}");
    assert_eq!(
        (queue["queued"].as_u64(), queue["running"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(queue["warning"], serde_json::Value::Null, "{queue}");
}
