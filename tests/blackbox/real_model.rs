//! Shelf against a real model server: llama.cpp's server with SmolLM2-135M-Instruct
//! (`tests/support/llama_server.rs`), real tokenization, sampling, slowness and nonsense. With
//! only the base URL and the model set, a folder of ordinary documents ends `ready` and
//! searchable with no call timed out or retried; a call Shelf gives up ends on the server too;
//! a model the server does not have stops the process before any work, naming the setting.

use std::path::Path;

use serde_json::Value;

use crate::llama_server::{LlamaServer, MODEL};
use crate::support::{Env, corpus};

/// Threads the server computes with: one, so that two test servers and the tests' own
/// processes share CI's two cores.
const THREADS: usize = 1;

/// A data directory whose only model settings are the base URL and the model's name.
fn env_for(server: &LlamaServer) -> Env {
    Env::new()
        .with("SHELF_LLM_PROVIDER", "generic-compatible")
        .with("SHELF_LLM_BASE_URL", &server.base_url)
        .with("SHELF_LLM_MODEL", MODEL)
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
}

/// The stages of a run as (name, status, attempts).
fn stages(run: &Value) -> Vec<(String, String, u64)> {
    run["stages"]
        .as_array()
        .map(|stages| {
            stages
                .iter()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap_or_default().to_string(),
                        s["status"].as_str().unwrap_or_default().to_string(),
                        s["attempts"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The first trial: the bundled examples and real pages, imported with default
/// settings, every one `ready` and found by a word of its own; no stage attempted twice, no
/// call retried or timed out inside the provider (it logs each retry), and the server idle
/// at the end.
#[test]
fn ordinary_documents_end_ready_and_searchable_with_a_real_model() {
    let Some(server) = LlamaServer::start_or_skip(THREADS) else {
        return;
    };
    let env = env_for(&server);
    let folder = env.path().join("library");
    std::fs::create_dir_all(&folder).expect("mkdir");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/documents");
    // (file, a word only it contains, for search)
    let files = [
        (examples.join("horse-care.md"), "farrier"),
        (examples.join("sqlite-wal.txt"), "checkpoint"),
        (examples.join("scanned-phototest.tif"), "quick"),
        (corpus("text/crazyones.txt"), "troublemakers"),
    ];
    for (file, _) in &files {
        copy(file, &folder.join(file.file_name().expect("name")));
    }
    let out = env.run(&["import", folder.to_str().expect("utf-8 path"), "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "import failed ({:?}):\n{}\n{stderr}\nserver:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        server.log_tail()
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("import JSON");
    assert_eq!(
        report["summary"]["runs_succeeded"],
        files.len(),
        "{report:#}\n{stderr}"
    );
    assert!(
        !stderr.contains("retrying") && !stderr.contains("provider_timeout"),
        "a model call was retried or timed out:\n{stderr}"
    );
    for record in report["files"].as_array().expect("files") {
        let run_id = record["run_id"].as_str().expect("run id");
        let run = env.json(&["runs", run_id, "--json"]);
        assert_eq!(run["status"], "succeeded", "{run:#}");
        for (name, status, attempts) in stages(&run) {
            assert!(
                attempts <= 1,
                "stage {name} ({status}) was attempted {attempts} times: {run:#}"
            );
        }
    }
    for (file, word) in &files {
        let hits = env.json(&["search", word, "--json"]);
        let found = hits["document_ids"].as_array().map_or(0, Vec::len);
        assert!(
            found >= 1,
            "{} is not found by {word:?}: {hits:#}",
            file.display()
        );
    }
    let listed = env.json(&[
        "search", "the", "--status", "ready", "--limit", "50", "--json",
    ]);
    assert_eq!(
        listed["document_ids"].as_array().map(Vec::len),
        Some(files.len()),
        "{listed:#}"
    );
}

/// Completions the server has begun (`POST` lines) and ended: finished ones print a timing
/// block, abandoned and interrupted ones a disconnect. Equal counts: nothing left generating.
fn begun_and_ended(server: &LlamaServer) -> (usize, usize) {
    let log = server.log_text();
    let begun = log
        .lines()
        .filter(|l| l.contains("\"POST /v1/chat/completions"))
        .count();
    let ended = server.finished_generations().len()
        + log
            .lines()
            .filter(|l| l.starts_with("Disconnected from client"))
            .count();
    (begun, ended)
}

/// Waits (a hang guard of minutes, not a speed assert) until every completion the server
/// began has ended, and returns how many were abandoned by a closed connection.
fn settle(server: &LlamaServer) -> usize {
    crate::support::wait_for(
        std::time::Duration::from_secs(300),
        "every completion on the server to end",
        || {
            let (begun, ended) = begun_and_ended(server);
            (begun == ended).then_some(())
        },
    );
    server
        .log_text()
        .lines()
        .filter(|l| l.starts_with("Disconnected from client"))
        .count()
}

/// A call Shelf gives up (here: the answer outgrew `SHELF_LLM_MAX_RESPONSE_CHARS`) closes its
/// stream, and the server stops generating for it: its log shows the disconnect, and the
/// completion never reaches its natural end (no timing block for it), while the run fails
/// with the stable code.
#[test]
fn an_abandoned_call_stops_generating_on_the_server() {
    let Some(server) = LlamaServer::start_or_skip(THREADS) else {
        return;
    };
    let env = env_for(&server).with("SHELF_LLM_MAX_RESPONSE_CHARS", "200");
    let text = std::fs::read_to_string(corpus("text/8071_093.3B.txt")).expect("corpus");
    let file = env.write("story.txt", text);
    let out = env.run(&["import", file.to_str().expect("utf-8"), "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let record = &report["files"][0];
    assert_eq!(record["run_status"], "failed", "{report:#}");
    let run = env.json(&["runs", record["run_id"].as_str().expect("run id"), "--json"]);
    assert!(
        run["error"]
            .as_str()
            .is_some_and(|e| e.contains("response_too_large")),
        "{run:#}"
    );
    let abandoned = settle(&server);
    assert!(
        abandoned >= 1,
        "no disconnect in the server's log:\n{}",
        server.log_tail()
    );
    let (begun, _) = begun_and_ended(&server);
    assert_eq!(
        server.finished_generations().len() + abandoned,
        begun,
        "{}",
        server.log_tail()
    );
}

/// The model is checked before any work: a name the server does not serve stops `shelf
/// worker` and `shelf import` at once with `model_not_found`, naming the setting and what the
/// server has; nothing is imported. With the right name, `shelf api --workers 1` starts and
/// `/ready` says the model was verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_server_lacks_stops_the_process_before_work() {
    let Some(server) = LlamaServer::start_or_skip(THREADS) else {
        return;
    };
    let env = env_for(&server).with("SHELF_LLM_MODEL", "no-such-model");
    let file = env.write("note.txt", "A short note about horses and hay.\n");
    let out = env.run(&["worker"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("SHELF_LLM_MODEL") && stderr.contains(MODEL),
        "{stderr}"
    );
    let out = env.run(&["import", file.to_str().expect("utf-8"), "--json"]);
    let error: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(out.status.code(), Some(2), "{error}");
    assert_eq!(error["code"], "model_not_found", "{error}");
    assert!(
        error["detail"]
            .as_str()
            .is_some_and(|d| d.contains("SHELF_LLM_MODEL") && d.contains(MODEL)),
        "{error}"
    );
    let listed = env.json(&["search", "horses", "--json"]);
    assert_eq!(
        listed["document_ids"].as_array().map(Vec::len),
        Some(0),
        "{listed:#}"
    );

    let env = env_for(&server);
    let api = crate::api::Api::start_with(&env, &["api", "--port", "0", "--workers", "1"]);
    let ready = crate::api::get_json(&crate::api::client(), &api, "/ready").await;
    assert_eq!(ready["model"]["status"], "verified", "{ready:#}");
    assert_eq!(ready["model"]["detail"], MODEL, "{ready:#}");
}

/// With no server where `SHELF_LLM_BASE_URL` points, or no base URL at all, model work does not
/// start: the error names the setting (`provider_unreachable`, exit 1; `provider_not_configured`,
/// exit 2). Queueing needs no model and still works.
#[test]
fn an_unreachable_or_unset_model_server_stops_model_work_before_it_starts() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let env = Env::new()
        .with("SHELF_LLM_PROVIDER", "generic-compatible")
        .with(
            "SHELF_LLM_BASE_URL",
            &format!("http://127.0.0.1:{closed}/v1"),
        );
    let file = env.write("note.txt", "A short note about horses and hay.\n");
    let path = file.to_str().expect("utf-8");
    let out = env.run(&["import", path, "--json"]);
    let error: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(out.status.code(), Some(1), "{error}");
    assert_eq!(error["code"], "provider_unreachable", "{error}");
    assert!(
        error["detail"]
            .as_str()
            .is_some_and(|d| d.contains("SHELF_LLM_BASE_URL")),
        "{error}"
    );
    let queued = env.json(&["import", path, "--mode", "queue", "--json"]);
    assert_eq!(queued["files"][0]["run_status"], "queued", "{queued:#}");

    let unset = Env::new().with("SHELF_LLM_PROVIDER", "generic-compatible");
    let out = unset.run(&["worker"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: no language-model endpoint is configured")
            && stderr.contains("SHELF_LLM_BASE_URL"),
        "{stderr}"
    );
}
