//! What the queue looks like to an operator: how many runs wait, since when, and when a worker
//! last claimed one (`runs.claimed_at`), read in one statement on either backend. Facts only;
//! what counts as "stuck" is the application's call.

use sea_orm::{DbErr, QueryResult};

use crate::error::EngineError;
use crate::store::{RunStore, stmt};
use shelf_db::sql::SqlExt;

/// The queue at one instant (`now_ms`); every time is epoch milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueHealth {
    /// The instant the counts were taken at (the caller's clock).
    pub now_ms: i64,
    pub queued: i64,
    /// Queued runs whose due time has come.
    pub due: i64,
    pub running: i64,
    /// Running runs whose lease lapsed: any worker may reclaim them.
    pub expired_leases: i64,
    /// The earliest due time among due queued runs and expired leases, if any.
    pub oldest_due_at: Option<i64>,
    /// The latest claim of any run by any worker or in-process executor, if ever.
    pub last_claim_at: Option<i64>,
}

impl QueueHealth {
    /// Runs a worker could take right now.
    pub fn waiting(&self) -> i64 {
        self.due + self.expired_leases
    }

    /// How long the oldest waiting run has been due, in milliseconds.
    pub fn oldest_due_age_ms(&self) -> Option<i64> {
        self.oldest_due_at.map(|at| (self.now_ms - at).max(0))
    }

    /// How long ago the latest claim was, in milliseconds (0 for a claim stamped ahead of this
    /// clock, as another host's may be).
    pub fn since_last_claim_ms(&self) -> Option<i64> {
        self.last_claim_at.map(|at| (self.now_ms - at).max(0))
    }
}

fn get<T: sea_orm::TryGetable>(row: &QueryResult, col: &str) -> Result<T, DbErr> {
    row.try_get::<T>("", col)
}

impl RunStore {
    /// The queue's counts and times as of `now_ms`. The counts read the runs that are queued
    /// or running; the last claim is `MAX(claimed_at)` over all runs, which the
    /// `runs_claimed_at` index answers without a scan.
    pub async fn queue_health(&self, now_ms: i64) -> Result<QueueHealth, EngineError> {
        let row = self
            .db()
            .query_one_sql(stmt(
                // CASE rather than summing comparisons: PostgreSQL's comparisons are booleans,
                // which it does not add up. MIN over a CASE without ELSE skips runs not yet due.
                "SELECT \
                   COALESCE(SUM(CASE WHEN status = 'queued' THEN 1 ELSE 0 END), 0) AS queued, \
                   COALESCE(SUM(CASE WHEN status = 'queued' AND due_at <= ? THEN 1 ELSE 0 END), 0) AS due, \
                   COALESCE(SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END), 0) AS running, \
                   COALESCE(SUM(CASE WHEN status = 'running' AND due_at <= ? THEN 1 ELSE 0 END), 0) AS expired, \
                   MIN(CASE WHEN due_at <= ? THEN due_at END) AS oldest_due, \
                   (SELECT MAX(claimed_at) FROM runs) AS last_claim \
                 FROM runs WHERE status IN ('queued', 'running')",
                vec![now_ms.into(), now_ms.into(), now_ms.into()],
            ))
            .await?;
        let Some(row) = row else {
            return Ok(QueueHealth {
                now_ms,
                queued: 0,
                due: 0,
                running: 0,
                expired_leases: 0,
                oldest_due_at: None,
                last_claim_at: None,
            });
        };
        Ok(QueueHealth {
            now_ms,
            queued: get(&row, "queued")?,
            due: get(&row, "due")?,
            running: get(&row, "running")?,
            expired_leases: get(&row, "expired")?,
            oldest_due_at: get(&row, "oldest_due")?,
            last_claim_at: get(&row, "last_claim")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_count_from_the_instant_of_the_counts() {
        let health = QueueHealth {
            now_ms: 10_000,
            queued: 2,
            due: 1,
            running: 1,
            expired_leases: 1,
            oldest_due_at: Some(4_000),
            last_claim_at: Some(12_000),
        };
        assert_eq!(health.waiting(), 2);
        assert_eq!(health.oldest_due_age_ms(), Some(6_000));
        assert_eq!(health.since_last_claim_ms(), Some(0));
        let idle = QueueHealth {
            oldest_due_at: None,
            last_claim_at: None,
            ..health
        };
        assert_eq!(idle.oldest_due_age_ms(), None);
        assert_eq!(idle.since_last_claim_ms(), None);
    }
}
