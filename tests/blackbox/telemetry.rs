//! Logs and traces of the real `shelf api` and `shelf worker`: spans exported over OTLP/HTTP to
//! a fake collector in this test (request, queue claim and stage spans, the worker continuing
//! the trace of the request that created the run), and JSON logs of a whole upload → run →
//! search that carry no secret, no document text and no generated summary.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated, post_json, run_to_the_end, upload};
use crate::support::{Env, drain};

/// One span as the collector received it.
#[derive(Debug, Clone)]
struct Collected {
    service: String,
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
    attributes: Vec<(String, String)>,
}

impl Collected {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Collector {
    spans: Mutex<Vec<Collected>>,
    /// The `x-collector-token` header of every export request.
    tokens: Mutex<Vec<String>>,
}

fn text_of(kv: &KeyValue) -> String {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// `POST /v1/traces` with an OTLP protobuf body, as a real collector accepts it.
async fn accept_traces(
    State(collector): State<Arc<Collector>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Vec<u8>) {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    if let Some(token) = headers
        .get("x-collector-token")
        .and_then(|v| v.to_str().ok())
    {
        collector
            .tokens
            .lock()
            .expect("lock")
            .push(token.to_string());
    }
    let mut spans = collector.spans.lock().expect("lock");
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|kv| kv.key == "service.name")
            .map(text_of)
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(Collected {
                    service: service.clone(),
                    name: span.name.clone(),
                    trace_id: span.trace_id.clone(),
                    span_id: span.span_id.clone(),
                    parent_span_id: span.parent_span_id.clone(),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text_of(kv)))
                        .collect(),
                });
            }
        }
    }
    (
        StatusCode::OK,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

/// The fake collector on 127.0.0.1, and its base URL.
async fn start_collector() -> (Arc<Collector>, String) {
    let collector = Arc::new(Collector::default());
    let app = Router::new()
        .route("/v1/traces", post(accept_traces))
        .with_state(collector.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind collector");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (collector, format!("http://{addr}"))
}

const STAGES: &[&str] = &["extract", "clean", "classify", "summarize", "index"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_continues_the_trace_of_the_request_that_created_the_run() {
    let (collector, endpoint) = start_collector().await;
    let env = migrated(
        Env::new()
            .with("SHELF_OTEL_ENABLED", "true")
            .with("SHELF_OTEL_ENDPOINT", &endpoint)
            .with("SHELF_OTEL_HEADERS", "x-collector-token=collector-secret")
            .with("SHELF_OTEL_SERVICE_NAME", "shelf-under-test"),
    );
    let mut api = Api::start(&env);
    let mut worker = env.spawn(&["worker"]);
    let worker_log = drain(worker.child.stderr.take().expect("stderr"));
    let client = client();

    let (status, doc) = upload(
        &client,
        &api,
        "traced.md",
        b"# Traced\n\nA document whose run is traced from the request to the worker.\n".to_vec(),
    )
    .await;
    assert_eq!(status, 201, "{doc}");
    let doc_id = doc["id"].as_str().expect("id").to_string();
    let run = run_to_the_end(&client, &api, &doc_id).await;
    assert_eq!(run["status"], "succeeded", "{run:#}");
    let run_id = run["id"].as_str().expect("run id").to_string();

    // SIGTERM: both processes export what they still buffer before exiting.
    for (name, process) in [("api", &mut api.process), ("worker", &mut worker)] {
        let exit = process.terminate(Duration::from_secs(30));
        assert!(
            exit.is_some_and(|s| s.success()),
            "{name} did not stop cleanly: {exit:?}"
        );
    }
    let spans = collector.spans.lock().expect("lock").clone();
    let context = || {
        format!(
            "spans: {spans:#?}\napi log: {}\nworker log: {}",
            api.logs(),
            worker_log.lock().map(|l| l.clone()).unwrap_or_default()
        )
    };

    assert!(
        spans.iter().all(|s| s.service == "shelf-under-test"),
        "{}",
        context()
    );
    let tokens = collector.tokens.lock().expect("lock").clone();
    assert!(
        !tokens.is_empty() && tokens.iter().all(|t| t == "collector-secret"),
        "{tokens:?}"
    );

    // The API request that created the run: named by its route template.
    let create = spans
        .iter()
        .find(|s| s.name == "POST /runs")
        .unwrap_or_else(|| panic!("no POST /runs span; {}", context()));
    assert_eq!(create.attr("method"), Some("POST"));
    assert_eq!(create.attr("route"), Some("/runs"));
    assert_eq!(create.attr("status"), Some("201"));
    // Templates, not ids: the run's GET polls share one name.
    let polled = spans
        .iter()
        .find(|s| s.attr("route") == Some("/runs/{id}"))
        .unwrap_or_else(|| panic!("no GET /runs/{{id}} span; {}", context()));
    assert_eq!(polled.name, "GET /runs/{id}");

    // The worker's claim of the run is a child of that request, in another process.
    let claim = spans
        .iter()
        .find(|s| s.name == "queue_claim" && s.attr("run_id") == Some(&run_id))
        .unwrap_or_else(|| panic!("no queue_claim span; {}", context()));
    assert_eq!(claim.trace_id, create.trace_id, "{}", context());
    assert_eq!(claim.parent_span_id, create.span_id, "{}", context());
    assert_eq!(claim.attr("document_id"), Some(doc_id.as_str()));
    assert_eq!(claim.attr("outcome"), Some("succeeded"));

    // One span per stage, children of the claim, with the run's and document's ids.
    for stage in STAGES {
        let span = spans
            .iter()
            .find(|s| s.name == format!("stage {stage}") && s.attr("run_id") == Some(&run_id))
            .unwrap_or_else(|| panic!("no span for stage {stage}; {}", context()));
        assert_eq!(span.trace_id, create.trace_id, "{stage}");
        assert_eq!(span.parent_span_id, claim.span_id, "{stage}");
        assert_eq!(span.attr("document_id"), Some(doc_id.as_str()), "{stage}");
        assert_eq!(span.attr("stage"), Some(*stage));
        assert_eq!(span.attr("attempt"), Some("1"), "{stage}");
        assert_eq!(span.attr("status"), Some("succeeded"), "{stage}");
    }
    // Log events stay in the logs: no span is named after one.
    assert!(!spans.iter().any(|s| s.name == "run_stage_finished"));
}

/// A sentence only the document has, and that the mock summary repeats.
const SENTENCE: &str = "Quillwort marsupials annotate heliotropic ledgers beneath amber lanterns.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_json_and_carry_no_secret_text_or_summary() {
    let api_key = "shelf-key-7f3a9c2e1b";
    let provider_key = "sk-test-Zq8xY2wV5uT1sR4pO7nM";
    let wrong_bearer = "sk-proj-WrongAttempt0123456789";
    let env = migrated(
        Env::new()
            .with("SHELF_LOG_FORMAT", "json")
            .with("SHELF_LOG_LEVEL", "debug")
            .with("SHELF_API_KEYS", &format!("write:{api_key}"))
            .with("SHELF_LLM_API_KEY_ENV", "SHELF_TEST_PROVIDER_KEY")
            .with("SHELF_TEST_PROVIDER_KEY", provider_key),
    );
    let mut api = Api::start(&env);
    let mut worker = env.spawn(&["worker"]);
    let worker_log = drain(worker.child.stderr.take().expect("stderr"));
    // Every request carries the key; some send it again as a bearer token or in the query.
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-api-key", api_key.parse().expect("header"));
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");

    let text = format!(
        "# Ledger notes\n\n{SENTENCE} The second sentence tells of ordinary matters.\n\n\
         More words follow so that cleaning and indexing have something to do.\n"
    );
    let (status, doc) = upload(&client, &api, "ledger.md", text.into_bytes()).await;
    assert_eq!(status, 201, "{doc}");
    let doc_id = doc["id"].as_str().expect("id").to_string();

    let reply = client
        .post(api.url("/runs"))
        .bearer_auth(api_key)
        .json(&json!({ "document_id": doc_id }))
        .send()
        .await
        .expect("create run");
    assert_eq!(reply.status(), 201);
    let run: Value = reply.json().await.expect("run");
    let run_id = run["id"].as_str().expect("run id").to_string();
    // Polled with the key in the query too: a logged URI must not carry it.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let finished = loop {
        let run: Value = client
            .get(format!(
                "{}?api_key={api_key}",
                api.url(&format!("/runs/{run_id}"))
            ))
            .header("x-api-key", api_key)
            .send()
            .await
            .expect("get run")
            .json()
            .await
            .expect("json");
        if matches!(
            run["status"].as_str(),
            Some("succeeded" | "failed" | "canceled")
        ) {
            break run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run never ended: {run:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(finished["status"], "succeeded", "{finished:#}");

    // A refused credential is audited and logged with its path, here one that carries a
    // provider-style key: the line is written, the key is not.
    let refused = reqwest::Client::new()
        .get(api.url(&format!("/runs/{wrong_bearer}")))
        .bearer_auth(wrong_bearer)
        .send()
        .await
        .expect("refused");
    assert_eq!(refused.status(), 401);

    let search = format!("{}?api_key={api_key}", api.url("/search"));
    let hits = post_json(&client, &search, &json!({ "query": "quillwort" })).await;
    let found = hits["document_ids"].as_array();
    assert!(
        found.is_some_and(|ids| ids.iter().any(|i| i == doc_id.as_str())),
        "{hits}"
    );
    let document = get_json(&client, &api, &format!("/documents/{doc_id}")).await;
    let summary = document["summary"].as_str().unwrap_or_default().to_string();
    assert!(summary.contains(SENTENCE), "the mock summary: {document:#}");

    for process in [&mut api.process, &mut worker] {
        process.terminate(Duration::from_secs(30));
    }
    let api_log = api.logs();
    let worker_log = worker_log.lock().map(|l| l.clone()).unwrap_or_default();
    assert!(!api_log.trim().is_empty() && !worker_log.trim().is_empty());

    let mut finished_stages = Vec::new();
    for (name, log) in [("api", &api_log), ("worker", &worker_log)] {
        for line in log.lines().filter(|l| !l.trim().is_empty()) {
            for secret in [api_key, provider_key, wrong_bearer, SENTENCE, "heliotropic"] {
                assert!(!line.contains(secret), "{name} logged {secret:?}: {line}");
            }
            let event: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{name} logged a line that is not JSON ({e}): {line}"));
            if event["fields"]["message"] == "run_stage_finished" {
                finished_stages.push(event["fields"].clone());
            }
        }
    }
    for stage in STAGES {
        let fields = finished_stages
            .iter()
            .find(|f| f["stage"] == *stage)
            .unwrap_or_else(|| panic!("no run_stage_finished for {stage}: {finished_stages:#?}"));
        assert_eq!(fields["run_id"], run_id.as_str());
        assert_eq!(fields["document_id"], doc_id.as_str());
        assert_eq!(fields["status"], "succeeded");
        assert!(fields["duration_ms"].is_u64(), "{fields}");
    }
    // The debug level did log requests, and the denial's path went through the redactor.
    assert!(api_log.contains("request_finished"), "{api_log}");
    assert!(
        api_log
            .lines()
            .any(|l| l.contains("request denied") && l.contains("/runs/sk-[REDACTED]")),
        "{api_log}"
    );
}
