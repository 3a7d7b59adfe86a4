//! The real `shelf api` on port 0 with a temp data directory, driven over HTTP with reqwest:
//! uploads of corpus and made-up documents, a run followed over SSE to `done` with a real
//! `shelf worker`, the auth matrix, upload and request limits, archives from the hostile
//! corpus, the public-bind rule, and SIGTERM with an in-process run.

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{Env, Running, announced, corpus, pipe_through, wait_for};

/// A running `shelf api` and its address.
pub(crate) struct Api {
    pub(crate) process: Running,
    base: String,
    stderr: Arc<Mutex<String>>,
}

impl Api {
    pub(crate) fn start(env: &Env) -> Api {
        Self::start_with(env, &["api", "--port", "0"])
    }

    pub(crate) fn start_with(env: &Env, args: &[&str]) -> Api {
        let mut process = env.spawn(args);
        let (base, stderr) = announced(&mut process, "shelf api listening on ");
        Api {
            process,
            base,
            stderr,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) fn logs(&self) -> String {
        self.stderr.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

pub(crate) fn client() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

pub(crate) fn migrated(env: Env) -> Env {
    let out = env.run(&["migrate"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env
}

pub(crate) async fn upload(
    client: &Client,
    api: &Api,
    name: &str,
    bytes: Vec<u8>,
) -> (StatusCode, Value) {
    post_files(client, api, "/documents", "file", &[(name, bytes)]).await
}

/// POSTs `files` (name, bytes) as multipart parts named `part`; returns the status and JSON.
pub(crate) async fn post_files(
    client: &Client,
    api: &Api,
    path: &str,
    part: &str,
    files: &[(&str, Vec<u8>)],
) -> (StatusCode, Value) {
    let mut form = reqwest::multipart::Form::new();
    for (name, bytes) in files {
        form = form.part(
            part.to_string(),
            reqwest::multipart::Part::bytes(bytes.clone()).file_name(name.to_string()),
        );
    }
    let reply = client
        .post(api.url(path))
        .multipart(form)
        .send()
        .await
        .expect("upload");
    let status = reply.status();
    (status, reply.json().await.expect("json"))
}

pub(crate) async fn get_json(client: &Client, api: &Api, path: &str) -> Value {
    client
        .get(api.url(path))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json")
}

/// POSTs a JSON body to a full URL; the reply's JSON.
pub(crate) async fn post_json(client: &Client, url: &str, body: &Value) -> Value {
    client
        .post(url)
        .json(body)
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json")
}

/// Queues a run of a document and waits for it to end; returns the finished run.
pub(crate) async fn run_to_the_end(client: &Client, api: &Api, document_id: &str) -> Value {
    run_to_the_end_with(client, api, json!({ "document_id": document_id })).await
}

/// Creates a run from `body` (`POST /runs`) and waits for it to end; returns the finished run.
pub(crate) async fn run_to_the_end_with(client: &Client, api: &Api, body: Value) -> Value {
    let reply = client
        .post(api.url("/runs"))
        .json(&body)
        .send()
        .await
        .expect("create run");
    assert_eq!(reply.status(), StatusCode::CREATED);
    let run: Value = reply.json().await.expect("run");
    let run_id = run["id"].as_str().expect("run id").to_string();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let run = get_json(client, api, &format!("/runs/{run_id}")).await;
        if matches!(
            run["status"].as_str(),
            Some("succeeded" | "failed" | "canceled")
        ) {
            return run;
        }
        assert!(Instant::now() < deadline, "run never ended: {run:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn assert_error(status: StatusCode, body: &Value, expected_status: u16, code: &str) {
    assert_eq!(status.as_u16(), expected_status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["detail"].is_string() || body["detail"].is_array(),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_uploads_and_a_run_followed_to_done_with_a_real_worker() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let _worker = env.spawn(&["worker"]);
    let client = client();

    let mut ids = Vec::new();
    let dir = corpus("text");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("corpus")
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    for path in &names {
        let name = path.file_name().and_then(|n| n.to_str()).expect("name");
        let (status, doc) = upload(&client, &api, name, std::fs::read(path).expect("read")).await;
        // Two corpus files have identical bytes: the second is the same document.
        assert!(
            status == 201 || (status == 200 && doc["duplicate"] == true),
            "{name}: {status} {doc}"
        );
        ids.push(doc["id"].as_str().expect("id").to_string());
    }
    // A document the test makes: UTF-8 text under a name that needs normalizing.
    let (status, made) = upload(
        &client,
        &api,
        "notes/../Über  café.md",
        "# Über café\n\nNaïve façade, 42 crêpes.\n"
            .as_bytes()
            .to_vec(),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["filename"], "Über café.md");

    let list = get_json(&client, &api, "/documents?limit=100").await;
    let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(list["total"], distinct.len() as u64 + 1);

    // Queue a run, follow its record stream with the worker doing the work.
    let doc = &ids[0];
    let run: Value = client
        .post(api.url("/runs"))
        .json(&json!({"document_id": doc}))
        .send()
        .await
        .expect("run")
        .json()
        .await
        .expect("json");
    let run_id = run["id"].as_str().expect("run id").to_string();
    let response = client
        .get(api.url(&format!("/runs/{run_id}/events/records/stream")))
        .send()
        .await
        .expect("stream");
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["x-frame-options"], "DENY");
    let text = tokio::time::timeout(Duration::from_secs(60), response.text())
        .await
        .expect("stream ends with done")
        .expect("body");
    let blocks: Vec<&str> = text.split("\n\n").filter(|b| b.contains("data:")).collect();
    let last = blocks.last().expect("events");
    assert!(last.starts_with("event: done"), "{text}");
    assert!(last.contains("\"status\":\"succeeded\""), "{text}");
    let sequences: Vec<u64> = blocks
        .iter()
        .filter_map(|b| b.lines().find_map(|l| l.strip_prefix("id: ")))
        .filter_map(|s| s.parse().ok())
        .collect();
    assert_eq!(sequences, (1..=sequences.len() as u64).collect::<Vec<_>>());
    assert!(text.contains("\"stage\":\"index\""));

    let finished = get_json(&client, &api, &format!("/runs/{run_id}")).await;
    assert_eq!(finished["status"], "succeeded");
    assert!(finished["stages"].as_array().is_some_and(|s| !s.is_empty()));
    let content = get_json(
        &client,
        &api,
        &format!("/documents/{doc}/content?limit=200"),
    )
    .await;
    assert!(content["text"].as_str().is_some_and(|t| !t.is_empty()));
    let first_word = content["text"]
        .as_str()
        .unwrap_or("")
        .split_whitespace()
        .next()
        .unwrap_or("the");
    let hits = post_json(&client, &api.url("/search"), &json!({"query": first_word})).await;
    assert!(
        hits["document_ids"]
            .as_array()
            .is_some_and(|d| d.iter().any(|i| i == doc.as_str())),
        "{hits}"
    );

    // Resume after the third event: the stream starts at the fourth.
    let resumed = client
        .get(api.url(&format!("/runs/{run_id}/events/stream")))
        .header("last-event-id", "3")
        .send()
        .await
        .expect("stream")
        .text()
        .await
        .expect("body");
    assert!(resumed.starts_with("id: 4\n"), "{resumed}");
    assert!(resumed.contains("event: done"));
}

/// Every route, with what it needs.
const ROUTES: &[(&str, &str, &str)] = &[
    ("POST", "/documents", "write"),
    ("GET", "/documents", "read"),
    ("GET", "/documents/doc_0000000000000000", "read"),
    ("DELETE", "/documents/doc_0000000000000000", "write"),
    ("POST", "/documents/doc_0000000000000000/reprocess", "write"),
    ("GET", "/documents/doc_0000000000000000/content", "read"),
    ("POST", "/runs", "write"),
    ("GET", "/runs", "read"),
    ("GET", "/runs/run_0000000000000000", "read"),
    ("POST", "/runs/run_0000000000000000/cancel", "write"),
    ("POST", "/runs/run_0000000000000000/retry", "write"),
    ("GET", "/runs/run_0000000000000000/events", "read"),
    ("GET", "/runs/run_0000000000000000/events/records", "read"),
    ("GET", "/runs/run_0000000000000000/events/stream", "read"),
    (
        "GET",
        "/runs/run_0000000000000000/events/records/stream",
        "read",
    ),
    ("POST", "/search", "read"),
    ("POST", "/search/results", "read"),
    ("POST", "/search/facets", "read"),
    ("GET", "/health", "open"),
    ("GET", "/ready", "open"),
    ("GET", "/version", "open"),
    ("GET", "/classifications", "read"),
    ("GET", "/config", "write"),
    ("GET", "/metrics", "write"),
    ("GET", "/metrics/prometheus", "write"),
    ("GET", "/openapi.json", "read"),
];

fn sha256_hex(text: &str) -> String {
    // The tests crate has no hash dependency: ask the system (coreutils).
    let out = pipe_through("sha256sum", &[], text.as_bytes(), "coreutils");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auth_matrix_over_the_wire() {
    let env = migrated(
        Env::new()
            .with("SHELF_API_KEYS", "read:bb-read-key,write:bb-write-key")
            .with(
                "SHELF_API_KEY_HASHES",
                &format!("write:{}", sha256_hex("bb-hashed-key")),
            )
            .with("SHELF_API_KEY_SHA256", &sha256_hex("bb-hashed-solo")),
    );
    let api = Api::start(&env);
    let client = client();
    #[derive(Debug, Clone, Copy)]
    enum Cred {
        None,
        Bad,
        ReadKey,
        WriteBearer,
        HashedKey,
        HashedSolo,
    }
    let mut denials = 0;
    for (method, path, access) in ROUTES {
        for cred in [
            Cred::None,
            Cred::Bad,
            Cred::ReadKey,
            Cred::WriteBearer,
            Cred::HashedKey,
            Cred::HashedSolo,
        ] {
            let mut req = client.request(method.parse::<Method>().expect("method"), api.url(path));
            req = match cred {
                Cred::None => req,
                Cred::Bad => req.header("x-api-key", "bb-wrong"),
                Cred::ReadKey => req.header("x-api-key", "bb-read-key"),
                Cred::WriteBearer => req.bearer_auth("bb-write-key"),
                Cred::HashedKey => req.header("x-api-key", "bb-hashed-key"),
                Cred::HashedSolo => req.bearer_auth("bb-hashed-solo"),
            };
            if *method == "POST" && path.starts_with("/search") {
                req = req.json(&json!({"query": "x"}));
            }
            let reply = req.send().await.expect("send");
            let status = reply.status().as_u16();
            let www = reply
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            assert_eq!(
                reply
                    .headers()
                    .get("x-frame-options")
                    .and_then(|v| v.to_str().ok()),
                Some("DENY")
            );
            let is_stream = path.ends_with("/stream") && status == 200;
            let body: Value = if is_stream {
                Value::Null
            } else {
                reply.json().await.unwrap_or(Value::Null)
            };
            let expected = match (*access, cred) {
                ("open", _) => None,
                (_, Cred::None | Cred::Bad) => Some((401, "invalid_api_key")),
                ("write", Cred::ReadKey) => Some((403, "insufficient_scope")),
                _ => None,
            };
            match expected {
                Some((s, code)) => {
                    assert_eq!(status, s, "{method} {path} {cred:?}: {body}");
                    assert_eq!(body["code"], code, "{method} {path} {cred:?}");
                    if s == 401 {
                        assert_eq!(www.as_deref(), Some("Bearer"));
                    }
                    denials += 1;
                }
                None => assert!(
                    status != 401 && status != 403,
                    "{method} {path} {cred:?}: {status} {body}"
                ),
            }
        }
    }
    // Every denial is in the audit trail (written in the background, a row per client,
    // reason and minute), without key material.
    let audit = wait_for(Duration::from_secs(20), "audit rows", || {
        let page = env.json(&["admin", "api-audit", "--json", "--limit", "1000"]);
        (page["denials"].as_u64() == Some(denials)).then_some(page)
    });
    let text = audit.to_string();
    for secret in ["bb-wrong", "bb-read-key", "bb-write-key", "bb-hashed-key"] {
        assert!(!text.contains(secret), "{secret} in the audit trail");
    }
    let second = env.json(&[
        "admin",
        "api-audit",
        "--json",
        "--limit",
        "2",
        "--offset",
        "1",
    ]);
    assert_eq!(second["events"].as_array().map(Vec::len), Some(2));
    assert_eq!(second["offset"], 1);
    assert!(!api.logs().contains("bb-wrong"), "key material in the logs");
    assert!(
        api.logs().contains("shelf.api"),
        "denials are logged as shelf.api"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_and_request_limits() {
    let env = migrated(
        Env::new()
            .with("SHELF_API_MAX_UPLOAD_BYTES", "100000")
            .with("SHELF_API_MAX_REQUEST_BYTES", "300000"),
    );
    let api = Api::start(&env);
    let client = client();
    let (status, body) = upload(&client, &api, "big.txt", vec![b'a'; 150_000]).await;
    assert_error(status, &body, 413, "upload_too_large");
    // A declared Content-Length over the request limit: refused before a byte is read.
    let (status, body) = raw_upload(&api, "huge.txt", 400_000, false);
    assert_error(status, &body, 413, "request_too_large");
    let (status, _) = upload(&client, &api, "fits.txt", vec![b'c'; 100_000]).await;
    assert_eq!(status, 201);
    let list = get_json(&client, &api, "/documents").await;
    assert_eq!(list["total"], 1, "failed uploads leave no row");
    assert_eq!(
        count_files(&env.path().join("data/uploads")),
        1,
        "failed uploads leave no file"
    );
    drop(api);

    // No Content-Length: the streamed bytes hit the request limit (the upload cap is higher).
    let env = migrated(
        Env::new()
            .with("SHELF_API_MAX_UPLOAD_BYTES", "1000000")
            .with("SHELF_API_MAX_REQUEST_BYTES", "300000"),
    );
    let api = Api::start(&env);
    let (status, body) = raw_upload(&api, "stream.txt", 400_000, true);
    assert_error(status, &body, 413, "request_too_large");
    let list = get_json(&client, &api, "/documents").await;
    assert_eq!(list["total"], 0);
    assert_eq!(count_files(&env.path().join("data/uploads")), 0);
}

/// POSTs a multipart upload of `size` bytes over a plain socket, either with a
/// Content-Length or with `Transfer-Encoding: chunked`, and reads the status and JSON body of
/// the answer. The server may answer before everything is sent; writes then stop.
fn raw_upload(api: &Api, name: &str, size: usize, chunked: bool) -> (StatusCode, Value) {
    use std::io::Write;
    let addr = api.base.trim_start_matches("http://");
    let mut socket = std::net::TcpStream::connect(addr).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let boundary = "blackbox-raw-boundary";
    let opening = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\r\n"
    );
    let closing = format!("\r\n--{boundary}--\r\n");
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_string()
    } else {
        format!("Content-Length: {}", opening.len() + size + closing.len())
    };
    let head = format!(
        "POST /documents HTTP/1.1\r\nHost: {addr}\r\nContent-Type: multipart/form-data; \
         boundary={boundary}\r\n{framing}\r\nConnection: close\r\n\r\n"
    );
    let mut open = socket.write_all(head.as_bytes()).is_ok();
    let mut send = |bytes: &[u8]| -> bool {
        if chunked {
            let mut framed = format!("{:x}\r\n", bytes.len()).into_bytes();
            framed.extend_from_slice(bytes);
            framed.extend_from_slice(b"\r\n");
            socket.write_all(&framed).is_ok()
        } else {
            socket.write_all(bytes).is_ok()
        }
    };
    open = open && send(opening.as_bytes());
    let block = vec![b'z'; 10_000];
    let mut sent = 0;
    while open && sent < size {
        let n = block.len().min(size - sent);
        open = send(&block[..n]);
        sent += n;
    }
    if open && send(closing.as_bytes()) && chunked {
        send(b"");
    }
    let mut response = Vec::new();
    let _ = socket.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or_else(|| panic!("no HTTP response: {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    // The answer may itself be chunked: take the JSON object out of it.
    let json_text = body
        .find('{')
        .and_then(|start| body.rfind('}').map(|end| &body[start..=end]))
        .unwrap_or("null");
    (
        status,
        serde_json::from_str(json_text).unwrap_or(Value::Null),
    )
}

pub(crate) fn count_files(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() { count_files(&p) } else { 1 }
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_archive_is_refused() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let client = client();
    let mut tried = 0;
    for dir in ["hostile/archives-renamed", "hostile/bombs"] {
        for entry in std::fs::read_dir(corpus(dir)).expect("corpus").flatten() {
            let path = entry.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .expect("name")
                .to_string();
            let bytes = std::fs::read(&path).expect("read");
            // Under its own name (renamed archives end in .txt: refused by signature; bombs
            // end in .zip: refused by extension), and under a text name (by signature).
            for as_name in [name.clone(), format!("{name}.txt")] {
                let (status, body) = upload(&client, &api, &as_name, bytes.clone()).await;
                assert_error(status, &body, 400, "archive_not_supported");
                tried += 1;
            }
        }
    }
    assert!(tried >= 40, "{tried}");
    let list = get_json(&client, &api, "/documents").await;
    assert_eq!(list["total"], 0);
    assert_eq!(count_files(&env.path().join("data/uploads")), 0);
}

/// The refusals without a key or an import root are in `fresh.rs` (they touch no storage).
#[test]
fn a_public_bind_with_a_key_and_an_import_root_serves() {
    let env = migrated(Env::new());
    let root = env.path().join("imports");
    std::fs::create_dir_all(&root).expect("mkdir");
    let env = env
        .with("SHELF_API_KEY", "public-key")
        .with("SHELF_API_IMPORT_ROOT", root.to_str().expect("utf-8"));
    let mut api = Api::start_with(&env, &["api", "--host", "0.0.0.0", "--port", "0"]);
    assert!(api.base.starts_with("http://0.0.0.0:"), "{}", api.base);
    assert!(
        api.process
            .terminate(Duration::from_secs(20))
            .is_some_and(|s| s.success())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_leaves_in_process_runs_resumable() {
    let env = migrated(
        Env::new()
            .with("SHELF_LLM_MOCK_DELAY_MS", "400")
            .with("SHELF_LLM_MAX_CONCURRENCY", "1")
            .with("SHELF_CHUNK_TARGET_CHARS", "400")
            .with("SHELF_CHUNK_OVERLAP_CHARS", "40"),
    );
    let mut api = Api::start(&env);
    let client = client();
    let text = std::fs::read(corpus("text/multicolumn-lorem-ipsum.txt")).expect("corpus");
    let (_, doc) = upload(&client, &api, "lorem.txt", text).await;
    let run: Value = client
        .post(api.url("/runs"))
        .json(&json!({"document_id": doc["id"], "processing_mode": "process"}))
        .send()
        .await
        .expect("run")
        .json()
        .await
        .expect("json");
    let run_id = run["id"].as_str().expect("id").to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = get_json(&client, &api, &format!("/runs/{run_id}")).await;
        if r["stages"].as_array().is_some_and(|s| {
            s.iter()
                .any(|st| st["name"] == "clean" && st["status"] == "running")
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run never reached clean: {r}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // An open stream must not hold the shutdown up.
    let stream = client
        .get(api.url(&format!("/runs/{run_id}/events/stream")))
        .send()
        .await
        .expect("stream");
    let status = api.process.terminate(Duration::from_secs(40));
    assert!(
        status.is_some_and(|s| s.success()),
        "api did not stop cleanly:\n{}",
        api.logs()
    );
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.text()).await;

    let shown = env.json(&["runs", &run_id, "--json"]);
    assert_eq!(
        shown["status"], "queued",
        "released back to the queue: {shown}"
    );
    let kinds: Vec<&str> = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"run_released"), "{kinds:?}");

    let _worker = env.spawn(&["worker"]);
    let done = wait_for(
        Duration::from_secs(60),
        "the worker to finish the run",
        || {
            let run = env.json(&["runs", &run_id, "--json"]);
            (run["status"] == "succeeded").then_some(run)
        },
    );
    assert_eq!(done["status"], "succeeded");
}

/// The upload rules users expect: an empty file is refused (`empty_file`), two `file` parts
/// are refused naming the field (the first is not kept), and `shelf import` of an empty file
/// fails with the same code.
/// `GET /documents` filtered by query parameters: status, classification prefix, tag and
/// creation window narrow the page and its total; invalid values answer search's codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_list_filters_by_query_parameters() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let client = client();
    let (status, processed) = upload(
        &client,
        &api,
        "horses.txt",
        b"Horses are large domesticated animals. Horses graze on farms and horses pull carts.\n"
            .to_vec(),
    )
    .await;
    assert_eq!(status, 201, "{processed}");
    let (status, waiting) =
        upload(&client, &api, "later.txt", b"Not processed yet.\n".to_vec()).await;
    assert_eq!(status, 201, "{waiting}");
    let id = processed["id"].as_str().expect("id").to_string();
    let waiting_id = waiting["id"].as_str().expect("id").to_string();
    let run = run_to_the_end_with(
        &client,
        &api,
        json!({"document_id": id, "processing_mode": "process"}),
    )
    .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let doc = get_json(&client, &api, &format!("/documents/{id}")).await;
    assert_eq!(doc["status"], "ready", "{doc}");
    let code = doc["classification"]
        .as_str()
        .expect("a classification")
        .to_string();
    let tag = doc["tags"][0].as_str().expect("a tag").to_string();
    let created = doc["created_at"].as_str().expect("created_at").to_string();

    // The ids listed for a query string, and the total (always the whole filtered count).
    let ids = |query: String| {
        let client = client.clone();
        let url = api.url(&format!("/documents?{query}"));
        async move {
            let response = client.get(url).send().await.expect("list");
            assert_eq!(response.status(), 200, "{query}");
            let list: Value = response.json().await.expect("json");
            let ids: Vec<String> = list["documents"]
                .as_array()
                .expect("documents")
                .iter()
                .map(|d| d["id"].as_str().expect("id").to_string())
                .collect();
            assert_eq!(list["total"], ids.len() as u64, "{query}: {list}");
            // Sorted: two uploads may share a creation millisecond, so their order is not
            // what this test is about.
            let mut ids = ids;
            ids.sort();
            ids
        }
    };
    // Percent-encodes a query value (every byte but the unreserved ones).
    let encode = |v: &str| {
        v.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let mut both = vec![waiting_id.clone(), id.clone()];
    both.sort();
    assert_eq!(ids(String::new()).await, both);
    assert_eq!(ids("status=ready".into()).await, vec![id.clone()]);
    assert_eq!(
        ids("status=ingested".into()).await,
        vec![waiting_id.clone()]
    );
    // Empty values filter nothing, as in a search body.
    assert_eq!(
        ids("status=&tag=&classification_prefix=".into()).await,
        both
    );
    let class = &code[..1];
    assert_eq!(
        ids(format!("classification_prefix={}", encode(class))).await,
        vec![id.clone()]
    );
    assert_eq!(
        ids(format!("classification_prefix={}", encode(&code))).await,
        vec![id.clone()]
    );
    assert_eq!(
        ids(format!("classification_prefix={}x", encode(&code))).await,
        Vec::<String>::new()
    );
    assert_eq!(ids(format!("tag={}", encode(&tag))).await, vec![id.clone()]);
    assert_eq!(
        ids(format!("tag={}", encode(&format!("{tag} ")))).await,
        vec![id.clone()],
        "a value is trimmed, as search trims it"
    );
    assert_eq!(
        ids(format!("tag={}", encode(&tag[..tag.len() - 1]))).await,
        Vec::<String>::new()
    );
    // The window is inclusive, in RFC 3339 or as a date.
    assert_eq!(
        ids(format!(
            "created_after={}&created_before={}&status=ready&limit=1",
            encode(&created),
            encode(&created)
        ))
        .await,
        vec![id.clone()]
    );
    assert_eq!(
        ids("created_before=2000-01-01".into()).await,
        Vec::<String>::new()
    );
    assert_eq!(ids("created_after=2000-01-01".into()).await, both);

    let refused = |query: &'static str| {
        let client = client.clone();
        let url = api.url(&format!("/documents?{query}"));
        async move {
            let response = client.get(url).send().await.expect("list");
            let status = response.status().as_u16();
            let body: Value = response.json().await.expect("json");
            (status, body)
        }
    };
    let (status, body) = refused("status=done").await;
    assert_eq!(
        (status, &body["code"]),
        (400, &json!("invalid_document_status")),
        "{body}"
    );
    let (status, body) = refused("created_after=2026-12-02&created_before=2026-12-01").await;
    assert_eq!(
        (status, &body["code"]),
        (400, &json!("invalid_search_window")),
        "{body}"
    );
    let (status, body) = refused("created_after=yesterday").await;
    assert_eq!(
        (status, &body["code"]),
        (422, &json!("validation_error")),
        "{body}"
    );
    assert!(body.to_string().contains("created_after"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_files_and_second_file_parts_are_refused() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let client = client();
    let (status, body) = upload(&client, &api, "empty.txt", Vec::new()).await;
    assert_error(status, &body, 400, "empty_file");

    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"first file\n".to_vec()).file_name("a.txt"),
        )
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"second file\n".to_vec()).file_name("b.txt"),
        );
    let reply = client
        .post(api.url("/documents"))
        .multipart(form)
        .send()
        .await
        .expect("upload");
    let status = reply.status();
    let body: Value = reply.json().await.expect("json");
    assert_error(status, &body, 422, "validation_error");
    assert_eq!(body["detail"][0]["loc"], json!(["body", "file"]), "{body}");

    let list = get_json(&client, &api, "/documents").await;
    assert_eq!(list["total"], 0, "refused uploads leave no row");
    assert_eq!(
        count_files(&env.path().join("data/uploads")),
        0,
        "refused uploads leave no file"
    );

    let empty = env.write("import/empty.md", "");
    let out = env.run(&["import", "--json", empty.to_str().expect("utf-8 path")]);
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("empty_file"), "{text}");
}

/// A client that sends half a request line and stalls is disconnected once the header read
/// timeout passes; an idle keep-alive connection is closed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_idle_connections_are_cut() {
    use std::io::Write;
    let env = migrated(
        Env::new()
            .with("SHELF_API_HEADER_READ_TIMEOUT_SECONDS", "1")
            .with("SHELF_API_KEEP_ALIVE_TIMEOUT_SECONDS", "1"),
    );
    let api = Api::start(&env);
    let addr = api.base.trim_start_matches("http://").to_string();
    // Whether the server closed the connection (EOF or a reset) rather than holding it until
    // the client's own read timeout, far beyond the server's 1 s: which one ended the read,
    // not how long it took.
    let closed_by_server = |mut socket: std::net::TcpStream| -> Result<(), std::io::Error> {
        socket
            .set_read_timeout(Some(Duration::from_secs(120)))
            .expect("timeout");
        let mut buf = [0u8; 4096];
        loop {
            match socket.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    };

    let mut slow = std::net::TcpStream::connect(&addr).expect("connect");
    slow.write_all(b"GET /hea").expect("write");
    closed_by_server(slow).expect("slow headers are cut off by the server");

    // A complete request is answered, then the idle connection is closed.
    let mut idle = std::net::TcpStream::connect(&addr).expect("connect");
    idle.write_all(format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .expect("write");
    closed_by_server(idle).expect("an idle connection is closed by the server");

    // The server still serves.
    let health = get_json(&client(), &api, "/health").await;
    assert_eq!(health["status"], "healthy");
}

/// The boundaries `/openapi.json` declares, checked against the server: values at a bound are
/// accepted, values past it are refused with a declared status; `null` bodies are accepted
/// where a body is optional; every status answered is one the operation declares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_declares_what_the_server_enforces() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let client = client();
    let schema = get_json(&client, &api, "/openapi.json").await;
    let (status, doc) = upload(&client, &api, "contract.txt", b"contract words\n".to_vec()).await;
    assert_eq!(status, 201, "{doc}");
    let doc_id = doc["id"].as_str().expect("id").to_string();

    let declared = |path: &str, method: &str, status: u16| -> bool {
        schema["paths"][path][method]["responses"]
            .get(status.to_string())
            .is_some()
    };
    let param_bounds = |path: &str, method: &str, name: &str| -> (u64, u64) {
        let params = schema["paths"][path][method]["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let param = params
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path} declares no {name}"));
        let s = &param["schema"];
        let min = s["minimum"]
            .as_u64()
            .unwrap_or_else(|| panic!("{path} {name}: no minimum"));
        let max = s["maximum"]
            .as_u64()
            .unwrap_or_else(|| panic!("{path} {name}: no maximum"));
        (min, max)
    };

    // Paging: every declared bound is the server's.
    for path in ["/documents", "/runs"] {
        let (min, max) = param_bounds(path, "get", "limit");
        assert_eq!((min, max), (1, 1000), "{path}");
        for (limit, ok) in [(min - 1, false), (min, true), (max, true), (max + 1, false)] {
            let reply = client
                .get(api.url(&format!("{path}?limit={limit}")))
                .send()
                .await
                .expect("get");
            let status = reply.status().as_u16();
            assert_eq!(status == 200, ok, "{path}?limit={limit}: {status}");
            assert!(declared(path, "get", status), "{path}: {status} undeclared");
        }
        let (_, max) = param_bounds(path, "get", "offset");
        for (offset, ok) in [(max, true), (max + 1, false)] {
            let reply = client
                .get(api.url(&format!("{path}?offset={offset}")))
                .send()
                .await
                .expect("get");
            assert_eq!(reply.status() == 200, ok, "{path}?offset={offset}");
        }
    }

    // A declared `pattern`, compiled as a validator would (a search, not a full match).
    let pattern = |field: &Value| -> regex::Regex {
        regex::Regex::new(
            field["pattern"]
                .as_str()
                .unwrap_or_else(|| panic!("{field}")),
        )
        .expect("pattern compiles")
    };

    // Search: an empty or blank query is outside the declared pattern and refused; a query
    // inside it with no letter or digit is the declared business 400.
    let search_in = &schema["components"]["schemas"]["SearchIn"]["properties"];
    let query = &search_in["query"];
    assert_eq!(query["minLength"], 1, "{query}");
    // The same in every regex dialect: no `\s`, `\w`, `\d` (Unicode in one, ASCII in another).
    assert_eq!(query["pattern"], r"[^\t\n\v\f\r ]", "{query}");
    let query_pattern = pattern(query);
    for (text, declared_ok) in [("", false), (" \t\n", false), ("!!", true), ("é", true)] {
        assert_eq!(query_pattern.is_match(text), declared_ok, "{text:?}");
    }
    for path in ["/search", "/search/results", "/search/facets"] {
        for (body, expected) in [
            (json!({"query": ""}), 400),
            (json!({"query": " \t "}), 400),
            (json!({"query": "!!"}), 400),
            (json!({"query": "été"}), 200),
            (json!({"query": "contract"}), 200),
            (json!({"query": "contract", "limit": 500}), 200),
            (json!({"query": "contract", "limit": 501}), 422),
            (json!({"query": "contract", "limit": 0}), 422),
            // Integers written as floats, read exactly (serde_json's float_roundtrip).
            (
                json!({"query": "contract", "limit": 451.0, "offset": 2_251_799_813_685_247.0}),
                200,
            ),
            (json!({"query": "contract", "scope": ""}), 400),
        ] {
            let reply = client
                .post(api.url(path))
                .json(&body)
                .send()
                .await
                .expect("search");
            let status = reply.status().as_u16();
            assert_eq!(status, expected, "{path} {body}");
            assert!(
                declared(path, "post", status),
                "{path}: {status} undeclared"
            );
        }
    }

    // Timestamps: `format: date-time` only annotates in JSON Schema 2020-12, so the pattern
    // spells RFC 3339 out; the server accepts exactly what it matches.
    for field in ["created_after", "created_before"] {
        let field_schema = &search_in[field];
        assert_eq!(field_schema["format"], "date-time", "{field_schema}");
        let timestamp = pattern(field_schema);
        for value in [
            "2026-11-21T10:00:00Z",
            "2026-11-21t10:00:00.123456789012z",
            "2026-11-21T10:00:00-23:59",
            "2024-02-29T00:00:00+00:00",
            "2000-02-29T23:59:59Z",
            "0000-02-29T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "",
            " 2026-11-21T10:00:00Z",
            "2026-11-21T10:00:00Z\n",
            "2026-11-21",
            "2026-11-21T10:00:00",
            "2026-11-21 10:00:00Z",
            "2026-11-21T10:00Z",
            "2026-11-21T10:00:00.Z",
            "2026-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-13-10T00:00:00Z",
            "2026-11-00T00:00:00Z",
            "2026-11-21T24:00:00Z",
            "2026-11-21T10:60:00Z",
            "2026-11-21T23:59:60Z",
            "2026-11-21T10:00:00+24:00",
            "2026-11-21T10:00:00+0200",
            "2026-11-21T10:00:00\u{2212}02:00",
            "\u{0662}026-11-21T10:00:00Z",
        ] {
            let declared_ok = timestamp.is_match(value);
            let reply = client
                .post(api.url("/search"))
                .json(&json!({"query": "contract", field: value}))
                .send()
                .await
                .expect("search");
            let status = reply.status().as_u16();
            assert_eq!(
                status,
                if declared_ok { 200 } else { 422 },
                "{field}={value:?} (pattern match: {declared_ok})"
            );
        }
    }
    let reply = client
        .post(api.url("/search"))
        .json(
            &json!({"query": "contract", "created_after": "2026-11-22T00:00:00Z",
            "created_before": "2026-11-21T00:00:00Z"}),
        )
        .send()
        .await
        .expect("search");
    assert_eq!(reply.status(), 400);
    let body: Value = reply.json().await.expect("json");
    assert_eq!(body["code"], "invalid_search_window", "{body}");

    // Pipeline names: the declared shape is the server's (422 outside it); a well-formed name
    // without a file is the business 400.
    for (path, template, schema_name) in [
        ("/runs".to_string(), "/runs", "CreateRun"),
        (
            format!("/documents/{doc_id}/reprocess"),
            "/documents/{id}/reprocess",
            "Reprocess",
        ),
    ] {
        let field_schema = &schema["components"]["schemas"][schema_name]["properties"]["pipeline"];
        assert_eq!(field_schema["minLength"], 1, "{field_schema}");
        assert_eq!(field_schema["maxLength"], 64, "{field_schema}");
        let name_pattern = pattern(field_schema);
        let long = "a".repeat(65);
        for (name, expected) in [
            ("", 422),
            ("no such", 422),
            ("../default", 422),
            ("d\u{e9}fault", 422),
            (long.as_str(), 422),
            ("no-such_pipeline9", 400),
            ("default", 201),
        ] {
            assert_eq!(
                name_pattern.is_match(name) && name.len() <= 64,
                expected != 422,
                "{name:?}"
            );
            let reply = client
                .post(api.url(&path))
                .json(&json!({"document_id": doc_id, "pipeline": name}))
                .send()
                .await
                .expect("run");
            let status = reply.status().as_u16();
            assert_eq!(status, expected, "{path} pipeline {name:?}");
            assert!(declared(template, "post", status), "{path}: {status}");
            if expected == 400 {
                let body: Value = reply.json().await.expect("json");
                assert_eq!(body["code"], "pipeline_not_found", "{body}");
            }
        }
    }

    // A body is an object: serde would read an array as the fields in order; the server
    // does not.
    for (path, body) in [
        ("/runs".to_string(), json!([doc_id, null, null])),
        (
            format!("/documents/{doc_id}/reprocess"),
            json!([null, null]),
        ),
        ("/search".to_string(), json!(["contract"])),
    ] {
        let reply = client
            .post(api.url(&path))
            .json(&body)
            .send()
            .await
            .expect("post");
        assert_eq!(reply.status(), 422, "{path} {body}");
    }

    // Optional bodies: nothing, `{}` and `null` are the same request.
    for body in ["", "{}", "null"] {
        let reply = client
            .post(api.url(&format!("/documents/{doc_id}/reprocess")))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("reprocess");
        assert_eq!(reply.status(), 201, "reprocess with {body:?}");
    }
    // White space alone is a body, and not JSON.
    let reply = client
        .post(api.url(&format!("/documents/{doc_id}/reprocess")))
        .header("content-type", "application/json")
        .body("\n")
        .send()
        .await
        .expect("reprocess");
    assert_eq!(reply.status(), 422, "a body of white space");
    let runs = get_json(&client, &api, "/runs").await;
    let run_id = runs["runs"][0]["id"].as_str().expect("run").to_string();
    let reply = client
        .post(api.url(&format!("/runs/{run_id}/retry")))
        .header("content-type", "application/json")
        .body("null")
        .send()
        .await
        .expect("retry");
    // The run is queued, not failed: `null` was read as no body, then the rule applied.
    assert_eq!(reply.status(), 400);
    let body: Value = reply.json().await.expect("json");
    assert_eq!(body["code"], "run_not_failed", "{body}");

    // Last-Event-ID: digits only.
    let stream = format!("/runs/{run_id}/events/stream");
    for (value, expected) in [
        ("abc", 422),
        ("-1", 422),
        ("+1", 422),
        ("99999999999999999999", 422),
    ] {
        let reply = client
            .get(api.url(&stream))
            .header("last-event-id", value)
            .send()
            .await
            .expect("stream");
        assert_eq!(reply.status().as_u16(), expected, "Last-Event-ID {value}");
    }

    // The two stream operations declare `Last-Event-ID`; any other header is accepted, as
    // HTTP has it (schemathesis.toml says why extra headers are not generated for them).
    let reply = client
        .get(api.url(&stream))
        .header("last-event-id", "0")
        .header("x-not-declared", "42")
        .send()
        .await
        .expect("stream");
    assert_eq!(reply.status(), 200, "an undeclared header is not refused");
    drop(reply);

    // Export: `format` is required and one of the declared enum; anything else is the
    // declared 400, before the document is looked up.
    let export_params = schema["paths"]["/documents/{id}/export"]["get"]["parameters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let format = export_params
        .iter()
        .find(|p| p["name"] == "format")
        .expect("format");
    assert_eq!(format["required"], true, "{format}");
    assert_eq!(
        format["schema"]["$ref"], "#/components/schemas/ExportFormatIn",
        "{format}"
    );
    assert_eq!(
        schema["components"]["schemas"]["ExportFormatIn"]["enum"],
        json!(["json", "txt", "md"])
    );
    for (query, expected) in [
        ("format=", 400),
        ("format=pdf", 400),
        ("", 400),
        // Declared formats reach the lookup: no succeeded run yet.
        ("format=md", 404),
        ("format=json", 404),
    ] {
        let reply = client
            .get(api.url(&format!("/documents/{doc_id}/export?{query}")))
            .send()
            .await
            .expect("export");
        let status = reply.status().as_u16();
        assert_eq!(status, expected, "export ?{query}");
        assert!(
            declared("/documents/{id}/export", "get", status),
            "{status}"
        );
    }

    // OKF bundle: the prefix is what the declared pattern matches, as sent; lengths count
    // the value as sent.
    let okf_params = schema["paths"]["/export/okf"]["get"]["parameters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let prefix = okf_params
        .iter()
        .find(|p| p["name"] == "classification_prefix")
        .expect("classification_prefix");
    let prefix_pattern = pattern(&prefix["schema"]);
    let spaces = format!(" {} ", "t".repeat(199));
    for (query, value, expected) in [
        ("classification_prefix", "636.1", 200),
        ("classification_prefix", "", 200),
        ("classification_prefix", " 636", 422),
        ("classification_prefix", "\u{aa9fd}", 422),
        ("classification_prefix", "6a", 422),
        ("tag", spaces.as_str(), 422),
        ("tag", " horses ", 200),
    ] {
        if query == "classification_prefix" {
            assert_eq!(
                prefix_pattern.is_match(value),
                expected == 200,
                "pattern on {value:?}"
            );
        }
        let encoded: String = value
            .bytes()
            .map(|b| match b {
                b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'.' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let reply = client
            .get(api.url(&format!("/export/okf?{query}={encoded}")))
            .send()
            .await
            .expect("okf");
        let status = reply.status().as_u16();
        assert_eq!(status, expected, "okf {query}={value:?}");
        assert!(declared("/export/okf", "get", status), "{status}");
    }

    // Imports: the enums and the rules between fields are in the schema.
    let import_in = &schema["components"]["schemas"]["ImportIn"];
    assert_eq!(import_in["properties"]["source_dir"]["minLength"], 1);
    assert_eq!(
        schema["components"]["schemas"]["ImportFormatIn"]["enum"],
        json!(["md", "markdown", "txt", "text"])
    );
    assert_eq!(
        schema["components"]["schemas"]["OutputModeIn"]["enum"],
        json!(["workspace", "new-directory", "original", "subdirectory"])
    );
    assert_eq!(
        schema["components"]["schemas"]["ImportProcessingModeIn"]["enum"],
        json!(["process", "queue", "none"])
    );
    let rules = import_in["allOf"].to_string();
    assert!(
        rules.contains("\"resume\"") && rules.contains("\"new-directory\""),
        "{import_in}"
    );

    // A batch needs one `files` part, of any content.
    let files = &schema["components"]["schemas"]["BatchUploadForm"]["properties"]["files"];
    assert_eq!(files["minItems"], 1, "{files}");
    assert!(files.get("type").is_none(), "{files}");
    assert!(files["items"].get("type").is_none(), "{files}");

    // Links: a new document's id leads to its operations, a new run's to its own.
    let links = |path: &str, status: &str| -> Value {
        schema["paths"][path]["post"]["responses"][status]["links"].clone()
    };
    for status in ["200", "201"] {
        let from_upload = links("/documents", status);
        for op in [
            "get_document",
            "delete_document",
            "reprocess_document",
            "get_document_content",
            "get_document_pages",
            "export_document",
            "get_document_okf",
        ] {
            assert_eq!(
                from_upload[op]["parameters"]["path.id"], "$response.body#/id",
                "{op}: {from_upload}"
            );
        }
        assert_eq!(
            from_upload["create_run"]["requestBody"]["document_id"],
            "$response.body#/id"
        );
    }
    for path in ["/runs", "/documents/{id}/reprocess", "/runs/{id}/retry"] {
        let from_run = links(path, "201");
        for op in [
            "get_run",
            "cancel_run",
            "retry_run",
            "list_run_events",
            "list_run_event_records",
            "stream_run_events",
            "stream_run_event_records",
        ] {
            assert_eq!(
                from_run[op]["parameters"]["path.id"], "$response.body#/id",
                "{path} -> {op}: {from_run}"
            );
        }
    }

    // A validation error body validates against the declared ErrorDetail: loc items are
    // strings or integers.
    let loc_items =
        &schema["components"]["schemas"]["ValidationIssue"]["properties"]["loc"]["items"];
    assert_eq!(loc_items["$ref"], "#/components/schemas/LocSegment");
    let loc_items = &schema["components"]["schemas"]["LocSegment"];
    assert!(loc_items.to_string().contains("integer"), "{loc_items}");
    assert!(loc_items.to_string().contains("string"), "{loc_items}");
}
