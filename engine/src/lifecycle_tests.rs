//! The lifecycle's decisions: every event in every reachable state of small pipelines, and a
//! property test over random pipelines and random interleavings of stage results, cancels,
//! shutdowns and lost leases, each step checked against the invariants ARCHITECTURE.md states.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn plan(name: &str, needs: &[&str], attempts: u32) -> StagePlan {
    StagePlan {
        name: name.into(),
        needs: needs.iter().map(|s| s.to_string()).collect(),
        when: None,
        max_attempts: attempts,
        on_failure: OnFailure::Fail,
        unavailable: None,
    }
}

/// A stage with `on_failure: continue`.
fn lenient(name: &str, needs: &[&str], attempts: u32) -> StagePlan {
    StagePlan {
        on_failure: OnFailure::Continue,
        ..plan(name, needs, attempts)
    }
}

fn failed(stage: &str, code: &str, retryable: bool) -> Event {
    Event::StageFailed {
        stage: stage.into(),
        code: code.into(),
        message: "m".into(),
        retryable,
        retry_at: 1_000,
    }
}

fn succeeded(stage: &str) -> Event {
    Event::StageSucceeded {
        stage: stage.into(),
        output: json!({}),
    }
}

fn start(stage: &str, attempt: u32, of: u32) -> Effect {
    Effect::Start {
        stage: stage.into(),
        attempt,
        of,
    }
}

fn finish_succeeded() -> Effect {
    Effect::Finish {
        status: RunStatus::Succeeded,
        error: None,
    }
}

fn fresh() -> ClaimFacts {
    ClaimFacts {
        claims: 1,
        max_reclaims: 3,
        ..ClaimFacts::default()
    }
}

/// What the test knows of a claim from the effects alone, checked against each step.
#[derive(Debug, Clone, Default)]
struct Observer {
    running: BTreeSet<String>,
    done: BTreeMap<String, StageStatus>,
    attempts: BTreeMap<String, u32>,
    cancel: bool,
    stopping: bool,
    lease_lost: bool,
    failed: bool,
    /// Stages that failed for good and were continued past.
    continued: BTreeSet<String>,
    retrying: bool,
    ended: Option<Effect>,
}

impl Observer {
    /// Whether `stage` is done in a way that lets dependents start and the run succeed.
    fn done_for_dependents(&self, stage: &str) -> bool {
        self.done
            .get(stage)
            .is_some_and(|s| s.satisfies_dependents())
            || self.continued.contains(stage)
    }

    fn event(&mut self, event: &Event) {
        match event {
            Event::CancelRequested => self.cancel = true,
            Event::Shutdown => self.stopping = true,
            Event::LeaseLost => self.lease_lost = true,
            _ => {}
        }
    }

    /// Checks one step's effects against the invariants and records them.
    fn effects(&mut self, plans: &[StagePlan], effects: &[Effect]) {
        if self.ended.is_some() {
            assert!(
                effects.is_empty(),
                "an ended claim decides nothing more: {effects:?}"
            );
            return;
        }
        for (i, effect) in effects.iter().enumerate() {
            let last = i + 1 == effects.len();
            match effect {
                Effect::Start { stage, attempt, of } => {
                    assert!(
                        !self.cancel && !self.stopping && !self.failed && !self.lease_lost,
                        "nothing starts once the run is stopping: {effect:?} in {self:?}"
                    );
                    assert!(!self.running.contains(stage), "{stage} started twice");
                    assert_ne!(
                        self.done.get(stage),
                        Some(&StageStatus::Succeeded),
                        "a succeeded stage never runs again in the same run"
                    );
                    let p = plans.iter().find(|p| &p.name == stage).expect("planned");
                    for need in &p.needs {
                        assert!(
                            self.done_for_dependents(need),
                            "{stage} started before {need}"
                        );
                    }
                    assert!(
                        !self.continued.contains(stage),
                        "a stage continued past never runs again in the same run"
                    );
                    assert!(*attempt <= *of && *of == p.max_attempts, "{effect:?}");
                    self.attempts.insert(stage.clone(), *attempt);
                    self.running.insert(stage.clone());
                    self.done.remove(stage);
                }
                Effect::Skip { stage, .. } => {
                    self.done.insert(stage.clone(), StageStatus::Skipped);
                }
                Effect::Succeeded { stage, .. } => {
                    assert!(
                        self.running.remove(stage),
                        "{stage} succeeded without running"
                    );
                    self.done.insert(stage.clone(), StageStatus::Succeeded);
                }
                Effect::AttemptEnded { stage, end, .. } => {
                    assert!(self.running.remove(stage), "{stage} ended without running");
                    match end {
                        AttemptEnd::Failed { .. } => {
                            let p = plans.iter().find(|p| &p.name == stage).expect("planned");
                            assert_eq!(p.on_failure, OnFailure::Fail, "{effect:?}");
                            self.failed = true;
                            self.done.insert(stage.clone(), StageStatus::Failed);
                        }
                        AttemptEnd::Continued { .. } => {
                            let p = plans.iter().find(|p| &p.name == stage).expect("planned");
                            assert_eq!(p.on_failure, OnFailure::Continue, "{effect:?}");
                            assert!(!self.cancel, "a canceled run continues past nothing");
                            self.continued.insert(stage.clone());
                            self.done.insert(stage.clone(), StageStatus::Failed);
                        }
                        AttemptEnd::Retrying { .. } => self.retrying = true,
                        AttemptEnd::Canceled => {
                            assert!(self.cancel || self.failed, "{effect:?} without a cancel");
                            self.done.insert(stage.clone(), StageStatus::Canceled);
                        }
                        AttemptEnd::Interrupted => assert!(self.stopping),
                    }
                }
                Effect::StopStages => {
                    // A stage continued past stops no sibling: only a cancel, a shutdown, a
                    // lost lease or a failure does.
                    assert!(
                        self.cancel || self.stopping || self.failed || self.lease_lost,
                        "stages stopped for no reason: {self:?}"
                    );
                }
                Effect::CheckpointsReused { .. } => {}
                Effect::Abandon => {
                    assert!(
                        last && self.lease_lost,
                        "abandon only for a lost lease, last"
                    );
                    self.ended = Some(effect.clone());
                }
                Effect::Requeue { reason, .. } => {
                    assert!(last, "the end of a claim is its last effect");
                    assert!(self.running.is_empty(), "requeued with stages running");
                    assert!(!self.cancel, "a canceled run is never requeued");
                    match reason {
                        Requeue::Released => assert!(self.stopping),
                        Requeue::RetryScheduled => assert!(self.retrying && !self.stopping),
                    }
                    self.ended = Some(effect.clone());
                }
                Effect::Finish { status, .. } => {
                    assert!(last, "the end of a claim is its last effect");
                    assert!(self.running.is_empty(), "finished with stages running");
                    assert!(!self.lease_lost, "a fenced-out claim writes nothing");
                    let all_done = plans.iter().all(|p| self.done_for_dependents(&p.name));
                    match status {
                        RunStatus::Succeeded => assert!(all_done, "succeeded with work left"),
                        RunStatus::Canceled => {
                            assert!(self.cancel, "canceled without a cancel");
                            assert!(!all_done, "every stage succeeded: the run succeeds");
                        }
                        RunStatus::Failed => assert!(!self.cancel && !all_done),
                        other => panic!("a claim never ends {other:?}"),
                    }
                    if self.cancel && !all_done {
                        assert_eq!(*status, RunStatus::Canceled, "cancel comes first");
                    }
                    self.ended = Some(effect.clone());
                }
            }
        }
    }
}

/// The events that may come next: each running stage's possible endings, and the signals.
fn next_events(observer: &Observer) -> Vec<Event> {
    let mut events = vec![Event::CancelRequested, Event::Shutdown, Event::LeaseLost];
    for stage in &observer.running {
        events.push(Event::StageSucceeded {
            stage: stage.clone(),
            output: json!({"flag": true}),
        });
        for (code, retryable) in [("timeout", true), ("bad_input", false), ("canceled", false)] {
            events.push(Event::StageFailed {
                stage: stage.clone(),
                code: code.into(),
                message: "m".into(),
                retryable,
                retry_at: 1_000,
            });
        }
    }
    events
}

fn pipelines() -> Vec<Vec<StagePlan>> {
    vec![
        vec![plan("a", &[], 1)],
        vec![plan("a", &[], 2), plan("b", &["a"], 1)],
        vec![
            plan("a", &[], 2),
            plan("b", &[], 1),
            plan("c", &["a", "b"], 2),
        ],
        vec![
            plan("a", &[], 1),
            StagePlan {
                unavailable: Some("no model here".into()),
                ..plan("b", &["a"], 2)
            },
            plan("c", &["b"], 1),
        ],
        // The default pipeline's shape: two lenient siblings, a dependent of both, and a
        // strict sibling.
        vec![
            plan("a", &[], 1),
            lenient("b", &["a"], 2),
            lenient("c", &["a"], 1),
            plan("d", &["b", "c"], 1),
            plan("e", &["a"], 1),
        ],
    ]
}

/// Every reachable state of the small pipelines (up to `depth` events), every next event.
fn explore(
    plans: &[StagePlan],
    machine: &Lifecycle,
    observer: &Observer,
    depth: usize,
    visited: &mut usize,
) {
    if depth == 0 || machine.is_over() {
        return;
    }
    for event in next_events(observer) {
        let mut m = machine.clone();
        let mut o = observer.clone();
        o.event(&event);
        let effects = m.step(event);
        o.effects(plans, &effects);
        assert_eq!(m.is_over(), o.ended.is_some(), "{effects:?}");
        *visited += 1;
        explore(plans, &m, &o, depth - 1, visited);
    }
}

#[test]
fn every_event_in_every_reachable_state_keeps_the_invariants() {
    let mut visited = 0;
    for plans in pipelines() {
        for cancel_requested in [false, true] {
            let facts = ClaimFacts {
                cancel_requested,
                ..fresh()
            };
            let (machine, effects) = Lifecycle::claimed(facts, Ok(plans.clone()), &[]);
            let mut observer = Observer {
                cancel: cancel_requested,
                ..Observer::default()
            };
            observer.effects(&plans, &effects);
            explore(&plans, &machine, &observer, 6, &mut visited);
        }
    }
    assert!(visited > 5_000, "explored {visited} transitions");
}

#[test]
fn a_cancel_comes_before_the_reclaim_cap_and_a_broken_snapshot() {
    let facts = ClaimFacts {
        cancel_requested: true,
        reclaimed: true,
        reclaims: 9,
        ..fresh()
    };
    let (machine, effects) = Lifecycle::claimed(facts, Err("bad yaml".into()), &[]);
    assert!(machine.is_over());
    assert_eq!(
        effects,
        vec![Effect::Finish {
            status: RunStatus::Canceled,
            error: None
        }]
    );
}

#[test]
fn the_reclaim_cap_fails_a_run_that_keeps_losing_its_worker() {
    let facts = ClaimFacts {
        reclaimed: true,
        reclaims: 4,
        ..fresh()
    };
    let (_, effects) = Lifecycle::claimed(facts, Ok(vec![plan("a", &[], 1)]), &[]);
    assert!(matches!(
        &effects[..],
        [Effect::Finish { status: RunStatus::Failed, error: Some(e) }] if e.contains("reclaimed 4 times")
    ));
}

#[test]
fn an_unavailable_stage_is_skipped_with_its_reason_and_its_dependents_run() {
    let plans = vec![
        plan("a", &[], 1),
        StagePlan {
            unavailable: Some("no embedding model is configured".into()),
            ..plan("b", &["a"], 1)
        },
        plan("c", &["b"], 1),
    ];
    let (mut m, effects) = Lifecycle::claimed(fresh(), Ok(plans), &[]);
    assert_eq!(
        effects,
        vec![Effect::Start {
            stage: "a".into(),
            attempt: 1,
            of: 1
        }]
    );
    let effects = m.step(Event::StageSucceeded {
        stage: "a".into(),
        output: json!({}),
    });
    assert_eq!(
        effects,
        vec![
            Effect::Succeeded {
                stage: "a".into(),
                output: json!({})
            },
            Effect::Skip {
                stage: "b".into(),
                reason: "skipped: no embedding model is configured".into()
            },
            Effect::Start {
                stage: "c".into(),
                attempt: 1,
                of: 1
            },
        ]
    );
    let effects = m.step(Event::StageSucceeded {
        stage: "c".into(),
        output: json!({}),
    });
    assert_eq!(
        effects.last(),
        Some(&Effect::Finish {
            status: RunStatus::Succeeded,
            error: None
        })
    );
}

#[test]
fn a_late_cancel_does_not_undo_a_finished_run() {
    let plans = vec![plan("a", &[], 1)];
    let (mut m, _) = Lifecycle::claimed(fresh(), Ok(plans), &[]);
    assert_eq!(m.step(Event::CancelRequested), vec![Effect::StopStages]);
    let effects = m.step(Event::StageSucceeded {
        stage: "a".into(),
        output: json!({}),
    });
    assert_eq!(
        effects.last(),
        Some(&Effect::Finish {
            status: RunStatus::Succeeded,
            error: None
        })
    );
}

#[test]
fn a_cancel_before_a_retryable_failure_cancels_instead_of_waiting_out_the_backoff() {
    let (mut m, _) = Lifecycle::claimed(fresh(), Ok(vec![plan("a", &[], 3)]), &[]);
    m.step(Event::CancelRequested);
    let effects = m.step(Event::StageFailed {
        stage: "a".into(),
        code: "timeout".into(),
        message: "slow".into(),
        retryable: true,
        retry_at: 60_000,
    });
    assert_eq!(
        effects.last(),
        Some(&Effect::Finish {
            status: RunStatus::Canceled,
            error: None
        })
    );
}

#[test]
fn shutdown_interrupts_without_counting_and_requeues_at_once() {
    let (mut m, _) = Lifecycle::claimed(fresh(), Ok(vec![plan("a", &[], 1)]), &[]);
    assert_eq!(m.step(Event::Shutdown), vec![Effect::StopStages]);
    let effects = m.step(Event::StageFailed {
        stage: "a".into(),
        code: "canceled".into(),
        message: "stage was canceled".into(),
        retryable: false,
        retry_at: 0,
    });
    assert!(matches!(
        &effects[..],
        [
            Effect::AttemptEnded {
                end: AttemptEnd::Interrupted,
                ..
            },
            Effect::Requeue {
                due_at: None,
                reason: Requeue::Released
            }
        ]
    ));
}

#[test]
fn a_resumed_claim_reuses_checkpoints_and_restarts_an_interrupted_stage() {
    let plans = vec![plan("a", &[], 1), plan("b", &["a"], 2)];
    let checkpoints = vec![
        StageCheckpoint {
            name: "a".into(),
            status: StageStatus::Succeeded,
            attempts: 1,
            output: Some(json!({"x": 1})),
        },
        StageCheckpoint {
            name: "b".into(),
            status: StageStatus::Running,
            attempts: 1,
            output: None,
        },
    ];
    let facts = ClaimFacts {
        claims: 2,
        reclaimed: true,
        reclaims: 1,
        ..fresh()
    };
    let (m, effects) = Lifecycle::claimed(facts, Ok(plans), &checkpoints);
    assert_eq!(
        effects,
        vec![
            Effect::CheckpointsReused {
                stages: vec!["a".into()]
            },
            Effect::Start {
                stage: "b".into(),
                attempt: 2,
                of: 2
            }
        ]
    );
    assert_eq!(m.output("a"), Some(&json!({"x": 1})));
}

/// `a` then `b` (lenient) and `c` side by side, then `d` needing both.
fn diamond(b: StagePlan) -> Vec<StagePlan> {
    vec![
        plan("a", &[], 1),
        b,
        plan("c", &["a"], 1),
        plan("d", &["b", "c"], 1),
    ]
}

/// A machine past `a`, with `b` and `c` running.
fn diamond_running(b: StagePlan) -> Lifecycle {
    let (mut m, _) = Lifecycle::claimed(fresh(), Ok(diamond(b)), &[]);
    let effects = m.step(succeeded("a"));
    assert_eq!(&effects[1..], [start("b", 1, 1), start("c", 1, 1)]);
    m
}

fn continued(stage: &str, code: &str, attempt: u32, of: u32) -> Effect {
    Effect::AttemptEnded {
        stage: stage.into(),
        attempt,
        of,
        end: AttemptEnd::Continued {
            code: code.into(),
            message: "m".into(),
        },
    }
}

#[test]
fn a_lenient_failure_stops_no_sibling_and_its_dependents_run_without_its_output() {
    let mut m = diamond_running(lenient("b", &["a"], 1));
    // No StopStages: `c` keeps running.
    assert_eq!(
        m.step(failed("b", "invalid_response", false)),
        vec![continued("b", "invalid_response", 1, 1)]
    );
    assert_eq!(m.running(), ["c"]);
    assert_eq!(m.status("b"), Some(StageStatus::Failed));
    assert_eq!(m.output("b"), None, "a stage continued past has no output");
    let effects = m.step(succeeded("c"));
    assert_eq!(effects.last(), Some(&start("d", 1, 1)));
    let effects = m.step(succeeded("d"));
    assert_eq!(effects.last(), Some(&finish_succeeded()));
    assert_eq!(m.continued(), ["b"]);
}

#[test]
fn a_lenient_failure_after_its_siblings_finished_lets_dependents_start_at_once() {
    let mut m = diamond_running(lenient("b", &["a"], 1));
    m.step(succeeded("c"));
    let effects = m.step(failed("b", "bad_input", false));
    assert_eq!(
        effects,
        vec![continued("b", "bad_input", 1, 1), start("d", 1, 1)]
    );
}

#[test]
fn a_lenient_last_stage_that_fails_ends_the_run_succeeded() {
    let plans = vec![plan("a", &[], 1), lenient("b", &["a"], 1)];
    let (mut m, _) = Lifecycle::claimed(fresh(), Ok(plans), &[]);
    m.step(succeeded("a"));
    assert_eq!(
        m.step(failed("b", "provider_error", false)),
        vec![continued("b", "provider_error", 1, 1), finish_succeeded()]
    );
    assert!(m.is_over());
    assert_eq!(m.continued(), ["b"]);
}

#[test]
fn the_fail_policy_still_fails_fast() {
    let mut m = diamond_running(plan("b", &["a"], 1));
    assert_eq!(
        m.step(failed("b", "bad_input", false)),
        vec![
            Effect::AttemptEnded {
                stage: "b".into(),
                attempt: 1,
                of: 1,
                end: AttemptEnd::Failed {
                    code: "bad_input".into(),
                    message: "m".into()
                },
            },
            Effect::StopStages,
        ]
    );
    let effects = m.step(failed("c", "canceled", false));
    assert_eq!(
        effects.last(),
        Some(&Effect::Finish {
            status: RunStatus::Failed,
            error: Some(stage_failure("b", "bad_input", "m")),
        })
    );
    assert!(m.continued().is_empty());
}

#[test]
fn a_strict_failure_after_a_lenient_one_still_fails_the_run() {
    let mut m = diamond_running(lenient("b", &["a"], 1));
    m.step(failed("b", "invalid_response", false));
    let effects = m.step(failed("c", "bad_input", false));
    assert_eq!(
        effects.last(),
        Some(&Effect::Finish {
            status: RunStatus::Failed,
            error: Some(stage_failure("c", "bad_input", "m")),
        })
    );
}

#[test]
fn a_cancel_while_a_lenient_stage_runs_cancels_the_run() {
    let mut m = diamond_running(lenient("b", &["a"], 1));
    assert_eq!(m.step(Event::CancelRequested), vec![Effect::StopStages]);
    let effects = m.step(failed("b", "canceled", false));
    assert!(matches!(
        &effects[..],
        [Effect::AttemptEnded {
            end: AttemptEnd::Canceled,
            ..
        }]
    ));
    // Even a real failure after the cancel is recorded as the cancel, not continued past.
    let effects = m.step(failed("c", "bad_input", false));
    assert!(matches!(
        &effects[..],
        [
            Effect::AttemptEnded {
                end: AttemptEnd::Canceled,
                ..
            },
            Effect::Finish {
                status: RunStatus::Canceled,
                error: None
            }
        ]
    ));
    assert!(m.continued().is_empty());
}

#[test]
fn a_lenient_stage_with_attempts_left_retries_first_and_is_continued_past_after_the_last() {
    let plans = vec![plan("a", &[], 1), lenient("b", &["a"], 2)];
    let (mut m, _) = Lifecycle::claimed(fresh(), Ok(plans.clone()), &[]);
    m.step(succeeded("a"));
    let effects = m.step(failed("b", "provider_timeout", true));
    assert!(
        matches!(
            &effects[..],
            [
                Effect::AttemptEnded {
                    end: AttemptEnd::Retrying { .. },
                    ..
                },
                Effect::Requeue {
                    due_at: Some(1_000),
                    reason: Requeue::RetryScheduled
                }
            ]
        ),
        "{effects:?}"
    );
    // The next claim resumes: `b`'s second and last attempt fails too, and the run succeeds.
    let checkpoints = vec![
        StageCheckpoint {
            name: "a".into(),
            status: StageStatus::Succeeded,
            attempts: 1,
            output: Some(json!({})),
        },
        StageCheckpoint {
            name: "b".into(),
            status: StageStatus::Pending,
            attempts: 1,
            output: None,
        },
    ];
    let facts = ClaimFacts {
        claims: 2,
        ..fresh()
    };
    let (mut m, effects) = Lifecycle::claimed(facts, Ok(plans), &checkpoints);
    assert_eq!(effects.last(), Some(&start("b", 2, 2)));
    assert_eq!(
        m.step(failed("b", "provider_timeout", true)),
        vec![continued("b", "provider_timeout", 2, 2), finish_succeeded()]
    );
}

#[test]
fn a_flag_of_a_stage_continued_past_is_not_set() {
    let plans = vec![
        plan("a", &[], 1),
        lenient("b", &["a"], 1),
        StagePlan {
            when: Some(WhenFlag {
                stage: "b".into(),
                flag: "flag".into(),
            }),
            ..plan("c", &["b"], 1)
        },
    ];
    let (mut m, _) = Lifecycle::claimed(fresh(), Ok(plans), &[]);
    m.step(succeeded("a"));
    assert_eq!(
        m.step(failed("b", "bad_input", false)),
        vec![
            continued("b", "bad_input", 1, 1),
            Effect::Skip {
                stage: "c".into(),
                reason: "skipped: b.flag is not set".into()
            },
            finish_succeeded(),
        ]
    );
}

#[test]
fn a_resumed_claim_never_reruns_a_stage_continued_past() {
    let plans = diamond(lenient("b", &["a"], 1));
    let checkpoint = |name: &str, status: StageStatus, attempts: u32| StageCheckpoint {
        name: name.into(),
        status,
        attempts,
        output: (status == StageStatus::Succeeded).then(|| json!({})),
    };
    // `c` had a retryable failure in the first claim, after `b` was continued past.
    let checkpoints = vec![
        checkpoint("a", StageStatus::Succeeded, 1),
        checkpoint("b", StageStatus::Failed, 1),
        checkpoint("c", StageStatus::Pending, 1),
    ];
    let plans = plans
        .into_iter()
        .map(|p| {
            if p.name == "c" {
                StagePlan {
                    max_attempts: 2,
                    ..p
                }
            } else {
                p
            }
        })
        .collect();
    let facts = ClaimFacts {
        claims: 2,
        reclaimed: true,
        reclaims: 1,
        ..fresh()
    };
    let (mut m, effects) = Lifecycle::claimed(facts, Ok(plans), &checkpoints);
    assert_eq!(
        effects,
        vec![
            Effect::CheckpointsReused {
                stages: vec!["a".into()]
            },
            start("c", 2, 2),
        ]
    );
    assert_eq!(m.continued(), ["b"]);
    let effects = m.step(succeeded("c"));
    assert_eq!(effects.last(), Some(&start("d", 1, 1)));
    let effects = m.step(succeeded("d"));
    assert_eq!(effects.last(), Some(&finish_succeeded()));
}

#[test]
fn a_shutdown_interrupts_a_lenient_stage_without_continuing_past_it() {
    let mut m = diamond_running(lenient("b", &["a"], 1));
    m.step(Event::Shutdown);
    m.step(failed("b", "canceled", false));
    let effects = m.step(failed("c", "canceled", false));
    assert!(matches!(
        effects.last(),
        Some(Effect::Requeue {
            due_at: None,
            reason: Requeue::Released
        })
    ));
    assert!(m.continued().is_empty());
    assert_eq!(m.status("b"), Some(StageStatus::Pending));
}

fn arb_pipeline() -> impl Strategy<Value = Vec<StagePlan>> {
    // Up to five stages; each may need any earlier one (a DAG by construction).
    proptest::collection::vec(
        (
            proptest::collection::vec(any::<bool>(), 5),
            1u32..4,
            any::<bool>(),
        ),
        1..6,
    )
    .prop_map(|stages| {
        stages
            .iter()
            .enumerate()
            .map(|(i, (needs, attempts, continues))| StagePlan {
                name: format!("s{i}"),
                needs: (0..i)
                    .filter(|j| needs[*j])
                    .map(|j| format!("s{j}"))
                    .collect(),
                when: None,
                max_attempts: *attempts,
                on_failure: if *continues {
                    OnFailure::Continue
                } else {
                    OnFailure::Fail
                },
                unavailable: None,
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random interleavings of stage results, cancels, shutdowns and lost leases: every step
    /// keeps the invariants, and every claim ends (nothing stays running).
    #[test]
    fn random_interleavings_keep_the_invariants(
        plans in arb_pipeline(),
        choices in proptest::collection::vec(any::<u16>(), 1..64),
        cancel_at_claim in any::<bool>(),
    ) {
        let facts = ClaimFacts { cancel_requested: cancel_at_claim, ..fresh() };
        let (mut m, effects) = Lifecycle::claimed(facts, Ok(plans.clone()), &[]);
        let mut o = Observer { cancel: cancel_at_claim, ..Observer::default() };
        o.effects(&plans, &effects);
        for choice in choices {
            if m.is_over() {
                break;
            }
            let events = next_events(&o);
            // Signals are rarer than stage results, as in life.
            let pick = if o.running.is_empty() || choice % 10 == 0 {
                usize::from(choice) % events.len()
            } else {
                3 + usize::from(choice) % (events.len() - 3)
            };
            let event = events[pick].clone();
            o.event(&event);
            let effects = m.step(event);
            o.effects(&plans, &effects);
            prop_assert_eq!(m.is_over(), o.ended.is_some());
        }
        // Let every running stage succeed: the claim must end.
        let mut guard = 0;
        while !m.is_over() {
            let stage = o.running.iter().next().cloned().expect("a claim that has not ended has a stage running");
            let event = Event::StageSucceeded { stage, output: json!({}) };
            o.event(&event);
            let effects = m.step(event);
            o.effects(&plans, &effects);
            guard += 1;
            prop_assert!(guard < 100);
        }
    }
}
