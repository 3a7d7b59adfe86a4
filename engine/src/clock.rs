//! The queue's clock: the epoch milliseconds that due times and leases are written and compared
//! in. On SQLite every process is on one host and reads that host's clock. On PostgreSQL the
//! processes are on several hosts, so each one reads its own clock corrected by its offset from
//! the database server's clock, measured at the first use and again every
//! [`RESYNC_EVERY_MS`]: a host whose clock runs 30 s ahead then neither reclaims live runs nor
//! writes due times that others see as 30 s late.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use sea_orm::{DatabaseConnection, DbBackend, Statement};

use crate::error::EngineError;
use shelf_db::sql::SqlExt;

/// How often a process on PostgreSQL measures its clock's offset again (local milliseconds).
pub const RESYNC_EVERY_MS: i64 = 30_000;

type Local = dyn Fn() -> i64 + Send + Sync;

#[derive(Clone)]
pub struct QueueClock {
    local: Arc<Local>,
    /// Database time minus local time, in ms (0 on SQLite and until the first measure).
    offset: Arc<AtomicI64>,
    /// Local time of the last measure; `i64::MIN` before the first.
    synced_at: Arc<AtomicI64>,
    syncing: Arc<AtomicBool>,
    /// Moved on by [`QueueClock::advance`], after the offset: time a test lets pass.
    shift: Arc<AtomicI64>,
}

impl Default for QueueClock {
    fn default() -> Self {
        Self::system()
    }
}

impl QueueClock {
    /// This host's clock.
    pub fn system() -> Self {
        Self::with_local(crate::time::now_ms)
    }

    /// Another local clock: a test's host whose clock is off, or one it moves by hand.
    pub fn with_local(local: impl Fn() -> i64 + Send + Sync + 'static) -> Self {
        QueueClock {
            local: Arc::new(local),
            offset: Arc::new(AtomicI64::new(0)),
            synced_at: Arc::new(AtomicI64::new(i64::MIN)),
            syncing: Arc::new(AtomicBool::new(false)),
            shift: Arc::new(AtomicI64::new(0)),
        }
    }

    /// Moves this clock (and its clones) forward by `by`, on top of the database's time: how a
    /// test lets a lease lapse or a retry come due without waiting for it.
    pub fn advance(&self, by: std::time::Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.shift.fetch_add(by, Ordering::Relaxed);
    }

    /// Now, in the queue's time.
    pub fn now_ms(&self) -> i64 {
        (self.local)()
            .saturating_add(self.offset.load(Ordering::Relaxed))
            .saturating_add(self.shift.load(Ordering::Relaxed))
    }

    /// On PostgreSQL, measures the offset from the database's clock when the last measure is
    /// older than [`RESYNC_EVERY_MS`]; nothing on SQLite. A failed measure keeps the last
    /// offset (a database that cannot answer this cannot take the write that follows either).
    pub async fn sync_if_stale(&self, db: &DatabaseConnection) {
        if !shelf_db::sql::is_postgres(db) {
            return;
        }
        let local = (self.local)();
        let last = self.synced_at.load(Ordering::Relaxed);
        if last != i64::MIN && local.saturating_sub(last) < RESYNC_EVERY_MS {
            return;
        }
        if self.syncing.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Err(error) = self.sync(db).await {
            tracing::warn!(%error, "cannot read the database's clock; keeping the last offset");
        }
        self.syncing.store(false, Ordering::Release);
    }

    /// Measures the offset now: the database's time against the midpoint of the round trip.
    pub async fn sync(&self, db: &DatabaseConnection) -> Result<(), EngineError> {
        let before = (self.local)();
        let row = db
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT) AS now_ms",
            ))
            .await?;
        let after = (self.local)();
        let Some(row) = row else {
            return Ok(());
        };
        let server: i64 = row.try_get("", "now_ms")?;
        let midpoint = before + (after - before) / 2;
        self.offset
            .store(server.saturating_sub(midpoint), Ordering::Relaxed);
        self.synced_at.store(after, Ordering::Relaxed);
        Ok(())
    }
}
