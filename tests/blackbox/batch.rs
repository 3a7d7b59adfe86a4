//! `POST /documents/batch` on the real `shelf api`: per-file outcomes with normalized names
//! (a corpus document, an archive, an unsupported file, an empty one, one over the upload cap,
//! a duplicate), the batch caps refusing everything before a file is kept, and an unexpected
//! failure of the storage reported per file as `ingest_failed`.

use reqwest::StatusCode;
use reqwest::multipart::Form;
use serde_json::Value;

use crate::api::{Api, client, count_files, get_json, post_files};
use crate::support::{Env, corpus};

/// POSTs `files` (name, bytes) as repeated `files` parts; returns the status and JSON body.
async fn post_batch(
    client: &reqwest::Client,
    api: &Api,
    files: &[(&str, Vec<u8>)],
) -> (StatusCode, Value) {
    post_files(client, api, "/documents/batch", "files", files).await
}

/// Sends only the head of a batch request declaring `length` bytes, with
/// `Expect: 100-continue`; returns the first status line other than `100 Continue`.
fn declared_only(api: &Api, length: u64) -> String {
    use std::io::{BufRead, BufReader, Write};
    let addr = api.url("").trim_start_matches("http://").to_string();
    let mut socket = std::net::TcpStream::connect(&addr).expect("connect");
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("timeout");
    let head = format!(
        "POST /documents/batch HTTP/1.1\r\nHost: {addr}\r\nContent-Type: multipart/form-data; \
         boundary=b\r\nContent-Length: {length}\r\nExpect: 100-continue\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).expect("write");
    let mut reader = BufReader::new(socket);
    let mut line = String::new();
    loop {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .expect("an answer before the body");
        assert!(read > 0, "the connection closed without an answer");
        if line.starts_with("HTTP/1.1 ") && !line.starts_with("HTTP/1.1 100") {
            return line.trim().to_string();
        }
    }
}

fn entry(report: &Value, index: usize) -> &Value {
    &report["documents"][index]
}

fn assert_failed(report: &Value, index: usize, filename: &str, code: &str) {
    let item = entry(report, index);
    assert_eq!(item["filename"], filename, "{item}");
    assert_eq!(item["status"], "failed", "{item}");
    assert_eq!(item["error"]["code"], code, "{item}");
    assert!(item["error"]["detail"].is_string(), "{item}");
    assert!(item.get("document").is_none(), "{item}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_ingests_what_it_can_and_reports_the_rest() {
    let env = Env::new().with("SHELF_API_MAX_UPLOAD_BYTES", "20000");
    let api = Api::start(&env);
    let client = client();
    let lorem = std::fs::read(corpus("text/multicolumn-lorem-ipsum.txt")).expect("corpus");
    let archive =
        std::fs::read(corpus("hostile/archives-renamed/small_archive-gzip.txt")).expect("corpus");
    let (status, report) = post_batch(
        &client,
        &api,
        &[
            ("../notes/Lorem   ipsum.txt", lorem.clone()),
            ("C:\\temp\\packed.txt", archive),
            ("  tools/setup.exe. ", b"MZ\x90\x00binary".to_vec()),
            ("empty.md", Vec::new()),
            ("big.txt", vec![b'b'; 25_000]),
            ("again/copy.txt", lorem.clone()),
            ("fresh.md", b"# Fresh\n\nA second document.\n".to_vec()),
        ],
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["ingested"], 3, "{report}");
    assert_eq!(report["failed"], 4, "{report}");
    assert_eq!(report["documents"].as_array().map(Vec::len), Some(7));

    let first = entry(&report, 0);
    assert_eq!(first["filename"], "Lorem ipsum.txt");
    assert_eq!(first["status"], "ingested");
    assert_eq!(first["document"]["filename"], "Lorem ipsum.txt");
    assert_eq!(first["document"]["duplicate"], false);
    assert_eq!(first["document"]["byte_size"], lorem.len());
    assert!(first.get("error").is_none(), "{first}");

    assert_failed(&report, 1, "packed.txt", "archive_not_supported");
    assert_failed(&report, 2, "setup.exe", "unsupported_file_type");
    assert_failed(&report, 3, "empty.md", "empty_file");
    assert_failed(&report, 4, "big.txt", "upload_too_large");

    let copy = entry(&report, 5);
    assert_eq!(copy["filename"], "copy.txt");
    assert_eq!(copy["status"], "ingested");
    assert_eq!(copy["document"]["duplicate"], true);
    assert_eq!(copy["document"]["id"], first["document"]["id"]);
    assert_eq!(entry(&report, 6)["document"]["duplicate"], false);

    let list = get_json(&client, &api, "/documents").await;
    assert_eq!(list["total"], 2, "failed files leave no row");
    let uploads = env.path().join("data/uploads");
    assert_eq!(count_files(&uploads), 2, "failed files leave no file");
    assert_eq!(count_files(&uploads.join(".staging")), 0);

    // The same batch again: everything stored already is a duplicate, nothing new is kept.
    let (status, again) = post_batch(
        &client,
        &api,
        &[
            ("Lorem ipsum.txt", lorem),
            ("x.zip", b"PK\x03\x04".to_vec()),
        ],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(entry(&again, 0)["document"]["duplicate"], true);
    assert_failed(&again, 1, "x.zip", "archive_not_supported");
    assert_eq!(count_files(&uploads), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_refuse_the_whole_batch_before_anything_is_kept() {
    let env = Env::new()
        .with("SHELF_API_MAX_BATCH_FILES", "3")
        .with("SHELF_API_MAX_BATCH_BYTES", "50000");
    let api = Api::start(&env);
    let client = client();
    let uploads = env.path().join("data/uploads");
    let nothing_kept = |what: &str| {
        assert_eq!(count_files(&uploads), 0, "{what}: a file was kept");
    };

    // One file too many: refused when the fourth part starts.
    let four: Vec<(String, Vec<u8>)> = (0..4)
        .map(|i| {
            (
                format!("f{i}.txt"),
                format!("file number {i}\n").into_bytes(),
            )
        })
        .collect();
    let four: Vec<(&str, Vec<u8>)> = four.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let (status, body) = post_batch(&client, &api, &four).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["code"], "batch_too_large");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("3 files"))
    );
    nothing_kept("too many files");

    // Too many bytes, found while streaming (the body fits the Content-Length allowance): the
    // first file was already staged and is removed.
    let (status, body) = post_batch(
        &client,
        &api,
        &[("a.txt", vec![b'a'; 30_000]), ("b.txt", vec![b'b'; 30_000])],
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["code"], "batch_too_large");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("50000 bytes"))
    );
    nothing_kept("too many bytes");

    // A Content-Length that cannot fit: refused before the body is read.
    let (status, body) = post_batch(&client, &api, &[("huge.txt", vec![b'h'; 200_000])]).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["code"], "batch_too_large");
    nothing_kept("declared length");

    // The declared length alone decides: with `Expect: 100-continue` and no byte of body
    // sent, the refusal comes at once (a server that read the body first would wait).
    let status = declared_only(&api, 200_000);
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    nothing_kept("expect 100-continue");

    let list = get_json(&client, &api, "/documents").await;
    assert_eq!(list["total"], 0, "no row");

    // Within the caps the same server ingests.
    let (status, report) = post_batch(
        &client,
        &api,
        &[("a.txt", vec![b'a'; 20_000]), ("b.txt", vec![b'b'; 20_000])],
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["ingested"], 2);
    assert_eq!(count_files(&uploads), 2);

    // No `files` part at all.
    let reply = client
        .post(api.url("/documents/batch"))
        .multipart(Form::new().text("note", "no files"))
        .send()
        .await
        .expect("send");
    assert_eq!(reply.status(), 422);
    let body: Value = reply.json().await.expect("json");
    assert_eq!(body["code"], "validation_error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unexpected_failure_fails_each_file_generically() {
    let env = Env::new();
    let api = crate::fresh::api_with_a_file_for_uploads(&env);
    let client = client();
    let (status, report) = post_batch(
        &client,
        &api,
        &[
            ("one.txt", b"first\n".to_vec()),
            ("two.txt", b"second\n".to_vec()),
            ("three.zip", b"PK\x03\x04".to_vec()),
        ],
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["failed"], 3);
    for (index, name) in ["one.txt", "two.txt"].into_iter().enumerate() {
        assert_failed(&report, index, name, "ingest_failed");
        assert_eq!(
            entry(&report, index)["error"]["detail"],
            "Document ingest failed"
        );
    }
    // Refused by name before any storage is touched: the user error still shows.
    assert_failed(&report, 2, "three.zip", "archive_not_supported");
    let list = get_json(&client, &api, "/documents").await;
    assert_eq!(list["total"], 0);
    let logs = api.logs();
    assert_eq!(
        logs.matches("batch_item_failed").count(),
        2,
        "each cause logged once: {logs}"
    );
    assert!(logs.contains("not a directory"), "{logs}");
    assert!(!report.to_string().contains("not a directory"));
}
