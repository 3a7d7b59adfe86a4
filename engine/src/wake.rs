//! How an idle worker learns that a run became due. On SQLite it polls (`poll_interval`); on
//! PostgreSQL every transaction that puts a run on the queue sends a `NOTIFY` on [`CHANNEL`]
//! and idle workers wait on a `LISTEN` connection for it, with the poll kept as a fallback:
//! expired leases and delayed retries coming due produce no notification, and notifications
//! sent while a listener reconnects are lost.

use std::time::Duration;

use sea_orm::DatabaseConnection;
use sea_orm::sqlx::postgres::{PgListener, PgPoolOptions};
use tokio_util::sync::CancellationToken;

/// The notification channel of the run queue. The payload is empty: a notification only means
/// "look at the queue again".
pub const CHANNEL: &str = "shelf_runs";

/// How long a worker whose listener failed waits before it reads the queue and listens again.
const RECONNECT_BACKOFF: Duration = Duration::from_secs(1);

/// Why [`Waiter::wait`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// A notification arrived (or the listener reconnected and may have missed one).
    Notified,
    /// The timeout passed.
    TimedOut,
    /// The worker is shutting down.
    Shutdown,
}

/// An idle worker's way to wait for work: a sleep on SQLite, a `LISTEN` on PostgreSQL.
pub struct Waiter {
    db: DatabaseConnection,
    /// The listener, once connected; dropped after an error and connected again on the next
    /// wait, so a restarted server or a dropped connection only costs polls meanwhile.
    listener: Option<PgListener>,
}

impl Waiter {
    pub fn new(db: DatabaseConnection) -> Self {
        Waiter { db, listener: None }
    }

    /// Whether this waiter listens for notifications (PostgreSQL) rather than only polling.
    pub fn listens(&self) -> bool {
        shelf_db::sql::is_postgres(&self.db)
    }

    /// Makes sure the listener is connected and listening. Call it before reading the queue:
    /// a run enqueued after that read then wakes the next [`Waiter::wait`], since the
    /// connection buffers notifications until they are received.
    pub async fn prepare(&mut self) {
        if !self.listens() || self.listener.is_some() {
            return;
        }
        match self.connect().await {
            Ok(listener) => self.listener = Some(listener),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for queue notifications; polling until it can")
            }
        }
    }

    async fn connect(&self) -> Result<PgListener, sea_orm::sqlx::Error> {
        listener(&self.db, CHANNEL).await
    }

    /// Waits until a notification arrives, `timeout` passes, or `shutdown` trips.
    pub async fn wait(&mut self, timeout: Duration, shutdown: &CancellationToken) -> Woken {
        let Some(listener) = self.listener.as_mut() else {
            return tokio::select! {
                _ = tokio::time::sleep(timeout) => Woken::TimedOut,
                _ = shutdown.cancelled() => Woken::Shutdown,
            };
        };
        // `try_recv` is cancel-safe: a notification half read when the timeout wins stays in the
        // connection's buffer for the next wait.
        let woken = tokio::select! {
            received = listener.try_recv() => match received {
                // `None`: the connection dropped and was re-established; notifications sent
                // meanwhile are lost, so the queue is read again as if notified.
                Ok(_) => Woken::Notified,
                Err(error) => {
                    tracing::warn!(%error, "queue listener failed; reconnecting");
                    self.listener = None;
                    // A short back-off, not the whole (possibly long) poll: the next wait
                    // reconnects, and a server that refuses connections is not spun on.
                    tokio::select! {
                        _ = tokio::time::sleep(timeout.min(RECONNECT_BACKOFF)) => Woken::TimedOut,
                        _ = shutdown.cancelled() => Woken::Shutdown,
                    }
                }
            },
            _ = tokio::time::sleep(timeout) => Woken::TimedOut,
            _ = shutdown.cancelled() => Woken::Shutdown,
        };
        if woken == Woken::Notified
            && let Some(listener) = self.listener.as_mut()
        {
            // Several runs enqueued at once are one reading of the queue, not one each.
            while listener.next_buffered().is_some() {}
        }
        woken
    }
}

/// A listener on `channel`, on a one-connection pool of its own with the options of `db`'s
/// pool (PostgreSQL): it holds its connection for as long as it lives, which must not starve
/// the pool the executor writes through.
pub(crate) async fn listener(
    db: &DatabaseConnection,
    channel: &str,
) -> Result<PgListener, sea_orm::sqlx::Error> {
    let options = db
        .get_postgres_connection_pool()
        .connect_options()
        .as_ref()
        .clone();
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .max_lifetime(None)
        .idle_timeout(None)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.listen(channel).await?;
    Ok(listener)
}
