//! `shelf pages` and `GET /documents/{id}/pages` on a real text-layer PDF processed by the
//! real binary: one `text_layer` record per page, the same listing from the CLI and the API,
//! the table for people, and the not-found exit code.

use std::time::Duration;

use serde_json::Value;

use crate::api::{Api, client, get_json};
use crate::support::{Env, corpus};

fn numbers(listing: &Value) -> Vec<u64> {
    listing["pages"]
        .as_array()
        .map(|pages| pages.iter().filter_map(|p| p["number"].as_u64()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processed_pdf_lists_its_text_layer_pages_in_the_cli_and_the_api() {
    let env = Env::new();
    let pdf = corpus("pdf/pypdf/crazyones.pdf");
    let report = env.json(&["import", pdf.to_str().expect("utf-8 path"), "--json"]);
    let record = &report["files"][0];
    assert_eq!(record["run_status"], "succeeded", "{report:#}");
    let doc_id = record["document_id"]
        .as_str()
        .expect("document id")
        .to_string();
    let run_id = record["run_id"].as_str().expect("run id").to_string();

    let listing = env.json(&["pages", &doc_id, "--json"]);
    assert_eq!(listing["document_id"], doc_id.as_str(), "{listing:#}");
    assert_eq!(listing["run_id"], run_id.as_str(), "{listing:#}");
    let summary = &listing["summary"];
    let pages = summary["pages"].as_u64().unwrap_or(0);
    assert!(pages >= 1, "{listing:#}");
    assert_eq!(summary["text_layer"], pages, "{listing:#}");
    assert_eq!(summary["ocr"], 0);
    assert_eq!(summary["pending"], 0);
    assert_eq!(summary["average_confidence"], Value::Null);
    assert_eq!(listing["total"], pages);
    assert_eq!(numbers(&listing), (1..=pages).collect::<Vec<_>>());
    let first = &listing["pages"][0];
    assert_eq!(first["source"], "text_layer");
    assert!(first["chars"].as_u64().unwrap_or(0) > 100, "{first}");
    assert!(first.get("text").is_none(), "the listing carries no text");
    assert_eq!(first["confidence"], Value::Null);

    let failures = env.json(&["pages", &doc_id, "--failures-only", "--json"]);
    assert_eq!(failures["total"], 0, "{failures:#}");
    assert_eq!(failures["pages"], serde_json::json!([]));

    // The table for people: a header, one line per page, the summary.
    let out = env.run(&["pages", &doc_id, "--limit", "1"]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("SOURCE") && table.contains("CONFIDENCE"),
        "{table}"
    );
    assert!(table.contains("text_layer"), "{table}");
    assert!(
        table.contains(&format!("1 of {pages} page(s) shown")),
        "{table}"
    );
    assert!(
        table.contains(&format!("{pages} page(s): {pages} text layer, 0 OCR")),
        "{table}"
    );

    // Unknown document: the not-found exit code and the error body.
    let out = env.run(&["pages", "doc_0000000000000000", "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let error: Value = serde_json::from_slice(&out.stdout).expect("error json");
    assert_eq!(error["code"], "not_found");
    let out = env.run(&["pages", &doc_id, "--limit", "0"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a limit outside 1..=1000 is bad usage"
    );

    // The API answers the same listing.
    let api = Api::start(&env);
    let client = client();
    let over_http = get_json(&client, &api, &format!("/documents/{doc_id}/pages")).await;
    assert_eq!(over_http, listing);
    let paged = get_json(
        &client,
        &api,
        &format!("/documents/{doc_id}/pages?limit=1&offset=0&failures_only=false"),
    )
    .await;
    assert_eq!(numbers(&paged), vec![1]);
    assert_eq!(paged["total"], pages);
    let reply = client
        .get(api.url("/documents/doc_0000000000000000/pages"))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("get");
    assert_eq!(reply.status().as_u16(), 404);
    let reply = client
        .get(api.url(&format!("/documents/{doc_id}/pages?limit=1001")))
        .send()
        .await
        .expect("get");
    assert_eq!(reply.status().as_u16(), 422);
    let body: Value = reply.json().await.expect("json");
    assert_eq!(body["code"], "validation_error");
}
