//! The queue worker: claims due runs up to its concurrency and executes them. Idle workers read
//! a cheap index (no write lock) to see whether anything is due. On SQLite they do so every
//! `poll_interval`; on PostgreSQL they wait for a queue notification instead, or until the next
//! due time or `poll_interval` (the fallback for leases that expire and retries that come due,
//! which nobody announces), whichever comes first. Before each claim the worker asks its
//! [`ClaimGate`], if the application gave it one: while the gate says no, it claims nothing
//! (runs in flight go on) and asks again every poll, so it resumes by itself. With a
//! [`ClaimPacer`] the number of runs in flight is not fixed: up to `concurrency` (then a
//! ceiling), the worker claims another run only when the pacer wants one, and asks again when
//! the pacer signals a change.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::executor::{ClaimOutcome, Engine};
use crate::wake::{Waiter, Woken};

/// The application's admission rule for new claims (free disk space, say: the engine does not
/// know what is checked). Asked before every claim, so it must be cheap; `Err` carries the
/// reason, logged when claiming pauses.
pub trait ClaimGate: Send + Sync + 'static {
    fn may_claim(&self) -> Result<(), String>;
}

/// The application's rule for how many runs to keep in flight, when that follows something
/// the engine does not know (how many calls a model server takes). Asked before every claim,
/// after the [`ClaimGate`], so it must be cheap.
pub trait ClaimPacer: Send + Sync + 'static {
    /// Whether to claim one more run while `in_flight` runs of this worker execute.
    fn wants_another(&self, in_flight: usize) -> bool;
    /// Resolves when the answer of [`ClaimPacer::wants_another`] may have changed. A change
    /// between the question and this wait must still resolve it (the worker also asks again
    /// every poll interval, so a missed one costs a poll, never a stall).
    fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub id: String,
    /// Runs in flight at most (with a [`ClaimPacer`], the ceiling of what it asks for).
    pub concurrency: usize,
    pub poll_interval: Duration,
}

impl WorkerConfig {
    pub fn new(concurrency: usize) -> Self {
        WorkerConfig {
            id: format!("{}-{:08x}", std::process::id(), fastrand::u32(..)),
            concurrency: concurrency.max(1),
            poll_interval: Duration::from_millis(100),
        }
    }
}

pub struct Worker {
    engine: Engine,
    config: WorkerConfig,
    gate: Option<Arc<dyn ClaimGate>>,
    pacer: Option<Arc<dyn ClaimPacer>>,
}

impl Worker {
    pub fn new(engine: Engine, config: WorkerConfig) -> Self {
        Worker {
            engine,
            config,
            gate: None,
            pacer: None,
        }
    }

    /// A worker that keeps as many runs in flight as `pacer` wants, up to `concurrency`.
    pub fn with_pacer(mut self, pacer: Arc<dyn ClaimPacer>) -> Self {
        self.pacer = Some(pacer);
        self
    }

    /// A worker that claims only while `gate` allows it.
    pub fn with_gate(mut self, gate: Arc<dyn ClaimGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Whether the gate lets this worker claim now; logs when claiming pauses and resumes.
    fn admitted(&self, paused: &mut bool) -> bool {
        // A damaged database takes no new work (`db::mark_damaged`): every claim would be
        // refused anyway, and a paused worker says why once instead of at every poll.
        let verdict = match (shelf_db::known_damage(), &self.gate) {
            (Some(_), _) => Err("the database is damaged; restore it from a backup".to_string()),
            (None, Some(gate)) => gate.may_claim(),
            (None, None) => Ok(()),
        };
        match verdict {
            Ok(()) => {
                if std::mem::take(paused) {
                    tracing::info!(worker = %self.config.id, "claiming resumed");
                }
                true
            }
            Err(reason) => {
                if !*paused {
                    *paused = true;
                    tracing::warn!(worker = %self.config.id, %reason, "claiming paused; runs in flight go on");
                }
                false
            }
        }
    }

    /// Runs until `shutdown` trips. In-flight runs are then released back to the queue with
    /// their checkpoints, so another worker resumes them.
    pub async fn run(&self, shutdown: CancellationToken) {
        let slots = Arc::new(Semaphore::new(self.config.concurrency));
        let mut tasks = JoinSet::new();
        let mut waiter = Waiter::new(self.engine.store().db().clone());
        let mut paused = false;
        tracing::info!(
            worker = %self.config.id,
            concurrency = self.config.concurrency,
            paced = self.pacer.is_some(),
            "worker started"
        );
        loop {
            while tasks.try_join_next().is_some() {}
            let permit = tokio::select! {
                permit = slots.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = shutdown.cancelled() => break,
            };
            if !self.admitted(&mut paused) {
                drop(permit);
                // A queue notification would not change the gate's answer: wait a whole poll.
                tokio::select! {
                    _ = tokio::time::sleep(self.config.poll_interval) => continue,
                    _ = shutdown.cancelled() => break,
                }
            }
            if let Some(pacer) = &self.pacer {
                // Runs in flight: every place but the one held here and the free ones.
                let in_flight = self.config.concurrency - slots.available_permits() - 1;
                if !pacer.wants_another(in_flight) {
                    drop(permit);
                    // Asked again when the pacer signals, or when a run ends (one fewer in
                    // flight), or after a poll.
                    tokio::select! {
                        _ = pacer.changed() => continue,
                        Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
                        _ = tokio::time::sleep(self.config.poll_interval) => continue,
                        _ = shutdown.cancelled() => break,
                    }
                }
            }
            // Listening starts before the queue is read, so a run enqueued right after the read
            // still wakes the wait below.
            waiter.prepare().await;
            let mut next_due = None;
            match self.try_claim(&mut next_due).await {
                Ok(Some(claim)) => {
                    let engine = self.engine.clone();
                    let shutdown = shutdown.clone();
                    tasks.spawn(async move {
                        let run_id = claim.run.id.clone();
                        match engine.execute(claim, shutdown).await {
                            Ok(ClaimOutcome::LeaseLost) => {
                                tracing::warn!(run_id = %run_id, "run taken over by another worker");
                            }
                            Ok(_) => {}
                            Err(error) => tracing::error!(run_id = %run_id, %error, "run execution failed"),
                        }
                        drop(permit);
                    });
                    continue;
                }
                Ok(None) => drop(permit),
                Err(error) => {
                    drop(permit);
                    // A whole poll, not the next due time: a failing database is not retried
                    // in a tight loop.
                    next_due = None;
                    tracing::warn!(%error, "claiming from the queue failed; backing off");
                }
            }
            let timeout = if waiter.listens() {
                idle_timeout(
                    self.config.poll_interval,
                    next_due,
                    self.engine.store().now(),
                )
            } else {
                self.config.poll_interval
            };
            if waiter.wait(timeout, &shutdown).await == Woken::Shutdown {
                break;
            }
        }
        tracing::info!(worker = %self.config.id, in_flight = tasks.len(), "worker stopping");
        while tasks.join_next().await.is_some() {}
    }

    /// Claims a due run, if the index says one is due; `next_due` receives the earliest due
    /// time it read.
    async fn try_claim(
        &self,
        next_due: &mut Option<i64>,
    ) -> Result<Option<crate::store::Claim>, crate::EngineError> {
        *next_due = self.engine.store().next_due_at().await?;
        match *next_due {
            Some(due) if due <= self.engine.store().now() => {
                self.engine.claim(&self.config.id, None).await
            }
            _ => Ok(None),
        }
    }
}

/// How long a listening worker may wait before reading the queue again: until the earliest due
/// time, at most `poll`. A run that is due yet was not claimed is locked by another worker's
/// claim for a moment, so the wait is not zero.
fn idle_timeout(poll: Duration, next_due: Option<i64>, now: i64) -> Duration {
    const LOCKED_ROW_WAIT: Duration = Duration::from_millis(10);
    match next_due {
        Some(due) => Duration::from_millis(u64::try_from(due - now).unwrap_or(0))
            .clamp(LOCKED_ROW_WAIT, poll.max(LOCKED_ROW_WAIT)),
        None => poll,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_worker_wakes_for_the_next_due_run() {
        let poll = Duration::from_secs(30);
        assert_eq!(idle_timeout(poll, None, 1_000), poll);
        assert_eq!(
            idle_timeout(poll, Some(1_250), 1_000),
            Duration::from_millis(250)
        );
        assert_eq!(idle_timeout(poll, Some(100_000), 1_000), poll);
        assert_eq!(
            idle_timeout(poll, Some(900), 1_000),
            Duration::from_millis(10)
        );
        assert_eq!(
            idle_timeout(Duration::ZERO, Some(900), 1_000),
            Duration::from_millis(10)
        );
    }
}
