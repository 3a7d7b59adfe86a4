//! Test stages and helpers shared by the engine's component tests: a real database with real
//! migrations (a SQLite file, or a fresh database on the test process's PostgreSQL cluster), and
//! stages whose behaviour the tests steer.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sea_orm::DatabaseConnection;
use serde::Deserialize;
use serde_json::{Value, json};
use shelf_db::{DatabaseTarget, connect_target};
use shelf_engine::executor::NoHooks;
use shelf_engine::{
    CompiledPipeline, Engine, EngineConfig, PipelineSource, Registry, RunStore, Stage,
    StageContext, StageError,
};
use shelf_migrations::{Migrator, MigratorTrait};
use tempfile::TempDir;

use crate::pg_cluster::PgCluster;

/// The database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A test's database: a SQLite file in a temporary directory, or a PostgreSQL database of its
/// own (dropped with the cluster when the test process ends).
pub struct TestDb {
    target: DatabaseTarget,
    _dir: Option<TempDir>,
}

impl TestDb {
    /// The SQLite file, on that backend.
    pub fn sqlite_path(&self) -> Option<std::path::PathBuf> {
        match &self.target {
            DatabaseTarget::Sqlite(path) => Some(path.clone()),
            DatabaseTarget::Postgres(_) => None,
        }
    }

    /// The database's name, on PostgreSQL.
    pub fn postgres_name(&self) -> Option<String> {
        match &self.target {
            DatabaseTarget::Postgres(url) => url.rsplit('/').next().map(str::to_string),
            DatabaseTarget::Sqlite(_) => None,
        }
    }

    pub fn backend(&self) -> Backend {
        match self.target {
            DatabaseTarget::Sqlite(_) => Backend::Sqlite,
            DatabaseTarget::Postgres(_) => Backend::Postgres,
        }
    }
}

/// A fresh, migrated database on `backend`. PostgreSQL tests call this only after
/// [`postgres_available`] said yes (the test macros do).
pub async fn database(backend: Backend) -> (TestDb, DatabaseConnection) {
    let test_db = match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().expect("tempdir");
            TestDb {
                target: DatabaseTarget::Sqlite(dir.path().join("engine.sqlite")),
                _dir: Some(dir),
            }
        }
        Backend::Postgres => {
            let cluster = PgCluster::shared().expect("PostgreSQL cluster");
            TestDb {
                target: DatabaseTarget::Postgres(cluster.create_database("engine")),
                _dir: None,
            }
        }
    };
    let db = connect(&test_db).await;
    Migrator::up(&db, None).await.expect("migrate");
    (test_db, db)
}

/// A second pool on the same database, as a second process would have.
pub async fn connect(test_db: &TestDb) -> DatabaseConnection {
    connect_target(&test_db.target, 4).await.expect("connect")
}

/// Whether this process has a PostgreSQL cluster; says why a test is skipped when not. With
/// `SHELF_REQUIRE_POSTGRES=1` (CI) a missing cluster fails instead.
pub fn postgres_available() -> bool {
    let available = PgCluster::shared().is_some();
    if !available {
        eprintln!("skipped on PostgreSQL: no PostgreSQL server binaries here");
    }
    available
}

/// Turns each `async fn name(backend: Backend)` into the tests `name::sqlite` and
/// `name::postgres`, so every engine invariant is checked on both databases. Prefix the list
/// with `multi_thread:` for tests that need a multi-threaded runtime.
macro_rules! on_both_backends {
    (multi_thread: $($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn sqlite() {
                    super::$name(crate::common::Backend::Sqlite).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    if crate::common::postgres_available() {
                        super::$name(crate::common::Backend::Postgres).await
                    }
                }
            }
        )+
    };
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn sqlite() {
                    super::$name(crate::common::Backend::Sqlite).await
                }

                #[tokio::test]
                async fn postgres() {
                    if crate::common::postgres_available() {
                        super::$name(crate::common::Backend::Postgres).await
                    }
                }
            }
        )+
    };
}
pub(crate) use on_both_backends;

/// What the test stages observed.
#[derive(Default)]
pub struct Probe {
    /// (run, stage) -> number of attempts started.
    pub starts: Mutex<HashMap<(String, String), usize>>,
    pub running: AtomicUsize,
    pub max_running: AtomicUsize,
    /// Run ids currently inside a stage, to catch two workers on one run.
    pub active_runs: Mutex<HashMap<String, usize>>,
    pub overlaps: AtomicUsize,
    /// Subjects currently inside a stage, to catch two runs of one subject at once.
    pub active_subjects: Mutex<HashMap<String, usize>>,
    pub subject_overlaps: AtomicUsize,
    /// Runs in the order their last stage ended.
    pub finished: Mutex<Vec<String>>,
    /// Gates the tests open (see [`StepOptions::gate`]).
    pub gates: Mutex<std::collections::HashSet<String>>,
    pub gate_opened: tokio::sync::Notify,
    pub failures_left: Mutex<HashMap<String, usize>>,
    pub child_pid: Mutex<Option<u32>>,
}

impl Probe {
    /// Lets every stage waiting at `gate` go on.
    pub fn open(&self, gate: &str) {
        self.gates.lock().unwrap().insert(gate.to_string());
        self.gate_opened.notify_waiters();
    }

    async fn wait_at(&self, gate: &str) {
        loop {
            let opened = self.gate_opened.notified();
            if self.gates.lock().unwrap().contains(gate) {
                return;
            }
            opened.await;
        }
    }

    pub fn starts_of(&self, run: &str, stage: &str) -> usize {
        self.starts
            .lock()
            .unwrap()
            .get(&(run.to_string(), stage.to_string()))
            .copied()
            .unwrap_or(0)
    }

    pub fn total_starts(&self, stage: &str) -> usize {
        self.starts
            .lock()
            .unwrap()
            .iter()
            .filter(|((_, s), _)| s == stage)
            .map(|(_, n)| n)
            .sum()
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct StepOptions {
    /// Sleep this long (honouring cancellation).
    pub sleep_ms: u64,
    /// Output fields to set.
    pub set: HashMap<String, Value>,
    /// Fail this many attempts (per subject, so a retried run shares the count) before
    /// succeeding.
    pub fail_times: usize,
    /// Failures are fatal instead of retryable.
    pub fatal: bool,
    /// Sleep without looking at the cancellation token.
    pub ignore_cancel: bool,
    /// Wait until the test opens this gate (honouring cancellation unless `ignore_cancel`):
    /// puts an event at a chosen point of a stage by construction, not by timing.
    pub gate: Option<String>,
    /// Hand the engine a write to commit with the attempt's success: a part keyed
    /// `handed-<attempt>`, before any failure of this attempt.
    pub hand_write: bool,
    /// Save a partial checkpoint keyed `saved-<attempt>` (`save_part`, committed at once, as a
    /// chunk's), before any failure of this attempt.
    pub save_part: bool,
}

/// A configurable test stage.
pub struct Step {
    pub probe: Arc<Probe>,
}

#[async_trait]
impl Stage for Step {
    const KIND: &'static str = "step";
    type Options = StepOptions;

    async fn run(&self, options: &StepOptions, ctx: &StageContext) -> Result<Value, StageError> {
        *self
            .probe
            .starts
            .lock()
            .unwrap()
            .entry((ctx.run_id.clone(), ctx.stage.clone()))
            .or_default() += 1;
        {
            let mut active = self.probe.active_runs.lock().unwrap();
            let n = active.entry(ctx.run_id.clone()).or_default();
            *n += 1;
            // Test pipelines that use this are sequential, so two stages of one run at once
            // means two workers hold the run.
            if *n > 1 {
                self.probe.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            let mut subjects = self.probe.active_subjects.lock().unwrap();
            let n = subjects.entry(ctx.subject.clone()).or_default();
            *n += 1;
            if *n > 1 {
                self.probe.subject_overlaps.fetch_add(1, Ordering::SeqCst);
            }
        }
        let now = self.probe.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.probe.max_running.fetch_max(now, Ordering::SeqCst);
        let result = self.work(options, ctx).await;
        self.probe.running.fetch_sub(1, Ordering::SeqCst);
        self.probe
            .active_runs
            .lock()
            .unwrap()
            .entry(ctx.run_id.clone())
            .and_modify(|n| *n -= 1);
        self.probe
            .active_subjects
            .lock()
            .unwrap()
            .entry(ctx.subject.clone())
            .and_modify(|n| *n -= 1);
        self.probe.finished.lock().unwrap().push(ctx.run_id.clone());
        result
    }
}

impl Step {
    async fn work(&self, options: &StepOptions, ctx: &StageContext) -> Result<Value, StageError> {
        if let Some(gate) = &options.gate {
            tokio::select! {
                _ = self.probe.wait_at(gate) => {}
                _ = ctx.cancel.cancelled(), if !options.ignore_cancel => return Err(StageError::canceled()),
            }
        }
        if options.sleep_ms > 0 {
            let sleep = tokio::time::sleep(Duration::from_millis(options.sleep_ms));
            if options.ignore_cancel {
                sleep.await;
            } else {
                tokio::select! {
                    _ = sleep => {}
                    _ = ctx.cancel.cancelled() => return Err(StageError::canceled()),
                }
            }
        }
        if options.hand_write {
            ctx.write_on_success(sea_orm::Statement::from_sql_and_values(
                sea_orm::DbBackend::Sqlite,
                "INSERT INTO run_stage_parts (run_id, stage, key, value) VALUES (?, ?, ?, '{}')",
                [
                    ctx.run_id.clone().into(),
                    ctx.stage.clone().into(),
                    format!("handed-{}", ctx.attempt).into(),
                ],
            ));
        }
        if options.save_part {
            ctx.save_part(&format!("saved-{}", ctx.attempt), &json!({}))
                .await?;
        }
        if options.fail_times > 0 {
            let key = format!("{}/{}", ctx.subject, ctx.stage);
            let mut left = self.probe.failures_left.lock().unwrap();
            let n = left.entry(key).or_insert(options.fail_times);
            if *n > 0 {
                *n -= 1;
                return Err(if options.fatal {
                    StageError::fatal("boom", "fatal test failure")
                } else {
                    StageError::retryable("flaky", "transient test failure")
                });
            }
        }
        let mut out = serde_json::Map::new();
        out.insert("stage".into(), json!(ctx.stage));
        if let Some(seen) = ctx.inputs.find("value") {
            out.insert("seen".into(), seen.clone());
        }
        for (k, v) in &options.set {
            out.insert(k.clone(), v.clone());
        }
        Ok(Value::Object(out))
    }
}

/// A stage that runs a long subprocess, the way OCR or converters will.
pub struct Spawn {
    pub probe: Arc<Probe>,
}

#[async_trait]
impl Stage for Spawn {
    const KIND: &'static str = "spawn";
    type Options = StepOptions;

    async fn run(&self, _options: &StepOptions, _ctx: &StageContext) -> Result<Value, StageError> {
        let mut child = tokio::process::Command::new("sleep")
            .arg("30")
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| StageError::fatal("spawn", e.to_string()))?;
        *self.probe.child_pid.lock().unwrap() = child.id();
        let status = child
            .wait()
            .await
            .map_err(|e| StageError::fatal("spawn", e.to_string()))?;
        Ok(json!({ "status": status.code() }))
    }
}

pub fn registry(probe: &Arc<Probe>) -> Registry {
    let mut registry = Registry::new();
    registry
        .register(Step {
            probe: probe.clone(),
        })
        .register(Spawn {
            probe: probe.clone(),
        });
    registry
}

pub fn fast_config() -> EngineConfig {
    EngineConfig {
        lease: Duration::from_secs(5),
        heartbeat: Duration::from_millis(100),
        max_reclaims: 3,
    }
}

pub fn engine(db: &DatabaseConnection, probe: &Arc<Probe>, config: EngineConfig) -> Engine {
    engine_on(
        db,
        probe,
        config,
        &shelf_engine::clock::QueueClock::system(),
    )
}

/// An engine whose queue reads `clock`: engines given clones of one clock share its time, which
/// the test moves on with `advance` instead of sleeping.
pub fn engine_on(
    db: &DatabaseConnection,
    probe: &Arc<Probe>,
    config: EngineConfig,
    clock: &shelf_engine::clock::QueueClock,
) -> Engine {
    let store = RunStore::with_clock(db.clone(), config.lease, clock.clone());
    Engine::new(store, registry(probe), Arc::new(NoHooks), config)
}

/// Submits `n` runs of `pipeline`, for subjects `s0`, `s1`, ...; their ids.
pub async fn submit_n(engine: &Engine, pipeline: &CompiledPipeline, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let run = engine
            .submit(&format!("s{i}"), pipeline, json!({}))
            .await
            .unwrap();
        ids.push(run.id);
    }
    ids
}

pub fn compile(engine: &Engine, yaml: &str) -> CompiledPipeline {
    engine
        .compile(&PipelineSource {
            name: "test".into(),
            file: "test.yaml".into(),
            text: yaml.into(),
        })
        .unwrap_or_else(|e| panic!("pipeline should compile: {e}"))
}

/// Event kinds of a run, in order, as `stage:kind`.
pub async fn event_kinds(engine: &Engine, run_id: &str) -> Vec<String> {
    engine
        .store()
        .events(run_id, 0, 1000)
        .await
        .expect("events")
        .into_iter()
        .map(|e| format!("{}:{}", e.stage, e.kind))
        .collect()
}

/// Executes `claim` on a task of its own, as a worker would.
pub fn spawn_execute(
    engine: &Engine,
    claim: shelf_engine::Claim,
) -> tokio::task::JoinHandle<Result<shelf_engine::executor::ClaimOutcome, shelf_engine::EngineError>>
{
    let engine = engine.clone();
    tokio::spawn(async move {
        engine
            .execute(claim, tokio_util::sync::CancellationToken::new())
            .await
    })
}

/// Polls `check` until it holds; the deadline only bounds a broken run, it is no margin a
/// test depends on.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `stage` of `run` has started `n` attempts.
pub async fn started(probe: &Probe, run: &str, stage: &str, n: usize) {
    eventually(&format!("{stage} of {run} starts"), || async {
        probe.starts_of(run, stage) >= n
    })
    .await;
}

/// `n` workers on their own pools, each running `concurrency` runs at once, until the token
/// trips.
pub async fn start_workers(
    db: &TestDb,
    probe: &Arc<Probe>,
    n: usize,
    concurrency: usize,
) -> (
    tokio_util::sync::CancellationToken,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let shutdown = tokio_util::sync::CancellationToken::new();
    let mut handles = Vec::new();
    for i in 0..n {
        let pool = connect(db).await;
        let e = engine(&pool, probe, fast_config());
        let mut config = shelf_engine::WorkerConfig::new(concurrency);
        config.id = format!("worker-{i}");
        config.poll_interval = Duration::from_millis(10);
        let stop = shutdown.clone();
        handles.push(tokio::spawn(async move {
            shelf_engine::Worker::new(e, config).run(stop).await
        }));
    }
    (shutdown, handles)
}

/// Waits until every run of the store has ended.
pub async fn all_terminal(engine: &Engine) {
    let store = engine.store().clone();
    eventually("every run ends", || {
        let store = store.clone();
        async move {
            let (runs, _) = store.list_runs(None, 1000, 0).await.unwrap();
            runs.iter().all(|r| r.status.is_terminal())
        }
    })
    .await;
}
