//! OCR end to end with real Tesseract: scans uploaded over HTTP become searchable text, a mixed
//! PDF has only its scanned page read, a worker SIGKILLed in the middle of a multi-page scan
//! leaves no finished page to read again, cancel stops between pages, and a page over its time
//! fails the document or is recorded and skipped, as the settings say.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated, run_to_the_end, upload};
use crate::support::{Env, corpus, wait_for};

/// `pdfunite` (poppler-utils) joins PDFs into one the test owns.
fn unite(env: &Env, name: &str, parts: &[PathBuf]) -> PathBuf {
    let out = env.path().join(name);
    let status = Command::new("pdfunite")
        .args(parts)
        .arg(&out)
        .status()
        .expect("pdfunite (poppler-utils) runs");
    assert!(status.success());
    out
}

/// An eight-page scan: the four rotated image-only PDFs, twice.
fn eight_page_scan(env: &Env) -> PathBuf {
    let names = [
        "ocr_test.pdf",
        "ocr_test_rotated_90.pdf",
        "ocr_test_rotated_180.pdf",
        "ocr_test_rotated_270.pdf",
    ];
    let parts: Vec<PathBuf> = names
        .iter()
        .chain(names.iter())
        .map(|n| corpus(&format!("ocr/rotated-pdf/{n}")))
        .collect();
    unite(env, "scan.pdf", &parts)
}

fn run_json(env: &Env, run_id: &str) -> Value {
    env.json(&["runs", run_id, "--json"])
}

fn pages_json(env: &Env, doc_id: &str) -> Value {
    env.json(&["pages", doc_id, "--json", "--limit", "1000"])
}

fn finished(env: &Env, run_id: &str, within: Duration) -> Value {
    wait_for(within, "the run to finish", || {
        let run = run_json(env, run_id);
        matches!(
            run["status"].as_str(),
            Some("succeeded" | "failed" | "canceled")
        )
        .then_some(run)
    })
}

fn events_of(run: &Value, kind: &str) -> Vec<String> {
    run["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The numbers of the pages a `page_read` event says were recognized.
fn pages_read(run: &Value) -> Vec<u32> {
    events_of(run, "page_read")
        .iter()
        .filter_map(|m| m.strip_prefix("page ")?.split(':').next()?.parse().ok())
        .collect()
}

fn expected_sentence() -> String {
    std::fs::read_to_string(corpus("ocr/rotated-pdf/expected.txt")).expect("expected.txt")
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

async fn search(client: &reqwest::Client, api: &Api, query: &str) -> Value {
    client
        .post(api.url("/search"))
        .json(&json!({ "query": query }))
        .send()
        .await
        .expect("search")
        .json()
        .await
        .expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_uploaded_over_http_become_searchable_text() {
    let env = migrated(Env::new().with("SHELF_OCR_PRESERVE_PAGE_IMAGES", "true"));
    let api = Api::start(&env);
    let _worker = env.spawn(&["worker"]);
    let client = client();

    // A photo of a page turned on its side, and a PDF whose second page is a rotated scan.
    let sideways = corpus("ocr/tesseract/phototest-rotated-L.png");
    let (status, photo) = upload(
        &client,
        &api,
        "phototest-rotated-L.png",
        std::fs::read(&sideways).expect("read"),
    )
    .await;
    assert_eq!(status, 201, "{photo}");
    let mixed = unite(
        &env,
        "mixed.pdf",
        &[
            corpus("pdf/pypdf/crazyones.pdf"),
            corpus("ocr/rotated-pdf/ocr_test_rotated_90.pdf"),
        ],
    );
    let (status, pdf) = upload(
        &client,
        &api,
        "mixed.pdf",
        std::fs::read(&mixed).expect("read"),
    )
    .await;
    assert_eq!(status, 201, "{pdf}");
    let photo_id = photo["id"].as_str().expect("id");
    let pdf_id = pdf["id"].as_str().expect("id");

    let run = run_to_the_end(&client, &api, photo_id).await;
    assert_eq!(run["status"], "succeeded", "{run:#}");
    let pages = get_json(&client, &api, &format!("/documents/{photo_id}/pages")).await;
    let page = &pages["pages"][0];
    assert_eq!(page["source"], "ocr", "{pages:#}");
    assert_eq!(page["rotation_degrees"], 90, "{pages:#}");
    assert!(
        page["confidence"].as_f64().unwrap_or(0.0) > 80.0,
        "{pages:#}"
    );
    let image = page["image_path"].as_str().expect("a kept page image");
    let png = std::fs::read(env.path().join("data").join(image)).expect("page image");
    assert!(png.starts_with(b"\x89PNG"), "{image}");
    let hits = search(&client, &api, "quick brown dog jumped").await;
    assert_eq!(hits["document_ids"], json!([photo_id]), "{hits}");

    let run = run_to_the_end(&client, &api, pdf_id).await;
    assert_eq!(run["status"], "succeeded", "{run:#}");
    // Only the scanned page went through OCR.
    let run_id = run["id"].as_str().expect("id");
    let detail = run_json(&env, run_id);
    assert_eq!(pages_read(&detail), vec![2], "{detail:#}");
    let pages = get_json(&client, &api, &format!("/documents/{pdf_id}/pages")).await;
    assert_eq!(pages["summary"]["text_layer"], 1, "{pages:#}");
    assert_eq!(pages["summary"]["ocr"], 1, "{pages:#}");
    assert_eq!(pages["pages"][0]["source"], "text_layer");
    assert_eq!(pages["pages"][1]["source"], "ocr");
    assert_ne!(pages["pages"][1]["rotation_degrees"], 0);
    let content = get_json(&client, &api, &format!("/documents/{pdf_id}/content")).await;
    let text = content["text"].as_str().unwrap_or_default();
    let crazy = text.find("crazy").expect("the text page's words");
    let scanned = text.find("Docling").expect("the scanned page's words");
    assert!(crazy < scanned, "pages stay in order");
    let hits = search(&client, &api, "Docling bundles").await;
    assert_eq!(hits["document_ids"], json!([pdf_id]), "{hits}");
}

/// Short leases so a killed worker's run is reclaimed quickly; one page at a time.
fn scan_env() -> Env {
    Env::new()
        .with("SHELF_OCR_PAGE_CONCURRENCY", "1")
        .with("SHELF_WORKER_LEASE_SECONDS", "2")
        .with("SHELF_WORKER_HEARTBEAT_MS", "300")
}

fn queue(env: &Env, file: &Path) -> (String, String) {
    assert!(env.run(&["migrate"]).status.success());
    env.queue(file)
}

#[test]
fn a_sigkilled_worker_mid_scan_reads_no_finished_page_again() {
    let env = scan_env();
    let scan = eight_page_scan(&env);
    let (doc_id, run_id) = queue(&env, &scan);
    let mut first = env.spawn(&["worker"]);
    wait_for(Duration::from_secs(120), "two pages read", || {
        (pages_json(&env, &doc_id)["summary"]["ocr"].as_u64() >= Some(2)).then_some(())
    });
    first.kill();
    let at_kill = pages_json(&env, &doc_id)["summary"]["ocr"]
        .as_u64()
        .expect("count");
    assert!(at_kill < 8, "the worker was killed mid-scan");

    let _second = env.spawn(&["worker"]);
    let done = finished(&env, &run_id, Duration::from_secs(180));
    assert_eq!(done["status"], "succeeded", "{done:#}");
    // Every page was recognized exactly once across both workers: the run's `page_read`
    // events (both workers') name each of the eight pages once, and the second worker reused
    // at least the pages finished before the kill.
    let mut read = pages_read(&done);
    let reused: usize = events_of(&done, "pages_reused")
        .first()
        .and_then(|m| m.split_whitespace().next()?.parse().ok())
        .expect("a pages_reused event");
    assert!(
        reused as u64 >= at_kill,
        "reused {reused}, read before the kill {at_kill}"
    );
    read.sort_unstable();
    let before = read.len();
    read.dedup();
    assert_eq!(before, read.len(), "a page was read twice: {read:?}");
    assert_eq!(read, (1..=8).collect::<Vec<u32>>(), "{done:#}");

    let pages = pages_json(&env, &doc_id);
    assert_eq!(pages["summary"]["ocr"], 8, "{pages:#}");
    // One recognition per page, two where a turn orientation detection was not sure of
    // was confirmed by reading the page as it is too (the rotated pages score 2.7 to 3).
    for page in pages["pages"].as_array().expect("pages") {
        assert!(page["attempts"].as_u64() <= Some(2), "{page}");
    }
    let expected = words(&expected_sentence());
    let hits = env.json(&["search", &expected[..3].join(" "), "--json"]);
    assert_eq!(hits["document_ids"], json!([doc_id]));
}

#[test]
fn canceling_a_scan_stops_between_pages() {
    let env = scan_env();
    let scan = eight_page_scan(&env);
    let (doc_id, run_id) = queue(&env, &scan);
    let _worker = env.spawn(&["worker"]);
    wait_for(Duration::from_secs(120), "a page read", || {
        (pages_json(&env, &doc_id)["summary"]["ocr"].as_u64() >= Some(1)).then_some(())
    });
    let answer = env.json(&["admin", "run-cancel", &run_id, "--json"]);
    assert_eq!(answer["outcome"], "requested");
    let done = finished(&env, &run_id, Duration::from_secs(120));
    assert_eq!(done["status"], "canceled", "{done:#}");
    let read = pages_json(&env, &doc_id)["summary"]["ocr"]
        .as_u64()
        .expect("count");
    assert!(read < 8, "canceled before the end, {read} pages read");
}

/// `three-pages.tif`: phototest (0.5 s), nine 300-dpi UNLV magazine pages tiled on one page
/// (about a minute of recognition), eurotext (0.7 s): a 15 s limit keeps a wide margin on both
/// sides, even on a loaded machine.
#[test]
fn a_page_over_its_time_fails_the_document_or_is_skipped_as_configured() {
    let tiff = corpus("ocr/made/three-pages.tif");
    let strict = Env::new().with("SHELF_OCR_TIMEOUT_SECONDS", "15");
    let lenient = Env::new()
        .with("SHELF_OCR_TIMEOUT_SECONDS", "15")
        .with("SHELF_OCR_FAIL_ON_PAGE_ERROR", "false");
    for env in [&strict, &lenient] {
        assert!(env.run(&["migrate"]).status.success());
    }
    let tiff_arg = tiff.display().to_string();
    let (strict_out, lenient_out) = std::thread::scope(|s| {
        let a = s.spawn(|| strict.run(&["import", &tiff_arg, "--mode", "process", "--json"]));
        let b = s.spawn(|| lenient.run(&["import", &tiff_arg, "--mode", "process", "--json"]));
        (a.join().expect("strict"), b.join().expect("lenient"))
    });

    let report: Value = serde_json::from_slice(&strict_out.stdout).expect("json");
    let file = &report["files"][0];
    assert_eq!(file["run_status"], "failed", "{report:#}");
    let run = run_json(&strict, file["run_id"].as_str().expect("run"));
    let error = run["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("ocr_timeout") && error.contains("page 2"),
        "{error}"
    );

    let report: Value = serde_json::from_slice(&lenient_out.stdout).expect("json");
    let file = &report["files"][0];
    assert_eq!(file["run_status"], "succeeded", "{report:#}");
    let doc_id = file["document_id"].as_str().expect("doc");
    let pages = pages_json(&lenient, doc_id);
    let sources: Vec<&str> = pages["pages"]
        .as_array()
        .expect("pages")
        .iter()
        .map(|p| p["source"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(sources, ["ocr", "failed", "ocr"], "{pages:#}");
    assert!(
        pages["pages"][1]["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("ocr_timeout"),
        "{pages:#}"
    );
    let failures = lenient.json(&["pages", doc_id, "--json", "--failures-only"]);
    assert_eq!(failures["total"], 1, "{failures:#}");
    let run = run_json(&lenient, file["run_id"].as_str().expect("run"));
    assert!(
        events_of(&run, "stage_warning")
            .iter()
            .any(|m| m.contains("page 2 could not be read")),
        "{run:#}"
    );
    // The pages on either side of the failed one are searchable.
    let hits = lenient.json(&["search", "quick brown dog", "--json"]);
    assert_eq!(hits["document_ids"], json!([doc_id]));
}
