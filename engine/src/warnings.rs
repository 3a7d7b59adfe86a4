//! A succeeded run's warnings: the stages that failed for good under `on_failure: continue`,
//! read back from their rows (a stage's error is stored as `CODE: MESSAGE`), so no run carries
//! a copy of them and no write grows for them.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use shelf_db::sql::SqlExt;

use crate::error::EngineError;
use crate::state::{RunStatus, StageStatus};
use crate::store::{RunRecord, RunStore, StageRecord, stmt};

/// One stage a run continued past: its name, its stable code and its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunWarning {
    pub stage: String,
    pub code: String,
    pub message: String,
}

impl RunWarning {
    /// The warnings of a run in `status` with these stages: its `failed` stages when the run
    /// succeeded (only a stage continued past can be `failed` then), none otherwise.
    pub fn of_stages(status: RunStatus, stages: &[StageRecord]) -> Vec<RunWarning> {
        if status != RunStatus::Succeeded {
            return Vec::new();
        }
        stages
            .iter()
            .filter(|s| s.status == StageStatus::Failed)
            .map(|s| RunWarning::from_error(&s.name, s.error.as_deref().unwrap_or_default()))
            .collect()
    }

    /// A warning from a failed stage's stored error, `CODE: MESSAGE` (see [`stage_error`]); an
    /// error of another shape keeps its whole text as the message, with the code `unknown`.
    fn from_error(stage: &str, error: &str) -> RunWarning {
        let (code, message) = split_stage_error(error).unwrap_or(("unknown", error));
        RunWarning {
            stage: stage.to_string(),
            code: code.to_string(),
            message: message.to_string(),
        }
    }

    /// `classify failed: invalid_response`: the short form lists and summaries show.
    pub fn short(&self) -> String {
        format!("{} failed: {}", self.stage, self.code)
    }
}

/// How a stage's error is stored in its row: `CODE: MESSAGE`.
pub(crate) fn stage_error(code: &str, message: &str) -> String {
    format!("{code}: {message}")
}

/// The code and message of a stage's stored error, when it has the shape [`stage_error`]
/// writes (a code of lowercase letters, digits and `_`).
fn split_stage_error(error: &str) -> Option<(&str, &str)> {
    let (code, message) = error.split_once(": ")?;
    (!code.is_empty()
        && code
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
    .then_some((code, message))
}

/// `succeeded (1 warning: classify failed: invalid_response)`: a run's status with its
/// warnings, as the command line and the web pages print it; the plain status without any.
pub fn status_line(status: &str, warnings: &[RunWarning]) -> String {
    if warnings.is_empty() {
        return status.to_string();
    }
    let list: Vec<String> = warnings.iter().map(RunWarning::short).collect();
    format!(
        "{status} ({} warning{}: {})",
        warnings.len(),
        if warnings.len() == 1 { "" } else { "s" },
        list.join("; ")
    )
}

impl RunStore {
    /// The warnings of each of `runs` that has any, by run id: one read of the failed stages
    /// of the succeeded ones (none when no run of them succeeded).
    pub async fn warnings(
        &self,
        runs: &[RunRecord],
    ) -> Result<HashMap<String, Vec<RunWarning>>, EngineError> {
        let succeeded: Vec<&str> = runs
            .iter()
            .filter(|r| r.status == RunStatus::Succeeded)
            .map(|r| r.id.as_str())
            .collect();
        let mut found: HashMap<String, Vec<RunWarning>> = HashMap::new();
        // A page of runs is at most a thousand: well under either database's limit of bound
        // values, in chunks all the same so a caller's larger list still reads.
        for ids in succeeded.chunks(500) {
            let marks = vec!["?"; ids.len()].join(", ");
            let rows = self
                .db()
                .query_all_sql(stmt(
                    &format!(
                        "SELECT run_id, name, error FROM run_stages \
                         WHERE status = 'failed' AND run_id IN ({marks}) ORDER BY run_id, position"
                    ),
                    ids.iter().map(|id| (*id).into()).collect(),
                ))
                .await?;
            for row in rows {
                let run_id: String = row.try_get("", "run_id")?;
                let stage: String = row.try_get("", "name")?;
                let error: Option<String> = row.try_get("", "error")?;
                found
                    .entry(run_id)
                    .or_default()
                    .push(RunWarning::from_error(&stage, &error.unwrap_or_default()));
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, status: StageStatus, error: Option<&str>) -> StageRecord {
        StageRecord {
            name: name.into(),
            kind: name.into(),
            position: 0,
            status,
            attempts: 1,
            output: None,
            error: error.map(str::to_string),
            reused_from: None,
            started_at: None,
            finished_at: None,
            duration_ms: None,
        }
    }

    #[test]
    fn a_succeeded_runs_failed_stages_are_its_warnings() {
        let stages = [
            stage("clean", StageStatus::Succeeded, None),
            stage(
                "classify",
                StageStatus::Failed,
                Some(&stage_error("invalid_response", "no JSON: here")),
            ),
            stage("embed", StageStatus::Skipped, None),
            stage("odd", StageStatus::Failed, Some("Not A Code: x")),
        ];
        let warnings = RunWarning::of_stages(RunStatus::Succeeded, &stages);
        assert_eq!(
            warnings,
            vec![
                RunWarning {
                    stage: "classify".into(),
                    code: "invalid_response".into(),
                    message: "no JSON: here".into(),
                },
                RunWarning {
                    stage: "odd".into(),
                    code: "unknown".into(),
                    message: "Not A Code: x".into(),
                },
            ]
        );
        for other in [RunStatus::Failed, RunStatus::Canceled, RunStatus::Running] {
            assert!(
                RunWarning::of_stages(other, &stages).is_empty(),
                "{other:?}"
            );
        }
    }

    #[test]
    fn the_status_line_counts_and_names_the_warnings() {
        let warning = |stage: &str, code: &str| RunWarning {
            stage: stage.into(),
            code: code.into(),
            message: "m".into(),
        };
        assert_eq!(status_line("succeeded", &[]), "succeeded");
        assert_eq!(
            status_line("succeeded", &[warning("classify", "invalid_response")]),
            "succeeded (1 warning: classify failed: invalid_response)"
        );
        assert_eq!(
            status_line(
                "succeeded",
                &[
                    warning("classify", "invalid_response"),
                    warning("summarize", "provider_timeout")
                ]
            ),
            "succeeded (2 warnings: classify failed: invalid_response; summarize failed: provider_timeout)"
        );
    }
}
