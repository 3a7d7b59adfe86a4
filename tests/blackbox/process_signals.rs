//! `shelf process` stopped by SIGTERM or SIGINT while a stage waits on the model: it exits with
//! the signal's conventional code, its run is back in the queue (released, not abandoned to a
//! lease), and a worker finishes it from its checkpoints.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::fake_model::FakeModel;
use crate::support::{Env, corpus, drain, wait_for};

/// Event kinds of a run as `stage:kind`.
fn kinds(run: &Value) -> Vec<String> {
    run["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .map(|e| {
                    format!(
                        "{}:{}",
                        e["stage"].as_str().unwrap_or_default(),
                        e["kind"].as_str().unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn count(kinds: &[String], what: &str) -> usize {
    kinds.iter().filter(|k| *k == what).count()
}

fn stage<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["stages"]
        .as_array()
        .and_then(|stages| stages.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no stage {name} in {run:#}"))
}

fn interrupting_process_releases_its_run(signal: &str, expected_exit: i32) {
    let model = FakeModel::held();
    let env = Env::new()
        .with("SHELF_LLM_PROVIDER", "generic-compatible")
        .with("SHELF_LLM_BASE_URL", &model.base_url)
        // A key from the test's own environment must not reach the fake model.
        .with("SHELF_LLM_API_KEY_ENV", "SHELF_TEST_NO_SUCH_KEY");
    assert!(env.run(&["migrate"]).status.success());
    let file = corpus("text/crazyones.txt");
    let report = env.json(&[
        "import",
        file.to_str().unwrap_or_default(),
        "--mode",
        "none",
        "--json",
    ]);
    let document_id = report["files"][0]["document_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no document in {report:#}"))
        .to_string();

    let mut process = env.spawn(&["process", &document_id, "--json"]);
    let stdout = drain(process.child.stdout.take().expect("stdout"));
    let stderr = drain(process.child.stderr.take().expect("stderr"));
    // `clean` sent its chunk and waits for the answer the model holds: the run is mid-stage.
    wait_for(Duration::from_secs(60), "clean to call the model", || {
        (model.requests() >= 1).then_some(())
    });
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &process.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let status = wait_for(Duration::from_secs(60), "shelf process to exit", || {
        process.child.try_wait().ok().flatten()
    });
    let log = |buffer: &std::sync::Arc<std::sync::Mutex<String>>| {
        buffer.lock().map(|s| s.clone()).unwrap_or_default()
    };
    assert_eq!(
        status.code(),
        Some(expected_exit),
        "exit status {status:?}\nstdout: {}\nstderr: {}",
        log(&stdout),
        log(&stderr)
    );
    // The run it printed is the released one (stdout is complete once the process exited
    // and the pipe hit its end).
    let printed: Value = wait_for(Duration::from_secs(30), "the printed run", || {
        serde_json::from_str(&log(&stdout)).ok()
    });
    assert_eq!(printed["status"], "queued", "{printed:#}");
    assert!(
        log(&stderr).contains("back in the queue"),
        "{}",
        log(&stderr)
    );

    let runs = env.json(&["runs", "--json"]);
    let listed = runs["runs"].as_array().cloned().unwrap_or_default();
    assert_eq!(listed.len(), 1, "{runs:#}");
    let run_id = listed[0]["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(printed["id"], run_id.as_str());

    let released = env.json(&["runs", &run_id, "--json"]);
    assert_eq!(released["status"], "queued", "{released:#}");
    let released_kinds = kinds(&released);
    assert_eq!(
        count(&released_kinds, "run:run_released"),
        1,
        "{released_kinds:?}"
    );
    // Checkpoints kept: what finished stays finished; the interrupted stage waits to run.
    assert_eq!(stage(&released, "extract")["status"], "succeeded");
    assert_ne!(stage(&released, "clean")["status"], "running");
    // Released, not abandoned: no lease holds it, and it was never reclaimed.
    let queue = env.json(&["admin", "queue", "--json"]);
    let queued = queue["runs"]
        .as_array()
        .and_then(|runs| runs.iter().find(|r| r["id"] == run_id.as_str()))
        .unwrap_or_else(|| panic!("run {run_id} not in the queue: {queue:#}"));
    assert_eq!(queued["status"], "queued", "{queued}");
    assert_eq!(queued["reclaims"], 0, "{queued}");
    assert_eq!(queued["lease_owner"], Value::Null, "{queued}");

    // A worker finishes it, reusing what the interrupted process finished.
    model.release();
    let _worker = env.spawn(&["worker"]);
    let done = wait_for(
        Duration::from_secs(120),
        "the worker to finish the run",
        || {
            let run = env.json(&["runs", &run_id, "--json"]);
            matches!(
                run["status"].as_str(),
                Some("succeeded" | "failed" | "canceled")
            )
            .then_some(run)
        },
    );
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let kinds = kinds(&done);
    assert_eq!(count(&kinds, "run:run_started"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "run:run_released"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "run:run_reclaimed"), 0, "{kinds:?}");
    assert_eq!(count(&kinds, "extract:stage_started"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "run:run_succeeded"), 1, "{kinds:?}");
    let hits = env.json(&["search", "crazy ones", "--json"]);
    assert_eq!(hits["document_ids"], serde_json::json!([document_id]));
}

#[test]
fn sigterm_releases_the_run_of_shelf_process_and_exits_143() {
    interrupting_process_releases_its_run("TERM", 143);
}

#[test]
fn sigint_releases_the_run_of_shelf_process_and_exits_130() {
    interrupting_process_releases_its_run("INT", 130);
}
