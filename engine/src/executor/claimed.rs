//! One claimed run while it is driven: the running stage tasks and the writes of the current
//! step (`ClaimRun`), the release of the claim if its executor is dropped, the heartbeat that
//! renews the lease, and one stage attempt (`run_stage`).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use super::{ClaimOutcome, Engine};
use crate::effects::{self, Write};
use crate::error::EngineError;
use crate::lifecycle::{AttemptEnd, Effect, Event, Lifecycle, Requeue};
use crate::pipeline::{CompiledPipeline, CompiledStage, format_duration};
use crate::registry::Registry;
use crate::stage::{StageContext, StageError, StageInputs, SuccessWrites};
use crate::state::{RunStatus, StageStatus};
use crate::store::{LeaseGuard, RunRecord, wake_statements};

/// One claim being executed: the running stage tasks and what they need, and the writes
/// decided in the current step, not yet committed.
pub(super) struct ClaimRun<'a> {
    engine: &'a Engine,
    run: &'a RunRecord,
    guard: &'a LeaseGuard,
    pipeline: Option<&'a CompiledPipeline>,
    pub(super) tasks: JoinSet<StageEnded>,
    /// Parent of every running stage's token: tripped by [`Effect::StopStages`].
    stop: CancellationToken,
    running: HashMap<String, RunningStage>,
    /// How long each ended attempt took, until its effect is applied.
    elapsed: HashMap<String, Duration>,
    batch: Write,
    ended: Vec<(Option<Span>, String, StageStatus, Duration)>,
    /// Stages continued past in the current step, with their codes, for the hooks once it
    /// commits.
    continued: Vec<(String, String)>,
}

struct RunningStage {
    attempt: u32,
    span: Span,
    on_success: SuccessWrites,
}

type StageEnded = (String, Result<Value, StageError>, Duration);

impl<'a> ClaimRun<'a> {
    pub(super) fn new(
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
            continued: Vec::new(),
        }
    }

    /// Turns a stage task's result into the lifecycle's event; the retry delay is drawn here
    /// (the lifecycle is pure).
    pub(super) fn stage_event(&mut self, (name, result, elapsed): StageEnded) -> Event {
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
    pub(super) async fn apply(
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
                    return self
                        .finish(status, error, &machine.continued())
                        .await
                        .map(Some);
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
        if let AttemptEnd::Continued { code, .. } = &end {
            self.continued.push((stage.clone(), code.clone()));
        }
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
        for (name, code) in std::mem::take(&mut self.continued) {
            let kind = self
                .pipeline
                .and_then(|p| p.stage(&name))
                .map_or(name.as_str(), |s| s.kind.as_str());
            self.engine
                .hooks
                .stage_failure_continued(self.run, &name, kind, &code);
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
        write.statements.extend(wake_statements(
            self.engine.store.db().get_database_backend(),
        ));
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

    /// Ends the run; `continued` names the stages it went on without (its warnings, if it
    /// succeeded).
    async fn finish(
        &mut self,
        status: RunStatus,
        error: Option<String>,
        continued: &[&str],
    ) -> Result<ClaimOutcome, EngineError> {
        let mut write = effects::finish(self.run, status, error, continued);
        write
            .statements
            .extend(self.engine.hooks.on_status(&self.run.subject, status));
        self.batch.push(write);
        self.commit().await?;
        self.engine.hooks.run_finished(&self.run.id, status);
        if status == RunStatus::Succeeded && !continued.is_empty() {
            self.engine
                .hooks
                .run_succeeded_with_warnings(&self.run.id, continued.len());
        }
        Ok(ClaimOutcome::Finished(status))
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Gives the claim back to the queue if the executor is dropped before it ended the claim
/// itself (its caller went away). The release is fenced, so a claim already lost writes
/// nothing; its write is only built when it is needed.
pub(super) struct ReleaseOnDrop {
    pending: Option<(Engine, LeaseGuard, RunRecord)>,
}

impl ReleaseOnDrop {
    pub(super) fn new(engine: Engine, guard: LeaseGuard, run: RunRecord) -> Self {
        ReleaseOnDrop {
            pending: Some((engine, guard, run)),
        }
    }

    pub(super) fn disarm(&mut self) {
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
pub(super) async fn heartbeat_loop(
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
