//! The queue worker: claims due runs up to its concurrency and executes them. Idle workers poll
//! a cheap indexed read (no write lock) every `poll_interval`, so new work is noticed within
//! about that long without hammering the database.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::executor::{ClaimOutcome, Engine};
use crate::time::now_ms;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub id: String,
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
}

impl Worker {
    pub fn new(engine: Engine, config: WorkerConfig) -> Self {
        Worker { engine, config }
    }

    /// Runs until `shutdown` trips. In-flight runs are then released back to the queue with
    /// their checkpoints, so another worker resumes them.
    pub async fn run(&self, shutdown: CancellationToken) {
        let slots = Arc::new(Semaphore::new(self.config.concurrency));
        let mut tasks = JoinSet::new();
        tracing::info!(worker = %self.config.id, concurrency = self.config.concurrency, "worker started");
        loop {
            while tasks.try_join_next().is_some() {}
            let permit = tokio::select! {
                permit = slots.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = shutdown.cancelled() => break,
            };
            match self.try_claim().await {
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
                    tracing::warn!(%error, "claiming from the queue failed; backing off");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.poll_interval) => {}
                _ = shutdown.cancelled() => break,
            }
        }
        tracing::info!(worker = %self.config.id, in_flight = tasks.len(), "worker stopping");
        while tasks.join_next().await.is_some() {}
    }

    async fn try_claim(&self) -> Result<Option<crate::store::Claim>, crate::EngineError> {
        match self.engine.store().next_due_at().await? {
            Some(due) if due <= now_ms() => self.engine.claim(&self.config.id, None).await,
            _ => Ok(None),
        }
    }
}
