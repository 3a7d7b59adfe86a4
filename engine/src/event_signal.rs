//! "Run events changed": a process-wide signal that whoever follows a run's events (the API's
//! event streams) waits on, instead of each follower polling the database. Three sources feed
//! it: this process's own commits of run events ([`notify`], called by the store after each
//! commit that appended events), and, through [`relay`], the other processes' commits: on
//! PostgreSQL every such transaction sends `pg_notify` on [`CHANNEL`] with the run id and the
//! relay listens for it; on SQLite, which cannot notify another process, the relay reads the
//! tail of `run_events` once per interval for the whole process (one indexed read, however many
//! followers), and only while someone follows. A follower still re-reads on a slow timer of its
//! own: a notification sent while the listener reconnects is lost, and a deleted run sends none.
//!
//! The signal carries no event, only "look again": a follower reads the events after the last
//! one it sent, so a missed or duplicated signal costs latency or one read, never an event.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sea_orm::{DatabaseConnection, DbBackend, Statement};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio_util::sync::CancellationToken;

use shelf_db::sql::SqlExt;

/// The PostgreSQL notification channel of run events; the payload is the run id.
pub const CHANNEL: &str = "shelf_run_events";

/// Signals held for a slow follower before it is told it fell behind (it then reads anyway).
const CAPACITY: usize = 1024;

/// Run ids read per tail read on SQLite; past it every follower looks again.
const TAIL_RUNS: usize = 256;

/// How long the relay waits before it listens again after its connection failed.
const RECONNECT_BACKOFF: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Changed {
    /// Events of this run were committed.
    Run(Arc<str>),
    /// Events of any run may have been committed (a source reconnected, or read too many).
    Any,
}

fn hub() -> &'static broadcast::Sender<Changed> {
    static HUB: OnceLock<broadcast::Sender<Changed>> = OnceLock::new();
    HUB.get_or_init(|| broadcast::channel(CAPACITY).0)
}

/// Events of `run_id` were committed. Costs nothing while nobody follows.
pub fn notify(run_id: &str) {
    let hub = hub();
    if hub.receiver_count() > 0 {
        // An error only means the last follower left meanwhile.
        let _ = hub.send(Changed::Run(Arc::from(run_id)));
    }
}

/// Events of any run may have been committed.
pub fn notify_any() {
    let hub = hub();
    if hub.receiver_count() > 0 {
        let _ = hub.send(Changed::Any);
    }
}

/// How many followers wait on the signal (for the relay, and tests).
pub fn followers() -> usize {
    hub().receiver_count()
}

/// One follower of one run. Subscribe before the first read of the run's events: a commit
/// after that read then wakes the next [`Follower::changed`].
pub struct Follower {
    rx: broadcast::Receiver<Changed>,
    run_id: String,
}

impl Follower {
    pub fn new(run_id: &str) -> Follower {
        Follower {
            rx: hub().subscribe(),
            run_id: run_id.to_string(),
        }
    }

    /// Returns once events of the run may have changed since the last return. Cancel-safe: a
    /// signal that arrives while another branch of a `select!` wins is kept for the next call.
    pub async fn changed(&mut self) {
        loop {
            match self.rx.recv().await {
                Ok(Changed::Run(id)) if *id == *self.run_id => break,
                Ok(Changed::Run(_)) => {}
                Ok(Changed::Any) | Err(RecvError::Lagged(_)) => break,
                // The hub lives as long as the process: never closed.
                Err(RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
        // Signals already queued are covered by the read the caller makes now.
        while let Ok(_) | Err(TryRecvError::Lagged(_)) = self.rx.try_recv() {}
    }
}

/// The statement that tells other processes `run_id`'s events changed, for the transaction that
/// appends them: `pg_notify` on PostgreSQL (delivered at commit, not at all on rollback), none
/// on SQLite (whose other processes read the tail instead).
pub(crate) fn notify_statement(backend: DbBackend, run_id: &str) -> Option<Statement> {
    (backend == DbBackend::Postgres).then(|| {
        Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "SELECT pg_notify(?, ?)",
            [CHANNEL.into(), run_id.into()],
        )
    })
}

/// Feeds the signal with the run events other processes commit, until `shutdown` trips: a
/// `LISTEN` on PostgreSQL, a read of `run_events`' tail every `tail_every` on SQLite while
/// anyone follows.
pub async fn relay(db: DatabaseConnection, tail_every: Duration, shutdown: CancellationToken) {
    if shelf_db::sql::is_postgres(&db) {
        listen(db, shutdown).await;
    } else {
        tail(db, tail_every, shutdown).await;
    }
}

async fn listen(db: DatabaseConnection, shutdown: CancellationToken) {
    loop {
        let mut listener = match crate::wake::listener(&db, CHANNEL).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "cannot listen for run event notifications; event streams poll until it can");
                tokio::select! {
                    _ = tokio::time::sleep(RECONNECT_BACKOFF) => continue,
                    _ = shutdown.cancelled() => return,
                }
            }
        };
        // Whatever was committed while nobody listened is unknown.
        notify_any();
        loop {
            tokio::select! {
                received = listener.try_recv() => match received {
                    Ok(Some(notification)) => notify(notification.payload()),
                    // The connection dropped and came back: notifications meanwhile are lost.
                    Ok(None) => notify_any(),
                    Err(error) => {
                        tracing::warn!(%error, "run event listener failed; listening again");
                        break;
                    }
                },
                _ = shutdown.cancelled() => return,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RECONNECT_BACKOFF) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

async fn tail(db: DatabaseConnection, every: Duration, shutdown: CancellationToken) {
    // The last `run_events` rowid seen; none while nobody follows.
    let mut last: Option<i64> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.cancelled() => return,
        }
        if followers() == 0 {
            last = None;
            continue;
        }
        match read_tail(&db, last).await {
            Ok(seen) => last = Some(seen),
            Err(error) => tracing::debug!(%error, "reading the tail of run_events failed"),
        }
    }
}

/// Signals the runs whose events were appended after rowid `last`, and returns the last rowid
/// now. SQLite gives a new row the largest rowid plus one, so rows past `last` are the new
/// ones; when the table's end was deleted (retention), rowids may be given again, and every
/// follower looks again rather than miss them.
async fn read_tail(db: &DatabaseConnection, last: Option<i64>) -> Result<i64, sea_orm::DbErr> {
    let sql = |text: &str, values: Vec<sea_orm::Value>| {
        Statement::from_sql_and_values(DbBackend::Sqlite, text, values)
    };
    let max: i64 = match db
        .query_one_sql(sql(
            "SELECT COALESCE(MAX(rowid), 0) AS m FROM run_events",
            vec![],
        ))
        .await?
    {
        Some(row) => row.try_get("", "m")?,
        None => 0,
    };
    let Some(last) = last else {
        // Someone started following: what they read first may be older than this.
        notify_any();
        return Ok(max);
    };
    if max < last {
        notify_any();
    } else if max > last {
        let rows = db
            .query_all_sql(sql(
                "SELECT DISTINCT run_id FROM run_events WHERE rowid > ? AND rowid <= ? LIMIT ?",
                vec![
                    last.into(),
                    max.into(),
                    i64::try_from(TAIL_RUNS + 1).unwrap_or(i64::MAX).into(),
                ],
            ))
            .await?;
        if rows.len() > TAIL_RUNS {
            notify_any();
        } else {
            for row in rows {
                notify(&row.try_get::<String>("", "run_id")?);
            }
        }
    }
    Ok(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_wake_for_their_run_and_the_sqlite_tail_signals_other_connections() {
        let mut follower = Follower::new("run_a");
        notify("run_b");
        let woke = tokio::time::timeout(Duration::from_millis(50), follower.changed()).await;
        assert!(woke.is_err(), "another run's events wake nobody else");
        notify("run_b");
        notify("run_a");
        notify("run_a");
        follower.changed().await;
        // Both signals of run_a were one wake-up: nothing is left queued.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), follower.changed())
                .await
                .is_err()
        );
        notify_any();
        follower.changed().await;
        drop(follower);

        // One test, not two: `notify_any` wakes every follower of the process, so a second
        // test running alongside would wake the first one's.
        let dir = tempfile::tempdir().expect("tempdir");
        let db = shelf_db::connect(&dir.path().join("tail.sqlite"), 2)
            .await
            .expect("connect");
        db.execute_sql(Statement::from_string(
            DbBackend::Sqlite,
            "CREATE TABLE run_events (run_id TEXT NOT NULL, sequence INTEGER NOT NULL)",
        ))
        .await
        .expect("create");
        let mut follower = Follower::new("run_tail_x");
        let last = read_tail(&db, None).await.expect("first read");
        assert_eq!(last, 0);
        follower.changed().await; // the first read says "look again" to everyone
        db.execute_sql(Statement::from_string(
            DbBackend::Sqlite,
            "INSERT INTO run_events VALUES ('run_tail_y', 1), ('run_tail_x', 1)",
        ))
        .await
        .expect("insert");
        let last = read_tail(&db, Some(last)).await.expect("tail");
        assert_eq!(last, 2);
        tokio::time::timeout(Duration::from_secs(5), follower.changed())
            .await
            .expect("woken by the tail");
        assert_eq!(read_tail(&db, Some(last)).await.expect("idle"), 2);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), follower.changed())
                .await
                .is_err(),
            "no new rows, no signal"
        );
    }
}
