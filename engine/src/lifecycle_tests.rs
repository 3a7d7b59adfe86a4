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
        unavailable: None,
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
    retrying: bool,
    ended: Option<Effect>,
}

impl Observer {
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
                            self.done
                                .get(need)
                                .is_some_and(|s| s.satisfies_dependents()),
                            "{stage} started before {need}"
                        );
                    }
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
                            self.failed = true;
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
                Effect::StopStages | Effect::CheckpointsReused { .. } => {}
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
                    let all_done = plans.iter().all(|p| {
                        self.done
                            .get(&p.name)
                            .is_some_and(|s| s.satisfies_dependents())
                    });
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

fn arb_pipeline() -> impl Strategy<Value = Vec<StagePlan>> {
    // Up to five stages; each may need any earlier one (a DAG by construction).
    proptest::collection::vec((proptest::collection::vec(any::<bool>(), 5), 1u32..4), 1..6)
        .prop_map(|stages| {
            stages
                .iter()
                .enumerate()
                .map(|(i, (needs, attempts))| StagePlan {
                    name: format!("s{i}"),
                    needs: (0..i)
                        .filter(|j| needs[*j])
                        .map(|j| format!("s{j}"))
                        .collect(),
                    when: None,
                    max_attempts: *attempts,
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
