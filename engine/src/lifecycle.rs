//! The run lifecycle as a pure state machine: one claim of a run is a [`Lifecycle`], fed
//! [`Event`]s (a stage ended, a cancel was requested, the process is stopping, the lease was
//! lost) and answering with [`Effect`]s (start or skip a stage, record how an attempt ended,
//! stop the running stages, put the run back on the queue, end it). No I/O, no clock, no
//! randomness: the executor measures time and draws retry delays, then applies what this module
//! decides, so every decision can be tested exhaustively.
//!
//! The order of decisions when a claim ends (see [`Lifecycle::ending`]) is the contract
//! ARCHITECTURE.md states: a lost lease writes nothing; a run whose every stage succeeded
//! succeeds (a late cancel does not undo committed work); then cancel, failure, shutdown and a
//! scheduled retry, in that order. A stage with `on_failure: continue` that fails for good
//! counts as done (like a skipped stage: no output) and fails nothing: the run can still
//! succeed, and [`Lifecycle::continued`] names such stages for its warnings.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::pipeline::{CompiledPipeline, OnFailure, WhenFlag};
use crate::state::{RunStatus, StageStatus};

/// What the machine needs to know of one stage of the pipeline.
#[derive(Debug, Clone)]
pub struct StagePlan {
    pub name: String,
    pub needs: Vec<String>,
    pub when: Option<WhenFlag>,
    /// Total attempts allowed, the first included.
    pub max_attempts: u32,
    /// What the stage's failure for good does to the run.
    pub on_failure: OnFailure,
    /// Why the stage's kind cannot run in this process ([`crate::Stage::unavailable`]): it is
    /// skipped with this reason.
    pub unavailable: Option<String>,
}

impl StagePlan {
    /// The plans of `pipeline`'s stages; `unavailable` says, by stage kind, why one cannot run
    /// here.
    pub fn of(
        pipeline: &CompiledPipeline,
        unavailable: impl Fn(&str) -> Option<String>,
    ) -> Vec<StagePlan> {
        pipeline
            .stages
            .iter()
            .map(|s| StagePlan {
                name: s.name.clone(),
                needs: s.needs.clone(),
                when: s.when.clone(),
                max_attempts: s.retry.attempts.max(1),
                on_failure: s.on_failure,
                unavailable: unavailable(&s.kind),
            })
            .collect()
    }
}

/// A stage's checkpoint as stored when the run was claimed.
#[derive(Debug, Clone)]
pub struct StageCheckpoint {
    pub name: String,
    pub status: StageStatus,
    pub attempts: u32,
    pub output: Option<Value>,
}

/// What the claim itself says about the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaimFacts {
    pub cancel_requested: bool,
    pub reclaimed: bool,
    /// Claims of this run so far, this one included.
    pub claims: u32,
    pub reclaims: u32,
    pub max_reclaims: u32,
}

/// Something that happened to a claimed run.
#[derive(Debug, Clone)]
pub enum Event {
    StageSucceeded {
        stage: String,
        output: Value,
    },
    StageFailed {
        stage: String,
        code: String,
        message: String,
        retryable: bool,
        /// When a retry would be due (the executor draws the backoff).
        retry_at: i64,
    },
    /// Someone asked to cancel the run (read by the heartbeat).
    CancelRequested,
    /// This process is stopping (SIGTERM, Ctrl-C, the executor's owner going away).
    Shutdown,
    /// Another worker holds the run now, or the lease could not be renewed in time.
    LeaseLost,
}

/// How a stage attempt that did not succeed is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptEnd {
    /// Failed, and another attempt comes when the run is due again.
    Retrying { code: String, message: String },
    /// Failed for good: the run fails.
    Failed { code: String, message: String },
    /// Failed for good, and the stage's `on_failure: continue` lets the run go on: the stage
    /// ends `failed`, its dependents run without its output, no sibling is stopped.
    Continued { code: String, message: String },
    /// Stopped by a cancel.
    Canceled,
    /// Stopped because the process is stopping: the attempt does not count.
    Interrupted,
}

/// What the executor must do. Effects of one step are applied in order and committed together.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Record that the claim reuses these stages' checkpoints (a resumed or retried run).
    CheckpointsReused {
        stages: Vec<String>,
    },
    Skip {
        stage: String,
        reason: String,
    },
    Start {
        stage: String,
        attempt: u32,
        of: u32,
    },
    /// Record the attempt's success (with the writes it handed over).
    Succeeded {
        stage: String,
        output: Value,
    },
    AttemptEnded {
        stage: String,
        attempt: u32,
        of: u32,
        end: AttemptEnd,
    },
    /// Trip every running stage's cancellation token.
    StopStages,
    /// Put the run back on the queue: for a retry at `due_at`, or at once (`due_at` None) when
    /// this process stops.
    Requeue {
        due_at: Option<i64>,
        reason: Requeue,
    },
    /// The run ends in a terminal state.
    Finish {
        status: RunStatus,
        error: Option<String>,
    },
    /// Stop without writing anything more: another worker owns the run.
    Abandon,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    RetryScheduled,
    Released,
}

#[derive(Debug, Clone)]
struct Slot {
    status: StageStatus,
    attempts: u32,
    output: Option<Value>,
}

/// One claim of a run, from the claim to its end.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    plans: Vec<StagePlan>,
    slots: Vec<Slot>,
    in_flight: BTreeSet<usize>,
    cancel_requested: bool,
    stopping: bool,
    lease_lost: bool,
    failure: Option<String>,
    retry_due: Option<i64>,
    ended: bool,
}

impl Lifecycle {
    /// The machine for a fresh claim, and the effects the claim itself calls for. `pipeline` is
    /// the run's snapshot compiled, or why it no longer compiles.
    pub fn claimed(
        facts: ClaimFacts,
        pipeline: Result<Vec<StagePlan>, String>,
        checkpoints: &[StageCheckpoint],
    ) -> (Lifecycle, Vec<Effect>) {
        let plans = pipeline.as_ref().cloned().unwrap_or_default();
        let slots = plans
            .iter()
            .map(|plan| {
                let stored = checkpoints.iter().find(|c| c.name == plan.name);
                Slot {
                    // A stage left `running` by a worker that died starts again from its
                    // checkpoints.
                    status: match stored.map(|c| c.status) {
                        Some(StageStatus::Running) | None => StageStatus::Pending,
                        Some(other) => other,
                    },
                    attempts: stored.map_or(0, |c| c.attempts),
                    output: stored
                        .filter(|c| c.status == StageStatus::Succeeded)
                        .map(|c| c.output.clone().unwrap_or(Value::Null)),
                }
            })
            .collect();
        let mut machine = Lifecycle {
            plans,
            slots,
            in_flight: BTreeSet::new(),
            cancel_requested: facts.cancel_requested,
            stopping: false,
            lease_lost: false,
            failure: None,
            retry_due: None,
            ended: false,
        };
        // A cancel is checked before anything else.
        if facts.cancel_requested {
            return machine.finished_at_claim(RunStatus::Canceled, None);
        }
        if facts.reclaimed && facts.reclaims > facts.max_reclaims {
            let message = format!(
                "run was reclaimed {} times after its worker stopped (limit {}); giving up",
                facts.reclaims, facts.max_reclaims
            );
            return machine.finished_at_claim(RunStatus::Failed, Some(message));
        }
        if let Err(e) = pipeline {
            let message = format!("the run's pipeline snapshot no longer compiles: {e}");
            return machine.finished_at_claim(RunStatus::Failed, Some(message));
        }
        let mut effects = Vec::new();
        if facts.claims > 1 || facts.reclaimed {
            let mut reused: Vec<String> = machine
                .plans
                .iter()
                .zip(&machine.slots)
                .filter(|(_, s)| s.status == StageStatus::Succeeded)
                .map(|(p, _)| p.name.clone())
                .collect();
            reused.sort();
            if !reused.is_empty() {
                effects.push(Effect::CheckpointsReused { stages: reused });
            }
        }
        machine.advance(&mut effects);
        (machine, effects)
    }

    /// Applies one event; the effects say what to do about it.
    pub fn step(&mut self, event: Event) -> Vec<Effect> {
        let mut effects = Vec::new();
        if self.ended {
            return effects;
        }
        match event {
            Event::LeaseLost => {
                self.lease_lost = true;
                self.ended = true;
                return vec![Effect::StopStages, Effect::Abandon];
            }
            Event::CancelRequested => {
                if !self.cancel_requested {
                    self.cancel_requested = true;
                    if !self.in_flight.is_empty() {
                        effects.push(Effect::StopStages);
                    }
                }
            }
            Event::Shutdown => {
                if !self.stopping {
                    self.stopping = true;
                    if !self.in_flight.is_empty() {
                        effects.push(Effect::StopStages);
                    }
                }
            }
            Event::StageSucceeded { stage, output } => {
                if let Some(i) = self.running_index(&stage) {
                    self.in_flight.remove(&i);
                    self.slots[i].status = StageStatus::Succeeded;
                    self.slots[i].output = Some(output.clone());
                    effects.push(Effect::Succeeded { stage, output });
                }
            }
            Event::StageFailed {
                stage,
                code,
                message,
                retryable,
                retry_at,
            } => {
                if let Some(i) = self.running_index(&stage) {
                    self.in_flight.remove(&i);
                    let end = self.attempt_end(i, code, message, retryable, retry_at);
                    let slot = &mut self.slots[i];
                    let attempt = slot.attempts;
                    slot.status = match &end {
                        AttemptEnd::Retrying { .. } => StageStatus::Pending,
                        AttemptEnd::Interrupted => {
                            slot.attempts = slot.attempts.saturating_sub(1);
                            StageStatus::Pending
                        }
                        AttemptEnd::Failed { .. } | AttemptEnd::Continued { .. } => {
                            StageStatus::Failed
                        }
                        AttemptEnd::Canceled => StageStatus::Canceled,
                    };
                    let fail_fast = matches!(end, AttemptEnd::Failed { .. });
                    effects.push(Effect::AttemptEnded {
                        stage,
                        attempt,
                        of: self.plans[i].max_attempts,
                        end,
                    });
                    // Fail fast: siblings still running stop now.
                    if fail_fast && !self.in_flight.is_empty() {
                        effects.push(Effect::StopStages);
                    }
                }
            }
        }
        self.advance(&mut effects);
        effects
    }

    /// Whether the claim has ended (a terminal state, a requeue, or abandoned).
    pub fn is_over(&self) -> bool {
        self.ended
    }

    /// The stages running now.
    pub fn running(&self) -> Vec<&str> {
        self.in_flight
            .iter()
            .map(|&i| self.plans[i].name.as_str())
            .collect()
    }

    /// The outputs of succeeded stages, by name.
    pub fn output(&self, stage: &str) -> Option<&Value> {
        let i = self.index(stage)?;
        self.slots[i].output.as_ref()
    }

    pub fn status(&self, stage: &str) -> Option<StageStatus> {
        self.index(stage).map(|i| self.slots[i].status)
    }

    /// The stages that failed for good and were continued past (`on_failure: continue`), in
    /// pipeline order: a run that succeeds with them succeeds with a warning each.
    pub fn continued(&self) -> Vec<&str> {
        (0..self.plans.len())
            .filter(|&i| self.continued_past(i))
            .map(|i| self.plans[i].name.as_str())
            .collect()
    }

    /// Whether stage `i` failed for good under `on_failure: continue`. Only that path leaves
    /// such a stage `failed` (a cancel or a sibling's failure leaves it `canceled`), also when
    /// the status comes from a checkpoint of an earlier claim.
    fn continued_past(&self, i: usize) -> bool {
        self.slots[i].status == StageStatus::Failed
            && self.plans[i].on_failure == OnFailure::Continue
    }

    /// Whether stage `i` is done in a way that lets its dependents start and the run succeed:
    /// succeeded, skipped, or failed and continued past (which, like a skipped stage, leaves
    /// no output, so lookups pass through it).
    fn done_for_dependents(&self, i: usize) -> bool {
        self.slots[i].status.satisfies_dependents() || self.continued_past(i)
    }

    fn index(&self, stage: &str) -> Option<usize> {
        self.plans.iter().position(|p| p.name == stage)
    }

    fn running_index(&self, stage: &str) -> Option<usize> {
        self.index(stage).filter(|i| self.in_flight.contains(i))
    }

    fn attempt_end(
        &mut self,
        i: usize,
        code: String,
        message: String,
        retryable: bool,
        retry_at: i64,
    ) -> AttemptEnd {
        if self.stopping && !self.cancel_requested {
            return AttemptEnd::Interrupted;
        }
        if self.cancel_requested || (self.failure.is_some() && code == "canceled") {
            return AttemptEnd::Canceled;
        }
        let name = &self.plans[i].name;
        if retryable && self.slots[i].attempts < self.plans[i].max_attempts {
            self.retry_due = Some(self.retry_due.map_or(retry_at, |d| d.min(retry_at)));
            AttemptEnd::Retrying { code, message }
        } else if self.plans[i].on_failure == OnFailure::Continue {
            AttemptEnd::Continued { code, message }
        } else {
            self.failure
                .get_or_insert_with(|| stage_failure(name, &code, &message));
            AttemptEnd::Failed { code, message }
        }
    }

    /// Starts and skips what can run now; once nothing runs and nothing can start, ends the
    /// claim.
    fn advance(&mut self, effects: &mut Vec<Effect>) {
        if self.ended {
            return;
        }
        let starting = !self.cancel_requested
            && !self.stopping
            && self.failure.is_none()
            && self.retry_due.is_none();
        if starting {
            let mut progressed = true;
            while progressed {
                progressed = false;
                for i in 0..self.plans.len() {
                    if self.slots[i].status != StageStatus::Pending || !self.needs_met(i) {
                        continue;
                    }
                    let plan = &self.plans[i];
                    if let Some(reason) = &plan.unavailable {
                        self.slots[i].status = StageStatus::Skipped;
                        effects.push(Effect::Skip {
                            stage: plan.name.clone(),
                            reason: format!("skipped: {reason}"),
                        });
                        progressed = true;
                        continue;
                    }
                    if let Some(when) = &plan.when
                        && !self.flag_set(when)
                    {
                        self.slots[i].status = StageStatus::Skipped;
                        effects.push(Effect::Skip {
                            stage: plan.name.clone(),
                            reason: format!("skipped: {when} is not set"),
                        });
                        progressed = true;
                        continue;
                    }
                    let slot = &mut self.slots[i];
                    slot.attempts += 1;
                    slot.status = StageStatus::Running;
                    self.in_flight.insert(i);
                    effects.push(Effect::Start {
                        stage: plan.name.clone(),
                        attempt: slot.attempts,
                        of: plan.max_attempts,
                    });
                }
            }
        }
        if self.in_flight.is_empty() {
            self.ended = true;
            effects.push(self.ending());
        }
    }

    /// How a claim with nothing running ends, in the documented order of precedence.
    fn ending(&self) -> Effect {
        if self.lease_lost {
            return Effect::Abandon;
        }
        if (0..self.slots.len()).all(|i| self.done_for_dependents(i)) {
            return Effect::Finish {
                status: RunStatus::Succeeded,
                error: None,
            };
        }
        if self.cancel_requested {
            return Effect::Finish {
                status: RunStatus::Canceled,
                error: None,
            };
        }
        if let Some(message) = &self.failure {
            return Effect::Finish {
                status: RunStatus::Failed,
                error: Some(message.clone()),
            };
        }
        if self.stopping {
            return Effect::Requeue {
                due_at: None,
                reason: Requeue::Released,
            };
        }
        if let Some(due) = self.retry_due {
            return Effect::Requeue {
                due_at: Some(due),
                reason: Requeue::RetryScheduled,
            };
        }
        let stuck: Vec<&str> = (0..self.plans.len())
            .filter(|&i| !self.done_for_dependents(i))
            .map(|i| self.plans[i].name.as_str())
            .collect();
        Effect::Finish {
            status: RunStatus::Failed,
            error: Some(format!("stages could not run: {}", stuck.join(", "))),
        }
    }

    fn needs_met(&self, i: usize) -> bool {
        self.plans[i]
            .needs
            .iter()
            .all(|n| self.index(n).is_some_and(|j| self.done_for_dependents(j)))
    }

    fn flag_set(&self, when: &WhenFlag) -> bool {
        self.index(&when.stage).is_some_and(|j| {
            self.slots[j].status == StageStatus::Succeeded
                && self.slots[j]
                    .output
                    .as_ref()
                    .and_then(|o| o.get(&when.flag))
                    .and_then(Value::as_bool)
                    == Some(true)
        })
    }

    fn finished_at_claim(
        mut self,
        status: RunStatus,
        error: Option<String>,
    ) -> (Lifecycle, Vec<Effect>) {
        self.ended = true;
        (self, vec![Effect::Finish { status, error }])
    }
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;

/// A run's error when a stage failed it: `stage NAME failed (CODE): MESSAGE`. The code is the
/// stage's stable code, which [`stage_failure_code`] reads back.
pub fn stage_failure(name: &str, code: &str, message: &str) -> String {
    format!("stage {name} failed ({code}): {message}")
}

/// The stable code of the stage that failed a run, from the run's error as
/// [`stage_failure`] writes it (none for a run failed otherwise, such as by reclaims).
pub fn stage_failure_code(error: &str) -> Option<&str> {
    let rest = error.strip_prefix("stage ")?;
    let (_, rest) = rest.split_once(" failed (")?;
    let (code, _) = rest.split_once("): ")?;
    (!code.is_empty()
        && code
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
    .then_some(code)
}

#[cfg(test)]
mod failure_line_tests {
    use super::*;

    #[test]
    fn the_code_of_a_stage_failure_reads_back() {
        let line = stage_failure("extract", "pdf_encrypted", "the PDF is encrypted (AES): no");
        assert_eq!(stage_failure_code(&line), Some("pdf_encrypted"));
        let tricky = stage_failure(
            "ocr",
            "ocr_failed",
            "page 2 failed (x): y; stage z failed (w): v",
        );
        assert_eq!(stage_failure_code(&tricky), Some("ocr_failed"));
        for other in [
            "",
            "lease lost too many times",
            "stage extract failed",
            "stage extract failed (): x",
            "stage extract failed (Not A Code): x",
        ] {
            assert_eq!(stage_failure_code(other), None, "{other}");
        }
    }
}
