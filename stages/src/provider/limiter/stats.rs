//! What the limiter shows an operator: Prometheus series (the limit, calls in flight and
//! waiting, calls by outcome, refusals, push-back waits, a latency histogram and the median
//! and 95th percentile of recent calls) and a report of the calls since the last one, for the
//! worker's log line.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{Counter, Histogram, HistogramOpts, IntCounterVec, Opts};

use super::{Limiter, Outcome};
use crate::metrics::Derived;

/// Recent latencies kept for the percentiles.
const RECENT: usize = 1024;

/// Latency buckets of one call, from a short classification to a long cleaning chunk.
const LATENCY_BUCKETS: &[f64] = &[
    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0,
];

pub(super) struct Stats {
    calls: IntCounterVec,
    pushback_waits: Counter,
    latency: Histogram,
    window: Mutex<Window>,
}

/// Since the last report, and the recent latencies.
#[derive(Default)]
struct Window {
    calls: u64,
    refused: u64,
    failed: u64,
    recent: VecDeque<f32>,
}

/// The limiter's state and the calls since the previous report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimiterReport {
    pub limit: usize,
    pub in_flight: usize,
    pub waiting: usize,
    /// Calls that ended (any outcome) since the previous report.
    pub calls: u64,
    /// Of them, refused by the server (429, or 503 with `Retry-After`).
    pub refused: u64,
    /// Of them, failed by the server or the network (5xx, timeouts, unreachable).
    pub failed: u64,
    /// Median and 95th percentile latency of the recent answered calls (0 before any).
    pub p50: Duration,
    pub p95: Duration,
}

fn outcome_label(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Answered => "answered",
        Outcome::Refused => "refused",
        Outcome::Overloaded => "overloaded",
        Outcome::Unreachable => "unreachable",
        Outcome::Neutral => "rejected",
    }
}

impl Stats {
    pub(super) fn new() -> Self {
        let calls = IntCounterVec::new(
            Opts::new(
                "shelf_llm_calls_total",
                "Language-model HTTP requests that ended, by outcome: answered, refused (429, or \
                 503 with Retry-After), overloaded (other 5xx, 408, timeout), unreachable, \
                 rejected (4xx that no retry fixes).",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        for outcome in [
            Outcome::Answered,
            Outcome::Refused,
            Outcome::Overloaded,
            Outcome::Unreachable,
            Outcome::Neutral,
        ] {
            calls.with_label_values(&[outcome_label(outcome)]);
        }
        Stats {
            calls,
            pushback_waits: Counter::new(
                "shelf_llm_pushback_wait_seconds_total",
                "Time calls waited because the server refused them (Retry-After), not counted \
                 as failed attempts.",
            )
            .expect("valid metric"),
            latency: Histogram::with_opts(
                HistogramOpts::new(
                    "shelf_llm_call_seconds",
                    "Latency of answered language-model requests, from sending to the whole \
                     answer (waiting for a place in the limiter excluded).",
                )
                .buckets(LATENCY_BUCKETS.to_vec()),
            )
            .expect("valid metric"),
            window: Mutex::new(Window::default()),
        }
    }

    fn window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn finished(&self, outcome: Outcome, latency: Duration) {
        self.calls
            .with_label_values(&[outcome_label(outcome)])
            .inc();
        let mut window = self.window();
        window.calls += 1;
        match outcome {
            Outcome::Answered => {
                self.latency.observe(latency.as_secs_f64());
                if window.recent.len() == RECENT {
                    window.recent.pop_front();
                }
                window.recent.push_back(latency.as_secs_f32());
            }
            Outcome::Refused => window.refused += 1,
            Outcome::Overloaded | Outcome::Unreachable => window.failed += 1,
            Outcome::Neutral => {}
        }
    }

    pub(super) fn pushed_back(&self, wait: Duration) {
        self.pushback_waits.inc_by(wait.as_secs_f64());
    }

    pub(super) fn pushed_back_for(&self) -> Duration {
        Duration::from_secs_f64(self.pushback_waits.get())
    }

    /// The report, and a new window for the next one (recent latencies are kept).
    pub(super) fn report(&self, limit: usize, in_flight: usize, waiting: usize) -> LimiterReport {
        let mut window = self.window();
        let (p50, p95) = percentiles(&window.recent);
        let report = LimiterReport {
            limit,
            in_flight,
            waiting,
            calls: window.calls,
            refused: window.refused,
            failed: window.failed,
            p50,
            p95,
        };
        window.calls = 0;
        window.refused = 0;
        window.failed = 0;
        report
    }

    fn percentiles(&self) -> (Duration, Duration) {
        percentiles(&self.window().recent)
    }
}

fn percentiles(recent: &VecDeque<f32>) -> (Duration, Duration) {
    if recent.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    let mut sorted: Vec<f32> = recent.iter().copied().collect();
    sorted.sort_by(f32::total_cmp);
    let at = |q: f64| {
        let i = ((sorted.len() - 1) as f64 * q).round() as usize;
        Duration::from_secs_f32(sorted[i.min(sorted.len() - 1)].max(0.0))
    };
    (at(0.5), at(0.95))
}

/// Every series of `limiter`, read when the registry is gathered.
pub(super) fn collectors(limiter: &Arc<Limiter>) -> Vec<Box<dyn Collector>> {
    let gauge = |name: &str, help: &str, read: fn(&Limiter) -> f64| -> Box<dyn Collector> {
        let limiter = limiter.clone();
        Box::new(Derived::new(name, help, move || read(&limiter)))
    };
    vec![
        gauge(
            "shelf_llm_concurrency_limit",
            "Language-model requests this process lets out at once now (adaptive unless \
             SHELF_LLM_MIN_CONCURRENCY equals SHELF_LLM_MAX_CONCURRENCY).",
            |l| l.limit() as f64,
        ),
        gauge(
            "shelf_llm_in_flight",
            "Language-model requests out now.",
            |l| l.in_flight() as f64,
        ),
        gauge(
            "shelf_llm_waiting",
            "Language-model calls waiting for a place under the limit now.",
            |l| l.waiting() as f64,
        ),
        gauge(
            "shelf_llm_latency_p50_seconds",
            "Median latency of the last 1024 answered language-model requests.",
            |l| l.stats.percentiles().0.as_secs_f64(),
        ),
        gauge(
            "shelf_llm_latency_p95_seconds",
            "95th percentile latency of the last 1024 answered language-model requests.",
            |l| l.stats.percentiles().1.as_secs_f64(),
        ),
        Box::new(limiter.stats.calls.clone()),
        Box::new(limiter.stats.pushback_waits.clone()),
        Box::new(limiter.stats.latency.clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_recent_calls() {
        let mut recent = VecDeque::new();
        assert_eq!(percentiles(&recent), (Duration::ZERO, Duration::ZERO));
        for ms in 1..=100u16 {
            recent.push_back(f32::from(ms) / 1000.0);
        }
        let (p50, p95) = percentiles(&recent);
        assert!((50..=51).contains(&p50.as_millis()), "{p50:?}");
        assert!((94..=95).contains(&p95.as_millis()), "{p95:?}");
    }
}
