//! `/documents`: uploads (streaming, limits, refusals, nothing left behind), listing, lookup,
//! deletion, reprocessing and content pages.

use axum::http::Method;
use serde_json::json;

use crate::common::*;

const TEXT: &[u8] = b"The quick brown fox jumps over the lazy dog.\nSecond line of plain text.\n";

#[tokio::test]
async fn upload_stores_then_deduplicates() {
    let app = TestApp::new().await;
    let first = app.upload("notes.txt", TEXT).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let doc = first.json();
    let id = doc["id"].as_str().expect("id");
    assert!(id.starts_with("doc_") && id.len() == 20);
    assert_eq!(doc["filename"], "notes.txt");
    assert_eq!(doc["status"], "ingested");
    assert_eq!(doc["byte_size"], TEXT.len());
    assert_eq!(doc["duplicate"], false);
    assert_eq!(doc["classification"], serde_json::Value::Null);
    for field in ["title", "summary", "tags", "suggested_stem", "created_at"] {
        assert!(doc.get(field).is_some(), "{field} missing: {doc}");
    }

    let again = app.upload("other-name.txt", TEXT).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["duplicate"], true);
    assert_eq!(again.json()["id"], id);
    assert_eq!(app.count("documents").await, 1);
    assert_eq!(files_under(&app.data_dir().join("uploads")).len(), 1);
}

#[tokio::test]
async fn filenames_are_normalized() {
    let app = TestApp::new().await;
    let reply = app.upload("../../etc/My\tReport .md", b"# Title\n").await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    assert_eq!(reply.json()["filename"], "My Report .md");
}

#[tokio::test]
async fn archive_extensions_are_refused_before_any_byte_is_written() {
    let app = TestApp::new().await;
    for name in ["a.zip", "b.tar", "c.7z", "d.rar", "e.tar.gz"] {
        app.upload(name, b"whatever")
            .await
            .assert_error(400, "archive_not_supported");
    }
    assert!(!app.data_dir().join("uploads").exists());
}

#[tokio::test]
async fn archive_signatures_are_refused_under_text_names() {
    let app = TestApp::new().await;
    let signatures: &[&[u8]] = &[
        b"PK\x03\x04\x14\x00\x00\x00",
        b"\x1f\x8b\x08\x00\x00\x00",
        b"7z\xbc\xaf\x27\x1c\x00\x04",
        b"Rar!\x1a\x07\x01\x00",
    ];
    for sig in signatures {
        app.upload("innocent.txt", sig)
            .await
            .assert_error(400, "archive_not_supported");
    }
    assert!(files_under(&app.data_dir().join("uploads")).is_empty());
    assert_eq!(app.count("documents").await, 0);
}

#[tokio::test]
async fn unsupported_and_binary_files_say_why() {
    let app = TestApp::new().await;
    let exe = app
        .upload("tool.exe", b"MZ")
        .await
        .assert_error(400, "unsupported_file_type");
    assert!(exe["detail"].as_str().unwrap_or("").contains(".exe"));
    let none = app
        .upload("LICENSE", b"\x01\x02\x03\0\0\x04")
        .await
        .assert_error(400, "unsupported_file_type");
    assert!(
        none["detail"]
            .as_str()
            .unwrap_or("")
            .contains("files without an extension")
    );
    // Text without an extension is text.
    let readme = app.upload("README", b"hi").await;
    assert_eq!(readme.status, 201);
    assert_eq!(readme.json()["extension"], "txt");
    let binary = app
        .upload("data.txt", b"abc\0\0\0def")
        .await
        .assert_error(400, "unsupported_file_type");
    assert!(binary["detail"].as_str().unwrap_or("").contains("binary"));
}

#[tokio::test]
async fn oversized_uploads_leave_no_file_and_no_row() {
    let app = TestApp::with([("SHELF_API_MAX_UPLOAD_BYTES", "10000")]).await;
    let big = vec![b'a'; 10_001];
    app.upload("big.txt", &big)
        .await
        .assert_error(413, "upload_too_large");
    let exact = vec![b'b'; 10_000];
    assert_eq!(app.upload("exact.txt", &exact).await.status, 201);
    assert_eq!(app.count("documents").await, 1);
    assert_eq!(files_under(&app.data_dir().join("uploads")).len(), 1);
}

#[tokio::test]
async fn multipart_problems_are_errors_with_bodies() {
    let app = TestApp::new().await;
    let body = multipart_body(&[("other", Some("x.txt"), b"hi".as_slice())]);
    let missing = app
        .call(
            Call::new(Method::POST, "/documents")
                .raw(&format!("multipart/form-data; boundary={BOUNDARY}"), body),
        )
        .await
        .assert_error(422, "validation_error");
    assert_eq!(missing["detail"][0]["loc"], json!(["body", "file"]));
    assert_eq!(missing["detail"][0]["type"], "missing");

    app.call(Call::new(Method::POST, "/documents").json(&json!({"file": "x"})))
        .await
        .assert_error(422, "validation_error");
    app.call(Call::new(Method::POST, "/documents").raw(
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nno end"),
    ))
    .await
    .assert_error(400, "bad_request");
    assert_eq!(app.count("documents").await, 0);
}

#[tokio::test]
async fn symlinked_uploads_directory_is_refused_for_upload_and_delete() {
    let app = TestApp::new().await;
    let id = app.upload_ok("keep.txt", TEXT).await;
    let uploads = app.data_dir().join("uploads");
    let moved = app.dir.path().join("elsewhere");
    std::fs::rename(&uploads, &moved).expect("move uploads");
    std::os::unix::fs::symlink(&moved, &uploads).expect("symlink");

    app.upload("new.txt", b"new text\n")
        .await
        .assert_error(400, "invalid_import_path");
    app.call(Call::new(Method::DELETE, &format!("/documents/{id}")))
        .await
        .assert_error(400, "invalid_import_path");
    assert_eq!(app.count("documents").await, 1);
    assert_eq!(
        files_under(&moved).len(),
        1,
        "nothing written through the link"
    );
}

#[tokio::test]
async fn unexpected_ingest_failures_are_generic() {
    let app = TestApp::new().await;
    // A regular file where the staging directory belongs: creating it fails inside the store.
    std::fs::create_dir_all(app.data_dir().join("uploads")).expect("mkdir");
    std::fs::write(app.data_dir().join("uploads/.staging"), b"in the way").expect("write");
    let big = vec![b'x'; 20_000];
    let body = app
        .upload("ok.txt", &big)
        .await
        .assert_error(400, "ingest_failed");
    assert_eq!(body["detail"], "Document ingest failed");
    assert_eq!(app.count("documents").await, 0);
}

#[tokio::test]
async fn list_get_and_delete() {
    let app = TestApp::new().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            app.upload_ok(&format!("d{i}.txt"), format!("document {i}\n").as_bytes())
                .await,
        );
    }
    let page = app.get("/documents?limit=2&offset=1").await;
    assert_eq!(page.status, 200);
    let page = page.json();
    assert_eq!(page["total"], 3);
    assert_eq!(page["limit"], 2);
    assert_eq!(page["offset"], 1);
    assert_eq!(page["documents"].as_array().map(Vec::len), Some(2));
    let all = app.get("/documents").await.json();
    assert_eq!(all["limit"], 100);
    assert_eq!(all["offset"], 0);

    app.get("/documents?limit=1001")
        .await
        .assert_error(422, "validation_error");
    app.get("/documents?offset=-1")
        .await
        .assert_error(422, "validation_error");

    let one = app.get(&format!("/documents/{}", ids[0])).await;
    assert_eq!(one.status, 200);
    assert_eq!(one.json()["id"], ids[0].as_str());
    assert!(one.json().get("duplicate").is_none());
    app.get("/documents/doc_0000000000000000")
        .await
        .assert_error(404, "not_found");

    let deleted = app
        .call(Call::new(Method::DELETE, &format!("/documents/{}", ids[0])))
        .await;
    assert_eq!(deleted.status, 200);
    assert_eq!(
        deleted.json(),
        json!({"id": ids[0], "deleted": true, "removed_files": true})
    );
    app.get(&format!("/documents/{}", ids[0]))
        .await
        .assert_error(404, "not_found");
    app.call(Call::new(Method::DELETE, &format!("/documents/{}", ids[0])))
        .await
        .assert_error(404, "not_found");
    assert_eq!(files_under(&app.data_dir().join("uploads")).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reprocess_and_content_pages() {
    let app = TestApp::with([("SHELF_API_MAX_CONTENT_CHARS", "10")]).await;
    let id = app.upload_ok("story.txt", TEXT).await;
    app.get(&format!("/documents/{id}/content"))
        .await
        .assert_error(404, "not_found");

    let run = app
        .post_json(
            &format!("/documents/{id}/reprocess"),
            json!({"processing_mode": "process"}),
        )
        .await;
    assert_eq!(run.status, 201, "{}", run.text());
    let run_id = run.json()["id"].as_str().expect("run id").to_string();
    assert_eq!(app.wait_terminal(&run_id).await["status"], "succeeded");

    let page = app.get(&format!("/documents/{id}/content")).await.json();
    assert_eq!(page["document_id"], id.as_str());
    assert_eq!(page["limit"], 10);
    assert_eq!(page["offset"], 0);
    assert_eq!(page["truncated"], true);
    assert_eq!(page["text"].as_str().map(|t| t.chars().count()), Some(10));
    assert!(page["total_chars"].as_u64().unwrap_or(0) > 10);
    let capped = app
        .get(&format!("/documents/{id}/content?offset=4&limit=1000"))
        .await
        .json();
    assert_eq!(capped["limit"], 10, "a larger limit is capped");
    assert_eq!(capped["offset"], 4);
    app.get(&format!("/documents/{id}/content?limit=0"))
        .await
        .assert_error(422, "validation_error");

    // No body: queued for a worker.
    let queued = app
        .call(Call::new(
            Method::POST,
            &format!("/documents/{id}/reprocess"),
        ))
        .await;
    assert_eq!(queued.status, 201);
    assert_eq!(queued.json()["status"], "queued");
    app.call(Call::new(
        Method::POST,
        "/documents/doc_0000000000000000/reprocess",
    ))
    .await
    .assert_error(404, "not_found");
    let unknown = app
        .post_json(
            &format!("/documents/{id}/reprocess"),
            json!({"pipeline": "nope"}),
        )
        .await
        .assert_error(400, "pipeline_not_found");
    assert_eq!(unknown["detail"], "Pipeline not found: nope");
}

fn batch_call(parts: &[(&str, Option<&str>, &[u8])]) -> Call {
    Call::new(Method::POST, "/documents/batch").raw(
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        multipart_body(parts),
    )
}

#[tokio::test]
async fn batch_answers_per_file_and_caps_refuse_everything() {
    let app = TestApp::with([("SHELF_API_MAX_BATCH_FILES", "3")]).await;
    let reply = app
        .call(batch_call(&[
            ("files", Some("a/b/notes.txt"), TEXT),
            ("comment", None, b"not a file"),
            ("files", Some("pack.zip"), b"PK\x03\x04"),
            ("files", Some("again.txt"), TEXT),
        ]))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["ingested"], 2);
    assert_eq!(body["failed"], 1);
    let items = body["documents"].as_array().expect("documents");
    assert_eq!(items[0]["filename"], "notes.txt");
    assert_eq!(items[0]["document"]["duplicate"], false);
    assert_eq!(items[1]["status"], "failed");
    assert_eq!(items[1]["error"]["code"], "archive_not_supported");
    assert_eq!(items[2]["document"]["duplicate"], true);
    assert_eq!(app.count("documents").await, 1);

    let four: Vec<(&str, Option<&str>, &[u8])> = ["1.txt", "2.txt", "3.txt", "4.txt"]
        .iter()
        .map(|n| ("files", Some(*n), &b"new bytes\n"[..]))
        .collect();
    app.call(batch_call(&four))
        .await
        .assert_error(413, "batch_too_large");
    assert_eq!(app.count("documents").await, 1);
    let staging = app.data_dir().join("uploads/.staging");
    assert!(files_under(&staging).is_empty(), "nothing staged is kept");

    app.call(batch_call(&[("file", Some("x.txt"), TEXT)]))
        .await
        .assert_error(422, "validation_error");
}
