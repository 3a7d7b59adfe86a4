//! The executor: runs one claimed run through its stage DAG. Independent stages run
//! concurrently; `when` flags skip stages; failures are retried by re-queueing the run with a
//! later due time (never by sleeping); cancellation and lease loss stop stages at once. The
//! engine's API (submit, retry, cancel, claim, execute) is here; the application's hooks
//! (`hooks`) and what drives one claimed run (`claimed`) beside it.

mod claimed;
mod hooks;

pub use hooks::{NoHooks, RunHooks};

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::effects::{self, Write};
use crate::error::EngineError;
use crate::lifecycle::{ClaimFacts, Event, Lifecycle, StageCheckpoint, StagePlan};
use crate::pipeline::{CompiledPipeline, PipelineError, PipelineSource};
use crate::registry::Registry;
use crate::state::{RunStatus, StageStatus};
use crate::store::{
    CancelOutcome, Claim, LeaseGuard, NewRun, RunRecord, RunStore, SubjectGuard, wake_statements,
};
use claimed::{ClaimRun, ReleaseOnDrop, heartbeat_loop};

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
            .map(|p| StagePlan::of(p, |kind| self.registry.unavailable(kind)))
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
        write
            .statements
            .extend(wake_statements(self.store.db().get_database_backend()));
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

/// The pipeline a run was created with, as a compilable source.
pub fn snapshot_source(run: &RunRecord) -> PipelineSource {
    PipelineSource {
        name: run.pipeline.clone(),
        file: format!("{} (snapshot in run {})", run.pipeline, run.id),
        text: run.pipeline_yaml.clone(),
    }
}
