//! The `Stage` trait that every concrete stage implements, and what a stage gets when it runs:
//! its inputs, its options, a cancellation token, an event sink, a store for partial
//! checkpoints, and writes that commit with the attempt's success.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sea_orm::Statement;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::store::LeaseGuard;

/// One kind of work a pipeline can use (`uses: KIND`). Delivery is at least once: a stage may
/// run again after a crash, so it must be idempotent.
#[async_trait]
pub trait Stage: Send + Sync + 'static {
    /// The name pipeline files use for this stage.
    const KIND: &'static str;
    /// The stage's `with:` block. It is deserialized when the pipeline is compiled, so a bad
    /// option is refused at load time with a position. Use `#[serde(deny_unknown_fields)]`.
    type Options: DeserializeOwned + Send + Sync + 'static;

    /// Does the work and returns the output the engine checkpoints. Boolean fields of the
    /// output are the flags that `when:` conditions of later stages read.
    async fn run(&self, options: &Self::Options, ctx: &StageContext) -> Result<Value, StageError>;

    /// Why this stage cannot run in this process (e.g. the model it needs is not configured):
    /// a run then records it as `skipped` with this reason, as for an unmet `when:`, and its
    /// dependents go on. `None`, the default: it runs.
    fn unavailable(&self) -> Option<String> {
        None
    }
}

/// Why a stage attempt did not succeed. `retryable` failures are retried by the stage's retry
/// policy; the rest fail the run at once.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct StageError {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

impl StageError {
    /// A failure that another attempt will not fix (bad input, missing configuration).
    pub fn fatal(code: impl Into<String>, message: impl Into<String>) -> Self {
        StageError {
            code: code.into(),
            message: message.into(),
            retryable: false,
        }
    }

    /// A failure that may pass on another attempt (timeouts, 5xx, busy database).
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> Self {
        StageError {
            code: code.into(),
            message: message.into(),
            retryable: true,
        }
    }

    pub fn canceled() -> Self {
        Self::fatal("canceled", "stage was canceled")
    }
}

/// The outputs of the stages upstream of the running one, nearest first. A skipped stage has no
/// output, so looking a field up passes through it to the stage before it.
#[derive(Debug, Clone, Default)]
pub struct StageInputs {
    pub(crate) upstream: Vec<(String, Value)>,
}

impl StageInputs {
    pub fn new(upstream: Vec<(String, Value)>) -> Self {
        StageInputs { upstream }
    }

    /// The output of a named upstream stage, if it ran.
    pub fn output(&self, stage: &str) -> Option<&Value> {
        self.upstream
            .iter()
            .find(|(name, _)| name == stage)
            .map(|(_, v)| v)
    }

    /// The nearest upstream value of `field`.
    pub fn find(&self, field: &str) -> Option<&Value> {
        self.upstream.iter().find_map(|(_, v)| v.get(field))
    }

    pub fn find_str(&self, field: &str) -> Option<&str> {
        self.find(field).and_then(Value::as_str)
    }
}

/// Everything a stage attempt gets from the engine.
pub struct StageContext {
    pub run_id: String,
    /// What the run is about; opaque to the engine (Shelf puts a document id here).
    pub subject: String,
    pub stage: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The run's input, as given when it was created.
    pub input: Value,
    pub inputs: StageInputs,
    /// Trips when the run is canceled, the stage times out or the worker loses its lease.
    /// Long work should check it; subprocesses should be killed when it trips.
    pub cancel: CancellationToken,
    pub(crate) guard: Option<LeaseGuard>,
    pub(crate) on_success: SuccessWrites,
}

/// The writes a stage attempt handed over with [`StageContext::write_on_success`].
#[derive(Clone, Default)]
pub(crate) struct SuccessWrites(Arc<Mutex<Vec<Statement>>>);

impl SuccessWrites {
    pub(crate) fn take(&self) -> Vec<Statement> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl StageContext {
    /// Records a run event from this stage (progress or a warning). Never put document text,
    /// generated content or secrets in it.
    pub async fn event(&self, kind: &str, message: impl Into<String>) -> Result<(), StageError> {
        if let Some(guard) = &self.guard {
            guard
                .event(&self.stage, kind, &message.into())
                .await
                .map_err(lost)?;
        }
        Ok(())
    }

    /// Queues a write of the stage's result (its text, a cache entry) to commit in the fenced
    /// transaction that records this attempt's success, before any dependent stage starts. A
    /// failed, canceled or interrupted attempt's writes are dropped, and a worker that lost its
    /// lease writes none. Written once with `?` placeholders, like every engine statement.
    pub fn write_on_success(&self, statement: Statement) {
        self.on_success
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(statement);
    }

    /// Commits `statements` now, in one fenced transaction of their own: for rows that must be
    /// seen while the stage still runs (a page's record once it is read, its image), where
    /// [`StageContext::write_on_success`] would hold them back. Nothing commits once another
    /// worker holds the run (`lease_lost`); a passing database refusal is retried while the
    /// lease holds, like every fenced write.
    pub async fn write_now(&self, statements: Vec<Statement>) -> Result<(), StageError> {
        let Some(guard) = &self.guard else {
            return Err(StageError::fatal(
                "lease_lost",
                "the stage has no claim to write under",
            ));
        };
        if statements.is_empty() {
            return Ok(());
        }
        guard
            .apply(crate::store::Write {
                statements,
                events: Vec::new(),
            })
            .await
            .map_err(lost)
    }

    /// A partial checkpoint saved earlier by this stage in this run (or in the run a retry
    /// replays), such as one cleaned chunk.
    pub async fn part<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StageError> {
        let Some(guard) = &self.guard else {
            return Ok(None);
        };
        let raw = guard.get_part(&self.stage, key).await.map_err(lost)?;
        Ok(raw.and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// Saves a partial checkpoint so a resumed attempt does not redo that piece of work.
    pub async fn save_part<T: Serialize>(&self, key: &str, value: &T) -> Result<(), StageError> {
        let Some(guard) = &self.guard else {
            return Ok(());
        };
        let text = serde_json::to_string(value)
            .map_err(|e| StageError::fatal("checkpoint_failed", e.to_string()))?;
        guard.put_part(&self.stage, key, &text).await.map_err(lost)
    }
}

fn lost(e: crate::EngineError) -> StageError {
    match e {
        crate::EngineError::LeaseLost(_) => {
            StageError::fatal("lease_lost", "the worker lost its lease on the run")
        }
        other => StageError::retryable("checkpoint_failed", other.to_string()),
    }
}
