//! The run object clients see: the engine's record in the shape docs/api.md ("Runs") gives,
//! with its stages and chunk progress.

use serde::Serialize;
use shelf_engine::{RunRecord, StageRecord};

#[derive(Debug, Clone, Serialize)]
pub struct StageView {
    pub name: String,
    pub kind: String,
    pub status: String,
    pub attempts: i64,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub duration_ms: Option<i64>,
    pub error: Option<String>,
    /// Set when the stage's checkpoint was reused from an earlier run.
    pub reused_from: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    pub id: String,
    pub document_id: String,
    pub status: String,
    /// The current or last stage.
    pub stage: Option<String>,
    pub total_chunks: i64,
    pub completed_chunks: i64,
    pub failed_chunks: i64,
    pub error: Option<String>,
    pub pipeline: String,
    pub pipeline_sha256: String,
    pub attempt: i64,
    pub retry_of: Option<String>,
    pub cancel_requested: bool,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageView>>,
}

impl RunView {
    /// A list item: the run without its stages.
    pub fn summary(run: &RunRecord) -> Self {
        RunView {
            id: run.id.clone(),
            document_id: run.subject.clone(),
            status: run.status.as_str().to_string(),
            stage: run.stage.clone(),
            total_chunks: 0,
            completed_chunks: 0,
            failed_chunks: 0,
            error: run.error.clone(),
            pipeline: run.pipeline.clone(),
            pipeline_sha256: run.pipeline_sha256.clone(),
            attempt: run.attempt,
            retry_of: run.retry_of.clone(),
            cancel_requested: run.cancel_requested,
            created_at: run.created_at.clone(),
            started_at: run.started_at.clone(),
            finished_at: run.finished_at.clone(),
            stages: None,
        }
    }

    /// The full run. Chunk counts come from the `clean` stages: their saved chunk checkpoints
    /// while running, their output once done.
    pub fn detail(run: &RunRecord, stages: &[StageRecord], part_counts: &[(String, i64)]) -> Self {
        let mut view = Self::summary(run);
        for stage in stages.iter().filter(|s| s.kind == "clean") {
            let saved = part_counts
                .iter()
                .find(|(name, _)| *name == stage.name)
                .map(|(_, n)| *n)
                .unwrap_or(0);
            let output = stage.output.as_ref();
            let total = output
                .and_then(|o| o.get("chunks"))
                .and_then(|v| v.as_i64());
            let fallback = output
                .and_then(|o| o.get("fallback_chunks"))
                .and_then(|v| v.as_i64())
                .unwrap_or(0);
            view.total_chunks += total.unwrap_or(saved);
            view.completed_chunks += total.map(|t| t - fallback).unwrap_or(saved);
            view.failed_chunks += fallback;
        }
        view.stages = Some(
            stages
                .iter()
                .map(|s| StageView {
                    name: s.name.clone(),
                    kind: s.kind.clone(),
                    status: s.status.as_str().to_string(),
                    attempts: s.attempts,
                    started_at: s.started_at.clone(),
                    finished_at: s.finished_at.clone(),
                    duration_ms: s.duration_ms,
                    error: s.error.clone(),
                    reused_from: s.reused_from.clone(),
                })
                .collect(),
        );
        view
    }
}
