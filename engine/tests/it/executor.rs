//! The executor on a real database (SQLite and PostgreSQL): DAG order, parallel branches, `when`, retries with
//! backoff through the queue, timeouts, cancellation, retry of failed runs.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use shelf_db::sql::SqlExt;
use shelf_engine::executor::ClaimOutcome;
use shelf_engine::store::CancelOutcome;
use shelf_engine::{EngineError, RunStatus, StageStatus};
use tokio_util::sync::CancellationToken;

use crate::common::{
    Backend, Probe, compile, database, engine, event_kinds, fast_config, on_both_backends,
};

async fn run_to_end(e: &shelf_engine::Engine, run_id: &str) -> shelf_engine::RunRecord {
    tokio::time::timeout(
        Duration::from_secs(30),
        e.run_in_process(run_id, "test-worker", CancellationToken::new()),
    )
    .await
    .expect("run should end in time")
    .expect("run")
}

async fn stages_run_in_dependency_order_and_see_upstream_outputs(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { set: { value: 7 } } }\n  b: { uses: step, needs: [a] }\n  c: { uses: step, needs: [b] }\n",
    );
    let run = e.submit("subject-1", &p, json!({"k": 1})).await.unwrap();
    assert_eq!(run.status, RunStatus::Queued);
    let done = run_to_end(&e, &run.id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    let kinds = event_kinds(&e, &run.id).await;
    assert_eq!(
        kinds,
        [
            "run:run_queued",
            "run:run_started",
            "a:stage_started",
            "a:stage_succeeded",
            "b:stage_started",
            "b:stage_succeeded",
            "c:stage_started",
            "c:stage_succeeded",
            "run:run_succeeded"
        ]
    );
    let stages = e.store().stages(&run.id).await.unwrap();
    let c = stages.iter().find(|s| s.name == "c").unwrap();
    assert_eq!(
        c.output.as_ref().unwrap()["seen"],
        json!(7),
        "c sees a's value through b"
    );
    // Sequences are gap-free from 1.
    let events = e.store().events(&run.id, 0, 100).await.unwrap();
    let seqs: Vec<i64> = events.iter().map(|e| e.sequence).collect();
    assert_eq!(seqs, (1..=events.len() as i64).collect::<Vec<_>>());
}

async fn independent_branches_run_concurrently(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  root: { uses: step }\n  left: { uses: step, needs: [root], with: { sleep_ms: 400 } }\n  right: { uses: step, needs: [root], with: { sleep_ms: 400 } }\n  join: { uses: step, needs: [left, right] }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    let done = run_to_end(&e, &run.id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(
        probe.max_running.load(Ordering::SeqCst),
        2,
        "left and right overlap"
    );
    let kinds = event_kinds(&e, &run.id).await;
    let join_start = kinds
        .iter()
        .position(|k| k == "join:stage_started")
        .unwrap();
    let left_done = kinds
        .iter()
        .position(|k| k == "left:stage_succeeded")
        .unwrap();
    let right_done = kinds
        .iter()
        .position(|k| k == "right:stage_succeeded")
        .unwrap();
    assert!(
        join_start > left_done && join_start > right_done,
        "{kinds:?}"
    );
}

async fn when_false_skips_and_passes_inputs_through(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  extract: { uses: step, with: { set: { needs_ocr: false, value: text } } }\n  ocr: { uses: step, needs: [extract], when: extract.needs_ocr, with: { set: { value: ocr, ran: true } } }\n  correct: { uses: step, needs: [ocr], when: ocr.ran }\n  clean: { uses: step, needs: [correct] }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    assert_eq!(run_to_end(&e, &run.id).await.status, RunStatus::Succeeded);
    let stages = e.store().stages(&run.id).await.unwrap();
    let by = |n: &str| stages.iter().find(|s| s.name == n).unwrap().clone();
    assert_eq!(by("ocr").status, StageStatus::Skipped);
    assert_eq!(by("correct").status, StageStatus::Skipped);
    assert_eq!(by("clean").output.unwrap()["seen"], json!("text"));
    assert_eq!(probe.total_starts("ocr"), 0);

    // With the flag set, the branch runs and its output wins.
    let p = compile(
        &e,
        "version: 1\nstages:\n  extract: { uses: step, with: { set: { needs_ocr: true, value: text } } }\n  ocr: { uses: step, needs: [extract], when: extract.needs_ocr, with: { set: { value: ocr, ran: true } } }\n  correct: { uses: step, needs: [ocr], when: ocr.ran }\n  clean: { uses: step, needs: [correct] }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    assert_eq!(run_to_end(&e, &run.id).await.status, RunStatus::Succeeded);
    let stages = e.store().stages(&run.id).await.unwrap();
    let clean = stages.iter().find(|s| s.name == "clean").unwrap();
    assert_eq!(clean.output.as_ref().unwrap()["seen"], json!("ocr"));
}

async fn retries_requeue_the_run_with_backoff_instead_of_sleeping(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step }\n  b: { uses: step, needs: [a], retry: { attempts: 3, backoff: 300ms }, with: { fail_times: 2 } }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    let claim = e.claim("w1", None).await.unwrap().expect("claim");
    let before = shelf_engine::time::now_ms();
    let outcome = e.execute(claim, CancellationToken::new()).await.unwrap();
    let ClaimOutcome::RetryScheduled { due_at } = outcome else {
        panic!("expected a scheduled retry, got {outcome:?}");
    };
    // Jittered exponential backoff: between 50 % and 100 % of 300 ms.
    assert!(due_at >= before + 150, "due {due_at} before {before}");
    let queued = e.store().get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(queued.status, RunStatus::Queued);
    assert!(e.claim("w1", None).await.unwrap().is_none(), "not due yet");

    let done = run_to_end(&e, &run.id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(probe.starts_of(&run.id, "a"), 1, "a's checkpoint is reused");
    assert_eq!(probe.starts_of(&run.id, "b"), 3);
    let b = e
        .store()
        .stages(&run.id)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.name == "b")
        .unwrap();
    assert_eq!(b.attempts, 3);
    let kinds = event_kinds(&e, &run.id).await;
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == "run:run_retry_scheduled")
            .count(),
        2,
        "{kinds:?}"
    );
}

async fn retries_exhausted_fail_the_run(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, retry: { attempts: 2, backoff: 10ms }, with: { fail_times: 5 } }\n  b: { uses: step, needs: [a] }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    let done = run_to_end(&e, &run.id).await;
    assert_eq!(done.status, RunStatus::Failed);
    assert!(
        done.error.as_deref().unwrap().contains("stage a failed"),
        "{:?}",
        done.error
    );
    let stages = e.store().stages(&run.id).await.unwrap();
    assert_eq!(stages[0].status, StageStatus::Failed);
    assert_eq!(stages[1].status, StageStatus::Canceled);
    assert_eq!(probe.total_starts("b"), 0);
}

async fn writes_handed_over_commit_only_with_the_attempts_success(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, retry: { attempts: 3, backoff: 10ms }, with: { hand_write: true, fail_times: 1 } }\n  b: { uses: step, needs: [a], with: { hand_write: true, fail_times: 1, fatal: true } }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    let done = run_to_end(&e, &run.id).await;
    assert_eq!(done.status, RunStatus::Failed);
    let rows = db
        .query_all_sql(sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Sqlite,
            "SELECT stage, key FROM run_stage_parts WHERE run_id = ? ORDER BY stage, key",
            [run.id.clone().into()],
        ))
        .await
        .unwrap();
    let keys: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.try_get("", "stage").unwrap(),
                r.try_get("", "key").unwrap(),
            )
        })
        .collect();
    // a's failed first attempt wrote nothing, its second wrote with its success; b failed.
    assert_eq!(keys, vec![("a".to_string(), "handed-2".to_string())]);
}

/// The partial checkpoints of a run, as (stage, key), in order.
async fn parts(db: &sea_orm::DatabaseConnection, run_id: &str) -> Vec<(String, String)> {
    db.query_all_sql(sea_orm::Statement::from_sql_and_values(
        sea_orm::DbBackend::Sqlite,
        "SELECT stage, key FROM run_stage_parts WHERE run_id = ? ORDER BY stage, key",
        [run_id.into()],
    ))
    .await
    .unwrap()
    .iter()
    .map(|r| {
        (
            r.try_get("", "stage").unwrap(),
            r.try_get("", "key").unwrap(),
        )
    })
    .collect()
}

/// Partial checkpoints serve only to resume an unfinished stage: a stage that fails keeps them
/// (a retry of the run copies them), and the transaction that records a stage's success drops
/// them, while the writes the attempt handed over commit in it as before.
async fn parts_go_with_the_stages_success_and_stay_while_it_is_unfinished(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { save_part: true } }\n  b: { uses: step, needs: [a], with: { save_part: true, hand_write: true, fail_times: 1, fatal: true } }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    let failed = run_to_end(&e, &run.id).await;
    assert_eq!(failed.status, RunStatus::Failed);
    let part = |stage: &str, key: &str| (stage.to_string(), key.to_string());
    // a succeeded: its checkpoint went with the success; b failed: its checkpoint stays.
    assert_eq!(parts(&db, &run.id).await, vec![part("b", "saved-1")]);

    let retry = e.retry(&run.id).await.unwrap();
    let done = run_to_end(&e, &retry.id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    // The retry's b succeeded: its checkpoints are gone, the write it handed over is there.
    assert_eq!(parts(&db, &retry.id).await, vec![part("b", "handed-1")]);
    assert_eq!(parts(&db, &run.id).await, vec![part("b", "saved-1")]);
}

async fn fatal_errors_are_not_retried(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, retry: { attempts: 5, backoff: 10ms }, with: { fail_times: 1, fatal: true } }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    assert_eq!(run_to_end(&e, &run.id).await.status, RunStatus::Failed);
    assert_eq!(probe.starts_of(&run.id, "a"), 1);
}

async fn per_stage_timeout_fails_the_attempt(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  slow: { uses: step, timeout: 150ms, with: { sleep_ms: 100000000, ignore_cancel: true } }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    // The stage would sleep for days: an end at all is the timeout's doing.
    let done = run_to_end(&e, &run.id).await;
    assert_eq!(done.status, RunStatus::Failed);
    let stage = &e.store().stages(&run.id).await.unwrap()[0];
    assert_eq!(stage.status, StageStatus::Failed);
    assert!(
        stage
            .error
            .as_deref()
            .unwrap()
            .starts_with("stage_timeout: timed out after 150ms"),
        "{:?}",
        stage.error
    );
}

async fn canceling_a_queued_run_is_immediate_and_final(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(&e, "version: 1\nstages:\n  a: { uses: step }\n");
    let run = e.submit("s", &p, json!({})).await.unwrap();
    assert_eq!(e.cancel(&run.id).await.unwrap(), CancelOutcome::Canceled);
    let canceled = e.store().get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(canceled.status, RunStatus::Canceled);
    assert!(
        e.claim("w", None).await.unwrap().is_none(),
        "a canceled run is never claimed"
    );
    assert!(matches!(
        e.cancel(&run.id).await,
        Err(EngineError::RunTerminal { .. })
    ));
    assert!(matches!(
        e.retry(&run.id).await,
        Err(EngineError::RunNotFailed { .. })
    ));
    assert_eq!(
        e.store().stages(&run.id).await.unwrap()[0].status,
        StageStatus::Canceled
    );
    assert_eq!(probe.total_starts("a"), 0);
}

async fn canceling_a_running_run_stops_its_stage_and_starts_nothing_later(backend: Backend) {
    let (dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let worker_engine = engine(&db, &probe, fast_config());
    // The API side uses its own pool, as another process would.
    let api_db = crate::common::connect(&dir).await;
    let api_engine = engine(&api_db, &probe, fast_config());
    let p = compile(
        &worker_engine,
        "version: 1\nstages:\n  slow: { uses: step, with: { sleep_ms: 100000000 } }\n  after: { uses: step, needs: [slow] }\n",
    );
    let run = api_engine.submit("s", &p, json!({})).await.unwrap();
    let id = run.id.clone();
    let runner = {
        let e = worker_engine.clone();
        tokio::spawn(async move { e.run_in_process(&id, "w", CancellationToken::new()).await })
    };
    while probe.total_starts("slow") == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        api_engine.cancel(&run.id).await.unwrap(),
        CancelOutcome::Requested
    );
    // The stage would sleep for days: an end at all is the cancel's doing (the bound only
    // keeps a regression from hanging the suite).
    let done = tokio::time::timeout(Duration::from_secs(300), runner)
        .await
        .expect("cancel reaches the worker")
        .unwrap()
        .unwrap();
    assert_eq!(done.status, RunStatus::Canceled);
    assert_eq!(probe.total_starts("after"), 0);
    let stages = api_engine.store().stages(&run.id).await.unwrap();
    assert!(
        stages.iter().all(|s| s.status == StageStatus::Canceled),
        "{stages:?}"
    );
}

async fn retry_of_a_failed_run_reuses_succeeded_checkpoints(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { set: { value: 1 } } }\n  b: { uses: step, needs: [a], with: { fail_times: 1, fatal: true } }\n",
    );
    let first = e.submit("s", &p, json!({"doc": "x"})).await.unwrap();
    assert_eq!(run_to_end(&e, &first.id).await.status, RunStatus::Failed);
    let second = e.retry(&first.id).await.unwrap();
    assert_eq!(second.retry_of.as_deref(), Some(first.id.as_str()));
    assert_eq!(second.attempt, 2);
    assert_eq!(second.pipeline_sha256, first.pipeline_sha256);
    assert_eq!(second.input, json!({"doc": "x"}));
    // The failure counter is per subject, so the replay's b succeeds.
    let done = run_to_end(&e, &second.id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(probe.starts_of(&second.id, "a"), 0, "a is not run again");
    let stages = e.store().stages(&second.id).await.unwrap();
    assert_eq!(stages[0].reused_from.as_deref(), Some(first.id.as_str()));
    assert_eq!(stages[1].output.as_ref().unwrap()["seen"], json!(1));
    // The failed run itself never changes.
    let old = e.store().get_run(&first.id).await.unwrap().unwrap();
    assert_eq!(old.status, RunStatus::Failed);
}

async fn editing_a_pipeline_never_changes_a_created_run(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let original = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { set: { v: 1 } } }\n",
    );
    let run = e.submit("s", &original, json!({})).await.unwrap();
    let _edited = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { set: { v: 2 } } }\n",
    );
    run_to_end(&e, &run.id).await;
    let stage = &e.store().stages(&run.id).await.unwrap()[0];
    assert_eq!(stage.output.as_ref().unwrap()["v"], json!(1));
    assert_eq!(run.pipeline_sha256, original.sha256);
}

async fn canceling_kills_a_stage_subprocess(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(&e, "version: 1\nstages:\n  convert: { uses: spawn }\n");
    let run = e.submit("s", &p, json!({})).await.unwrap();
    let id = run.id.clone();
    let runner = {
        let e = e.clone();
        tokio::spawn(async move { e.run_in_process(&id, "w", CancellationToken::new()).await })
    };
    let pid = loop {
        if let Some(pid) = *probe.child_pid.lock().unwrap() {
            break pid;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    };
    assert!(alive(pid));
    e.cancel(&run.id).await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(5), runner)
        .await
        .expect("stops in time")
        .unwrap()
        .unwrap();
    assert_eq!(done.status, RunStatus::Canceled);
    let mut gone = false;
    for _ in 0..50 {
        if !alive(pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the subprocess {pid} was killed");
}

/// Records what the engine reports to its hooks.
#[derive(Default)]
struct Recorder {
    seen: std::sync::Mutex<Vec<String>>,
}

impl Recorder {
    fn push(&self, what: String) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push(what);
        }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl shelf_engine::RunHooks for Recorder {
    fn stage_finished(
        &self,
        _run: &shelf_engine::RunRecord,
        stage: &str,
        status: StageStatus,
        _duration: Duration,
    ) {
        self.push(format!("stage {stage} {}", status.as_str()));
    }

    fn claimed(&self, claim: &shelf_engine::Claim) {
        self.push(format!("claimed reclaimed={}", claim.reclaimed));
    }

    fn run_finished(&self, _run_id: &str, status: RunStatus) {
        self.push(format!("finished {}", status.as_str()));
    }

    fn stage_failure_continued(
        &self,
        _run: &shelf_engine::RunRecord,
        stage: &str,
        kind: &str,
        code: &str,
    ) {
        self.push(format!("continued past {stage} ({kind}) {code}"));
    }

    fn run_succeeded_with_warnings(&self, _run_id: &str, warnings: usize) {
        self.push(format!("warnings {warnings}"));
    }
}

/// An engine whose hooks record what it reports.
fn recorded_engine(
    db: &sea_orm::DatabaseConnection,
    probe: &Arc<Probe>,
) -> (shelf_engine::Engine, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let e = shelf_engine::Engine::new(
        shelf_engine::RunStore::new(db.clone(), fast_config().lease),
        crate::common::registry(probe),
        recorder.clone(),
        fast_config(),
    );
    (e, recorder)
}

/// `on_failure: continue`: a stage whose retries run out ends `failed`, its sibling is not
/// stopped, its dependent runs and sees through it, and the run succeeds with its warning.
async fn a_stage_continued_past_leaves_a_succeeded_run_with_a_warning(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let (e, recorder) = recorded_engine(&db, &probe);
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { set: { value: 7 } } }\n  b: { uses: step, needs: [a], on_failure: continue, retry: { attempts: 2, backoff: 10ms }, with: { fail_times: 5 } }\n  c: { uses: step, needs: [a] }\n  d: { uses: step, needs: [b, c] }\n",
    );
    let run = e.submit("s", &p, json!({})).await.unwrap();
    let done = run_to_end(&e, &run.id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.error, None);
    assert_eq!(probe.starts_of(&run.id, "b"), 2, "retried first");
    let stages = e.store().stages(&run.id).await.unwrap();
    let by = |n: &str| stages.iter().find(|s| s.name == n).unwrap().clone();
    assert_eq!(by("b").status, StageStatus::Failed);
    assert_eq!(
        by("b").error.as_deref(),
        Some("flaky: transient test failure")
    );
    assert_eq!(by("c").status, StageStatus::Succeeded);
    assert_eq!(
        by("d").output.unwrap()["seen"],
        json!(7),
        "d's lookup passes through b to a"
    );
    let warning = shelf_engine::RunWarning {
        stage: "b".into(),
        code: "flaky".into(),
        message: "transient test failure".into(),
    };
    assert_eq!(
        shelf_engine::RunWarning::of_stages(done.status, &stages),
        std::slice::from_ref(&warning)
    );
    let found = e
        .store()
        .warnings(std::slice::from_ref(&done))
        .await
        .unwrap();
    assert_eq!(found.get(&run.id), Some(&vec![warning]));
    let events = e.store().events(&run.id, 0, 100).await.unwrap();
    assert!(
        events.iter().any(|ev| ev.stage == "b"
            && ev.message
                == "attempt 2 of 2 failed (flaky): transient test failure; continuing (on_failure: continue)"),
        "{events:?}"
    );
    assert_eq!(
        events.last().map(|ev| ev.message.as_str()),
        Some("run succeeded with 1 warning: failed and continued past: b")
    );
    let seen = recorder.seen();
    assert!(
        seen.contains(&"continued past b (step) flaky".to_string()),
        "{seen:?}"
    );
    assert_eq!(
        seen.iter().rev().take(2).collect::<Vec<_>>(),
        ["warnings 1", "finished succeeded"]
    );
    // A failed run has no warnings, even with a failed stage.
    let strict = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { fail_times: 1, fatal: true } }\n",
    );
    let failed = e.submit("t", &strict, json!({})).await.unwrap();
    let failed = run_to_end(&e, &failed.id).await;
    assert_eq!(failed.status, RunStatus::Failed);
    assert!(
        e.store()
            .warnings(&[failed, done])
            .await
            .unwrap()
            .keys()
            .eq([&run.id])
    );
}

async fn hooks_observe_claims_with_their_queue_wait_and_terminal_runs(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let (e, recorder) = recorded_engine(&db, &probe);
    let p = compile(&e, "version: 1\nstages:\n  a: { uses: step }\n");
    let run = e.submit("s", &p, json!({})).await.unwrap();
    // The run has been due at least this long when it is claimed.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let claim = e.claim("w", None).await.unwrap().expect("claim");
    assert!(
        claim.queue_wait >= Duration::from_millis(50),
        "{:?}",
        claim.queue_wait
    );
    assert!(
        claim.queue_wait < Duration::from_secs(3600),
        "{:?}",
        claim.queue_wait
    );
    let outcome = e.execute(claim, CancellationToken::new()).await.unwrap();
    assert_eq!(outcome, ClaimOutcome::Finished(RunStatus::Succeeded));
    let queued = e.submit("t", &p, json!({})).await.unwrap();
    assert_eq!(e.cancel(&queued.id).await.unwrap(), CancelOutcome::Canceled);
    assert_eq!(
        recorder.seen(),
        [
            "claimed reclaimed=false",
            "stage a succeeded",
            "finished succeeded",
            "finished canceled",
        ]
    );
    assert_eq!(
        e.store().get_run(&run.id).await.unwrap().unwrap().status,
        RunStatus::Succeeded
    );
}

/// Hooks that hand out a trace context and record which spans the engine asked for.
#[derive(Default)]
struct TracingHooks {
    parent: std::sync::Mutex<Option<String>>,
    spans: std::sync::Mutex<Vec<String>>,
}

impl shelf_engine::RunHooks for TracingHooks {
    fn trace_parent(&self) -> Option<String> {
        self.parent.lock().unwrap().clone()
    }

    fn claim_span(&self, run: &shelf_engine::RunRecord) -> tracing::Span {
        self.spans.lock().unwrap().push(format!(
            "claim {} {}",
            run.id,
            run.trace_parent.as_deref().unwrap_or("-")
        ));
        tracing::Span::none()
    }

    fn stage_span(
        &self,
        run: &shelf_engine::RunRecord,
        stage: &str,
        attempt: u32,
    ) -> tracing::Span {
        self.spans
            .lock()
            .unwrap()
            .push(format!("stage {} {stage} {attempt}", run.id));
        tracing::Span::none()
    }
}

async fn a_run_carries_the_trace_context_of_its_creator_to_its_claims(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let hooks = Arc::new(TracingHooks::default());
    let config = fast_config();
    let e = shelf_engine::Engine::new(
        shelf_engine::RunStore::new(db.clone(), config.lease),
        crate::common::registry(&probe),
        hooks.clone(),
        config,
    );
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step }\n  b: { uses: step, needs: [a], with: { fail_times: 1, fatal: true } }\n",
    );
    let creator = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    *hooks.parent.lock().unwrap() = Some(creator.to_string());
    let run = e.submit("s", &p, json!({})).await.unwrap();
    assert_eq!(run.trace_parent.as_deref(), Some(creator));
    let done = run_to_end(&e, &run.id).await;
    assert_eq!(done.status, RunStatus::Failed);
    assert_eq!(
        hooks.spans.lock().unwrap().clone(),
        [
            format!("claim {} {creator}", run.id),
            format!("stage {} a 1", run.id),
            format!("stage {} b 1", run.id),
        ]
    );

    // A retry continues the trace of whoever retried it; none at all is stored as none.
    *hooks.parent.lock().unwrap() = None;
    let retry = e.retry(&run.id).await.unwrap();
    assert_eq!(retry.trace_parent, None);
    let reread = e.store().get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(reread.trace_parent.as_deref(), Some(creator));
}

on_both_backends!(
    stages_run_in_dependency_order_and_see_upstream_outputs,
    independent_branches_run_concurrently,
    when_false_skips_and_passes_inputs_through,
    retries_requeue_the_run_with_backoff_instead_of_sleeping,
    retries_exhausted_fail_the_run,
    writes_handed_over_commit_only_with_the_attempts_success,
    parts_go_with_the_stages_success_and_stay_while_it_is_unfinished,
    fatal_errors_are_not_retried,
    per_stage_timeout_fails_the_attempt,
    canceling_a_queued_run_is_immediate_and_final,
    canceling_a_running_run_stops_its_stage_and_starts_nothing_later,
    retry_of_a_failed_run_reuses_succeeded_checkpoints,
    editing_a_pipeline_never_changes_a_created_run,
    canceling_kills_a_stage_subprocess,
    hooks_observe_claims_with_their_queue_wait_and_terminal_runs,
    a_run_carries_the_trace_context_of_its_creator_to_its_claims,
    a_stage_continued_past_leaves_a_succeeded_run_with_a_warning,
);
