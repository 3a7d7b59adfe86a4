//! The queue as operators need to see it (`GET /queue`, `shelf runs`): runs waiting, how long
//! the oldest has waited, when a worker last claimed a run, and a warning when runs wait while
//! nothing claims them (an API-only deployment without `--workers`, dead workers).

use chrono::{DateTime, SecondsFormat};
use serde::Serialize;
use shelf_engine::queue_health::QueueHealth;
use utoipa::ToSchema;

use crate::error::AppError;
use crate::shelf::Shelf;

/// How long runs may be due with no claim before the report warns, and how recent a claim must
/// be for workers to count as seen. A live worker polls every `SHELF_WORKER_POLL_MS` (100 ms by
/// default), so a minute without a claim while runs are due means nothing is claiming, or
/// every worker is busy with long runs the whole time; either way runs wait.
pub const STALL_MS: i64 = 60_000;

/// `GET /queue`: runs waiting for a worker and whether any worker is taking them.
// The API serves this type as it is (`QueueOut` in `/openapi.json`). Counts are over the whole
// database, so every API process and worker sharing it sees the same numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = QueueOut)]
pub struct QueueReport {
    /// Queued runs, due or not.
    pub queued: u64,
    /// Queued runs whose due time has come (a delayed retry is queued but not yet due).
    pub due: u64,
    pub running: u64,
    /// Running runs whose lease lapsed (their executor died or was cut off); a worker reclaims
    /// them.
    pub expired_leases: u64,
    /// Age in whole seconds of the oldest due queued run or expired lease; null when none.
    pub oldest_due_age_seconds: Option<u64>,
    /// RFC 3339 time of the latest claim of a run by any worker or in-process execution; null
    /// if no run was ever claimed.
    pub last_claim_at: Option<String>,
    /// Whether a run was claimed within the last 60 s.
    pub workers_seen_recently: bool,
    /// Set when runs have been due for over 60 s and no run was claimed in that time; says
    /// what to start.
    pub warning: Option<String>,
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn seconds(ms: i64) -> u64 {
    count(ms / 1000)
}

impl QueueReport {
    /// The report of a measurement: the thresholds and the warning's wording live here.
    pub fn from_health(health: &QueueHealth) -> QueueReport {
        let since_claim = health.since_last_claim_ms();
        let workers_seen_recently = since_claim.is_some_and(|ms| ms < STALL_MS);
        let oldest = health.oldest_due_age_ms();
        let waiting = count(health.waiting());
        let stalled = waiting > 0 && oldest.is_some_and(|ms| ms >= STALL_MS);
        let warning = match (stalled && !workers_seen_recently, since_claim) {
            (false, _) => None,
            (true, Some(ms)) => Some(format!(
                "{} and no worker has claimed a run for {} s: start `shelf worker` or `shelf api --workers N`",
                waiting_phrase(waiting),
                seconds(ms)
            )),
            (true, None) => Some(format!(
                "{}, the oldest for {} s, and no worker has ever claimed a run: start `shelf worker` or `shelf api --workers N`",
                waiting_phrase(waiting),
                seconds(oldest.unwrap_or(0))
            )),
        };
        QueueReport {
            queued: count(health.queued),
            due: count(health.due),
            running: count(health.running),
            expired_leases: count(health.expired_leases),
            oldest_due_age_seconds: oldest.map(seconds),
            last_claim_at: health.last_claim_at.and_then(rfc3339),
            workers_seen_recently,
            warning,
        }
    }
}

fn waiting_phrase(waiting: u64) -> String {
    match waiting {
        1 => "1 run is waiting".into(),
        n => format!("{n} runs are waiting"),
    }
}

fn rfc3339(ms: i64) -> Option<String> {
    DateTime::from_timestamp_millis(ms).map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

impl Shelf {
    /// The queue's state now (see [`QueueReport`]).
    pub async fn queue_report(&self) -> Result<QueueReport, AppError> {
        let store = self.engine.store();
        let health = store.queue_health(store.now_synced().await).await?;
        Ok(QueueReport::from_health(&health))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(due: i64, oldest_age: Option<i64>, since_claim: Option<i64>) -> QueueHealth {
        let now = 1_800_000_000_000;
        QueueHealth {
            now_ms: now,
            queued: due + 1,
            due,
            running: 0,
            expired_leases: 0,
            oldest_due_at: oldest_age.map(|age| now - age),
            last_claim_at: since_claim.map(|ago| now - ago),
        }
    }

    #[test]
    fn an_empty_or_served_queue_gives_no_warning() {
        let empty = QueueReport::from_health(&health(0, None, None));
        assert_eq!(empty.warning, None);
        assert_eq!(empty.oldest_due_age_seconds, None);
        assert_eq!(empty.last_claim_at, None);
        assert!(!empty.workers_seen_recently);
        // Due for long, but a worker claimed a run a second ago: it is working through them.
        let busy = QueueReport::from_health(&health(3, Some(300_000), Some(1_000)));
        assert_eq!(busy.warning, None);
        assert!(busy.workers_seen_recently);
        // Nothing claims, but the run has not waited a minute yet.
        let fresh = QueueReport::from_health(&health(1, Some(59_999), None));
        assert_eq!(fresh.warning, None);
        assert_eq!(fresh.oldest_due_age_seconds, Some(59));
    }

    #[test]
    fn runs_due_with_no_claim_warn() {
        let never = QueueReport::from_health(&health(1, Some(61_500), None));
        assert_eq!(
            never.warning.as_deref(),
            Some(
                "1 run is waiting, the oldest for 61 s, and no worker has ever claimed a run: \
                 start `shelf worker` or `shelf api --workers N`"
            )
        );
        let stale = QueueReport::from_health(&health(2, Some(120_000), Some(90_000)));
        assert_eq!(
            stale.warning.as_deref(),
            Some(
                "2 runs are waiting and no worker has claimed a run for 90 s: \
                 start `shelf worker` or `shelf api --workers N`"
            )
        );
        assert!(!stale.workers_seen_recently);
        assert_eq!(
            stale.last_claim_at.as_deref(),
            Some("2027-01-15T07:58:30.000Z")
        );
    }

    #[test]
    fn expired_leases_count_as_waiting() {
        let mut lapsed = health(0, Some(70_000), Some(70_000));
        lapsed.running = 1;
        lapsed.expired_leases = 1;
        let report = QueueReport::from_health(&lapsed);
        assert_eq!(report.expired_leases, 1);
        assert!(
            report
                .warning
                .is_some_and(|w| w.starts_with("1 run is waiting"))
        );
    }
}
