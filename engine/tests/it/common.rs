//! Test stages and helpers shared by the engine's component tests: a real SQLite file with real
//! migrations, and stages whose behaviour the tests steer.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sea_orm::DatabaseConnection;
use serde::Deserialize;
use serde_json::{Value, json};
use shelf_engine::executor::NoHooks;
use shelf_engine::{
    CompiledPipeline, Engine, EngineConfig, PipelineSource, Registry, RunStore, Stage,
    StageContext, StageError,
};
use shelf_migrations::{Migrator, MigratorTrait};
use tempfile::TempDir;

pub async fn database() -> (TempDir, DatabaseConnection) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = connect(&dir).await;
    Migrator::up(&db, None).await.expect("migrate");
    (dir, db)
}

/// A second pool on the same file, as a second process would have.
pub async fn connect(dir: &TempDir) -> DatabaseConnection {
    shelf_engine::db::connect(&dir.path().join("engine.sqlite"), 4)
        .await
        .expect("connect")
}

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
    pub failures_left: Mutex<HashMap<String, usize>>,
    pub child_pid: Mutex<Option<u32>>,
}

impl Probe {
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
        result
    }
}

impl Step {
    async fn work(&self, options: &StepOptions, ctx: &StageContext) -> Result<Value, StageError> {
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
    let store = RunStore::new(db.clone(), config.lease);
    Engine::new(store, registry(probe), Arc::new(NoHooks), config)
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
