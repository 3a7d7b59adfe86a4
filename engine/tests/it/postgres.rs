//! The queue as several hosts use it on PostgreSQL: workers with pools of their own claiming
//! from one database while two "APIs" submit and cancel, and idle workers woken by
//! `LISTEN/NOTIFY` rather than by their (long) poll, also after their listening connection was
//! killed; a cancel racing the end of its run under READ COMMITTED; run event writes notifying
//! their run to the event streams of other hosts.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, TransactionTrait};
use serde_json::json;
use shelf_db::sql::SqlExt;
use shelf_engine::store::CancelOutcome;
use shelf_engine::{Engine, EngineError, RunRecord, RunStatus, Worker, WorkerConfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::common::{
    Backend, Probe, TestDb, compile, connect, database, engine, event_kinds, fast_config,
    postgres_available,
};

/// Far longer than any bound these tests wait: a run picked up in time was woken, not polled.
const LONG_POLL: Duration = Duration::from_secs(30);

/// A worker with its own pool on `test_db`, as a worker process on another host would have.
async fn spawn_worker(
    test_db: &TestDb,
    probe: &Arc<Probe>,
    id: &str,
    concurrency: usize,
    poll: Duration,
    shutdown: &CancellationToken,
) -> JoinHandle<()> {
    let db = connect(test_db).await;
    let e = engine(&db, probe, fast_config());
    let mut config = WorkerConfig::new(concurrency);
    config.id = id.to_string();
    config.poll_interval = poll;
    let stop = shutdown.clone();
    tokio::spawn(async move { Worker::new(e, config).run(stop).await })
}

/// The run once it is terminal; fails the test if that takes longer than `bound`.
async fn terminal_within(e: &Engine, run_id: &str, bound: Duration) -> RunRecord {
    let deadline = Instant::now() + bound;
    loop {
        let run = e
            .store()
            .get_run(run_id)
            .await
            .unwrap()
            .expect("run exists");
        if run.status.is_terminal() {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "run {run_id} still {} after {bound:?}",
            run.status.as_str()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Backend pids of the connections listening for queue notifications on this database.
async fn listeners(db: &DatabaseConnection) -> Vec<i64> {
    db.query_all_raw(Statement::from_string(
        DbBackend::Postgres,
        "SELECT pid::BIGINT AS pid FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN%' ORDER BY pid",
    ))
    .await
    .expect("pg_stat_activity")
    .iter()
    .map(|row| row.try_get::<i64>("", "pid").expect("pid"))
    .collect()
}

/// Waits until `count` connections listen (a worker that listens is idle or about to be).
async fn until_listening(db: &DatabaseConnection, count: usize, except: &[i64]) -> Vec<i64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pids: Vec<i64> = listeners(db)
            .await
            .into_iter()
            .filter(|pid| !except.contains(pid))
            .collect();
        if pids.len() >= count {
            return pids;
        }
        assert!(Instant::now() < deadline, "workers never listened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_workers_finish_every_run_exactly_once_while_apis_submit_and_cancel() {
    if !postgres_available() {
        return;
    }
    let (test_db, db) = database(Backend::Postgres).await;
    let probe = Arc::new(Probe::default());
    let yaml = "version: 1\nstages:\n  a: { uses: step, with: { sleep_ms: 5 } }\n  b: { uses: step, needs: [a] }\n  c: { uses: step, needs: [b] }\n";
    let shutdown = CancellationToken::new();
    let mut workers = Vec::new();
    for n in 0..4 {
        // A short poll as well: this test is about exclusive claims, not wake-ups.
        workers.push(
            spawn_worker(
                &test_db,
                &probe,
                &format!("worker-{n}"),
                3,
                Duration::from_millis(200),
                &shutdown,
            )
            .await,
        );
    }
    // Two API processes submit at once, and one of them cancels every seventh run it made
    // while the workers take them.
    let mut apis = Vec::new();
    for api in 0..2 {
        let api_db = connect(&test_db).await;
        let probe = probe.clone();
        apis.push(tokio::spawn(async move {
            let e = engine(&api_db, &probe, fast_config());
            let p = compile(&e, yaml);
            let mut made = Vec::new();
            let mut cancels = Vec::new();
            for i in 0..50 {
                let run = e
                    .submit(&format!("api{api}-s{i}"), &p, json!({}))
                    .await
                    .expect("submit");
                made.push(run.id.clone());
                if i % 7 == 3 {
                    let outcome = match e.cancel(&run.id).await {
                        Ok(outcome) => Some(outcome),
                        Err(EngineError::RunTerminal { .. }) => None,
                        Err(other) => panic!("cancel failed: {other}"),
                    };
                    cancels.push((run.id, outcome));
                }
            }
            (made, cancels)
        }));
    }
    let mut ids = Vec::new();
    let mut cancels = Vec::new();
    for api in apis {
        let (made, canceled) = api.await.unwrap();
        ids.extend(made);
        cancels.extend(canceled);
    }
    let observer = engine(&db, &probe, fast_config());
    for id in &ids {
        terminal_within(&observer, id, Duration::from_secs(120)).await;
    }
    shutdown.cancel();
    for w in workers {
        w.await.unwrap();
    }

    assert_eq!(
        probe.overlaps.load(Ordering::SeqCst),
        0,
        "one worker per run"
    );
    let canceled: HashSet<&str> = cancels.iter().map(|(id, _)| id.as_str()).collect();
    let mut owners = HashSet::new();
    for id in &ids {
        let run = observer.store().get_run(id).await.unwrap().unwrap();
        let events = observer.store().events(id, 0, 1000).await.unwrap();
        let sequences: Vec<i64> = events.iter().map(|e| e.sequence).collect();
        assert_eq!(
            sequences,
            (1..=events.len() as i64).collect::<Vec<_>>(),
            "gap-free events of {id}"
        );
        let kinds = event_kinds(&observer, id).await;
        let terminal: Vec<&String> = kinds
            .iter()
            .filter(|k| {
                ["run:run_succeeded", "run:run_failed", "run:run_canceled"].contains(&k.as_str())
            })
            .collect();
        assert_eq!(terminal.len(), 1, "one end for {id}: {kinds:?}");
        assert_eq!(kinds.last(), terminal.first().copied(), "{kinds:?}");
        assert!(run.claims <= 1, "{id} claimed {} times", run.claims);
        for stage in ["a", "b", "c"] {
            assert!(probe.starts_of(id, stage) <= 1, "{id}/{stage} ran twice");
        }
        match run.status {
            RunStatus::Succeeded => {
                assert_eq!(run.claims, 1);
                for stage in ["a", "b", "c"] {
                    assert_eq!(probe.starts_of(id, stage), 1, "{id}/{stage}");
                }
            }
            RunStatus::Canceled => assert!(canceled.contains(id.as_str()), "{id} canceled"),
            other => panic!("run {id} ended {}: {:?}", other.as_str(), run.error),
        }
        if let Some(started) = observer
            .store()
            .events(id, 0, 1000)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.kind == "run_started")
        {
            owners.insert(started.message);
        }
    }
    for (id, outcome) in &cancels {
        let run = observer.store().get_run(id).await.unwrap().unwrap();
        if *outcome == Some(CancelOutcome::Canceled) {
            assert_eq!(run.status, RunStatus::Canceled, "{id}");
            assert_eq!(
                run.claims, 0,
                "a run canceled in the queue is never claimed"
            );
        }
    }
    assert!(owners.len() > 1, "several workers took work: {owners:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_is_woken_by_a_new_run_long_before_its_poll() {
    if !postgres_available() {
        return;
    }
    let (test_db, db) = database(Backend::Postgres).await;
    let probe = Arc::new(Probe::default());
    let shutdown = CancellationToken::new();
    let worker = spawn_worker(&test_db, &probe, "idle", 2, LONG_POLL, &shutdown).await;
    until_listening(&db, 1, &[]).await;
    let api = engine(&db, &probe, fast_config());
    let p = compile(&api, "version: 1\nstages:\n  a: { uses: step }\n");
    for subject in ["first", "second"] {
        let run = api.submit(subject, &p, json!({})).await.unwrap();
        let done = terminal_within(&api, &run.id, Duration::from_secs(10)).await;
        assert_eq!(done.status, RunStatus::Succeeded);
    }
    // A retry a moment later wakes the worker too: the re-queue notifies, and the worker then
    // waits for the retry's due time rather than its poll.
    let flaky = compile(
        &api,
        "version: 1\nstages:\n  a: { uses: step, retry: { attempts: 2, backoff: 200ms }, with: { fail_times: 1 } }\n",
    );
    let run = api.submit("flaky", &flaky, json!({})).await.unwrap();
    let done = terminal_within(&api, &run.id, Duration::from_secs(10)).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(probe.starts_of(&run.id, "a"), 2);
    shutdown.cancel();
    worker.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_listens_again_after_its_connection_is_killed() {
    if !postgres_available() {
        return;
    }
    let (test_db, db) = database(Backend::Postgres).await;
    let probe = Arc::new(Probe::default());
    let shutdown = CancellationToken::new();
    let worker = spawn_worker(&test_db, &probe, "killed", 1, LONG_POLL, &shutdown).await;
    let before = until_listening(&db, 1, &[]).await;
    db.execute_raw(Statement::from_string(
        DbBackend::Postgres,
        format!("SELECT pg_terminate_backend({})", before[0]),
    ))
    .await
    .expect("terminate the listener");
    until_listening(&db, 1, &before).await;
    let api = engine(&db, &probe, fast_config());
    let p = compile(&api, "version: 1\nstages:\n  a: { uses: step }\n");
    let run = api.submit("after", &p, json!({})).await.unwrap();
    let done = terminal_within(&api, &run.id, Duration::from_secs(10)).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    shutdown.cancel();
    worker.await.unwrap();
}

/// Waits until some session of this database waits on a row lock.
async fn until_blocked_on_a_lock(db: &DatabaseConnection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row = db
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                "SELECT COUNT(*) AS n FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            ))
            .await
            .expect("pg_stat_activity")
            .expect("one row");
        if row.try_get::<i64>("", "n").expect("n") > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "nothing ever waited on the lock");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_the_end_of_its_run_sees_the_end() {
    if !postgres_available() {
        return;
    }
    let (test_db, db) = database(Backend::Postgres).await;
    let probe = Arc::new(Probe::default());
    let worker = engine(&db, &probe, fast_config());
    let p = compile(&worker, "version: 1\nstages:\n  a: { uses: step }\n");
    let run = worker.submit("s", &p, json!({})).await.unwrap();
    worker.claim("w", None).await.unwrap().expect("claim");
    // The worker's last transaction, caught between its write and its commit: under READ
    // COMMITTED a cancel that read the run without locking it would still see it running.
    let worker_db = connect(&test_db).await;
    let ending = worker_db.begin().await.unwrap();
    ending
        .execute_sql(statement_on_run(
            "UPDATE runs SET status = 'succeeded', finished_at = 'now', lease_owner = NULL WHERE id = ?",
            &run.id,
        ))
        .await
        .unwrap();
    let api_db = connect(&test_db).await;
    let api = engine(&api_db, &probe, fast_config());
    let cancel = {
        let id = run.id.clone();
        tokio::spawn(async move { api.cancel(&id).await })
    };
    until_blocked_on_a_lock(&db).await;
    ending.commit().await.unwrap();
    let outcome = cancel.await.unwrap();
    assert!(
        matches!(outcome, Err(EngineError::RunTerminal { .. })),
        "{outcome:?}"
    );
    let after = worker.store().get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(
        after.status,
        RunStatus::Succeeded,
        "a terminal run never changes"
    );
    let kinds = event_kinds(&worker, &run.id).await;
    assert_eq!(kinds, ["run:run_queued", "run:run_started"], "{kinds:?}");
}

/// A statement written as every engine statement is (SQLite placeholders), bound to one run id.
fn statement_on_run(sql: &str, id: &str) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, [id.into()])
}

/// Every transaction that appends run events tells other processes which run it was, and the
/// relay of an API process turns that into its followers' wake-up: an event stream on one host
/// follows a run a worker on another host writes without polling for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_event_writes_notify_their_run_id_and_the_relay_wakes_its_followers() {
    use sea_orm::sqlx::postgres::PgListener;
    use shelf_engine::event_signal::{self, Follower};
    if !postgres_available() {
        return;
    }
    let (test_db, db) = database(Backend::Postgres).await;
    let probe = Arc::new(Probe::default());
    // Another host's pool: its notifications reach this one only through PostgreSQL.
    let writer_db = connect(&test_db).await;
    let mut listener = PgListener::connect_with(db.get_postgres_connection_pool())
        .await
        .expect("listener");
    listener
        .listen(event_signal::CHANNEL)
        .await
        .expect("listen");
    let api = engine(&writer_db, &probe, fast_config());
    let p = compile(&api, "version: 1\nstages:\n  a: { uses: step }\n");
    let run = api.submit("notified", &p, json!({})).await.unwrap();
    async fn next(listener: &mut PgListener) -> String {
        tokio::time::timeout(Duration::from_secs(10), listener.recv())
            .await
            .expect("a notification within 10 s")
            .expect("notification")
            .payload()
            .to_string()
    }
    assert_eq!(
        next(&mut listener).await,
        run.id,
        "the new run's first event"
    );
    api.cancel(&run.id).await.unwrap();
    assert_eq!(next(&mut listener).await, run.id, "the cancel's event");

    // The relay: a follower subscribed before it connects is woken once it listens (what was
    // written meanwhile is unknown), then by a notification of its run sent from elsewhere.
    let shutdown = CancellationToken::new();
    let mut follower = Follower::new("run_relayed");
    let relay = tokio::spawn(event_signal::relay(db.clone(), LONG_POLL, shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(10), follower.changed())
        .await
        .expect("woken when the relay listens");
    writer_db
        .execute_unprepared("SELECT pg_notify('shelf_run_events', 'run_relayed')")
        .await
        .expect("notify");
    tokio::time::timeout(Duration::from_secs(10), follower.changed())
        .await
        .expect("woken by the notification");
    shutdown.cancel();
    relay.await.unwrap();
}
