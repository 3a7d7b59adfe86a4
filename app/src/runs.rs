//! The run object clients see: the engine's record in the shape docs/api.md ("Runs") gives,
//! with its stages, chunk progress and warnings. The API serves these types as they are (named
//! `RunOut` and `StageOut` in `/openapi.json`), so the run has one shape outside the engine;
//! the engine's [`RunRecord`] stays free of HTTP and differs (lease fields, no chunk counts).

use serde::Serialize;
use shelf_engine::{RunRecord, RunWarning, StageRecord};
use utoipa::ToSchema;

/// The schema of the engine's [`RunWarning`] (which has no schema derive), as `/openapi.json`
/// names it; the run serves the engine's type itself.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = RunWarning)]
pub struct RunWarningSchema {
    /// The stage that failed and was continued past (`on_failure: continue`).
    pub stage: String,
    /// Its stable code (docs/errors.md), e.g. `invalid_response`.
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = StageOut)]
pub struct StageView {
    pub name: String,
    pub kind: String,
    /// `pending`, `running`, `succeeded`, `failed`, `skipped` or `canceled`.
    pub status: String,
    pub attempts: i64,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub duration_ms: Option<i64>,
    pub error: Option<String>,
    /// The run whose checkpoint this stage reused.
    pub reused_from: Option<String>,
}

/// A run.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = RunOut)]
pub struct RunView {
    /// `run_` + 16 hex digits.
    pub id: String,
    pub document_id: String,
    /// `queued`, `running`, `succeeded`, `failed` or `canceled`.
    pub status: String,
    /// A succeeded run's stages that failed and were continued past (`on_failure: continue`),
    /// each with its code; empty otherwise. A run with warnings still `succeeded`.
    #[schema(value_type = Vec<RunWarningSchema>)]
    pub warnings: Vec<RunWarning>,
    /// The current or last stage.
    pub stage: Option<String>,
    pub total_chunks: i64,
    pub completed_chunks: i64,
    pub failed_chunks: i64,
    pub error: Option<String>,
    /// The stable code of the stage that failed the run (as in docs/errors.md, e.g.
    /// `pdf_encrypted`), when a stage failed it.
    pub error_code: Option<String>,
    pub pipeline: String,
    pub pipeline_sha256: String,
    pub attempt: i64,
    pub retry_of: Option<String>,
    pub cancel_requested: bool,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// Present on single-run responses, absent from list items.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageView>>,
}

impl RunView {
    /// A list item: the run without its stages, with its warnings (see
    /// [`shelf_engine::RunStore::warnings`]).
    pub fn summary(run: &RunRecord, warnings: Vec<RunWarning>) -> Self {
        RunView {
            id: run.id.clone(),
            document_id: run.subject.clone(),
            status: run.status.as_str().to_string(),
            warnings,
            stage: run.stage.clone(),
            total_chunks: 0,
            completed_chunks: 0,
            failed_chunks: 0,
            error: run.error.clone(),
            error_code: run.error_code().map(str::to_string),
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
        let mut view = Self::summary(run, RunWarning::of_stages(run.status, stages));
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

    /// `succeeded (1 warning: classify failed: invalid_response)`, or the plain status: how the
    /// command line and the web pages print a run's status.
    pub fn status_line(&self) -> String {
        shelf_engine::warnings::status_line(&self.status, &self.warnings)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;
    use shelf_engine::{RunStatus, StageStatus};

    use super::*;

    fn keys(value: &impl Serialize) -> BTreeSet<String> {
        match serde_json::to_value(value) {
            Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
            other => panic!("not an object: {other:?}"),
        }
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn run() -> RunRecord {
        RunRecord {
            id: "run_1".into(),
            subject: "doc_1".into(),
            pipeline: "default".into(),
            pipeline_sha256: "0".repeat(64),
            pipeline_yaml: String::new(),
            input: json!({}),
            status: RunStatus::Queued,
            stage: None,
            error: None,
            attempt: 1,
            retry_of: None,
            cancel_requested: false,
            due_at: 0,
            lease_owner: None,
            lease_token: 0,
            claims: 0,
            reclaims: 0,
            created_at: "2026-11-25T00:00:00Z".into(),
            started_at: None,
            finished_at: None,
            enqueued_at: 0,
            trace_parent: None,
        }
    }

    fn stage() -> StageRecord {
        StageRecord {
            name: "clean".into(),
            kind: "clean".into(),
            position: 0,
            status: StageStatus::Pending,
            attempts: 0,
            output: None,
            error: None,
            reused_from: None,
            started_at: None,
            finished_at: None,
            duration_ms: None,
        }
    }

    /// The engine's records and these views differ on purpose (leases and queue bookkeeping
    /// stay in the engine; chunk counts and stages are derived here), so they are two types.
    /// A field added to either side must be placed: shown (mapped in `summary`/`detail`), or
    /// named below as the engine's own. Either list failing means one side grew alone.
    #[test]
    fn every_record_field_is_shown_or_named_engine_only() {
        let engine_only = set(&[
            "input",
            "due_at",
            "lease_owner",
            "lease_token",
            "claims",
            "reclaims",
            "enqueued_at",
        ]);
        let renamed = [("subject", "document_id")];
        let derived = set(&[
            "error_code",
            "warnings",
            "total_chunks",
            "completed_chunks",
            "failed_chunks",
            "stages",
        ]);
        let record = keys(&run());
        let view = keys(&RunView::detail(&run(), &[stage()], &[]));
        let mut expected: BTreeSet<String> = record
            .difference(&engine_only)
            .map(|k| {
                renamed
                    .iter()
                    .find(|(from, _)| from == k)
                    .map_or(k.clone(), |(_, to)| to.to_string())
            })
            .collect();
        expected.extend(derived);
        assert_eq!(view, expected, "RunRecord and RunView drifted apart");

        let stage_only = set(&["position"]);
        let expected: BTreeSet<String> = keys(&stage()).difference(&stage_only).cloned().collect();
        let shown = keys(&RunView::detail(&run(), &[stage()], &[]).stages.unwrap()[0]);
        assert_eq!(shown, expected, "StageRecord and StageView drifted apart");
    }

    /// The schema names the warning's fields as the engine's type serializes them.
    #[test]
    fn the_warning_schema_matches_the_engine_warning() {
        let warning = RunWarning {
            stage: "classify".into(),
            code: "invalid_response".into(),
            message: "m".into(),
        };
        let schema = RunWarningSchema {
            stage: String::new(),
            code: String::new(),
            message: String::new(),
        };
        assert_eq!(keys(&warning), keys(&schema));
    }

    #[test]
    fn a_succeeded_run_with_a_failed_stage_shows_its_warning() {
        let succeeded = RunRecord {
            status: RunStatus::Succeeded,
            ..run()
        };
        let classify = StageRecord {
            name: "classify".into(),
            kind: "classify".into(),
            status: StageStatus::Failed,
            error: Some("invalid_response: no JSON object".into()),
            ..stage()
        };
        let view = RunView::detail(&succeeded, &[stage(), classify], &[]);
        assert_eq!(view.warnings.len(), 1);
        assert_eq!(
            view.status_line(),
            "succeeded (1 warning: classify failed: invalid_response)"
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(
            json["warnings"],
            json!([{"stage": "classify", "code": "invalid_response", "message": "no JSON object"}])
        );
        let plain = RunView::summary(&succeeded, Vec::new());
        assert_eq!(plain.status_line(), "succeeded");
        assert_eq!(serde_json::to_value(&plain).unwrap()["warnings"], json!([]));
    }
}
