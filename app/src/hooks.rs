//! What Shelf adds to the engine's run transitions: the document's status moves in the same
//! transaction as its run's, each finished stage writes the `run_stage_finished` log event,
//! and claims, stage attempts and terminal runs are counted in the process's metrics.

use std::sync::Arc;
use std::time::Duration;

use sea_orm::Statement;
use shelf_documents::{DocumentStatus, status_after_cancel_statement, status_statement};
use shelf_engine::{Claim, EngineError, RunHooks, RunRecord, RunStatus, StageStatus};

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
            RunStatus::Failed => status_statement(subject, DocumentStatus::Failed),
            RunStatus::Canceled => status_after_cancel_statement(subject),
        }]
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
}
