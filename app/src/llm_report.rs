//! The worker's log line about its language-model calls, once a minute: the limit the limiter
//! has found, calls in flight and waiting, calls, refusals and failures in the minute, and
//! the median and 95th percentile latency of recent calls. Nothing is logged for a minute
//! without calls, so an idle worker stays quiet.

use std::sync::Arc;
use std::time::Duration;

use shelf_stages::provider::limiter::{Limiter, LimiterReport};
use tokio_util::sync::CancellationToken;

/// How often the line is written.
pub const REPORT_EVERY: Duration = Duration::from_secs(60);

/// Logs `limiter`'s report every [`REPORT_EVERY`] until `shutdown` trips.
pub async fn every_minute(limiter: Arc<Limiter>, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(REPORT_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is immediate: start the window there.
    ticks.tick().await;
    limiter.report();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = shutdown.cancelled() => return,
        }
        log(&limiter);
    }
}

/// Whether a minute is worth a line: calls ended in it, or some are out or waiting.
fn worth_logging(report: &LimiterReport) -> bool {
    report.calls > 0 || report.in_flight > 0 || report.waiting > 0
}

fn log(limiter: &Limiter) {
    let report = limiter.report();
    if !worth_logging(&report) {
        return;
    }
    tracing::info!(
        limit = report.limit,
        in_flight = report.in_flight,
        waiting = report.waiting,
        calls = report.calls,
        refused = report.refused,
        failed = report.failed,
        p50_ms = u64::try_from(report.p50.as_millis()).unwrap_or(u64::MAX),
        p95_ms = u64::try_from(report.p95.as_millis()).unwrap_or(u64::MAX),
        "language-model calls in the last minute"
    );
}

#[cfg(test)]
mod tests {
    use shelf_stages::provider::limiter::{CallClass, LimitConfig, Outcome};

    use super::*;

    #[tokio::test]
    async fn a_minute_is_logged_when_calls_ended_or_are_out_and_each_minute_starts_anew() {
        let limiter = Limiter::new(LimitConfig::new(1, 8, 4));
        assert!(
            !worth_logging(&limiter.report()),
            "an idle worker stays quiet"
        );
        let out = limiter.acquire(CallClass::new("clean", 100)).await;
        let report = limiter.report();
        assert!(worth_logging(&report));
        assert_eq!((report.in_flight, report.calls), (1, 0));
        out.finish(Outcome::Refused);
        let report = limiter.report();
        assert_eq!((report.calls, report.refused, report.in_flight), (1, 1, 0));
        assert!(worth_logging(&report));
        // The next minute counts from zero.
        assert!(!worth_logging(&limiter.report()));
    }
}
