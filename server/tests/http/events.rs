//! Run events: pages with limits, and both SSE streams to `done`, with `Last-Event-ID`
//! resume, heartbeats and shutdown.

use std::time::Duration;

use axum::http::Method;
use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common::*;

const TEXT: &[u8] = b"Bees make honey in hives.\nBeekeepers collect it.\n";

async fn finished_run(app: &TestApp) -> String {
    let doc = app.upload_ok("bees.txt", TEXT).await;
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
    assert_eq!(app.wait_terminal(&id).await["status"], "succeeded");
    id
}

/// Reads a whole event stream (it ends after `done`) into `(event, id, data)` triples.
async fn read_stream(app: &TestApp, call: Call) -> (Vec<(String, Option<String>, String)>, String) {
    let response = app
        .router
        .clone()
        .oneshot(call.build())
        .await
        .expect("response");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    assert_eq!(
        response
            .headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("no-store")
    );
    assert!(response.headers().get("x-content-type-options").is_some());
    let body = tokio::time::timeout(Duration::from_secs(20), response.into_body().collect())
        .await
        .expect("stream ends")
        .expect("body")
        .to_bytes();
    let text = String::from_utf8_lossy(&body).into_owned();
    (parse_sse(&text), text)
}

fn parse_sse(text: &str) -> Vec<(String, Option<String>, String)> {
    let mut events = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut event = "message".to_string();
        let mut id = None;
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                event = v.to_string();
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push(v.to_string());
            }
        }
        if !data.is_empty() {
            events.push((event, id, data.join("\n")));
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_lines_and_records() {
    let app = TestApp::new().await;
    let id = finished_run(&app).await;
    let records = app.get(&format!("/runs/{id}/events/records")).await.json();
    assert_eq!(records["limit"], 500);
    assert_eq!(records["offset"], 0);
    assert_eq!(records["run_status"], "succeeded");
    let events = records["events"].as_array().expect("events").clone();
    assert!(events.len() > 5);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence"], i as u64 + 1);
        for field in ["stage", "message", "created_at", "kind"] {
            assert!(e.get(field).is_some());
        }
    }
    let page = app
        .get(&format!("/runs/{id}/events/records?offset=2&limit=2"))
        .await
        .json();
    assert_eq!(page["events"][0]["sequence"], 3);
    assert_eq!(page["events"].as_array().map(Vec::len), Some(2));

    let lines = app.get(&format!("/runs/{id}/events?limit=3")).await.json();
    assert_eq!(lines["events"].as_array().map(Vec::len), Some(3));
    assert!(
        lines["events"][0]
            .as_str()
            .unwrap_or("")
            .contains("run queued")
    );

    app.get(&format!("/runs/{id}/events?limit=1001"))
        .await
        .assert_error(422, "validation_error");
    app.get(&format!("/runs/{id}/events/records?limit=abc"))
        .await
        .assert_error(422, "validation_error");
    app.get("/runs/run_0000000000000000/events")
        .await
        .assert_error(404, "not_found");
    app.get("/runs/run_0000000000000000/events/records")
        .await
        .assert_error(404, "not_found");
    app.get("/runs/run_0000000000000000/events/stream")
        .await
        .assert_error(404, "not_found");
    app.get("/runs/run_0000000000000000/events/records/stream")
        .await
        .assert_error(404, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_stream_ends_with_done_and_resumes() {
    let app = TestApp::new().await;
    let id = finished_run(&app).await;
    let total = app.get(&format!("/runs/{id}/events/records")).await.json()["events"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);

    let (events, _) = read_stream(
        &app,
        Call::new(Method::GET, &format!("/runs/{id}/events/records/stream")),
    )
    .await;
    assert_eq!(events.len(), total + 1);
    for (i, (event, seq, data)) in events.iter().take(total).enumerate() {
        assert_eq!(event, "run-event");
        assert_eq!(seq.as_deref(), Some((i + 1).to_string().as_str()));
        let record: Value = serde_json::from_str(data).expect("json record");
        assert_eq!(record["sequence"], i as u64 + 1);
    }
    let (event, _, data) = events.last().expect("done");
    assert_eq!(event, "done");
    assert_eq!(
        serde_json::from_str::<Value>(data).expect("json"),
        json!({"run_id": id, "status": "succeeded"})
    );

    let (resumed, _) = read_stream(
        &app,
        Call::new(Method::GET, &format!("/runs/{id}/events/records/stream"))
            .header("last-event-id", "3"),
    )
    .await;
    assert_eq!(resumed.len(), total - 3 + 1);
    assert_eq!(resumed[0].1.as_deref(), Some("4"));

    let (lines, _) = read_stream(
        &app,
        Call::new(Method::GET, &format!("/runs/{id}/events/stream")).header("last-event-id", "1"),
    )
    .await;
    assert_eq!(lines.len(), total - 1 + 1);
    assert_eq!(lines[0].0, "message");
    assert_eq!(lines[0].1.as_deref(), Some("2"));
    assert_eq!(lines.last().map(|e| e.0.as_str()), Some("done"));

    app.call(
        Call::new(Method::GET, &format!("/runs/{id}/events/stream")).header("last-event-id", "abc"),
    )
    .await
    .assert_error(422, "validation_error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_streams_send_heartbeats_and_end_on_cancel_and_shutdown() {
    let app = TestApp::new().await;
    let doc = app.upload_ok("bees.txt", TEXT).await;
    // Queued with no worker: the stream waits.
    let id = app
        .post_json("/runs", json!({"document_id": doc}))
        .await
        .json()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let response = app
        .router
        .clone()
        .oneshot(Call::new(Method::GET, &format!("/runs/{id}/events/records/stream")).build())
        .await
        .expect("response");
    let mut body = response.into_body().into_data_stream();
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !seen.contains(": heartbeat") {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("heartbeat in time")
            .expect("open")
            .expect("chunk");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("event: run-event"));

    // Canceling the run ends the stream with `done`.
    app.call(Call::new(Method::POST, &format!("/runs/{id}/cancel")))
        .await;
    while !seen.contains("event: done") {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("done in time")
            .expect("open")
            .expect("chunk");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("\"status\":\"canceled\""));

    // A stream of a live run ends (without `done`) when the server shuts down.
    let other = app
        .post_json("/runs", json!({"document_id": doc}))
        .await
        .json()["id"]
        .as_str()
        .expect("id")
        .to_string();
    let response = app
        .router
        .clone()
        .oneshot(Call::new(Method::GET, &format!("/runs/{other}/events/stream")).build())
        .await
        .expect("response");
    let collect = tokio::spawn(response.into_body().collect());
    tokio::time::sleep(Duration::from_millis(100)).await;
    app.shutdown.cancel();
    let rest = tokio::time::timeout(Duration::from_secs(5), collect)
        .await
        .expect("stream ends on shutdown")
        .expect("join")
        .expect("body")
        .to_bytes();
    assert!(!String::from_utf8_lossy(&rest).contains("event: done"));
}
