//! The durable queue on one database shared by several pools (SQLite and PostgreSQL): exclusive claims, lease
//! expiry and reclaim, lease-token fencing, the reclaim cap.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sea_orm::{DbBackend, Statement};
use serde_json::json;
use shelf_db::sql::SqlExt;
use shelf_engine::executor::ClaimOutcome;
use shelf_engine::{EngineConfig, EngineError, RunStatus};
use tokio_util::sync::CancellationToken;

use shelf_engine::clock::QueueClock;

use crate::common::{
    Backend, Probe, all_terminal, compile, connect, database, engine, engine_on, event_kinds,
    fast_config, on_both_backends, spawn_execute, start_workers, submit_n,
};

async fn two_workers_never_run_the_same_run_at_once(backend: Backend) {
    let (dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let submitter = engine(&db, &probe, fast_config());
    let p = compile(
        &submitter,
        "version: 1\nstages:\n  a: { uses: step, with: { sleep_ms: 5 } }\n  b: { uses: step, needs: [a] }\n",
    );
    let ids = submit_n(&submitter, &p, 60).await;
    let (shutdown, handles) = start_workers(&dir, &probe, 2, 4).await;
    all_terminal(&submitter).await;
    shutdown.cancel();
    for h in handles {
        h.await.unwrap();
    }
    assert_eq!(probe.overlaps.load(Ordering::SeqCst), 0);
    let mut owners = std::collections::HashSet::new();
    for id in &ids {
        let run = submitter.store().get_run(id).unwrap_or_else_none().await;
        assert_eq!(run.status, RunStatus::Succeeded);
        assert_eq!(run.claims, 1, "each run claimed exactly once");
        assert_eq!(probe.starts_of(id, "a"), 1);
        assert_eq!(probe.starts_of(id, "b"), 1);
        let kinds = event_kinds(&submitter, id).await;
        assert_eq!(kinds.iter().filter(|k| *k == "run:run_started").count(), 1);
        owners.insert(
            submitter
                .store()
                .events(id, 0, 100)
                .await
                .unwrap()
                .into_iter()
                .find(|e| e.kind == "run_started")
                .unwrap()
                .message,
        );
    }
    assert_eq!(owners.len(), 2, "both workers took work: {owners:?}");
}

trait GetRun {
    async fn unwrap_or_else_none(self) -> shelf_engine::RunRecord;
}

impl<F> GetRun for F
where
    F: std::future::Future<Output = Result<Option<shelf_engine::RunRecord>, EngineError>>,
{
    async fn unwrap_or_else_none(self) -> shelf_engine::RunRecord {
        self.await.unwrap().expect("run exists")
    }
}

/// A lease the tests let lapse by moving a shared clock past it (`LAPSE`), never by sleeping:
/// nothing here depends on how fast the machine is.
fn short_lease() -> EngineConfig {
    EngineConfig {
        lease: Duration::from_secs(10),
        heartbeat: Duration::from_millis(100),
        max_reclaims: 3,
    }
}

const LAPSE: Duration = Duration::from_secs(11);

async fn an_expired_lease_is_reclaimed_and_the_stale_worker_is_fenced_off(backend: Backend) {
    let (dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let clock = QueueClock::system();
    let stale = engine_on(&db, &probe, short_lease(), &clock);
    let p = compile(&stale, "version: 1\nstages:\n  a: { uses: step }\n");
    let run = stale.submit("s", &p, json!({})).await.unwrap();
    let first = stale.claim("stale", None).await.unwrap().expect("claim");
    assert!(!first.reclaimed);
    // While the lease is valid nobody else can take the run.
    let db2 = connect(&dir).await;
    let fresh = engine_on(&db2, &probe, short_lease(), &clock);
    assert!(fresh.claim("fresh", None).await.unwrap().is_none());
    // The stale worker stops renewing (it "died"); the lease expires.
    clock.advance(LAPSE);
    let second = fresh.claim("fresh", None).await.unwrap().expect("reclaim");
    assert!(second.reclaimed);
    assert_eq!(second.run.reclaims, 1);
    assert!(second.token > first.token);
    // Every write of the stale worker is refused by the token.
    assert!(matches!(
        stale.store().heartbeat(&run.id, first.token).await,
        Err(EngineError::LeaseLost(_))
    ));
    let outcome = stale
        .execute(first, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome, ClaimOutcome::LeaseLost);
    assert_eq!(
        probe.starts_of(&run.id, "a"),
        0,
        "a fenced worker starts nothing"
    );
    // The new owner finishes it.
    let outcome = fresh
        .execute(second, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome, ClaimOutcome::Finished(RunStatus::Succeeded));
    let kinds = event_kinds(&fresh, &run.id).await;
    assert!(
        kinds.contains(&"run:run_reclaimed".to_string()),
        "{kinds:?}"
    );
}

/// Heartbeats renew the lease while a stage runs: the test watches the lease end move on
/// three times while nobody else can claim the run. The lease is 200 heartbeats long, so only a
/// machine stalled for 10 s could let it lapse; nothing depends on how fast renewals come.
async fn heartbeats_keep_a_long_stage_from_being_reclaimed(backend: Backend) {
    let (dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let config = EngineConfig {
        lease: Duration::from_secs(10),
        heartbeat: Duration::from_millis(50),
        max_reclaims: 3,
    };
    let owner = engine(&db, &probe, config.clone());
    let p = compile(
        &owner,
        "version: 1\nstages:\n  a: { uses: step, with: { sleep_ms: 600000 } }\n",
    );
    let run = owner.submit("s", &p, json!({})).await.unwrap();
    let claim = owner.claim("owner", None).await.unwrap().unwrap();
    let mut lease_end = claim.run.due_at;
    let exec = spawn_execute(&owner, claim);
    let db2 = connect(&dir).await;
    let other = engine(&db2, &probe, config);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut renewals = 0;
    while renewals < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the lease was never renewed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        let due = owner
            .store()
            .get_run(&run.id)
            .await
            .unwrap()
            .unwrap()
            .due_at;
        if due > lease_end {
            renewals += 1;
            lease_end = due;
        }
        assert!(
            other.claim("other", None).await.unwrap().is_none(),
            "lease is renewed"
        );
    }
    owner.cancel(&run.id).await.unwrap();
    assert_eq!(
        exec.await.unwrap().unwrap(),
        ClaimOutcome::Finished(RunStatus::Canceled)
    );
    assert_eq!(
        owner
            .store()
            .get_run(&run.id)
            .await
            .unwrap()
            .unwrap()
            .claims,
        1
    );
}

async fn reclaims_are_capped(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let config = EngineConfig {
        max_reclaims: 1,
        ..short_lease()
    };
    let clock = QueueClock::system();
    let e = engine_on(&db, &probe, config, &clock);
    let p = compile(&e, "version: 1\nstages:\n  a: { uses: step }\n");
    let run = e.submit("s", &p, json!({})).await.unwrap();
    e.claim("w1", None).await.unwrap().unwrap();
    clock.advance(LAPSE);
    e.claim("w2", None).await.unwrap().unwrap();
    clock.advance(LAPSE);
    let third = e.claim("w3", None).await.unwrap().unwrap();
    assert_eq!(third.run.reclaims, 2);
    let outcome = e.execute(third, CancellationToken::new()).await.unwrap();
    assert_eq!(outcome, ClaimOutcome::Finished(RunStatus::Failed));
    let failed = e.store().get_run(&run.id).await.unwrap().unwrap();
    assert!(failed.error.unwrap().contains("reclaimed 2 times"));
    assert_eq!(probe.starts_of(&run.id, "a"), 0);
}

async fn canceling_a_run_whose_worker_died_is_immediate(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let clock = QueueClock::system();
    let e = engine_on(&db, &probe, short_lease(), &clock);
    let p = compile(&e, "version: 1\nstages:\n  a: { uses: step }\n");
    let run = e.submit("s", &p, json!({})).await.unwrap();
    let claim = e.claim("dead", None).await.unwrap().unwrap();
    clock.advance(LAPSE);
    assert_eq!(
        e.cancel(&run.id).await.unwrap(),
        shelf_engine::store::CancelOutcome::Canceled
    );
    // The dead worker waking up finds its token fenced off.
    assert_eq!(
        e.execute(claim, CancellationToken::new()).await.unwrap(),
        ClaimOutcome::LeaseLost
    );
}

async fn queue_counts_tell_queued_due_running_and_expired_runs_apart(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let long = engine(
        &db,
        &probe,
        EngineConfig {
            lease: Duration::from_secs(600),
            ..fast_config()
        },
    );
    let short = engine(
        &db,
        &probe,
        EngineConfig {
            lease: Duration::from_millis(1),
            ..fast_config()
        },
    );
    let p = compile(&long, "version: 1\nstages:\n  a: { uses: step }\n");
    let empty = long.store().queue_counts().await.unwrap();
    assert_eq!(
        (empty.queued, empty.due, empty.running, empty.expired_leases),
        (0, 0, 0, 0)
    );
    for subject in ["s1", "s2", "s3"] {
        long.submit(subject, &p, json!({})).await.unwrap();
    }
    long.claim("held", None).await.unwrap().expect("claim");
    short.claim("gone", None).await.unwrap().expect("claim");
    // The short lease (1 ms) is over once this much has passed.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let counts = long.store().queue_counts().await.unwrap();
    assert_eq!(
        (
            counts.queued,
            counts.due,
            counts.running,
            counts.expired_leases
        ),
        (1, 1, 2, 1),
        "{counts:?}"
    );
}

/// A claim gate the test opens and closes, counting how often the worker asked.
#[derive(Default)]
struct TestGate {
    closed: std::sync::atomic::AtomicBool,
    asked: std::sync::atomic::AtomicUsize,
}

impl shelf_engine::ClaimGate for TestGate {
    fn may_claim(&self) -> Result<(), String> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            Err("closed by the test".into())
        } else {
            Ok(())
        }
    }
}

/// While the application's gate says no, a worker claims nothing (a queued run stays queued)
/// but the run it already executes goes on to its end; once the gate opens again the worker
/// resumes by itself.
async fn a_closed_claim_gate_pauses_claims_and_lets_runs_in_flight_finish(backend: Backend) {
    let (dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let submitter = engine(&db, &probe, fast_config());
    let held = compile(
        &submitter,
        "version: 1\nstages:\n  a: { uses: step, with: { gate: hold } }\n",
    );
    let quick = compile(&submitter, "version: 1\nstages:\n  a: { uses: step }\n");
    let first = submitter.submit("s1", &held, json!({})).await.unwrap().id;

    let gate = Arc::new(TestGate::default());
    let pool = connect(&dir).await;
    let worker_engine = engine(&pool, &probe, fast_config());
    let mut config = shelf_engine::WorkerConfig::new(2);
    config.poll_interval = Duration::from_millis(10);
    let shutdown = CancellationToken::new();
    let worker = {
        let (gate, stop) = (gate.clone(), shutdown.clone());
        tokio::spawn(async move {
            shelf_engine::Worker::new(worker_engine, config)
                .with_gate(gate)
                .run(stop)
                .await
        })
    };
    crate::common::started(&probe, &first, "a", 1).await;

    gate.closed.store(true, Ordering::SeqCst);
    // An open answer given just before the close may still lead to a claim: the second run
    // is submitted only once the worker has come round its loop and asked the closed gate,
    // so that claim, if any, has found nothing due. Every answer counted from here is "no".
    let asked = gate.asked.load(Ordering::SeqCst);
    crate::common::eventually("the worker asks the closed gate", || async {
        gate.asked.load(Ordering::SeqCst) > asked
    })
    .await;
    let second = submitter.submit("s2", &quick, json!({})).await.unwrap().id;
    // Asked twice more: the worker went round its loop with a free slot and a due run, and a
    // claim only ever follows an open answer.
    let asked = gate.asked.load(Ordering::SeqCst);
    crate::common::eventually("the worker asks the closed gate", || async {
        gate.asked.load(Ordering::SeqCst) >= asked + 2
    })
    .await;
    let status = |id: String| {
        let store = submitter.store().clone();
        async move { store.get_run(&id).await.unwrap().expect("run").status }
    };
    assert_eq!(status(second.clone()).await, RunStatus::Queued);

    // The run in flight is not stopped by the gate.
    probe.open("hold");
    crate::common::eventually("the run in flight ends", || async {
        status(first.clone()).await == RunStatus::Succeeded
    })
    .await;
    let asked = gate.asked.load(Ordering::SeqCst);
    crate::common::eventually("the worker asks again", || async {
        gate.asked.load(Ordering::SeqCst) >= asked + 2
    })
    .await;
    assert_eq!(status(second.clone()).await, RunStatus::Queued);
    assert_eq!(probe.starts_of(&second, "a"), 0);

    gate.closed.store(false, Ordering::SeqCst);
    crate::common::eventually("claiming resumes by itself", || async {
        status(second.clone()).await == RunStatus::Succeeded
    })
    .await;
    shutdown.cancel();
    worker.await.unwrap();
}

/// A claim pacer the test sets: it wants another run while fewer than `allowed` are in
/// flight, and records the counts the worker asked with.
#[derive(Default)]
struct TestPacer {
    allowed: std::sync::atomic::AtomicUsize,
    asked: std::sync::Mutex<Vec<usize>>,
    changed: tokio::sync::Notify,
}

impl shelf_engine::ClaimPacer for TestPacer {
    fn wants_another(&self, in_flight: usize) -> bool {
        self.asked.lock().unwrap().push(in_flight);
        in_flight < self.allowed.load(Ordering::SeqCst)
    }

    fn changed(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(self.changed.notified())
    }
}

impl TestPacer {
    fn asked_with(&self, in_flight: usize) -> usize {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .filter(|n| **n == in_flight)
            .count()
    }
}

/// A paced worker keeps as many runs in flight as its pacer wants (told the true count each
/// time), not its ceiling; told of a change, it claims more at once; and as runs end it
/// claims the rest.
async fn a_paced_worker_keeps_the_runs_its_pacer_wants(backend: Backend) {
    let (dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let submitter = engine(&db, &probe, fast_config());
    let held = compile(
        &submitter,
        "version: 1\nstages:\n  a: { uses: step, with: { gate: hold } }\n",
    );
    let runs = submit_n(&submitter, &held, 4).await;
    let pacer = Arc::new(TestPacer::default());
    pacer.allowed.store(1, Ordering::SeqCst);
    let pool = connect(&dir).await;
    let worker_engine = engine(&pool, &probe, fast_config());
    let mut config = shelf_engine::WorkerConfig::new(8);
    // A long poll: the claims below follow the pacer's signal, not a poll.
    config.poll_interval = Duration::from_secs(3600);
    let shutdown = CancellationToken::new();
    let worker = {
        let (pacer, stop) = (pacer.clone(), shutdown.clone());
        tokio::spawn(async move {
            shelf_engine::Worker::new(worker_engine, config)
                .with_pacer(pacer)
                .run(stop)
                .await
        })
    };
    let started = |probe: &Probe| runs.iter().filter(|r| probe.starts_of(r, "a") > 0).count();
    crate::common::eventually("one run claimed", || async { started(&probe) == 1 }).await;
    crate::common::eventually("the pacer is asked with one in flight", || async {
        pacer.asked_with(1) >= 1
    })
    .await;
    assert_eq!(started(&probe), 1, "a claim only follows a yes");

    pacer.allowed.store(3, Ordering::SeqCst);
    pacer.changed.notify_one();
    crate::common::eventually("three runs in flight", || async { started(&probe) == 3 }).await;
    crate::common::eventually("the pacer is asked with three in flight", || async {
        pacer.asked_with(3) >= 1
    })
    .await;
    assert_eq!(started(&probe), 3);

    // As runs end, the worker claims the fourth by itself.
    probe.open("hold");
    let store = submitter.store().clone();
    crate::common::eventually("every run succeeds", || async {
        let mut all = true;
        for id in &runs {
            all &= store.get_run(id).await.unwrap().expect("run").status == RunStatus::Succeeded;
        }
        all
    })
    .await;
    shutdown.cancel();
    worker.await.unwrap();
}

/// The failed runs the operations page counts: only failed ones, only those finished at or
/// after `since`, newest first, at most `limit`. The finish times are set by hand so the window
/// is decided by construction, not by the wall clock.
async fn recent_failures_are_the_failed_runs_of_the_window_newest_first(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let bad = compile(
        &e,
        "version: 1\nstages:\n  bad: { uses: step, with: { fail_times: 1000, fatal: true } }\n",
    );
    let ok = compile(&e, "version: 1\nstages:\n  ok: { uses: step }\n");
    let mut ids = Vec::new();
    for (subject, pipeline) in [("s0", &bad), ("s1", &bad), ("s2", &bad), ("s3", &ok)] {
        let run = e.submit(subject, pipeline, json!({})).await.unwrap();
        e.run_in_process(&run.id, "test", CancellationToken::new())
            .await
            .unwrap();
        ids.push(run.id);
    }
    let finish = [
        "2026-11-27T08:00:00.000Z",
        "2026-11-27T09:30:00.000Z",
        "2026-11-27T09:45:00.000Z",
        "2026-11-27T09:50:00.000Z",
    ];
    for (id, at) in ids.iter().zip(finish) {
        db.execute_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "UPDATE runs SET finished_at = ? WHERE id = ?",
            [at.into(), id.clone().into()],
        ))
        .await
        .unwrap();
    }
    let since = chrono::DateTime::parse_from_rfc3339("2026-11-27T09:30:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let store = e.store();
    let listed = |runs: Vec<shelf_engine::RunRecord>| -> Vec<String> {
        runs.into_iter()
            .map(|r| {
                assert_eq!(r.status, RunStatus::Failed);
                assert_eq!(r.error_code(), Some("boom"), "{:?}", r.error);
                r.id
            })
            .collect()
    };
    // The run finished exactly at `since` is in (inclusive); the earlier one and the
    // succeeded one are not.
    assert_eq!(
        listed(store.recent_failures(since, 10).await.unwrap()),
        vec![ids[2].clone(), ids[1].clone()]
    );
    assert_eq!(
        listed(store.recent_failures(since, 1).await.unwrap()),
        vec![ids[2].clone()]
    );
    let later = since + chrono::Duration::hours(1);
    assert!(store.recent_failures(later, 10).await.unwrap().is_empty());
}

on_both_backends!(
    recent_failures_are_the_failed_runs_of_the_window_newest_first,
    a_paced_worker_keeps_the_runs_its_pacer_wants,
    a_closed_claim_gate_pauses_claims_and_lets_runs_in_flight_finish,
    queue_counts_tell_queued_due_running_and_expired_runs_apart,
    an_expired_lease_is_reclaimed_and_the_stale_worker_is_fenced_off,
    heartbeats_keep_a_long_stage_from_being_reclaimed,
    reclaims_are_capped,
    canceling_a_run_whose_worker_died_is_immediate,
);
on_both_backends!(
    multi_thread:
    two_workers_never_run_the_same_run_at_once,
);
