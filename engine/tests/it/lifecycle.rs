//! The run lifecycle's invariants on real databases: a claim never outlives its executor, runs
//! of one subject never overlap and end in creation order, a failed run is retried once, a
//! cancel never waits out a backoff, and a database held by another process wastes no work.

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use shelf_engine::executor::ClaimOutcome;
use shelf_engine::{EngineConfig, RunStatus, StageStatus};
use tokio_util::sync::CancellationToken;

use crate::common::{
    Backend, Probe, all_terminal, compile, connect, database, engine, event_kinds, eventually,
    fast_config, on_both_backends, spawn_execute, start_workers, started,
};

async fn a_dropped_executor_releases_its_claim(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step }\n  b: { uses: step, needs: [a], with: { sleep_ms: 600000 } }\n",
    );
    let run = e.submit("doc", &p, json!({})).await.unwrap();
    let claim = e.claim("caller", None).await.unwrap().unwrap();
    let task = spawn_execute(&e, claim);
    started(&probe, &run.id, "b", 1).await;
    // The caller goes away (a client that timed out): its future is dropped.
    task.abort();
    let store = e.store().clone();
    let id = run.id.clone();
    eventually("the run is back on the queue", || {
        let store = store.clone();
        let id = id.clone();
        async move { store.get_run(&id).await.unwrap().unwrap().status == RunStatus::Queued }
    })
    .await;
    let released = e.store().get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(released.reclaims, 0);
    assert_eq!(released.lease_owner, None);
    let stages = e.store().stages(&run.id).await.unwrap();
    assert_eq!(
        stages[0].status,
        StageStatus::Succeeded,
        "a's checkpoint kept"
    );
    assert_eq!(
        (stages[1].status, stages[1].attempts),
        (StageStatus::Pending, 0),
        "b's interrupted attempt does not count"
    );
    let kinds = event_kinds(&e, &run.id).await;
    assert!(kinds.contains(&"run:run_released".to_string()), "{kinds:?}");
    // The next claim is a resume, not a reclaim, and reuses a's checkpoint.
    let next = e
        .claim("next", None)
        .await
        .unwrap()
        .expect("claimable at once");
    assert!(!next.reclaimed);
    assert_eq!(probe.starts_of(&run.id, "a"), 1);
}

async fn runs_of_one_subject_never_overlap_and_end_in_creation_order(backend: Backend) {
    let (dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let submitter = engine(&db, &probe, fast_config());
    let p = compile(
        &submitter,
        "version: 1\nstages:\n  a: { uses: step, with: { sleep_ms: 30 } }\n  b: { uses: step, needs: [a] }\n",
    );
    let mut same = Vec::new();
    for i in 0..4 {
        same.push(submitter.submit("doc", &p, json!({})).await.unwrap().id);
        submitter
            .submit(&format!("other{i}"), &p, json!({}))
            .await
            .unwrap();
    }
    let (shutdown, workers) = start_workers(&dir, &probe, 2, 4).await;
    all_terminal(&submitter).await;
    shutdown.cancel();
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(probe.subject_overlaps.load(Ordering::SeqCst), 0);
    let finished: Vec<String> = probe
        .finished
        .lock()
        .unwrap()
        .iter()
        .filter(|id| same.contains(id))
        .cloned()
        .collect();
    // Each run's two stages, run after run, in creation order.
    let expected: Vec<String> = same
        .iter()
        .flat_map(|id| [id.clone(), id.clone()])
        .collect();
    assert_eq!(finished, expected);
    for id in &same {
        let run = submitter.store().get_run(id).await.unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Succeeded);
    }
}

async fn the_database_refuses_a_second_running_run_of_a_subject(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(&e, "version: 1\nstages:\n  a: { uses: step }\n");
    let first = e.submit("doc", &p, json!({})).await.unwrap();
    let second = e.submit("doc", &p, json!({})).await.unwrap();
    assert_eq!(e.claim("w", None).await.unwrap().unwrap().run.id, first.id);
    // The second run waits for the first, even when asked for by id.
    assert!(e.claim("w", None).await.unwrap().is_none());
    assert!(e.claim("w", Some(&second.id)).await.unwrap().is_none());
    // Idle workers do not see the waiting run as due (they would try a claim at every poll).
    let next_due = e
        .store()
        .next_due_at()
        .await
        .unwrap()
        .expect("the first run's lease end");
    assert!(next_due > second.due_at, "the waiting run counted as due");
    // Whatever a claim did, the database itself refuses two running runs of one subject.
    let forced = shelf_db::sql::SqlExt::execute_sql(
        &db,
        sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Sqlite,
            "UPDATE runs SET status = 'running' WHERE id = ?",
            [second.id.clone().into()],
        ),
    )
    .await;
    assert!(
        forced.is_err(),
        "two running runs of one subject were allowed"
    );
}

async fn retrying_a_failed_run_twice_creates_one_retry(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { fail_times: 1, fatal: true } }\n",
    );
    let run = e.submit("doc", &p, json!({})).await.unwrap();
    let failed = e
        .run_in_process(&run.id, "here", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    let (one, two) = tokio::join!(e.retry(&run.id), e.retry(&run.id));
    let (one, two) = (one.unwrap(), two.unwrap());
    assert_eq!(one.id, two.id, "two clicks, one retry");
    assert_eq!(e.retry(&run.id).await.unwrap().id, one.id);
    let (runs, total) = e.store().list_runs(Some("doc"), 10, 0).await.unwrap();
    assert_eq!(total, 2, "{runs:?}");
}

async fn a_cancel_that_races_a_retryable_failure_does_not_wait_out_the_backoff(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    // The heartbeat never reads the cancel flag during this claim: the failure's requeue and
    // the cancel meet in the database.
    let config = EngineConfig {
        heartbeat: Duration::from_secs(3600),
        lease: Duration::from_secs(7200),
        ..fast_config()
    };
    let e = engine(&db, &probe, config);
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, retry: { attempts: 3, backoff: 1h }, with: { gate: g, fail_times: 1 } }\n",
    );
    let run = e.submit("doc", &p, json!({})).await.unwrap();
    let claim = e.claim("w", None).await.unwrap().unwrap();
    let task = spawn_execute(&e, claim);
    started(&probe, &run.id, "a", 1).await;
    // The stage waits at its gate: the cancel lands while it runs, then it fails.
    assert_eq!(
        e.cancel(&run.id).await.unwrap(),
        shelf_engine::store::CancelOutcome::Requested
    );
    probe.open("g");
    assert!(matches!(
        task.await.unwrap().unwrap(),
        ClaimOutcome::RetryScheduled { .. }
    ));
    // Due at once despite the hour of backoff: the next claim ends it.
    let next = e.claim("w", None).await.unwrap().expect("due now");
    assert_eq!(
        e.execute(next, CancellationToken::new()).await.unwrap(),
        ClaimOutcome::Finished(RunStatus::Canceled)
    );
    assert_eq!(probe.starts_of(&run.id, "a"), 1);
}

async fn a_late_cancel_never_undoes_a_finished_run(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    // The cancel lands while the last stage runs, and the executor hears of it only after
    // that stage's success (its heartbeat is slower than the stage).
    let config = EngineConfig {
        heartbeat: Duration::from_secs(3600),
        lease: Duration::from_secs(7200),
        ..fast_config()
    };
    let e = engine(&db, &probe, config);
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { gate: g } }\n",
    );
    let run = e.submit("doc", &p, json!({})).await.unwrap();
    let claim = e.claim("w", None).await.unwrap().unwrap();
    let task = spawn_execute(&e, claim);
    started(&probe, &run.id, "a", 1).await;
    assert_eq!(
        e.cancel(&run.id).await.unwrap(),
        shelf_engine::store::CancelOutcome::Requested
    );
    probe.open("g");
    assert_eq!(
        task.await.unwrap().unwrap(),
        ClaimOutcome::Finished(RunStatus::Succeeded),
        "every stage succeeded: the work stands"
    );
    assert!(matches!(
        e.cancel(&run.id).await,
        Err(shelf_engine::EngineError::RunTerminal { .. })
    ));
}

/// A backup tool holds the SQLite file's write lock for 8 s while a stage runs: its success
/// waits for the lock instead of being thrown away, and nothing runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_held_by_another_process_wastes_no_work() {
    let (dir, db) = database(Backend::Sqlite).await;
    let probe = Arc::new(Probe::default());
    let config = EngineConfig {
        lease: Duration::from_secs(30),
        ..fast_config()
    };
    let e = engine(&db, &probe, config);
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { gate: g } }\n  b: { uses: step, needs: [a] }\n",
    );
    let run = e.submit("doc", &p, json!({})).await.unwrap();
    let claim = e.claim("w", None).await.unwrap().unwrap();
    let task = spawn_execute(&e, claim);
    started(&probe, &run.id, "a", 1).await;
    let file = dir.sqlite_path().expect("a SQLite file");
    let mut holder = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys, time\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('BEGIN IMMEDIATE')\n\
             print('locked', flush=True)\n\
             time.sleep(8)\n\
             c.execute('ROLLBACK')\n",
        ])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");
    // Stage a ends while the other process holds the lock: its success must wait for it.
    probe.open("g");
    assert_eq!(
        task.await.unwrap().unwrap(),
        ClaimOutcome::Finished(RunStatus::Succeeded)
    );
    holder.wait().unwrap();
    let kinds = event_kinds(&e, &run.id).await;
    assert!(!kinds.iter().any(|k| k.contains("reclaimed")), "{kinds:?}");
    assert_eq!(probe.starts_of(&run.id, "a"), 1, "a ran once");
    let stages = e.store().stages(&run.id).await.unwrap();
    assert!(stages.iter().all(|s| s.attempts == 1), "{stages:?}");
}

/// Hooks whose subjects are rows of a test table: a run's creation touches its subject's row
/// first, so a subject that is gone gets no run.
struct TableSubjects;

impl shelf_engine::RunHooks for TableSubjects {
    fn subject_guard(
        &self,
        _backend: sea_orm::DbBackend,
        subject: &str,
    ) -> Option<shelf_engine::SubjectGuard> {
        Some(shelf_engine::SubjectGuard {
            lock: Vec::new(),
            touch: sea_orm::Statement::from_sql_and_values(
                sea_orm::DbBackend::Sqlite,
                "UPDATE guard_subjects SET touched = touched + 1 WHERE id = ?",
                [subject.into()],
            ),
        })
    }
}

async fn a_subject_its_guard_finds_gone_gets_no_run_and_no_retry(backend: Backend) {
    use shelf_db::sql::SqlExt;
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = shelf_engine::Engine::new(
        shelf_engine::RunStore::new(db.clone(), fast_config().lease),
        crate::common::registry(&probe),
        Arc::new(TableSubjects),
        fast_config(),
    );
    let sql = |text: &str| sea_orm::Statement::from_string(sea_orm::DbBackend::Sqlite, text);
    db.execute_sql(sql(
        "CREATE TABLE guard_subjects (id TEXT PRIMARY KEY, touched INTEGER NOT NULL)",
    ))
    .await
    .unwrap();
    db.execute_sql(sql("INSERT INTO guard_subjects VALUES ('doc', 0)"))
        .await
        .unwrap();
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { fail_times: 1, fatal: true } }\n",
    );
    let run = e.submit("doc", &p, json!({})).await.unwrap();
    let failed = e
        .run_in_process(&run.id, "here", CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(failed.status, RunStatus::Failed);

    // The subject goes (its runs stay: deleting them is the application's business).
    db.execute_sql(sql("DELETE FROM guard_subjects"))
        .await
        .unwrap();
    let submitted = e.submit("doc", &p, json!({})).await;
    assert!(
        matches!(&submitted, Err(shelf_engine::EngineError::SubjectNotFound(s)) if s == "doc"),
        "{submitted:?}"
    );
    let retried = e.retry(&run.id).await;
    assert!(
        matches!(&retried, Err(shelf_engine::EngineError::SubjectNotFound(s)) if s == "doc"),
        "{retried:?}"
    );
    let (runs, total) = e.store().list_runs(Some("doc"), 10, 0).await.unwrap();
    assert_eq!(total, 1, "only the first run: {runs:?}");
    let events = db
        .query_one_sql(sql(
            "SELECT COUNT(*) AS n FROM run_events WHERE run_id NOT IN (SELECT id FROM runs)",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64>("", "n")
        .unwrap();
    assert_eq!(events, 0, "nothing of a refused run was written");
}

on_both_backends!(
    a_subject_its_guard_finds_gone_gets_no_run_and_no_retry,
    a_dropped_executor_releases_its_claim,
    the_database_refuses_a_second_running_run_of_a_subject,
    retrying_a_failed_run_twice_creates_one_retry,
    a_cancel_that_races_a_retryable_failure_does_not_wait_out_the_backoff,
    a_late_cancel_never_undoes_a_finished_run,
);
on_both_backends!(
    multi_thread:
    runs_of_one_subject_never_overlap_and_end_in_creation_order,
);

/// A host whose clock runs a minute ahead, on PostgreSQL: it measures its offset from the
/// database's clock, so it neither reclaims a live run nor writes due times the others see as
/// late.
#[tokio::test]
async fn a_host_with_a_clock_a_minute_ahead_reclaims_no_live_run() {
    if !crate::common::postgres_available() {
        return;
    }
    let (dir, db) = database(Backend::Postgres).await;
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
    let run = owner.submit("doc", &p, json!({})).await.unwrap();
    let claim = owner.claim("owner", None).await.unwrap().unwrap();
    let exec = spawn_execute(&owner, claim);
    let db2 = connect(&dir).await;
    let skewed = shelf_engine::Engine::new(
        shelf_engine::RunStore::with_clock(
            db2,
            config.lease,
            shelf_engine::clock::QueueClock::with_local(|| shelf_engine::time::now_ms() + 60_000),
        ),
        crate::common::registry(&probe),
        Arc::new(shelf_engine::executor::NoHooks),
        config,
    );
    // Without the database's clock, the owner's lease (10 s from now) would look a minute old.
    assert!(skewed.claim("skewed", None).await.unwrap().is_none());
    assert!((skewed.store().now() - shelf_engine::time::now_ms()).abs() < 5_000);
    // A run the skewed host submits is due now for everyone else.
    let other = skewed.submit("other", &p, json!({})).await.unwrap();
    assert!(other.due_at <= shelf_engine::time::now_ms() + 5_000);
    let taken = owner.claim("owner", None).await.unwrap().expect("due now");
    assert_eq!(taken.run.id, other.id);
    owner.cancel(&run.id).await.unwrap();
    owner.cancel(&other.id).await.unwrap();
    assert_eq!(
        exec.await.unwrap().unwrap(),
        ClaimOutcome::Finished(RunStatus::Canceled)
    );
}

/// Every connection to the PostgreSQL database is cut (what the pools see of a server restart
/// or a failover) while a stage runs: its success is written once the pool reconnects, with no
/// reclaim and no second attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connections_cut_mid_run_waste_no_work() {
    if !crate::common::postgres_available() {
        return;
    }
    let (dir, db) = database(Backend::Postgres).await;
    let probe = Arc::new(Probe::default());
    let config = EngineConfig {
        lease: Duration::from_secs(30),
        ..fast_config()
    };
    let e = engine(&db, &probe, config);
    let p = compile(
        &e,
        "version: 1\nstages:\n  a: { uses: step, with: { gate: g } }\n  b: { uses: step, needs: [a] }\n",
    );
    let run = e.submit("doc", &p, json!({})).await.unwrap();
    let claim = e.claim("w", None).await.unwrap().unwrap();
    let task = spawn_execute(&e, claim);
    started(&probe, &run.id, "a", 1).await;
    let name = dir.postgres_name().expect("a PostgreSQL database");
    crate::pg_cluster::PgCluster::shared()
        .expect("cluster")
        .psql(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        ));
    probe.open("g");
    assert_eq!(
        task.await.unwrap().unwrap(),
        ClaimOutcome::Finished(RunStatus::Succeeded)
    );
    let kinds = event_kinds(&e, &run.id).await;
    assert!(!kinds.iter().any(|k| k.contains("reclaimed")), "{kinds:?}");
    assert_eq!(probe.starts_of(&run.id, "a"), 1);
    let stages = e.store().stages(&run.id).await.unwrap();
    assert!(stages.iter().all(|s| s.attempts == 1), "{stages:?}");
}
