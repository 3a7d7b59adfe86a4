//! The search endpoints and their specific errors.

use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_results_and_facets() {
    let app = TestApp::new().await;
    let doc = app
        .upload_ok("bees.txt", b"Honey bees build wax combs in the hive.\n")
        .await;
    let run = app
        .post_json(
            "/runs",
            json!({"document_id": doc, "processing_mode": "process"}),
        )
        .await
        .json();
    let run_id = run["id"].as_str().expect("id");
    app.wait_terminal(run_id).await;

    let ids = app.post_json("/search", json!({"query": "honey"})).await;
    assert_eq!(ids.status, 200, "{}", ids.text());
    let ids = ids.json();
    assert_eq!(ids["document_ids"], json!([doc]));
    assert_eq!(ids["total"], 1);
    assert_eq!(ids["limit"], 20);
    assert_eq!(ids["offset"], 0);

    let results = app
        .post_json("/search/results", json!({"query": "wax", "limit": 5}))
        .await
        .json();
    let hit = &results["results"][0];
    assert_eq!(hit["document_id"], doc.as_str());
    assert_eq!(hit["run_id"], run_id);
    assert_eq!(hit["source"], "cleaned");
    assert!(hit["snippet"].as_str().unwrap_or("").contains("<mark>"));
    for field in [
        "filename",
        "document_status",
        "created_at",
        "score",
        "classification_code",
        "classification_label",
    ] {
        assert!(hit.get(field).is_some(), "{field}");
    }
    let raw = app
        .post_json("/search/results", json!({"query": "wax", "scope": "raw"}))
        .await
        .json();
    assert_eq!(raw["results"][0]["run_id"], serde_json::Value::Null);

    let facets = app
        .post_json(
            "/search/facets",
            json!({"query": "honey", "facet_limit": 5}),
        )
        .await;
    assert_eq!(facets.status, 200, "{}", facets.text());
    let facets = facets.json();
    for key in ["classifications", "statuses", "sources", "filenames"] {
        assert!(facets[key].is_array(), "{key}");
    }
    assert_eq!(facets["sources"][0]["count"], 1);
}

#[tokio::test]
async fn search_errors() {
    let app = TestApp::new().await;
    let cases = [
        (
            json!({"query": "x", "created_after": "2026-02-01T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"}),
            400,
            "invalid_search_window",
        ),
        (
            json!({"query": "a".repeat(4097)}),
            400,
            "search_query_too_large",
        ),
        (json!({"query": "!!! ---"}), 400, "invalid_search_query"),
        (
            json!({"query": "x", "scope": "everything"}),
            400,
            "invalid_search_scope",
        ),
        (
            json!({"query": "x", "document_status": "gone"}),
            400,
            "invalid_document_status",
        ),
        (
            json!({"query": "x", "created_after": "yesterday"}),
            422,
            "validation_error",
        ),
        (json!({"query": 5}), 422, "validation_error"),
    ];
    for path in ["/search", "/search/results", "/search/facets"] {
        for (body, status, code) in &cases {
            app.post_json(path, body.clone())
                .await
                .assert_error(*status, code);
        }
    }
    let bad_ts = app
        .post_json(
            "/search",
            json!({"query": "x", "created_after": "yesterday"}),
        )
        .await
        .json();
    assert_eq!(bad_ts["detail"][0]["loc"], json!(["body", "created_after"]));
    app.post_json("/search/facets", json!({"query": "x", "facet_limit": 501}))
        .await
        .assert_error(422, "validation_error");
}
