//! The executor: runs one claimed run through its stage DAG. Independent stages run
//! concurrently; `when` flags skip stages; failures are retried by re-queueing the run with a
//! later due time (never by sleeping); cancellation and lease loss stop stages at once.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use sea_orm::{DbBackend, Statement};
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::effects::{self, Write};
use crate::error::EngineError;
use crate::lifecycle::{
    AttemptEnd, ClaimFacts, Effect, Event, Lifecycle, Requeue, StageCheckpoint, StagePlan,
};
use crate::pipeline::{
    CompiledPipeline, CompiledStage, PipelineError, PipelineSource, format_duration,
};
use crate::registry::Registry;
use crate::stage::{StageContext, StageError, StageInputs, SuccessWrites};
use crate::state::{RunStatus, StageStatus};
use crate::store::{
    CancelOutcome, Claim, LeaseGuard, NewRun, RunRecord, RunStore, SubjectGuard, wake_statements,
};

/// What the application adds to the engine's transitions, without the engine knowing what a
/// subject is.
pub trait RunHooks: Send + Sync + 'static {
    /// Statements committed in the same transaction as the run's move to `status`.
    fn on_status(&self, _subject: &str, _status: RunStatus) -> Vec<Statement> {
        Vec::new()
    }

    /// The check of `subject` that a run's creation (submit or retry) makes first in its
    /// transaction, on a database of `backend`: with one, a run is never created for a subject
    /// deleted meanwhile ([`EngineError::SubjectNotFound`]). `None`: no check.
    fn subject_guard(&self, _backend: DbBackend, _subject: &str) -> Option<SubjectGuard> {
        None
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
                    guard: self.subject_guard(subject),
                },
                None,
                extra,
            )
            .await
    }

    fn subject_guard(&self, subject: &str) -> Option<SubjectGuard> {
        let backend = self.store.db().get_database_backend();
        self.hooks.subject_guard(backend, subject)
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
                    guard: self.subject_guard(&old.subject),
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
            let wait = (run.due_at - self.store.now()).clamp(20, 1000) as u64;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }

    /// Executes a claimed run until it ends, is re-queued for a retry, is released on
    /// shutdown, or the lease is lost. The heartbeat lives inside this future, and dropping the
    /// future (a caller that went away) releases the claim: the run goes back to the queue
    /// with its checkpoints instead of staying `running` under a lease nobody renews.
    pub async fn execute(
        &self,
        claim: Claim,
        shutdown: CancellationToken,
    ) -> Result<ClaimOutcome, EngineError> {
        let guard = LeaseGuard::new(
            self.store.clone(),
            claim.run.id.clone(),
            claim.token,
            claim.run.due_at,
        );
        let mut release = ReleaseOnDrop::new(self.clone(), guard.clone(), claim.run.clone());
        let (signals, mut inbox) = tokio::sync::mpsc::unbounded_channel();
        let heartbeat = heartbeat_loop(guard.clone(), self.config.heartbeat, signals);
        let span = self.hooks.claim_span(&claim.run);
        let drive = self
            .drive(&claim, &guard, &mut inbox, &shutdown)
            .instrument(span.clone());
        let result = tokio::select! {
            result = drive => result,
            never = heartbeat => match never {},
        };
        let result = match result {
            Err(EngineError::LeaseLost(_)) => Ok(ClaimOutcome::LeaseLost),
            Err(error) => {
                // The database refused even after retries: give the run back now rather than
                // leave it `running` until its lease expires (and count as a reclaim).
                if let Err(release_error) = guard.apply(self.release_write(&claim.run)).await {
                    tracing::warn!(run_id = %claim.run.id, error = %release_error, "cannot release the run; its lease will expire");
                }
                Err(error)
            }
            ok => ok,
        };
        release.disarm();
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

    /// The event loop of one claim: the lifecycle decides, this applies its effects and waits
    /// for the next event (a stage ending, a signal from the heartbeat, shutdown).
    async fn drive(
        &self,
        claim: &Claim,
        guard: &LeaseGuard,
        inbox: &mut UnboundedReceiver<Event>,
        shutdown: &CancellationToken,
    ) -> Result<ClaimOutcome, EngineError> {
        let run = &claim.run;
        let pipeline = self.compile(&snapshot_source(run));
        let checkpoints = match &pipeline {
            Ok(_) => self.checkpoints(&run.id).await?,
            Err(_) => Vec::new(),
        };
        let facts = ClaimFacts {
            cancel_requested: run.cancel_requested,
            reclaimed: claim.reclaimed,
            claims: u32::try_from(run.claims).unwrap_or(u32::MAX),
            reclaims: u32::try_from(run.reclaims).unwrap_or(u32::MAX),
            max_reclaims: self.config.max_reclaims,
        };
        let plans = pipeline
            .as_ref()
            .map(StagePlan::of)
            .map_err(|e| e.to_string());
        let (mut machine, effects) = Lifecycle::claimed(facts, plans, &checkpoints);
        let Ok(pipeline) = pipeline else {
            let mut claim_run = ClaimRun::new(self, run, guard, None);
            return claim_run
                .apply(&machine, effects)
                .await
                .map(|o| o.unwrap_or(ClaimOutcome::Finished(RunStatus::Failed)));
        };
        let mut claim_run = ClaimRun::new(self, run, guard, Some(&pipeline));
        let mut outcome = claim_run.apply(&machine, effects).await?;
        let mut shutdown_seen = false;
        loop {
            if let Some(outcome) = outcome {
                return Ok(outcome);
            }
            let event = tokio::select! {
                joined = claim_run.tasks.join_next(), if !claim_run.tasks.is_empty() => {
                    match joined {
                        Some(Ok(ended)) => claim_run.stage_event(ended),
                        // Stage panics are caught inside the task; a join error means the task
                        // was aborted, which only happens when this executor is dropped.
                        _ => Event::LeaseLost,
                    }
                }
                Some(signal) = inbox.recv() => signal,
                _ = shutdown.cancelled(), if !shutdown_seen => {
                    shutdown_seen = true;
                    Event::Shutdown
                }
            };
            let effects = machine.step(event);
            outcome = claim_run.apply(&machine, effects).await?;
        }
    }

    /// The stored checkpoints of a run's stages.
    async fn checkpoints(&self, run_id: &str) -> Result<Vec<StageCheckpoint>, EngineError> {
        Ok(self
            .store
            .stages(run_id)
            .await?
            .into_iter()
            .map(|record| StageCheckpoint {
                name: record.name,
                status: record.status,
                attempts: u32::try_from(record.attempts.max(0)).unwrap_or(u32::MAX),
                output: record.output,
            })
            .collect())
    }

    /// The write that gives a claimed run back to the queue at once (shutdown, a dropped
    /// executor, a database that kept refusing): running stages become pending again and their
    /// attempts do not count; the next claim is a resume, not a reclaim.
    fn release_write(&self, run: &RunRecord) -> Write {
        let mut write = Write {
            statements: vec![effects::uncount_running_stages(run)],
            events: Vec::new(),
        };
        write.push(effects::requeue(run, None, self.store.now()));
        write
            .statements
            .extend(self.hooks.on_status(&run.subject, RunStatus::Queued));
        write.statements.extend(wake_statements(self.store.db()));
        write.events.push((
            "run".into(),
            "run_released",
            "worker stopping; run returned to the queue".into(),
        ));
        write
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
}

/// One claim being executed: the running stage tasks and what they need, and the writes
/// decided in the current step, not yet committed.
struct ClaimRun<'a> {
    engine: &'a Engine,
    run: &'a RunRecord,
    guard: &'a LeaseGuard,
    pipeline: Option<&'a CompiledPipeline>,
    tasks: JoinSet<StageEnded>,
    /// Parent of every running stage's token: tripped by [`Effect::StopStages`].
    stop: CancellationToken,
    running: HashMap<String, RunningStage>,
    /// How long each ended attempt took, until its effect is applied.
    elapsed: HashMap<String, Duration>,
    batch: Write,
    ended: Vec<(Option<Span>, String, StageStatus, Duration)>,
}

struct RunningStage {
    attempt: u32,
    span: Span,
    on_success: SuccessWrites,
}

type StageEnded = (String, Result<Value, StageError>, Duration);

impl<'a> ClaimRun<'a> {
    fn new(
        engine: &'a Engine,
        run: &'a RunRecord,
        guard: &'a LeaseGuard,
        pipeline: Option<&'a CompiledPipeline>,
    ) -> Self {
        ClaimRun {
            engine,
            run,
            guard,
            pipeline,
            tasks: JoinSet::new(),
            stop: CancellationToken::new(),
            running: HashMap::new(),
            elapsed: HashMap::new(),
            batch: Write::default(),
            ended: Vec::new(),
        }
    }

    /// Turns a stage task's result into the lifecycle's event; the retry delay is drawn here
    /// (the lifecycle is pure).
    fn stage_event(&mut self, (name, result, elapsed): StageEnded) -> Event {
        self.elapsed.insert(name.clone(), elapsed);
        match result {
            Ok(output) => Event::StageSucceeded {
                stage: name,
                output,
            },
            Err(e) => {
                let attempt = self.attempts_so_far(&name);
                let delay = self
                    .pipeline
                    .and_then(|p| p.stage(&name))
                    .map(|s| s.retry.delay_after(attempt))
                    .unwrap_or_default();
                Event::StageFailed {
                    stage: name,
                    code: e.code,
                    message: e.message,
                    retryable: e.retryable,
                    retry_at: self.engine.store.now().saturating_add(duration_ms(delay)),
                }
            }
        }
    }

    /// The number of the attempt that just ended: the backoff grows with it.
    fn attempts_so_far(&self, name: &str) -> u32 {
        self.running.get(name).map_or(1, |r| r.attempt)
    }

    /// Applies one step's effects in order, commits them in one fenced transaction, then starts
    /// the stages they started. Returns how the claim ended, once it has.
    async fn apply(
        &mut self,
        machine: &Lifecycle,
        effects: Vec<Effect>,
    ) -> Result<Option<ClaimOutcome>, EngineError> {
        let mut starting = Vec::new();
        for effect in effects {
            match effect {
                Effect::CheckpointsReused { stages } => self.batch.events.push((
                    "run".into(),
                    "checkpoints_reused",
                    format!("reusing checkpoints of {}", stages.join(", ")),
                )),
                Effect::Skip { stage, reason } => {
                    self.batch.push(effects::skip(self.run, &stage, reason));
                    self.ended
                        .push((None, stage, StageStatus::Skipped, Duration::ZERO));
                }
                Effect::Start { stage, attempt, of } => {
                    self.batch
                        .push(effects::start(self.run, &stage, attempt, of));
                    starting.push(self.prepare(machine, &stage, attempt));
                }
                Effect::Succeeded { stage, output } => self.succeeded(stage, output),
                Effect::AttemptEnded {
                    stage,
                    attempt,
                    of,
                    end,
                } => self.attempt_ended(stage, attempt, of, end),
                Effect::StopStages => self.stop.cancel(),
                Effect::Abandon => return Ok(Some(ClaimOutcome::LeaseLost)),
                Effect::Requeue { due_at, reason } => {
                    return self.requeue(due_at, reason).await.map(Some);
                }
                Effect::Finish { status, error } => {
                    return self.finish(status, error).await.map(Some);
                }
            }
        }
        self.commit().await?;
        for (stage, ctx, span) in starting.into_iter().flatten() {
            let registry = self.engine.registry.clone();
            self.tasks
                .spawn(run_stage(registry, stage, ctx).instrument(span));
        }
        Ok(None)
    }

    /// What a starting stage runs with.
    fn prepare(
        &mut self,
        machine: &Lifecycle,
        name: &str,
        attempt: u32,
    ) -> Option<(CompiledStage, StageContext, Span)> {
        let stage = self.pipeline?.stage(name)?.clone();
        let ctx = StageContext {
            run_id: self.run.id.clone(),
            subject: self.run.subject.clone(),
            stage: stage.name.clone(),
            attempt,
            input: self.run.input.clone(),
            inputs: StageInputs::new(
                stage
                    .upstream
                    .iter()
                    .filter_map(|n| machine.output(n).map(|o| (n.clone(), o.clone())))
                    .collect(),
            ),
            cancel: self.stop.child_token(),
            guard: Some(self.guard.clone()),
            on_success: SuccessWrites::default(),
        };
        let span = self.engine.hooks.stage_span(self.run, &stage.name, attempt);
        self.running.insert(
            stage.name.clone(),
            RunningStage {
                attempt,
                span: span.clone(),
                on_success: ctx.on_success.clone(),
            },
        );
        Some((stage, ctx, span))
    }

    fn succeeded(&mut self, stage: String, output: Value) {
        let running = self.running.remove(&stage);
        let elapsed = self.elapsed.remove(&stage).unwrap_or_default();
        // The stage's partial checkpoints go first: they only serve to resume an unfinished
        // attempt, and its output now stands for them (a retry reuses that).
        let mut statements = vec![effects::parts_dropped(self.run, &stage)];
        statements.extend(
            running
                .as_ref()
                .map(|r| r.on_success.take())
                .unwrap_or_default(),
        );
        statements.push(effects::stage_succeeded(self.run, &stage, &output, elapsed));
        self.batch.push(Write {
            statements,
            events: vec![(
                stage.clone(),
                "stage_succeeded",
                format!("succeeded in {} ms", duration_ms(elapsed)),
            )],
        });
        self.ended.push((
            running.map(|r| r.span),
            stage,
            StageStatus::Succeeded,
            elapsed,
        ));
    }

    fn attempt_ended(&mut self, stage: String, attempt: u32, of: u32, end: AttemptEnd) {
        let span = self.running.remove(&stage).map(|r| r.span);
        let elapsed = self.elapsed.remove(&stage).unwrap_or_default();
        let (write, status) = effects::attempt_ended(self.run, &stage, attempt, of, &end, elapsed);
        self.batch.push(write);
        match status {
            Some(status) => self.ended.push((span, stage, status, elapsed)),
            None => {
                if let Some(span) = span {
                    span.record("status", "interrupted");
                }
            }
        }
    }

    /// Commits the batch (if it holds anything), then reports the stage attempts that ended in
    /// it.
    async fn commit(&mut self) -> Result<(), EngineError> {
        let write = std::mem::take(&mut self.batch);
        if !write.statements.is_empty() || !write.events.is_empty() {
            self.guard.apply(write).await?;
        }
        for (span, name, status, elapsed) in std::mem::take(&mut self.ended) {
            self.engine
                .stage_ended(span.as_ref(), self.run, &name, status, elapsed);
        }
        Ok(())
    }

    async fn requeue(
        &mut self,
        due_at: Option<i64>,
        reason: Requeue,
    ) -> Result<ClaimOutcome, EngineError> {
        let now = self.engine.store.now();
        let mut write = effects::requeue(self.run, due_at, now);
        write.statements.extend(
            self.engine
                .hooks
                .on_status(&self.run.subject, RunStatus::Queued),
        );
        // Idle workers wake for a released run, and re-read the next due time for a retry.
        write
            .statements
            .extend(wake_statements(self.engine.store.db()));
        let outcome = match (reason, due_at) {
            (Requeue::RetryScheduled, Some(due)) => {
                let wait = Duration::from_millis(u64::try_from(due - now).unwrap_or(0));
                write.events.push((
                    "run".into(),
                    "run_retry_scheduled",
                    format!("run re-queued; next attempt in {}", format_duration(wait)),
                ));
                ClaimOutcome::RetryScheduled { due_at: due }
            }
            _ => {
                write.events.push((
                    "run".into(),
                    "run_released",
                    "worker stopping; run returned to the queue".into(),
                ));
                ClaimOutcome::Released
            }
        };
        self.batch.push(write);
        self.commit().await?;
        Ok(outcome)
    }

    async fn finish(
        &mut self,
        status: RunStatus,
        error: Option<String>,
    ) -> Result<ClaimOutcome, EngineError> {
        let mut write = effects::finish(self.run, status, error);
        write
            .statements
            .extend(self.engine.hooks.on_status(&self.run.subject, status));
        self.batch.push(write);
        self.commit().await?;
        self.engine.hooks.run_finished(&self.run.id, status);
        Ok(ClaimOutcome::Finished(status))
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Gives the claim back to the queue if the executor is dropped before it ended the claim
/// itself (its caller went away). The release is fenced, so a claim already lost writes
/// nothing; its write is only built when it is needed.
struct ReleaseOnDrop {
    pending: Option<(Engine, LeaseGuard, RunRecord)>,
}

impl ReleaseOnDrop {
    fn new(engine: Engine, guard: LeaseGuard, run: RunRecord) -> Self {
        ReleaseOnDrop {
            pending: Some((engine, guard, run)),
        }
    }

    fn disarm(&mut self) {
        self.pending = None;
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let Some((engine, guard, run)) = self.pending.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    match guard.apply(engine.release_write(&run)).await {
                        Ok(()) => tracing::info!(run_id = %run.id, "executor dropped; run returned to the queue"),
                        Err(error) => tracing::warn!(run_id = %run.id, %error, "executor dropped; cannot release the run, its lease will expire"),
                    }
                });
            }
            Err(_) => {
                tracing::warn!(run_id = %run.id, "executor dropped outside a runtime; the run's lease will expire")
            }
        }
    }
}

/// Renews the lease every `every` and reports what it reads: a cancel request, or a lease that
/// is lost (another worker took the run, or renewal kept failing until the lease was about to
/// end). Never returns: it lives as long as the claim's executor, inside its future.
async fn heartbeat_loop(
    guard: LeaseGuard,
    every: Duration,
    signals: UnboundedSender<Event>,
) -> std::convert::Infallible {
    let mut cancel_reported = false;
    loop {
        tokio::time::sleep(every).await;
        let started = guard.store.now();
        match guard.store.heartbeat(&guard.run_id, guard.token).await {
            Ok(cancel_requested) => {
                guard.renewed_at(started);
                if cancel_requested && !cancel_reported {
                    cancel_reported = true;
                    tracing::info!(run_id = %guard.run_id, "cancel requested; stopping stages");
                    let _ = signals.send(Event::CancelRequested);
                }
            }
            Err(EngineError::LeaseLost(_)) => {
                tracing::warn!(run_id = %guard.run_id, "lease lost; stopping stages");
                let _ = signals.send(Event::LeaseLost);
                return std::future::pending().await;
            }
            Err(error) if !guard.valid_after(every) => {
                // A worker that cannot renew must stop before another worker may reclaim.
                tracing::warn!(run_id = %guard.run_id, %error, "cannot renew lease; stopping stages");
                let _ = signals.send(Event::LeaseLost);
                return std::future::pending().await;
            }
            Err(error) => {
                tracing::warn!(run_id = %guard.run_id, %error, "lease renewal failed; will retry");
            }
        }
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
