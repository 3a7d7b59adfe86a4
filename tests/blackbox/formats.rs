//! Every kind of document through the real `shelf api` and a real `shelf worker`: a PDF, a
//! DOCX, an HTML page and an SRT transcript uploaded, processed by the default pipeline and
//! found by a phrase of each; a damaged file fails its run with a stable code and stays.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated, post_json, run_to_the_end, upload};
use crate::support::{Env, corpus};

async fn search_total(client: &reqwest::Client, api: &Api, query: &str) -> (u64, Vec<Value>) {
    let body = json!({ "query": query, "phrase": true });
    let reply = post_json(client, &api.url("/search/results"), &body).await;
    let results = reply["results"].as_array().cloned().unwrap_or_default();
    (reply["total"].as_u64().unwrap_or(0), results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_of_every_kind_are_processed_and_found() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let _worker = env.spawn(&["worker"]);
    let client = client();
    let cases = [
        (
            "pdf/pypdf/crazyones.pdf",
            "crazyones.pdf",
            "the round pegs in the square holes",
        ),
        (
            "office/docx/sources/lorem_ipsum.docx",
            "lorem_ipsum.docx",
            "porttitor mollis quam",
        ),
        (
            "office/html/sources/example_01.html",
            "example_01.html",
            "first paragraph of the introduction",
        ),
        ("transcripts/srt/ascii.srt", "ascii.srt", "ascii everywhere"),
    ];
    for (path, name, phrase) in cases {
        let bytes = std::fs::read(corpus(path)).expect("corpus file");
        let (status, document) = upload(&client, &api, name, bytes).await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {document}");
        let document_id = document["id"].as_str().expect("id").to_string();
        let run = run_to_the_end(&client, &api, &document_id).await;
        assert_eq!(run["status"], "succeeded", "{name}: {run:#}");
        let (total, results) = search_total(&client, &api, phrase).await;
        assert!(total >= 1, "{name}: no hit for {phrase:?}");
        assert!(
            results
                .iter()
                .any(|r| r["document_id"] == document_id.as_str()),
            "{name}: {results:#?}"
        );
    }

    // A damaged file is accepted, its run fails with a stable code, and the document stays.
    let bytes = std::fs::read(corpus("hostile/malformed/testWORD_truncated.docx")).expect("corpus");
    let (status, document) = upload(&client, &api, "truncated.docx", bytes).await;
    assert_eq!(status, StatusCode::CREATED, "{document}");
    let document_id = document["id"].as_str().expect("id").to_string();
    let run = run_to_the_end(&client, &api, &document_id).await;
    assert_eq!(run["status"], "failed", "{run:#}");
    let error = run["error"].as_str().unwrap_or("");
    assert!(
        error.starts_with("stage extract failed (malformed_document): "),
        "{run:#}"
    );
    let document = get_json(&client, &api, &format!("/documents/{document_id}")).await;
    assert_eq!(document["status"], "failed", "{document:#}");
}

/// A file is read as what its content is when its extension is wrong or unknown (issue 25):
/// a DOCX named `.doc`, a PPTX named `.ppt`, HTML, JSON and text under names Shelf does not
/// know; the format found is the document's `extension`. A password-protected workbook is
/// accepted and its run fails with `document_encrypted`; binary content under an unknown
/// name is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_read_as_what_their_content_is() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let _worker = env.spawn(&["worker"]);
    let client = client();
    let read = |path: &str| std::fs::read(corpus(path)).expect("corpus file");
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "report.doc",
            read("office/docx/sources/lorem_ipsum.docx"),
            "docx",
            "porttitor mollis quam",
        ),
        (
            "slides.ppt",
            read("office/pptx/sources/powerpoint_sample.pptx"),
            "pptx",
            "",
        ),
        (
            "page",
            read("office/html/sources/example_01.html"),
            "html",
            "first paragraph of the introduction",
        ),
        (
            "export.dat",
            br#"{"title": "Harbour inventory", "note": "seventeen lanterns counted"}"#.to_vec(),
            "json",
            "seventeen lanterns counted",
        ),
        (
            "minutes.log",
            b"The committee agreed to repaint the lighthouse in spring.\n".to_vec(),
            "txt",
            "repaint the lighthouse",
        ),
    ];
    for (name, bytes, extension, phrase) in cases {
        let (status, document) = upload(&client, &api, name, bytes).await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {document}");
        assert_eq!(document["extension"], extension, "{name}: {document:#}");
        assert_eq!(document["filename"], name, "{document:#}");
        let document_id = document["id"].as_str().expect("id").to_string();
        let run = run_to_the_end(&client, &api, &document_id).await;
        assert_eq!(run["status"], "succeeded", "{name}: {run:#}");
        if !phrase.is_empty() {
            let (_, results) = search_total(&client, &api, phrase).await;
            assert!(
                results
                    .iter()
                    .any(|r| r["document_id"] == document_id.as_str()),
                "{name}: no hit for {phrase:?}: {results:#?}"
            );
        }
    }

    let (status, document) = upload(
        &client,
        &api,
        "budget.xlsx",
        read("office/made/password-secret.xlsx"),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{document}");
    assert_eq!(document["extension"], "xlsx");
    let document_id = document["id"].as_str().expect("id").to_string();
    let run = run_to_the_end(&client, &api, &document_id).await;
    assert_eq!(run["status"], "failed", "{run:#}");
    assert_eq!(run["error_code"], "document_encrypted", "{run:#}");

    let (status, body) = upload(
        &client,
        &api,
        "setup.bin",
        b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["code"], "unsupported_file_type", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap_or_default()
            .contains(".bin files are not supported"),
        "{body}"
    );
}
