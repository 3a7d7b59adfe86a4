//! The writes that apply the lifecycle's effects (see [`crate::lifecycle`]): one function per
//! effect, each returning the statements and events that record it. The executor commits them
//! through the claim's lease guard, so each is fenced.

use std::time::Duration;

use serde_json::Value;

use crate::lifecycle::AttemptEnd;
use crate::state::{RunStatus, StageStatus};
use crate::store::{RunRecord, stmt};
use crate::time::now_rfc3339;
use crate::warnings::stage_error;

pub(crate) use crate::store::Write;

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

pub(crate) fn skip(run: &RunRecord, stage: &str, reason: String) -> Write {
    Write {
        statements: vec![stmt(
            "UPDATE run_stages SET status = 'skipped', output = NULL, finished_at = ?, duration_ms = 0 WHERE run_id = ? AND name = ?",
            vec![now_rfc3339().into(), run.id.clone().into(), stage.into()],
        )],
        events: vec![(stage.to_string(), "stage_skipped", reason)],
    }
}

pub(crate) fn start(run: &RunRecord, stage: &str, attempt: u32, of: u32) -> Write {
    Write {
        statements: vec![
            stmt(
                "UPDATE run_stages SET status = 'running', attempts = ?, started_at = ?, finished_at = NULL, duration_ms = NULL \
                 WHERE run_id = ? AND name = ?",
                vec![
                    i64::from(attempt).into(),
                    now_rfc3339().into(),
                    run.id.clone().into(),
                    stage.into(),
                ],
            ),
            stmt(
                "UPDATE runs SET stage = ? WHERE id = ?",
                vec![stage.into(), run.id.clone().into()],
            ),
        ],
        events: vec![(
            stage.to_string(),
            "stage_started",
            format!("attempt {attempt} of {of}"),
        )],
    }
}

/// Drops a stage's partial checkpoints (`run_stage_parts`), in the transaction that records
/// its success: they are kept only so that an unfinished attempt resumes where it was, and
/// after the success nothing reads them (the run's chunk counts come from the output then).
pub(crate) fn parts_dropped(run: &RunRecord, stage: &str) -> sea_orm::Statement {
    stmt(
        "DELETE FROM run_stage_parts WHERE run_id = ? AND stage = ?",
        vec![run.id.clone().into(), stage.into()],
    )
}

pub(crate) fn stage_succeeded(
    run: &RunRecord,
    stage: &str,
    output: &Value,
    elapsed: Duration,
) -> sea_orm::Statement {
    stmt(
        "UPDATE run_stages SET status = 'succeeded', output = ?, error = NULL, finished_at = ?, duration_ms = ? \
         WHERE run_id = ? AND name = ?",
        vec![
            output.to_string().into(),
            now_rfc3339().into(),
            ms(elapsed).into(),
            run.id.clone().into(),
            stage.into(),
        ],
    )
}

/// How an attempt that did not succeed is recorded, and the status the hooks hear of (none for
/// an interrupted attempt, which does not count).
pub(crate) fn attempt_ended(
    run: &RunRecord,
    stage: &str,
    attempt: u32,
    of: u32,
    end: &AttemptEnd,
    elapsed: Duration,
) -> (Write, Option<StageStatus>) {
    let record = |status: StageStatus, error: Option<String>| {
        stmt(
            "UPDATE run_stages SET status = ?, error = ?, finished_at = ?, duration_ms = ? WHERE run_id = ? AND name = ?",
            vec![
                status.as_str().into(),
                error.into(),
                now_rfc3339().into(),
                ms(elapsed).into(),
                run.id.clone().into(),
                stage.into(),
            ],
        )
    };
    match end {
        AttemptEnd::Interrupted => (
            Write {
                statements: vec![stmt(
                    "UPDATE run_stages SET status = 'pending', attempts = attempts - 1 WHERE run_id = ? AND name = ?",
                    vec![run.id.clone().into(), stage.into()],
                )],
                events: vec![],
            },
            None,
        ),
        AttemptEnd::Canceled => (
            Write {
                statements: vec![record(
                    StageStatus::Canceled,
                    Some("canceled: stage was canceled".into()),
                )],
                events: vec![(stage.to_string(), "stage_canceled", "canceled".into())],
            },
            Some(StageStatus::Canceled),
        ),
        AttemptEnd::Retrying { code, message } => (
            Write {
                statements: vec![record(
                    StageStatus::Pending,
                    Some(stage_error(code, message)),
                )],
                events: vec![(
                    stage.to_string(),
                    "stage_failed",
                    format!("attempt {attempt} of {of} failed ({code}): {message}; retrying"),
                )],
            },
            Some(StageStatus::Failed),
        ),
        AttemptEnd::Failed { code, message } | AttemptEnd::Continued { code, message } => {
            // The stage's row is the same either way (its `code: message` is what a run's
            // warnings are read from); only the event says whether the run goes on.
            let going_on = if matches!(end, AttemptEnd::Continued { .. }) {
                "; continuing (on_failure: continue)"
            } else {
                ""
            };
            (
                Write {
                    statements: vec![record(
                        StageStatus::Failed,
                        Some(stage_error(code, message)),
                    )],
                    events: vec![(
                        stage.to_string(),
                        "stage_failed",
                        format!("attempt {attempt} of {of} failed ({code}): {message}{going_on}"),
                    )],
                },
                Some(StageStatus::Failed),
            )
        }
    }
}

/// Back to the queue, due at `due_at` (now when `None`). A cancel requested meanwhile makes the
/// run due at once, so the next claim ends it instead of waiting out a retry's backoff.
pub(crate) fn requeue(run: &RunRecord, due_at: Option<i64>, now: i64) -> Write {
    Write {
        statements: vec![
            stmt(
                "UPDATE runs SET status = 'queued', due_at = CASE WHEN cancel_requested = 1 THEN ? ELSE ? END, lease_owner = NULL WHERE id = ?",
                vec![
                    now.into(),
                    due_at.unwrap_or(now).into(),
                    run.id.clone().into(),
                ],
            ),
            stmt(
                "UPDATE run_stages SET status = 'pending' WHERE run_id = ? AND status = 'running'",
                vec![run.id.clone().into()],
            ),
        ],
        events: vec![],
    }
}

/// Running stages whose attempt is given up without counting (a release): pending again, one
/// attempt fewer. Comes before [`requeue`]'s own reset of running stages.
pub(crate) fn uncount_running_stages(run: &RunRecord) -> sea_orm::Statement {
    stmt(
        "UPDATE run_stages SET status = 'pending', attempts = attempts - 1 WHERE run_id = ? AND status = 'running' AND attempts > 0",
        vec![run.id.clone().into()],
    )
}

/// The run's end; `continued` names the stages it went on without (`on_failure: continue`),
/// which its success event lists.
pub(crate) fn finish(
    run: &RunRecord,
    status: RunStatus,
    error: Option<String>,
    continued: &[&str],
) -> Write {
    let (kind, message) = match status {
        RunStatus::Succeeded if !continued.is_empty() => (
            "run_succeeded",
            format!(
                "run succeeded with {} warning{}: failed and continued past: {}",
                continued.len(),
                if continued.len() == 1 { "" } else { "s" },
                continued.join(", ")
            ),
        ),
        RunStatus::Succeeded => ("run_succeeded", "run succeeded".to_string()),
        RunStatus::Canceled => ("run_canceled", "run canceled".to_string()),
        _ => (
            "run_failed",
            format!(
                "run failed: {}",
                error.as_deref().unwrap_or("unknown error")
            ),
        ),
    };
    Write {
        statements: vec![
            stmt(
                "UPDATE runs SET status = ?, error = ?, finished_at = ?, lease_owner = NULL WHERE id = ?",
                vec![
                    status.as_str().into(),
                    error.into(),
                    now_rfc3339().into(),
                    run.id.clone().into(),
                ],
            ),
            stmt(
                "UPDATE run_stages SET status = 'canceled' WHERE run_id = ? AND status IN ('pending', 'running')",
                vec![run.id.clone().into()],
            ),
        ],
        events: vec![("run".into(), kind, message)],
    }
}
