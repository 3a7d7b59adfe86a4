//! Metrics and version over the wire: the counters of a real `shelf api` (requests by route
//! template, runs executed in process, queue claims, a conversion failure, mock-provider tokens
//! and their cost) and of a real `shelf worker --metrics-port`, their scopes, the Prometheus
//! exposition checked by `promtool`, and `/version` against `shelf --version`.

use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated, run_to_the_end_with, upload};
use crate::support::{Env, announced, corpus, pipe_through};

/// Not a PDF past its signature: the extractor fails with `malformed_document`.
const BROKEN_PDF: &[u8] = b"%PDF-1.4\nthis is no pdf at all\n%%EOF\n";

fn keyed_client(key: &str) -> Client {
    let mut headers = HeaderMap::new();
    headers.insert("x-api-key", HeaderValue::from_str(key).expect("header"));
    Client::builder()
        .timeout(Duration::from_secs(60))
        .default_headers(headers)
        .build()
        .expect("client")
}

/// The samples of one family whose labels include every pair of `labels`.
fn samples<'a>(metrics: &'a Value, name: &str, labels: &Value) -> Vec<&'a Value> {
    let wanted = labels.as_object().cloned().unwrap_or_default();
    metrics["metrics"][name]["samples"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|s| wanted.iter().all(|(k, v)| &s["labels"][k] == v))
                .collect()
        })
        .unwrap_or_default()
}

/// The value of a counter or gauge with exactly these labels (0 when absent).
fn value(metrics: &Value, name: &str, labels: Value) -> f64 {
    samples(metrics, name, &labels)
        .first()
        .and_then(|s| s["value"].as_f64())
        .unwrap_or(0.0)
}

/// The observation count of a histogram's series with these labels (0 when absent).
fn count(metrics: &Value, name: &str, labels: Value) -> u64 {
    samples(metrics, name, &labels)
        .iter()
        .filter_map(|s| s["count"].as_u64())
        .sum()
}

/// `promtool check metrics` on an exposition; panics with its findings.
fn promtool_accepts(text: &str) {
    let out = pipe_through(
        "promtool",
        &["check", "metrics"],
        text.as_bytes(),
        "Debian package prometheus; scripts/install-system-packages",
    );
    assert!(
        out.status.success(),
        "promtool refused the exposition:\n{}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// GETs the Prometheus text, checks its content type and that promtool accepts it.
async fn exposition(client: &Client, url: &str) -> String {
    let reply = client.get(url).send().await.expect("get");
    assert_eq!(reply.status(), StatusCode::OK);
    let content_type = reply
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert_eq!(content_type, "text/plain; version=0.0.4");
    let text = reply.text().await.expect("text");
    promtool_accepts(&text);
    text
}

/// Every family of the JSON has its `# TYPE` line in the text, and the reverse.
fn same_families(json: &Value, text: &str) {
    let mut in_json: Vec<String> = json["metrics"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let mut in_text: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect();
    in_json.sort();
    in_text.sort();
    assert_eq!(in_json, in_text);
}

/// The value of an unlabeled sample line `name value` in the exposition.
fn text_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

async fn denied(client: &Client, url: &str, status: StatusCode, code: &str) {
    let reply = client.get(url).send().await.expect("get");
    assert_eq!(reply.status(), status, "{url}");
    let body: Value = reply.json().await.expect("json");
    assert_eq!(body["code"], code, "{url}: {body}");
}

/// Creates a run processed by the API process itself and waits for its end.
async fn run_in_process(client: &Client, api: &Api, document_id: &str) -> Value {
    let body = json!({ "document_id": document_id, "processing_mode": "process" });
    run_to_the_end_with(client, api, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_counts_requests_runs_conversions_and_tokens() {
    let env = migrated(
        Env::new()
            .with("SHELF_API_KEYS", "read:mx-read,write:mx-write")
            .with("SHELF_LLM_PROMPT_COST_PER_1K_TOKENS_USD", "2")
            .with("SHELF_LLM_COMPLETION_COST_PER_1K_TOKENS_USD", "4"),
    );
    let api = Api::start(&env);
    let writer = keyed_client("mx-write");
    let reader = keyed_client("mx-read");

    // Write scope: a read key is refused, no key is unauthenticated.
    for path in ["/metrics", "/metrics/prometheus"] {
        denied(
            &reader,
            &api.url(path),
            StatusCode::FORBIDDEN,
            "insufficient_scope",
        )
        .await;
        denied(
            &client(),
            &api.url(path),
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
        )
        .await;
    }

    let text = std::fs::read(corpus("text/crazyones.txt")).expect("corpus file");
    let (status, good) = upload(&writer, &api, "crazyones.txt", text).await;
    assert_eq!(status, StatusCode::CREATED, "{good}");
    let good_id = good["id"].as_str().expect("id").to_string();
    let run = run_in_process(&writer, &api, &good_id).await;
    assert_eq!(run["status"], "succeeded", "{run:#}");

    let (status, broken) = upload(&writer, &api, "broken.pdf", BROKEN_PDF.to_vec()).await;
    assert_eq!(status, StatusCode::CREATED, "{broken}");
    let run = run_in_process(&writer, &api, broken["id"].as_str().expect("id")).await;
    assert_eq!(run["status"], "failed", "{run:#}");
    assert!(
        run["error"]
            .as_str()
            .is_some_and(|e| e.contains("malformed_document")),
        "{run:#}"
    );
    for _ in 0..2 {
        let reply = writer
            .get(api.url(&format!("/documents/{good_id}")))
            .send()
            .await
            .expect("get");
        assert_eq!(reply.status(), StatusCode::OK);
    }

    let m = get_json(&writer, &api, "/metrics").await;
    // Requests, by the route's template and never the raw path.
    let by_id = json!({"route": "/documents/{id}", "method": "GET", "status": "200"});
    assert!(
        value(&m, "shelf_http_requests_total", by_id) >= 2.0,
        "{m:#}"
    );
    let uploads = json!({"route": "/documents", "method": "POST", "status": "201"});
    assert_eq!(value(&m, "shelf_http_requests_total", uploads), 2.0);
    let refused = json!({"route": "unmatched", "method": "GET", "status": "403"});
    assert_eq!(value(&m, "shelf_http_requests_total", refused), 2.0);
    let latency = json!({"route": "/documents", "method": "POST"});
    assert_eq!(count(&m, "shelf_http_request_duration_seconds", latency), 2);
    for sample in samples(&m, "shelf_http_requests_total", &json!({})) {
        let route = sample["labels"]["route"].as_str().unwrap_or_default();
        assert!(route == "unmatched" || route.starts_with('/'), "{route}");
        assert!(
            !route.contains("doc_") && !route.contains("run_"),
            "{route}"
        );
    }
    // Runs, stages and the queue: both runs were claimed and ended in this process.
    let finished = |status: &str| value(&m, "shelf_runs_finished_total", json!({"status": status}));
    assert_eq!((finished("succeeded"), finished("failed")), (1.0, 1.0));
    assert_eq!(finished("canceled"), 0.0);
    let claims = value(&m, "shelf_queue_claims_total", json!({}));
    assert!(claims >= 2.0, "{claims}");
    assert_eq!(
        count(&m, "shelf_queue_wait_seconds", json!({})) as f64,
        claims
    );
    assert!(value(&m, "shelf_queue_wait_seconds_average", json!({})) >= 0.0);
    let extract = |status: &str| {
        count(
            &m,
            "shelf_stage_duration_seconds",
            json!({"stage": "extract", "status": status}),
        )
    };
    assert_eq!((extract("succeeded"), extract("failed")), (1, 1));
    assert!(
        count(
            &m,
            "shelf_stage_duration_seconds",
            json!({"stage": "clean"})
        ) >= 1
    );
    // The conversion failure, by its code.
    let failures = json!({"code": "malformed_document"});
    assert_eq!(value(&m, "shelf_conversion_failures_total", failures), 1.0);
    // Tokens the mock reported, and their cost at the configured prices.
    let prompt = value(
        &m,
        "shelf_llm_prompt_tokens_total",
        json!({"provider": "mock"}),
    );
    let completion = value(
        &m,
        "shelf_llm_completion_tokens_total",
        json!({"provider": "mock"}),
    );
    assert!(prompt > 0.0 && completion > 0.0, "{prompt} {completion}");
    assert!(value(&m, "shelf_llm_requests_total", json!({"provider": "mock"})) >= 3.0);
    let cost = value(&m, "shelf_llm_estimated_cost_usd", json!({}));
    let expected = prompt / 1000.0 * 2.0 + completion / 1000.0 * 4.0;
    assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");
    // No OCR happened: its counters are there, at zero.
    assert_eq!(value(&m, "shelf_ocr_pages_total", json!({})), 0.0);
    assert_eq!(value(&m, "shelf_ocr_pages_per_second", json!({})), 0.0);

    // The exposition: promtool accepts it, it has the same families and the same counts.
    let text = exposition(&writer, &api.url("/metrics/prometheus")).await;
    let m = get_json(&writer, &api, "/metrics").await;
    same_families(&m, &text);
    assert_eq!(
        text_value(&text, "shelf_queue_claims_total"),
        Some(value(&m, "shelf_queue_claims_total", json!({})))
    );
    assert!(
        text.contains("shelf_conversion_failures_total{code=\"malformed_document\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("route=\"/documents/{id}\""), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_serves_its_own_metrics() {
    let env = migrated(Env::new().with("SHELF_API_KEYS", "read:wk-read,write:wk-write"));
    env.queue(&corpus("text/phototest.txt"));
    let bad = env.write(
        "bad.docx",
        std::fs::read(corpus("hostile/malformed/testWORD_truncated.docx")).expect("corpus"),
    );
    // The import's own conversion fails (exit 1) but still queues the run, whose extract
    // stage then fails in the worker: that is the conversion failure the worker counts.
    let import = env.run(&[
        "import",
        &bad.display().to_string(),
        "--mode",
        "queue",
        "--json",
    ]);
    assert_eq!(import.status.code(), Some(1), "{import:?}");
    let report: Value = serde_json::from_slice(&import.stdout).expect("report");
    assert_eq!(report["files"][0]["run_status"], "queued", "{report}");

    let mut worker = env.spawn(&["worker", "--metrics-port", "0"]);
    let (base, _log) = announced(&mut worker, "shelf worker metrics listening on ");
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    let writer = keyed_client("wk-write");
    let url = |path: &str| format!("{base}{path}");
    denied(
        &keyed_client("wk-read"),
        &url("/metrics"),
        StatusCode::FORBIDDEN,
        "insufficient_scope",
    )
    .await;
    denied(
        &client(),
        &url("/metrics/prometheus"),
        StatusCode::UNAUTHORIZED,
        "invalid_api_key",
    )
    .await;

    let metrics = || async {
        writer
            .get(url("/metrics"))
            .send()
            .await
            .expect("get")
            .json::<Value>()
            .await
            .expect("json")
    };
    let deadline = Instant::now() + Duration::from_secs(180);
    let m = loop {
        let m = metrics().await;
        let ended = value(
            &m,
            "shelf_runs_finished_total",
            json!({"status": "succeeded"}),
        ) + value(&m, "shelf_runs_finished_total", json!({"status": "failed"}));
        if ended >= 2.0 {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "the worker never ended both runs: {m:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let finished = |status: &str| value(&m, "shelf_runs_finished_total", json!({"status": status}));
    assert_eq!((finished("succeeded"), finished("failed")), (1.0, 1.0));
    assert_eq!(value(&m, "shelf_queue_claims_total", json!({})), 2.0);
    assert_eq!(value(&m, "shelf_queue_reclaims_total", json!({})), 0.0);
    assert_eq!(count(&m, "shelf_queue_wait_seconds", json!({})), 2);
    let failures = json!({"code": "malformed_document"});
    assert_eq!(value(&m, "shelf_conversion_failures_total", failures), 1.0);
    assert!(
        value(
            &m,
            "shelf_llm_prompt_tokens_total",
            json!({"provider": "mock"})
        ) > 0.0
    );
    assert_eq!(
        count(
            &m,
            "shelf_stage_duration_seconds",
            json!({"stage": "extract"})
        ),
        2
    );
    // A worker serves no API: it has no request counters.
    assert!(
        m["metrics"].get("shelf_http_requests_total").is_none(),
        "{m:#}"
    );

    let text = exposition(&writer, &url("/metrics/prometheus")).await;
    same_families(&metrics().await, &text);
    assert_eq!(text_value(&text, "shelf_queue_claims_total"), Some(2.0));

    // The runs the metrics counted are the queue's.
    let runs = env.json(&["runs", "--json"]);
    let statuses: Vec<&str> = runs["runs"]
        .as_array()
        .map(|r| r.iter().filter_map(|r| r["status"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(statuses.len(), 2, "{runs:#}");
    assert!(
        statuses.contains(&"succeeded") && statuses.contains(&"failed"),
        "{runs:#}"
    );
    let stopped = worker.terminate(Duration::from_secs(30));
    assert!(stopped.is_some_and(|s| s.success()), "{stopped:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_says_the_same_over_http_and_on_the_command_line() {
    let env = migrated(Env::new());
    let out = env.run(&["--version"]);
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut words = line.split(' ');
    assert_eq!(words.next(), Some("shelf"), "{line}");
    let cli_version = words.next().unwrap_or_default().to_string();
    let fields: Vec<(String, String)> = words
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{name} missing from {line:?}"))
    };

    let api = Api::start(&env);
    let client = client();
    let version = get_json(&client, &api, "/version").await;
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(version["version"], cli_version.as_str());
    assert_eq!(version["git_sha"], field("git_sha").as_str());
    assert_eq!(version["schema_version"], field("schema_version").as_str());
    assert_eq!(version["okf_version"], field("okf_version").as_str());
    assert_eq!(version["okf_version"], "0.1");
    let sha = version["git_sha"].as_str().unwrap_or_default();
    assert!(
        sha == "unknown" || (sha.len() == 12 && sha.bytes().all(|b| b.is_ascii_hexdigit())),
        "{sha}"
    );
    // The schema it names is the newest migration the database has applied.
    let ready = get_json(&client, &api, "/ready").await;
    let newest = ready["applied_migrations"]
        .as_array()
        .and_then(|a| a.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(version["schema_version"], newest);
}

#[test]
fn a_public_worker_metrics_listener_needs_a_key() {
    let env = migrated(Env::new());
    let out = env.run(&["worker", "--metrics-port", "0", "--metrics-host", "0.0.0.0"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("an API key"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// A fresh `shelf api`, before any request but this one: every labelled counter the docs list
/// has its series for the known label values at 0 (statuses of finished runs, conversion
/// failure codes, the configured provider), so dashboards and alerts work before the first
/// failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_api_shows_every_known_series_at_zero() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    let client = client();
    let m = get_json(&client, &api, "/metrics").await;
    let text = exposition(&client, &api.url("/metrics/prometheus")).await;
    let at_zero = |name: &str, label: &str, value: &str| {
        let found = samples(&m, name, &json!({ label: value }));
        assert_eq!(found.len(), 1, "{name}{{{label}={value:?}}} missing: {m}");
        assert_eq!(found[0]["value"], 0.0, "{name}{{{label}={value:?}}}");
        let line = format!("{name}{{{label}=\"{value}\"}} 0\n");
        assert!(text.contains(&line), "{line:?} not in\n{text}");
    };
    for status in ["succeeded", "failed", "canceled"] {
        at_zero("shelf_runs_finished_total", "status", status);
    }
    // The codes docs/operations.md and docs/formats.md list for the extract stage.
    for code in [
        "converter_failed",
        "converter_unavailable",
        "document_encrypted",
        "document_too_complex",
        "extraction_timeout",
        "extractor_crashed",
        "file_too_large",
        "io_error",
        "malformed_document",
        "no_text_found",
        "pdf_encrypted",
        "source_changed",
        "unsupported_file_type",
    ] {
        at_zero("shelf_conversion_failures_total", "code", code);
    }
    for name in [
        "shelf_llm_requests_total",
        "shelf_llm_prompt_tokens_total",
        "shelf_llm_completion_tokens_total",
    ] {
        at_zero(name, "provider", "mock");
    }
}
