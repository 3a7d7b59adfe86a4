//! Real worker processes killed mid-run: the run finishes exactly once, on another worker,
//! reusing the checkpoints (stages and cleaned chunks) of the dead one.

use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, wait_for};

/// A slow, chunked setup: every provider call takes 250 ms, one chunk at a time, short leases.
fn slow_env() -> Env {
    Env::new()
        .with("SHELF_LLM_MOCK_DELAY_MS", "250")
        .with("SHELF_LLM_MAX_CONCURRENCY", "1")
        .with("SHELF_CHUNK_TARGET_CHARS", "300")
        .with("SHELF_CHUNK_OVERLAP_CHARS", "30")
        .with("SHELF_WORKER_LEASE_SECONDS", "2")
        .with("SHELF_WORKER_HEARTBEAT_MS", "300")
}

fn queue_document(env: &Env) -> (String, String) {
    assert!(env.run(&["migrate"]).status.success());
    env.queue(&crate::support::corpus("text/multicolumn-lorem-ipsum.txt"))
}

fn run_json(env: &Env, run_id: &str) -> Value {
    env.json(&["runs", run_id, "--json"])
}

fn kinds(run: &Value) -> Vec<String> {
    run["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["stage"].as_str().unwrap(),
                e["kind"].as_str().unwrap()
            )
        })
        .collect()
}

fn count(kinds: &[String], what: &str) -> usize {
    kinds.iter().filter(|k| *k == what).count()
}

#[test]
fn a_sigkilled_worker_loses_no_run_and_no_finished_work() {
    let env = slow_env();
    let (doc_id, run_id) = queue_document(&env);

    let mut first = env.spawn(&["worker"]);
    // Kill it in the middle of `clean`, after some chunks were checkpointed.
    wait_for(
        Duration::from_secs(60),
        "clean to checkpoint two chunks",
        || {
            let run = run_json(&env, &run_id);
            (run["stage"] == "clean" && run["completed_chunks"].as_i64() >= Some(2)).then_some(())
        },
    );
    first.kill();
    let during = run_json(&env, &run_id);
    assert_eq!(
        during["status"], "running",
        "the dead worker's run stays claimed until its lease expires"
    );

    let _second = env.spawn(&["worker"]);
    let done = wait_for(Duration::from_secs(120), "the run to finish", || {
        let run = run_json(&env, &run_id);
        let status = run["status"].as_str().unwrap_or("").to_string();
        matches!(status.as_str(), "succeeded" | "failed" | "canceled").then_some(run)
    });
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let kinds = kinds(&done);
    // Exactly once: one start, one reclaim, one success.
    assert_eq!(count(&kinds, "run:run_started"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "run:run_reclaimed"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "run:run_succeeded"), 1, "{kinds:?}");
    // Finished stages were not redone; clean resumed from its chunk checkpoints.
    assert_eq!(count(&kinds, "extract:stage_started"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "clean:stage_started"), 2, "{kinds:?}");
    let events = done["events"].as_array().unwrap();
    let reused = events
        .iter()
        .find(|e| e["kind"] == "checkpoints_reused")
        .expect("a checkpoints_reused event");
    assert!(reused["message"].as_str().unwrap().contains("extract"));
    let chunks = events
        .iter()
        .find(|e| e["kind"] == "chunks_reused")
        .expect("a chunks_reused event");
    let reused_chunks: usize = chunks["message"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(reused_chunks >= 2, "{chunks}");
    assert_eq!(done["total_chunks"], done["completed_chunks"]);
    // Sequences stayed gap-free across both workers.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence"].as_i64(), Some(i as i64 + 1));
    }
    // The document is published once and searchable.
    let stages = done["stages"].as_array().unwrap();
    assert!(
        stages
            .iter()
            .all(|s| s["status"] == "succeeded" || s["status"] == "skipped")
    );
    let hits = env.json(&["search", "lorem ipsum", "--json"]);
    assert_eq!(hits["document_ids"], serde_json::json!([doc_id]));
}

#[test]
fn a_terminated_worker_hands_its_run_back_at_once() {
    let env = slow_env().with("SHELF_WORKER_LEASE_SECONDS", "60");
    let (_doc, run_id) = queue_document(&env);
    let mut first = env.spawn(&["worker"]);
    wait_for(Duration::from_secs(60), "clean to start", || {
        (run_json(&env, &run_id)["stage"] == "clean").then_some(())
    });
    let status = first
        .terminate(Duration::from_secs(10))
        .expect("worker exits on SIGTERM");
    assert!(status.success());
    // Released, not abandoned: no 60 s lease to wait out.
    let released = run_json(&env, &run_id);
    assert_eq!(released["status"], "queued", "{released:#}");
    let _second = env.spawn(&["worker"]);
    let done = wait_for(Duration::from_secs(60), "the run to finish", || {
        let run = run_json(&env, &run_id);
        (run["status"] == "succeeded").then_some(run)
    });
    let kinds = kinds(&done);
    assert_eq!(count(&kinds, "run:run_released"), 1, "{kinds:?}");
    assert_eq!(count(&kinds, "run:run_reclaimed"), 0, "{kinds:?}");
    assert_eq!(count(&kinds, "extract:stage_started"), 1, "{kinds:?}");
}

#[test]
fn canceling_a_run_reaches_the_worker_process_holding_it() {
    // Each model call would take a day: the run ends only if the cancel interrupts `clean`.
    let env = slow_env().with("SHELF_LLM_MOCK_DELAY_MS", "86400000");
    let (_doc, run_id) = queue_document(&env);
    let _worker = env.spawn(&["worker"]);
    wait_for(Duration::from_secs(60), "clean to start", || {
        (run_json(&env, &run_id)["stage"] == "clean").then_some(())
    });
    let answer = env.json(&["admin", "run-cancel", &run_id, "--json"]);
    assert_eq!(answer["outcome"], "requested");
    let done = wait_for(
        Duration::from_secs(120),
        "the worker to stop the run",
        || {
            let run = run_json(&env, &run_id);
            (run["status"] == "canceled").then_some(run)
        },
    );
    let kinds = kinds(&done);
    assert_eq!(
        count(&kinds, "classify:stage_started"),
        0,
        "no later stage starts: {kinds:?}"
    );
    // Terminal states never change.
    let again = env.run(&["admin", "run-cancel", &run_id, "--json"]);
    assert_eq!(again.status.code(), Some(1));
    let body: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(body["code"], "run_terminal");
}
