//! The executor: runs one claimed run through its stage DAG. Independent stages run
//! concurrently; `when` flags skip stages; failures are retried by re-queueing the run with a
//! later due time (never by sleeping); cancellation and lease loss stop stages at once.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use sea_orm::Statement;
use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::error::EngineError;
use crate::pipeline::{
    CompiledPipeline, CompiledStage, PipelineError, PipelineSource, format_duration,
};
use crate::registry::Registry;
use crate::stage::{StageContext, StageError, StageInputs, SuccessWrites};
use crate::state::{RunStatus, StageStatus};
use crate::store::{
    CancelOutcome, Claim, LeaseGuard, NewRun, RunRecord, RunStore, Write, stmt, wake_statements,
};
use crate::time::{now_ms, now_rfc3339};

/// What the application adds to the engine's transitions, without the engine knowing what a
/// subject is.
pub trait RunHooks: Send + Sync + 'static {
    /// Statements committed in the same transaction as the run's move to `status`.
    fn on_status(&self, _subject: &str, _status: RunStatus) -> Vec<Statement> {
        Vec::new()
    }

    /// Called after each stage attempt ends (logs, metrics).
    fn stage_finished(
        &self,
        _run: &RunRecord,
        _stage: &str,
        _status: StageStatus,
        _duration: Duration,
    ) {
    }

    /// Called after a claim of a run commits (metrics): whether it was a reclaim and how long
    /// the run waited are in the claim.
    fn claimed(&self, _claim: &Claim) {}

    /// Called when claiming from the queue failed (the database refused or was busy).
    fn claim_failed(&self, _error: &EngineError) {}

    /// Called after a run's move to a terminal state commits.
    fn run_finished(&self, _run_id: &str, _status: RunStatus) {}

    /// The trace context a new run carries (a W3C `traceparent`), taken when it is submitted
    /// or retried; [`RunHooks::claim_span`] continues it.
    fn trace_parent(&self) -> Option<String> {
        None
    }

    /// The span one claim of `run` executes in (the queue processing span). The engine
    /// records `outcome` on it when the claim ends, if the span declares that field.
    fn claim_span(&self, run: &RunRecord) -> Span {
        tracing::info_span!(
            "queue_claim",
            run_id = %run.id,
            subject = %run.subject,
            claim = run.claims,
            outcome = tracing::field::Empty,
        )
    }

    /// The span one stage attempt runs in, a child of the claim's span. The engine records
    /// `status` on it when the attempt ends, if the span declares that field.
    fn stage_span(&self, run: &RunRecord, stage: &str, attempt: u32) -> Span {
        tracing::info_span!(
            "stage",
            run_id = %run.id,
            subject = %run.subject,
            stage,
            attempt,
            status = tracing::field::Empty,
        )
    }
}

pub struct NoHooks;
impl RunHooks for NoHooks {}

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How long a claim stays valid without a heartbeat.
    pub lease: Duration,
    /// How often a worker renews its lease and reads the cancel flag.
    pub heartbeat: Duration,
    /// How many times a run may be reclaimed from a dead worker before it fails.
    pub max_reclaims: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(1),
            max_reclaims: 3,
        }
    }
}

/// How one claim of a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    Finished(RunStatus),
    /// A stage failed and will be retried when the run is due again.
    RetryScheduled {
        due_at: i64,
    },
    /// The worker is stopping; the run went back to the queue.
    Released,
    /// Another worker owns the run now; this one stopped without writing.
    LeaseLost,
}

#[derive(Clone)]
pub struct Engine {
    store: RunStore,
    registry: Arc<Registry>,
    hooks: Arc<dyn RunHooks>,
    config: EngineConfig,
}

/// Signals from the heartbeat to the executor.
struct Signals {
    trip: CancellationToken,
    cancel_requested: AtomicBool,
    lost: AtomicBool,
}

impl Engine {
    pub fn new(
        store: RunStore,
        registry: Registry,
        hooks: Arc<dyn RunHooks>,
        config: EngineConfig,
    ) -> Self {
        Engine {
            store,
            registry: Arc::new(registry),
            hooks,
            config,
        }
    }

    pub fn store(&self) -> &RunStore {
        &self.store
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn compile(&self, source: &PipelineSource) -> Result<CompiledPipeline, PipelineError> {
        self.registry.compile(source)
    }

    /// Creates and enqueues a run of `pipeline` over `subject`.
    pub async fn submit(
        &self,
        subject: &str,
        pipeline: &CompiledPipeline,
        input: Value,
    ) -> Result<RunRecord, EngineError> {
        let extra = self.hooks.on_status(subject, RunStatus::Queued);
        self.store
            .create_run(
                NewRun {
                    subject,
                    pipeline,
                    input,
                    trace_parent: self.hooks.trace_parent(),
                },
                None,
                extra,
            )
            .await
    }

    /// Replays a failed run as a new run on the same pipeline snapshot, reusing the checkpoints
    /// of its succeeded stages.
    pub async fn retry(&self, run_id: &str) -> Result<RunRecord, EngineError> {
        let old = self
            .store
            .get_run(run_id)
            .await?
            .ok_or_else(|| EngineError::RunNotFound(run_id.to_string()))?;
        if old.status != RunStatus::Failed {
            return Err(EngineError::RunNotFailed {
                id: old.id,
                status: old.status.as_str().to_string(),
            });
        }
        let pipeline = self.compile(&snapshot_source(&old))?;
        let extra = self.hooks.on_status(&old.subject, RunStatus::Queued);
        self.store
            .create_run(
                NewRun {
                    subject: &old.subject,
                    pipeline: &pipeline,
                    input: old.input.clone(),
                    trace_parent: self.hooks.trace_parent(),
                },
                Some(&old),
                extra,
            )
            .await
    }

    pub async fn cancel(&self, run_id: &str) -> Result<CancelOutcome, EngineError> {
        let hooks = self.hooks.clone();
        let outcome = self
            .store
            .cancel(run_id, move |subject| {
                hooks.on_status(subject, RunStatus::Canceled)
            })
            .await?;
        if outcome == CancelOutcome::Canceled {
            self.hooks.run_finished(run_id, RunStatus::Canceled);
        }
        Ok(outcome)
    }

    /// Claims the next due run for `worker`, if any.
    pub async fn claim(
        &self,
        worker: &str,
        only: Option<&str>,
    ) -> Result<Option<Claim>, EngineError> {
        let hooks = self.hooks.clone();
        let claimed = self
            .store
            .claim(worker, only, move |subject| {
                hooks.on_status(subject, RunStatus::Running)
            })
            .await;
        match &claimed {
            Ok(Some(claim)) => self.hooks.claimed(claim),
            Ok(None) => {}
            Err(error) => self.hooks.claim_failed(error),
        }
        claimed
    }

    /// Runs one run to a terminal state in this process, with the same engine a worker uses:
    /// claim it, execute it, wait out scheduled retries, and wait for another worker if one
    /// holds it.
    pub async fn run_in_process(
        &self,
        run_id: &str,
        worker: &str,
        shutdown: CancellationToken,
    ) -> Result<RunRecord, EngineError> {
        loop {
            let run = self
                .store
                .get_run(run_id)
                .await?
                .ok_or_else(|| EngineError::RunNotFound(run_id.to_string()))?;
            if run.status.is_terminal() || shutdown.is_cancelled() {
                return Ok(run);
            }
            if let Some(claim) = self.claim(worker, Some(run_id)).await? {
                self.execute(claim, shutdown.clone()).await?;
                continue;
            }
            let wait = (run.due_at - now_ms()).clamp(20, 1000) as u64;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }

    /// Executes a claimed run until it ends, is re-queued for a retry, is released on
    /// shutdown, or the lease is lost.
    pub async fn execute(
        &self,
        claim: Claim,
        shutdown: CancellationToken,
    ) -> Result<ClaimOutcome, EngineError> {
        let guard = LeaseGuard {
            store: self.store.clone(),
            run_id: claim.run.id.clone(),
            token: claim.token,
        };
        let signals = Arc::new(Signals {
            trip: CancellationToken::new(),
            cancel_requested: AtomicBool::new(false),
            lost: AtomicBool::new(false),
        });
        let stop_heartbeat = CancellationToken::new();
        let heartbeat = tokio::spawn(heartbeat_loop(
            self.store.clone(),
            claim.run.id.clone(),
            claim.token,
            self.config.heartbeat,
            self.config.lease,
            signals.clone(),
            stop_heartbeat.clone(),
        ));
        let span = self.hooks.claim_span(&claim.run);
        let result = self
            .drive(&claim, &guard, &signals, &shutdown)
            .instrument(span.clone())
            .await;
        stop_heartbeat.cancel();
        let _ = heartbeat.await;
        let result = match result {
            Err(EngineError::LeaseLost(_)) => Ok(ClaimOutcome::LeaseLost),
            other => other,
        };
        span.record(
            "outcome",
            match &result {
                Ok(ClaimOutcome::Finished(status)) => status.as_str(),
                Ok(ClaimOutcome::RetryScheduled { .. }) => "retry_scheduled",
                Ok(ClaimOutcome::Released) => "released",
                Ok(ClaimOutcome::LeaseLost) => "lease_lost",
                Err(_) => "error",
            },
        );
        result
    }

    async fn drive(
        &self,
        claim: &Claim,
        guard: &LeaseGuard,
        signals: &Signals,
        shutdown: &CancellationToken,
    ) -> Result<ClaimOutcome, EngineError> {
        let run = &claim.run;
        // Transitions decided in one turn of the loop (a stage's success, the skips and starts
        // it unlocks) commit together in one fenced transaction before the loop waits again:
        // fewer write transactions per run, and a stage never starts before its start commits.
        let mut batch = Batch::default();
        if claim.reclaimed && run.reclaims > i64::from(self.config.max_reclaims) {
            let message = format!(
                "run was reclaimed {} times after its worker stopped (limit {}); giving up",
                run.reclaims, self.config.max_reclaims
            );
            return self
                .finish(guard, run, &mut batch, RunStatus::Failed, Some(message))
                .await;
        }
        if run.cancel_requested {
            return self
                .finish(guard, run, &mut batch, RunStatus::Canceled, None)
                .await;
        }
        let pipeline = match self.compile(&snapshot_source(run)) {
            Ok(p) => p,
            Err(e) => {
                let message = format!("the run's pipeline snapshot no longer compiles: {e}");
                return self
                    .finish(guard, run, &mut batch, RunStatus::Failed, Some(message))
                    .await;
            }
        };

        let mut status: HashMap<String, StageStatus> = HashMap::new();
        let mut attempts: HashMap<String, u32> = HashMap::new();
        let mut outputs: HashMap<String, Value> = HashMap::new();
        for record in self.store.stages(&run.id).await? {
            // A stage left `running` by a worker that died starts again from its checkpoints.
            let s = match record.status {
                StageStatus::Running => StageStatus::Pending,
                other => other,
            };
            if s == StageStatus::Succeeded {
                outputs.insert(record.name.clone(), record.output.unwrap_or(Value::Null));
            }
            attempts.insert(record.name.clone(), record.attempts.max(0) as u32);
            status.insert(record.name, s);
        }
        for stage in &pipeline.stages {
            status
                .entry(stage.name.clone())
                .or_insert(StageStatus::Pending);
            attempts.entry(stage.name.clone()).or_insert(0);
        }
        if claim.run.claims > 1 || claim.reclaimed {
            let mut reused: Vec<&str> = pipeline
                .stages
                .iter()
                .filter(|s| status[&s.name] == StageStatus::Succeeded)
                .map(|s| s.name.as_str())
                .collect();
            reused.sort();
            if !reused.is_empty() {
                guard
                    .event(
                        "run",
                        "checkpoints_reused",
                        &format!("reusing checkpoints of {}", reused.join(", ")),
                    )
                    .await?;
            }
        }

        let mut tasks: JoinSet<(String, Result<Value, StageError>, Duration)> = JoinSet::new();
        let mut children: HashMap<String, CancellationToken> = HashMap::new();
        // Each running stage's span, to record how the attempt ended.
        let mut spans: HashMap<String, Span> = HashMap::new();
        // What each running attempt handed over to commit with its success.
        let mut success_writes: HashMap<String, SuccessWrites> = HashMap::new();
        let mut retry_due: Option<i64> = None;
        let mut failure: Option<String> = None;
        let mut canceling = false;
        let mut stopping = false;

        loop {
            let mut starting: Vec<(CompiledStage, StageContext, Span)> = Vec::new();
            if !canceling && !stopping && failure.is_none() && retry_due.is_none() {
                let mut progressed = true;
                while progressed {
                    progressed = false;
                    for stage in &pipeline.stages {
                        if status[&stage.name] != StageStatus::Pending
                            || children.contains_key(&stage.name)
                            || !stage.needs.iter().all(|n| status[n].satisfies_dependents())
                        {
                            continue;
                        }
                        if let Some(when) = &stage.when {
                            let on = status.get(&when.stage) == Some(&StageStatus::Succeeded)
                                && outputs
                                    .get(&when.stage)
                                    .and_then(|o| o.get(&when.flag))
                                    .and_then(Value::as_bool)
                                    == Some(true);
                            if !on {
                                batch.skip(run, stage);
                                status.insert(stage.name.clone(), StageStatus::Skipped);
                                progressed = true;
                                continue;
                            }
                        }
                        let attempt = attempts[&stage.name] + 1;
                        batch.push(Write {
                                statements: vec![
                                    stmt(
                                        "UPDATE run_stages SET status = 'running', attempts = ?, started_at = ?, finished_at = NULL, duration_ms = NULL \
                                         WHERE run_id = ? AND name = ?",
                                        vec![
                                            i64::from(attempt).into(),
                                            now_rfc3339().into(),
                                            run.id.clone().into(),
                                            stage.name.clone().into(),
                                        ],
                                    ),
                                    stmt(
                                        "UPDATE runs SET stage = ? WHERE id = ?",
                                        vec![stage.name.clone().into(), run.id.clone().into()],
                                    ),
                                ],
                                events: vec![(
                                    stage.name.clone(),
                                    "stage_started",
                                    format!("attempt {attempt} of {}", stage.retry.attempts),
                                )],
                            });
                        attempts.insert(stage.name.clone(), attempt);
                        status.insert(stage.name.clone(), StageStatus::Running);
                        let child = signals.trip.child_token();
                        children.insert(stage.name.clone(), child.clone());
                        let ctx = StageContext {
                            run_id: run.id.clone(),
                            subject: run.subject.clone(),
                            stage: stage.name.clone(),
                            attempt,
                            input: run.input.clone(),
                            inputs: StageInputs::new(
                                stage
                                    .upstream
                                    .iter()
                                    .filter_map(|n| outputs.get(n).map(|o| (n.clone(), o.clone())))
                                    .collect(),
                            ),
                            cancel: child,
                            guard: Some(guard.clone()),
                            on_success: SuccessWrites::default(),
                        };
                        success_writes.insert(stage.name.clone(), ctx.on_success.clone());
                        let span = self.hooks.stage_span(run, &stage.name, attempt);
                        spans.insert(stage.name.clone(), span.clone());
                        starting.push((stage.clone(), ctx, span));
                    }
                }
            }
            if tasks.is_empty() && starting.is_empty() {
                // The run ends: its last transitions commit with its terminal state.
                break;
            }
            self.commit(guard, run, &mut batch).await?;
            for (stage, ctx, span) in starting {
                tasks.spawn(run_stage(self.registry.clone(), stage, ctx).instrument(span));
            }
            tokio::select! {
                joined = tasks.join_next() => {
                    let Some(joined) = joined else { continue };
                    let (name, result, elapsed) = match joined {
                        Ok(done) => done,
                        // Stage panics are caught inside the task; a join error means the
                        // task was aborted, which only happens when this executor is dropped.
                        Err(_) => return Err(EngineError::LeaseLost(run.id.clone())),
                    };
                    children.remove(&name);
                    let span = spans.remove(&name);
                    let handed_over = success_writes.remove(&name).map(|w| w.take()).unwrap_or_default();
                    let Some(stage) = pipeline.stage(&name) else { continue };
                    let duration_ms = elapsed.as_millis().min(i64::MAX as u128) as i64;
                    // The stage may report its cancellation before the select sees the trip.
                    if signals.trip.is_cancelled() && !stopping {
                        if signals.lost.load(Ordering::SeqCst) {
                            return Err(EngineError::LeaseLost(run.id.clone()));
                        }
                        canceling = true;
                    }
                    match result {
                        Ok(output) => {
                            let mut statements = handed_over;
                            statements.push(stmt(
                                "UPDATE run_stages SET status = 'succeeded', output = ?, error = NULL, finished_at = ?, duration_ms = ? \
                                 WHERE run_id = ? AND name = ?",
                                vec![output.to_string().into(), now_rfc3339().into(), duration_ms.into(), run.id.clone().into(), name.clone().into()],
                            ));
                            batch.push(Write {
                                statements,
                                events: vec![(name.clone(), "stage_succeeded", format!("succeeded in {duration_ms} ms"))],
                            });
                            batch.ended.push((span, name.clone(), StageStatus::Succeeded, elapsed));
                            status.insert(name.clone(), StageStatus::Succeeded);
                            outputs.insert(name, output);
                        }
                        Err(_) if stopping => {
                            // Shutting down: the attempt did not count, the stage starts again.
                            guard.apply(Write {
                                statements: vec![stmt(
                                    "UPDATE run_stages SET status = 'pending', attempts = attempts - 1 WHERE run_id = ? AND name = ?",
                                    vec![run.id.clone().into(), name.clone().into()],
                                )],
                                events: vec![],
                            }).await?;
                            status.insert(name.clone(), StageStatus::Pending);
                            if let Some(span) = &span {
                                span.record("status", "interrupted");
                            }
                        }
                        Err(e) if canceling || (failure.is_some() && e.code == "canceled") => {
                            self.mark_stage(guard, run, &name, StageStatus::Canceled, None, duration_ms, "stage_canceled", "canceled".into()).await?;
                            status.insert(name.clone(), StageStatus::Canceled);
                            self.stage_ended(span.as_ref(), run, &name, StageStatus::Canceled, elapsed);
                        }
                        Err(e) => {
                            let attempt = attempts[&name];
                            if e.retryable && attempt < stage.retry.attempts {
                                let delay = stage.retry.delay_after(attempt);
                                let due = now_ms() + delay.as_millis().min(i64::MAX as u128) as i64;
                                let message = format!(
                                    "attempt {attempt} of {} failed ({}): {}; retrying in {}",
                                    stage.retry.attempts, e.code, e.message, format_duration(delay)
                                );
                                self.mark_stage(guard, run, &name, StageStatus::Pending, Some(&e), duration_ms, "stage_failed", message).await?;
                                status.insert(name.clone(), StageStatus::Pending);
                                retry_due = Some(retry_due.map_or(due, |d| d.min(due)));
                            } else {
                                let message = format!("attempt {attempt} of {} failed ({}): {}", stage.retry.attempts, e.code, e.message);
                                self.mark_stage(guard, run, &name, StageStatus::Failed, Some(&e), duration_ms, "stage_failed", message).await?;
                                status.insert(name.clone(), StageStatus::Failed);
                                failure.get_or_insert_with(|| format!("stage {name} failed ({}): {}", e.code, e.message));
                                // Fail fast: siblings still running stop now.
                                for child in children.values() {
                                    child.cancel();
                                }
                            }
                            self.stage_ended(span.as_ref(), run, &name, StageStatus::Failed, elapsed);
                        }
                    }
                }
                _ = signals.trip.cancelled(), if !canceling && !stopping => {
                    if signals.lost.load(Ordering::SeqCst) {
                        return Err(EngineError::LeaseLost(run.id.clone()));
                    }
                    canceling = true;
                }
                _ = shutdown.cancelled(), if !canceling && !stopping => {
                    stopping = true;
                    for child in children.values() {
                        child.cancel();
                    }
                }
            }
        }

        if signals.lost.load(Ordering::SeqCst) {
            return Err(EngineError::LeaseLost(run.id.clone()));
        }
        if canceling || signals.cancel_requested.load(Ordering::SeqCst) {
            return self
                .finish(guard, run, &mut batch, RunStatus::Canceled, None)
                .await;
        }
        if let Some(message) = failure {
            return self
                .finish(guard, run, &mut batch, RunStatus::Failed, Some(message))
                .await;
        }
        if stopping {
            return self
                .requeue(
                    guard,
                    run,
                    &mut batch,
                    now_ms(),
                    "run_released",
                    "worker stopping; run returned to the queue".into(),
                )
                .await;
        }
        if let Some(due) = retry_due {
            let wait = Duration::from_millis((due - now_ms()).max(0) as u64);
            return self
                .requeue(
                    guard,
                    run,
                    &mut batch,
                    due,
                    "run_retry_scheduled",
                    format!("run re-queued; next attempt in {}", format_duration(wait)),
                )
                .await
                .map(|outcome| match outcome {
                    ClaimOutcome::Released => ClaimOutcome::RetryScheduled { due_at: due },
                    other => other,
                });
        }
        let stuck: Vec<&str> = pipeline
            .stages
            .iter()
            .filter(|s| !status[&s.name].satisfies_dependents())
            .map(|s| s.name.as_str())
            .collect();
        if stuck.is_empty() {
            self.finish(guard, run, &mut batch, RunStatus::Succeeded, None)
                .await
        } else {
            let message = format!("stages could not run: {}", stuck.join(", "));
            self.finish(guard, run, &mut batch, RunStatus::Failed, Some(message))
                .await
        }
    }

    /// A stage attempt ended: its span says how, and the hooks hear of it inside that span (so
    /// its log line carries the trace).
    fn stage_ended(
        &self,
        span: Option<&Span>,
        run: &RunRecord,
        name: &str,
        status: StageStatus,
        elapsed: Duration,
    ) {
        match span {
            Some(span) => {
                span.record("status", status.as_str());
                span.in_scope(|| self.hooks.stage_finished(run, name, status, elapsed));
            }
            None => self.hooks.stage_finished(run, name, status, elapsed),
        }
    }

    /// Commits the batch (if it holds anything) in one fenced transaction, then reports the
    /// stage attempts that ended in it.
    async fn commit(
        &self,
        guard: &LeaseGuard,
        run: &RunRecord,
        batch: &mut Batch,
    ) -> Result<(), EngineError> {
        let Batch { write, ended } = std::mem::take(batch);
        if !write.statements.is_empty() || !write.events.is_empty() {
            guard.apply(write).await?;
        }
        for (span, name, status, elapsed) in ended {
            self.stage_ended(span.as_ref(), run, &name, status, elapsed);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn mark_stage(
        &self,
        guard: &LeaseGuard,
        run: &RunRecord,
        name: &str,
        status: StageStatus,
        error: Option<&StageError>,
        duration_ms: i64,
        kind: &'static str,
        message: String,
    ) -> Result<(), EngineError> {
        guard
            .apply(Write {
                statements: vec![stmt(
                    "UPDATE run_stages SET status = ?, error = ?, finished_at = ?, duration_ms = ? WHERE run_id = ? AND name = ?",
                    vec![
                        status.as_str().into(),
                        error.map(|e| format!("{}: {}", e.code, e.message)).into(),
                        now_rfc3339().into(),
                        duration_ms.into(),
                        run.id.clone().into(),
                        name.into(),
                    ],
                )],
                events: vec![(name.to_string(), kind, message)],
            })
            .await
    }

    async fn requeue(
        &self,
        guard: &LeaseGuard,
        run: &RunRecord,
        batch: &mut Batch,
        due_at: i64,
        kind: &'static str,
        message: String,
    ) -> Result<ClaimOutcome, EngineError> {
        let mut statements = vec![
            stmt(
                "UPDATE runs SET status = 'queued', due_at = ?, lease_owner = NULL WHERE id = ?",
                vec![due_at.into(), run.id.clone().into()],
            ),
            stmt(
                "UPDATE run_stages SET status = 'pending' WHERE run_id = ? AND status = 'running'",
                vec![run.id.clone().into()],
            ),
        ];
        statements.extend(self.hooks.on_status(&run.subject, RunStatus::Queued));
        // Idle workers wake for a released run, and re-read the next due time for a retry.
        statements.extend(wake_statements(self.store.db()));
        batch.push(Write {
            statements,
            events: vec![("run".into(), kind, message)],
        });
        self.commit(guard, run, batch).await?;
        Ok(ClaimOutcome::Released)
    }

    async fn finish(
        &self,
        guard: &LeaseGuard,
        run: &RunRecord,
        batch: &mut Batch,
        status: RunStatus,
        error: Option<String>,
    ) -> Result<ClaimOutcome, EngineError> {
        let (kind, message) = match status {
            RunStatus::Succeeded => ("run_succeeded", "run succeeded".to_string()),
            RunStatus::Canceled => ("run_canceled", "run canceled".to_string()),
            _ => (
                "run_failed",
                format!(
                    "run failed: {}",
                    error.as_deref().unwrap_or("unknown error")
                ),
            ),
        };
        let mut statements = vec![
            stmt(
                "UPDATE runs SET status = ?, error = ?, finished_at = ?, lease_owner = NULL WHERE id = ?",
                vec![
                    status.as_str().into(),
                    error.into(),
                    now_rfc3339().into(),
                    run.id.clone().into(),
                ],
            ),
            stmt(
                "UPDATE run_stages SET status = 'canceled' WHERE run_id = ? AND status IN ('pending', 'running')",
                vec![run.id.clone().into()],
            ),
        ];
        statements.extend(self.hooks.on_status(&run.subject, status));
        batch.push(Write {
            statements,
            events: vec![("run".into(), kind, message)],
        });
        self.commit(guard, run, batch).await?;
        self.hooks.run_finished(&run.id, status);
        Ok(ClaimOutcome::Finished(status))
    }
}

/// The transitions of one turn of the executor's loop, not yet committed: one write, and the
/// stage attempts that ended in it (reported to the hooks only once it commits).
#[derive(Default)]
struct Batch {
    write: Write,
    ended: Vec<(Option<Span>, String, StageStatus, Duration)>,
}

impl Batch {
    fn push(&mut self, write: Write) {
        self.write.statements.extend(write.statements);
        self.write.events.extend(write.events);
    }

    fn skip(&mut self, run: &RunRecord, stage: &CompiledStage) {
        let reason = match &stage.when {
            Some(when) => format!("skipped: {when} is not set"),
            None => "skipped".to_string(),
        };
        self.push(Write {
            statements: vec![stmt(
                "UPDATE run_stages SET status = 'skipped', output = NULL, finished_at = ?, duration_ms = 0 WHERE run_id = ? AND name = ?",
                vec![now_rfc3339().into(), run.id.clone().into(), stage.name.clone().into()],
            )],
            events: vec![(stage.name.clone(), "stage_skipped", reason)],
        });
        self.ended.push((
            None,
            stage.name.clone(),
            StageStatus::Skipped,
            Duration::ZERO,
        ));
    }
}

/// The pipeline a run was created with, as a compilable source.
pub fn snapshot_source(run: &RunRecord) -> PipelineSource {
    PipelineSource {
        name: run.pipeline.clone(),
        file: format!("{} (snapshot in run {})", run.pipeline, run.id),
        text: run.pipeline_yaml.clone(),
    }
}

/// One stage attempt: never panics outward, honours the stage timeout, and stops as soon as the
/// stage's token trips even if the stage ignores it (its future is dropped, which also kills
/// subprocesses spawned with `kill_on_drop`).
async fn run_stage(
    registry: Arc<Registry>,
    stage: CompiledStage,
    ctx: StageContext,
) -> (String, Result<Value, StageError>, Duration) {
    let started = Instant::now();
    let name = stage.name.clone();
    let Some(erased) = registry.get(&stage.kind).cloned() else {
        let e = StageError::fatal(
            "unknown_stage",
            format!("stage kind {} is not registered", stage.kind),
        );
        return (name, Err(e), started.elapsed());
    };
    let work = AssertUnwindSafe(erased.run(stage.options.as_ref(), &ctx)).catch_unwind();
    let bounded = async {
        match stage.timeout {
            Some(limit) => tokio::time::timeout(limit, work).await.ok(),
            None => Some(work.await),
        }
    };
    let result = tokio::select! {
        done = bounded => match done {
            Some(Ok(result)) => result,
            Some(Err(_panic)) => Err(StageError::fatal("stage_panicked", format!("stage {name} panicked"))),
            None => Err(StageError::retryable(
                "stage_timeout",
                format!("timed out after {}", format_duration(stage.timeout.unwrap_or_default())),
            )),
        },
        _ = ctx.cancel.cancelled() => Err(StageError::canceled()),
    };
    (name, result, started.elapsed())
}

async fn heartbeat_loop(
    store: RunStore,
    run_id: String,
    token: i64,
    every: Duration,
    lease: Duration,
    signals: Arc<Signals>,
    stop: CancellationToken,
) {
    let mut last_renewed = Instant::now();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        match store.heartbeat(&run_id, token).await {
            Ok(cancel_requested) => {
                last_renewed = Instant::now();
                if cancel_requested && !signals.cancel_requested.swap(true, Ordering::SeqCst) {
                    tracing::info!(run_id = %run_id, "cancel requested; stopping stages");
                    signals.trip.cancel();
                }
            }
            Err(EngineError::LeaseLost(_)) => {
                tracing::warn!(run_id = %run_id, "lease lost; stopping stages");
                signals.lost.store(true, Ordering::SeqCst);
                signals.trip.cancel();
                return;
            }
            Err(error) => {
                // A worker that cannot renew must stop before another worker may reclaim.
                if last_renewed.elapsed() + every >= lease {
                    tracing::warn!(run_id = %run_id, %error, "cannot renew lease; stopping stages");
                    signals.lost.store(true, Ordering::SeqCst);
                    signals.trip.cancel();
                    return;
                }
                tracing::warn!(run_id = %run_id, %error, "lease renewal failed; will retry");
            }
        }
    }
}
