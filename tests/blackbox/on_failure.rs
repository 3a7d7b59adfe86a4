//! A bad answer never makes a document unsearchable: real `shelf` processes against a model
//! whose every classification answer is prose (no JSON), and otherwise the well-behaved fake
//! model. Under the default pipeline (`classify` has `on_failure: continue`) the run ends
//! `succeeded` with one warning naming `classify` and its code, the document is `ready`,
//! unclassified and found by its text; the CLI's JSON and text, the API (run, list, OpenAPI),
//! the run's web page and the metrics all say so.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated, run_to_the_end_with};
use crate::fake_model::FakeModel;
use crate::support::{Env, corpus};

/// The model in front of the fake: classification requests (their system prompt names Dewey)
/// are answered with prose, everything else is passed to the fake model as it came.
struct Babbler {
    fake: FakeModel,
    http: reqwest::Client,
    classifications: AtomicUsize,
}

async fn answer(
    State(model): State<Arc<Babbler>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let system = request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    if system.contains("Dewey") {
        model.classifications.fetch_add(1, Ordering::SeqCst);
        let prose = "This text seems to be about people who think differently, I would say.";
        return axum::Json(json!({
            "id": "chatcmpl-prose",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": prose}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135},
        }))
        .into_response();
    }
    // The fake's base URL ends in `/v1`, as this server's paths begin with it.
    let upstream = model.fake.base_url.trim_end_matches("/v1").to_string();
    let forwarded = model
        .http
        .request(method, format!("{upstream}{uri}"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    match forwarded {
        Ok(reply) => {
            let status =
                StatusCode::from_u16(reply.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let bytes = reply.bytes().await.unwrap_or_default();
            (status, [("content-type", "application/json")], bytes).into_response()
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}

/// Starts the babbling model on 127.0.0.1; its `SHELF_LLM_BASE_URL` and its state.
async fn babbler() -> (String, Arc<Babbler>) {
    let model = Arc::new(Babbler {
        fake: FakeModel::refusing_first(0),
        http: reqwest::Client::new(),
        classifications: AtomicUsize::new(0),
    });
    let app = Router::new().fallback(answer).with_state(model.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the model");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/v1"), model)
}

/// Runs a `shelf` command on this runtime's thread without starving the model's tasks.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn the_warning(run: &Value) {
    assert_eq!(run["status"], "succeeded", "{run:#}");
    let warnings = run["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{run:#}");
    assert_eq!(warnings[0]["stage"], "classify", "{run:#}");
    assert_eq!(warnings[0]["code"], "invalid_response", "{run:#}");
    assert!(
        warnings[0]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{run:#}"
    );
    assert_eq!(run["error"], Value::Null, "{run:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classification_that_fails_for_good_leaves_the_document_ready_and_searchable() {
    let (base_url, model) = babbler().await;
    let env = blocking(|| {
        migrated(
            Env::new()
                .with("SHELF_LLM_PROVIDER", "generic-compatible")
                .with("SHELF_LLM_BASE_URL", &base_url)
                .with("SHELF_LLM_API_KEY_ENV", "SHELF_TEST_NO_SUCH_KEY"),
        )
    });
    let file = corpus("text/crazyones.txt");
    let report = blocking(|| env.json(&["import", file.to_str().expect("utf-8"), "--json"]));
    let record = &report["files"][0];
    assert_eq!(record["run_status"], "succeeded", "{report:#}");
    assert_eq!(record["run_warnings"][0]["stage"], "classify", "{report:#}");
    assert_eq!(
        record["run_warnings"][0]["code"], "invalid_response",
        "{report:#}"
    );
    let run_id = record["run_id"].as_str().expect("run id").to_string();
    let document_id = record["document_id"].as_str().expect("id").to_string();
    assert!(
        model.classifications.load(Ordering::SeqCst) >= 1,
        "classify asked the model"
    );

    // The CLI: one run with its stages, the list, and the status line.
    let run = &blocking(|| env.json(&["runs", &run_id, "--json"]));
    the_warning(run);
    let stages = run["stages"].as_array().expect("stages");
    let stage = |name: &str| {
        stages
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(stage("classify")["status"], "failed", "{run:#}");
    assert!(
        stage("classify")["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("invalid_response: ")),
        "{run:#}"
    );
    for name in ["summarize", "index"] {
        assert_eq!(stage(name)["status"], "succeeded", "{name}: {run:#}");
    }
    let listed = blocking(|| env.json(&["runs", "--document", &document_id, "--json"]));
    the_warning(&listed["runs"][0]);
    let line = "succeeded (1 warning: classify failed: invalid_response)";
    for args in [vec!["runs"], vec!["runs", run_id.as_str()]] {
        let out = blocking(|| env.run(&args));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(line),
            "{args:?}: {text}"
        );
    }

    // Searchable by its text.
    let found = blocking(|| env.json(&["search", "troublemakers", "--json"]));
    assert_eq!(found["document_ids"], json!([document_id]), "{found:#}");

    // The API: the document, the run, the list, the schema; a run executed in the API process
    // counts in its metrics.
    let api = blocking(|| Api::start(&env));
    let http = client();
    let document = get_json(&http, &api, &format!("/documents/{document_id}")).await;
    assert_eq!(document["status"], "ready", "{document:#}");
    for field in [
        "classification",
        "classification_label",
        "classification_confidence",
    ] {
        assert_eq!(document[field], Value::Null, "{field}: {document:#}");
    }
    assert_eq!(document["title"], "The crazy ones", "{document:#}");
    the_warning(&get_json(&http, &api, &format!("/runs/{run_id}")).await);
    let runs = get_json(&http, &api, &format!("/runs?document_id={document_id}")).await;
    the_warning(&runs["runs"][0]);
    let openapi = get_json(&http, &api, "/openapi.json").await;
    let schemas = &openapi["components"]["schemas"];
    assert!(
        schemas["RunOut"]["properties"]["warnings"].is_object(),
        "{:#}",
        schemas["RunOut"]
    );
    assert!(
        schemas["RunOut"]["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("warnings"))),
        "{:#}",
        schemas["RunOut"]
    );
    for field in ["stage", "code", "message"] {
        assert!(
            schemas["RunWarning"]["properties"][field].is_object(),
            "{:#}",
            schemas["RunWarning"]
        );
    }

    // The web pages: the run's, and the document's list of runs.
    for path in [
        format!("/ui/runs/{run_id}"),
        format!("/ui/documents/{document_id}"),
    ] {
        let reply = http.get(api.url(&path)).send().await.expect("page");
        assert_eq!(reply.status(), reqwest::StatusCode::OK, "{path}");
        let page = reply.text().await.expect("page");
        assert!(
            page.contains("1 warning: classify failed: invalid_response"),
            "{path}: {page}"
        );
    }

    let again = run_to_the_end_with(
        &http,
        &api,
        json!({"document_id": document_id, "processing_mode": "process"}),
    )
    .await;
    the_warning(&again);
    let metrics = http
        .get(api.url("/metrics/prometheus"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    for series in [
        "shelf_stage_failures_continued_total{code=\"invalid_response\",kind=\"classify\"} 1\n",
        "shelf_runs_succeeded_with_warnings_total 1\n",
        "shelf_runs_finished_total{status=\"succeeded\"} 1\n",
    ] {
        assert!(metrics.contains(series), "{series}: {metrics}");
    }
    let document = get_json(&http, &api, &format!("/documents/{document_id}")).await;
    assert_eq!(document["status"], "ready", "{document:#}");
}
