//! The hooks through which the application adds to the engine's transitions (statements in
//! the same transaction, metrics, spans) without the engine knowing what a subject is, and
//! `NoHooks` for an engine with none.

use std::time::Duration;

use sea_orm::{DbBackend, Statement};
use tracing::Span;

use crate::error::EngineError;
use crate::state::{RunStatus, StageStatus};
use crate::store::{Claim, RunRecord, SubjectGuard};

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

    /// Called after a stage of kind `kind` failed for good with `code` and, by its
    /// `on_failure: continue`, the run went on without it (metrics).
    fn stage_failure_continued(&self, _run: &RunRecord, _stage: &str, _kind: &str, _code: &str) {}

    /// Called after a run succeeded with `warnings` stages continued past (at least one), next
    /// to its [`RunHooks::run_finished`] (metrics).
    fn run_succeeded_with_warnings(&self, _run_id: &str, _warnings: usize) {}

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
