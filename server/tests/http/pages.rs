//! `GET /documents/{id}/pages`: the latest run's page records with their summary, the
//! failures filter, paging, and every refusal (unknown document, bad parameters).

use serde_json::json;
use shelf_documents::pages::put_pages;
use shelf_documents::{PageRecord, PageSource};

use crate::common::*;

const PDF: &[u8] = include_bytes!("../../../tests/corpus/pdf/pypdf/crazyones.pdf");

/// A run of the document as the engine writes it (only the listing's columns matter).
async fn add_run(app: &TestApp, run_id: &str, document_id: &str, created_at: &str) {
    app.sql(&format!(
        "INSERT INTO runs (id, subject, pipeline, pipeline_yaml, pipeline_sha256, status, \
         due_at, enqueued_at, created_at) \
         VALUES ('{run_id}', '{document_id}', 'default', '', '', 'succeeded', 0, 0, '{created_at}')"
    ))
    .await;
}

fn records() -> Vec<PageRecord> {
    let mut ocr = PageRecord::pending(2);
    ocr.source = PageSource::Ocr;
    ocr.text = "read by OCR".into();
    ocr.confidence = Some(88.0);
    ocr.rotation_degrees = Some(180);
    ocr.attempts = 4;
    ocr.corrected = true;
    let mut low = ocr.clone();
    low.number = 3;
    low.confidence = Some(41.0);
    low.corrected = false;
    low.warnings = vec!["low confidence: 41.0 is under the threshold of 60".into()];
    let mut failed = PageRecord::pending(4);
    failed.source = PageSource::Failed;
    failed.attempts = 1;
    failed.error = Some("ocr_timeout: the page took longer than 120 s".into());
    vec![
        PageRecord::text_layer(1, "Typed page"),
        ocr,
        low,
        failed,
        PageRecord::pending(5),
    ]
}

#[tokio::test]
async fn the_latest_runs_pages_with_their_summary() {
    let app = TestApp::new().await;
    let id = app.upload_ok("scan.pdf", PDF).await;

    // Not processed yet: an empty listing, not an error.
    let empty = app.get(&format!("/documents/{id}/pages")).await;
    assert_eq!(empty.status, 200, "{}", empty.text());
    let empty = empty.json();
    assert_eq!(empty["run_id"], json!(null));
    assert_eq!(empty["total"], 0);
    assert_eq!(empty["pages"], json!([]));
    assert_eq!(empty["limit"], 100);
    assert_eq!(empty["summary"]["pages"], 0);
    assert_eq!(empty["summary"]["average_confidence"], json!(null));

    add_run(
        &app,
        "run_0000000000000001",
        &id,
        "2026-11-23T10:00:00.000Z",
    )
    .await;
    add_run(
        &app,
        "run_0000000000000002",
        &id,
        "2026-11-23T11:00:00.000Z",
    )
    .await;
    let db = &app.shelf().db;
    put_pages(db, &id, "run_0000000000000001", &records()[..1])
        .await
        .expect("older run");
    put_pages(db, &id, "run_0000000000000002", &records())
        .await
        .expect("latest run");

    let listing = app.get(&format!("/documents/{id}/pages")).await.json();
    assert_eq!(listing["document_id"], id.as_str());
    assert_eq!(listing["run_id"], "run_0000000000000002");
    assert_eq!(
        listing["summary"],
        json!({
            "pages": 5, "text_layer": 1, "ocr": 2, "failed": 1, "pending": 1,
            "corrected": 1, "with_warnings": 1, "average_confidence": 64.5, "attempts": 9,
        })
    );
    assert_eq!(listing["total"], 5);
    assert_eq!(listing["offset"], 0);
    assert_eq!(
        listing["pages"][1],
        json!({
            "number": 2, "source": "ocr", "confidence": 88.0, "rotation_degrees": 180,
            "chars": 11, "attempts": 4, "corrected": true, "warnings": [], "error": null,
            "image_path": null,
        })
    );
    assert_eq!(listing["pages"][0]["source"], "text_layer");
    assert_eq!(listing["pages"][0]["chars"], 10);
    assert_eq!(listing["pages"][4]["source"], "pending");

    let failures = app
        .get(&format!("/documents/{id}/pages?failures_only=true"))
        .await
        .json();
    let numbers: Vec<u64> = failures["pages"]
        .as_array()
        .expect("pages")
        .iter()
        .filter_map(|p| p["number"].as_u64())
        .collect();
    assert_eq!(numbers, vec![3, 4]);
    assert_eq!(failures["total"], 2);
    assert_eq!(failures["summary"]["pages"], 5);
    assert_eq!(
        app.get(&format!("/documents/{id}/pages?failures_only=1"))
            .await
            .json()["total"],
        2
    );

    let paged = app
        .get(&format!(
            "/documents/{id}/pages?limit=2&offset=1&failures_only=false"
        ))
        .await
        .json();
    let numbers: Vec<u64> = paged["pages"]
        .as_array()
        .expect("pages")
        .iter()
        .filter_map(|p| p["number"].as_u64())
        .collect();
    assert_eq!(numbers, vec![2, 3]);
    assert_eq!(
        (paged["limit"].clone(), paged["total"].clone()),
        (json!(2), json!(5))
    );

    // Deleting the document deletes its page records.
    app.call(Call::new(
        axum::http::Method::DELETE,
        &format!("/documents/{id}"),
    ))
    .await;
    assert_eq!(app.count("document_pages").await, 0);
    app.get(&format!("/documents/{id}/pages"))
        .await
        .assert_error(404, "not_found");
}

#[tokio::test]
async fn unknown_documents_and_bad_parameters_are_refused() {
    let app = TestApp::new().await;
    app.get("/documents/doc_0000000000000000/pages")
        .await
        .assert_error(404, "not_found");
    let id = app.upload_ok("scan.pdf", PDF).await;
    for query in [
        "limit=0",
        "limit=1001",
        "limit=ten",
        "offset=-1",
        "offset=9007199254740992",
        "failures_only=maybe",
    ] {
        let body = app
            .get(&format!("/documents/{id}/pages?{query}"))
            .await
            .assert_error(422, "validation_error");
        assert!(body["detail"][0]["loc"][0] == "query", "{query}: {body}");
    }
    assert_eq!(
        app.get(&format!("/documents/{id}/pages?limit=1000"))
            .await
            .json()["limit"],
        1000
    );
}

#[tokio::test]
async fn the_route_is_in_the_openapi_document() {
    let app = TestApp::new().await;
    let doc = app.get("/openapi.json").await.json();
    let operation = &doc["paths"]["/documents/{id}/pages"]["get"];
    assert_eq!(operation["operationId"], "get_document_pages");
    let params: Vec<&str> = operation["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(params, vec!["id", "limit", "offset", "failures_only"]);
    let schema = &doc["components"]["schemas"]["PageListingOut"];
    assert!(schema["properties"]["summary"].is_object(), "{schema}");
    assert!(doc["components"]["schemas"]["PageOut"]["properties"]["chars"].is_object());
    assert!(
        operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .is_some_and(|r| r.ends_with("/PageListingOut"))
    );
}
