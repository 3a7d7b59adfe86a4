//! What Shelf adds to the engine's run transitions: a run is created only for a document that
//! still exists (checked in the creating transaction), the document's status moves in the same
//! transaction as its run's, each finished stage writes the `run_stage_finished` log event
//! (and a stage continued past `run_stage_failure_continued`), claims, stage attempts, stages
//! continued past and terminal runs are counted in the process's metrics, and the
//! engine's spans name the run's subject `document_id` and continue the trace of the request
//! that created the run.

use std::sync::Arc;
use std::time::Duration;

use sea_orm::{DbBackend, Statement};
use shelf_documents::{
    DocumentStatus, lock_document_statement, status_after_unsuccessful_run_statement,
    status_statement,
};
use shelf_engine::subject_sql::has_succeeded_run;
use shelf_engine::{Claim, EngineError, RunHooks, RunRecord, RunStatus, StageStatus, SubjectGuard};
use tracing::Span;
use tracing::field::Empty;

use crate::metrics::Metrics;

pub struct DocumentHooks {
    pub metrics: Arc<Metrics>,
}

impl RunHooks for DocumentHooks {
    fn on_status(&self, subject: &str, status: RunStatus) -> Vec<Statement> {
        vec![match status {
            RunStatus::Queued | RunStatus::Running => {
                status_statement(subject, DocumentStatus::Processing)
            }
            RunStatus::Succeeded => status_statement(subject, DocumentStatus::Ready),
            RunStatus::Failed => status_after_unsuccessful_run_statement(
                subject,
                DocumentStatus::Failed,
                &has_succeeded_run(subject),
            ),
            RunStatus::Canceled => status_after_unsuccessful_run_statement(
                subject,
                DocumentStatus::Ingested,
                &has_succeeded_run(subject),
            ),
        }]
    }

    /// A run is created only for a document that still exists: its lock first (PostgreSQL;
    /// a delete takes it too), then the move to `processing`, which finds the row or not.
    fn subject_guard(&self, backend: DbBackend, subject: &str) -> Option<SubjectGuard> {
        Some(SubjectGuard {
            lock: lock_document_statement(backend, subject)
                .into_iter()
                .collect(),
            touch: status_statement(subject, DocumentStatus::Processing),
        })
    }

    fn stage_finished(
        &self,
        run: &RunRecord,
        stage: &str,
        status: StageStatus,
        duration: Duration,
    ) {
        tracing::info!(
            run_id = %run.id,
            document_id = %run.subject,
            stage,
            status = status.as_str(),
            duration_ms = duration.as_millis() as u64,
            "run_stage_finished"
        );
        self.metrics.stage_finished(stage, status, duration);
    }

    fn claimed(&self, claim: &Claim) {
        self.metrics.claimed(claim.reclaimed, claim.queue_wait);
    }

    fn claim_failed(&self, _error: &EngineError) {
        self.metrics.claim_failed();
    }

    fn run_finished(&self, _run_id: &str, status: RunStatus) {
        self.metrics.run_finished(status);
    }

    fn stage_failure_continued(&self, run: &RunRecord, stage: &str, kind: &str, code: &str) {
        tracing::warn!(
            run_id = %run.id,
            document_id = %run.subject,
            stage,
            kind,
            code,
            "run_stage_failure_continued"
        );
        self.metrics.stage_failure_continued(kind, code);
    }

    fn run_succeeded_with_warnings(&self, _run_id: &str, _warnings: usize) {
        self.metrics.run_succeeded_with_warnings();
    }

    fn trace_parent(&self) -> Option<String> {
        crate::telemetry::current_traceparent()
    }

    fn claim_span(&self, run: &RunRecord) -> Span {
        // A root span here (not a child of the worker's poll loop): its parent is the request
        // that created the run, wherever that ran.
        let span = tracing::info_span!(
            parent: None,
            "queue_claim",
            otel.kind = "consumer",
            run_id = %run.id,
            document_id = %run.subject,
            pipeline = %run.pipeline,
            worker = run.lease_owner.as_deref().unwrap_or(""),
            claim = run.claims,
            outcome = Empty,
        );
        crate::telemetry::continue_trace(&span, run.trace_parent.as_deref());
        span
    }

    fn stage_span(&self, run: &RunRecord, stage: &str, attempt: u32) -> Span {
        tracing::info_span!(
            "stage",
            otel.name = format!("stage {stage}"),
            run_id = %run.id,
            document_id = %run.subject,
            stage,
            attempt,
            status = Empty,
        )
    }
}
