//! Readiness: can this process serve writes right now? The data directory and `uploads/` must
//! take a write that reaches the disk (written, flushed and fsynced), every volume Shelf
//! writes to must keep `SHELF_MIN_FREE_BYTES`, the database file must be present and intact,
//! and its migrations exactly the ones this binary knows. Reasons are short and carry no paths
//! or OS text (`/ready` is unauthenticated); the causes are logged.
//!
//! The database is checked on a fresh, short-lived connection, never the pool's: since SQLite
//! 3.44 `PRAGMA quick_check` also checks FTS5 tables using the structure record the connection
//! cached, so on a long-lived connection, after another connection wrote the index, it reports
//! `fts5: checksum mismatch` on an intact index (issue 22). Every call opens the file and reads
//! its schema and migrations; the full `quick_check`, which reads the whole file, runs at most
//! every `SHELF_READY_FULL_CHECK_SECONDS` in the background, one at a time, and its verdict is
//! reused in between. Concurrent calls share one evaluation, so a burst of probes costs what
//! one costs and never holds the pool.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbBackend, DbErr, Statement};
use serde::Serialize;
use shelf_db::sql::SqlExt;
use shelf_documents::UPLOADS_DIR;
use tokio::sync::{Mutex, watch};

use crate::db::{SchemaStatus, schema_status};
use crate::shelf::Shelf;

/// A ready process: the migrations it verified.
#[derive(Debug, Clone, Serialize)]
pub struct Readiness {
    pub applied_migrations: Vec<String>,
}

/// Why the process is not ready, safe to show to anyone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct NotReady {
    pub reason: &'static str,
}

fn not_ready(reason: &'static str, cause: impl std::fmt::Display) -> NotReady {
    tracing::warn!(reason, cause = %cause, "readiness check failed");
    NotReady { reason }
}

fn unreadable_migrations(cause: impl std::fmt::Display) -> NotReady {
    not_ready("database migration metadata is unreadable", cause)
}

/// The reason `/ready` gives while a volume is below `SHELF_MIN_FREE_BYTES`.
pub const LOW_SPACE: &str = "free disk space is below SHELF_MIN_FREE_BYTES";

/// How long a fresh connection waits for a lock (a checkpoint, a restore) before the check
/// says the database is unavailable.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// The verdict of one full integrity check, and when that check started.
#[derive(Debug, Clone)]
struct FullVerdict {
    started: Instant,
    result: Result<(), NotReady>,
}

/// What should be done about the full check at `now`, given the last verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FullCheck {
    /// The last verdict is recent enough: use it.
    Reuse,
    /// Due: start a check, and meanwhile use the last verdict (a refresh in the background).
    RefreshAndReuse,
    /// Due, and the last verdict is too old to stand in (or there is none, or the interval is
    /// 0): start a check if none runs, and wait for its verdict.
    Wait,
}

/// The rule, apart from clocks and tasks: a verdict younger than `interval` stands; one
/// younger than twice the interval stands while a new check runs; anything older (or none)
/// is waited for.
fn full_check_plan(last_started: Option<Instant>, now: Instant, interval: Duration) -> FullCheck {
    let Some(started) = last_started else {
        return FullCheck::Wait;
    };
    let age = now.saturating_duration_since(started);
    if interval.is_zero() {
        FullCheck::Wait
    } else if age < interval {
        FullCheck::Reuse
    } else if age < interval.saturating_mul(2) {
        FullCheck::RefreshAndReuse
    } else {
        FullCheck::Wait
    }
}

/// The state `/ready` keeps between calls: the last full check's verdict, whether one runs,
/// and the last evaluation, which concurrent callers share.
pub struct ReadinessCache {
    interval: Duration,
    full: watch::Sender<Option<FullVerdict>>,
    full_running: Arc<AtomicBool>,
    /// The last evaluation and when it started: a caller that waited for the lock reuses it
    /// when it started after the caller arrived (it is then as fresh as its own would be).
    last: Mutex<Option<(Instant, Result<Readiness, NotReady>)>>,
}

impl ReadinessCache {
    /// `interval`: `SHELF_READY_FULL_CHECK_SECONDS`.
    pub fn new(interval: Duration) -> ReadinessCache {
        ReadinessCache {
            interval,
            full: watch::Sender::new(None),
            full_running: Arc::new(AtomicBool::new(false)),
            last: Mutex::new(None),
        }
    }
}

/// Resets the "a full check runs" flag however the check's task ends.
struct RunningFlag(Arc<AtomicBool>);

impl Drop for RunningFlag {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Opens the SQLite file on a connection of its own, never creating it. Not read-only: a
/// read-only connection cannot set up the WAL index when no other connection has, and this one
/// only ever reads anyway.
async fn open_fresh(path: &Path) -> Result<DatabaseConnection, DbErr> {
    let file = path.to_path_buf();
    let mut options = ConnectOptions::new("sqlite://shelf.sqlite");
    options
        .max_connections(1)
        .min_connections(0)
        .acquire_timeout(OPEN_TIMEOUT)
        .test_before_acquire(false)
        .sqlx_logging(false)
        .map_sqlx_sqlite_opts(move |o| {
            o.filename(&file)
                .create_if_missing(false)
                .busy_timeout(OPEN_TIMEOUT)
        });
    Database::connect(options).await
}

/// `PRAGMA quick_check` on a fresh connection (see the module docs for why not a pooled one).
async fn full_sqlite_check(path: PathBuf) -> Result<(), NotReady> {
    let db = open_fresh(&path)
        .await
        .map_err(|e| not_ready("database is unavailable", e))?;
    let rows = db
        .query_all_sql(Statement::from_string(
            DbBackend::Sqlite,
            "PRAGMA quick_check(1)",
        ))
        .await;
    let _ = db.close().await;
    let rows = rows.map_err(|e| not_ready("database is unavailable", e))?;
    let verdict = rows
        .first()
        .and_then(|row| row.try_get_by_index::<String>(0).ok());
    if verdict.as_deref() != Some("ok") {
        return Err(not_ready(
            "database failed its integrity check",
            verdict.unwrap_or_default(),
        ));
    }
    Ok(())
}

/// Creates, writes, flushes, fsyncs and removes a probe file in `dir`. std's `File`, on the
/// blocking pool: tokio's `File` keeps a write's error (`ENOSPC`) until it is flushed, so its
/// `sync_all` alone can succeed on a full disk.
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".ready-probe-{:016x}", random_suffix()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)?;
        file.write_all(b"ok")?;
        file.flush()?;
        file.sync_all()?;
        drop(file);
        std::fs::remove_file(&probe)
    })();
    if result.is_err() {
        // Best effort: a probe that was created but not written must not linger.
        let _ = std::fs::remove_file(&probe);
    }
    result
}

/// The data directory and `uploads/` take a durable write. `uploads/` before the first upload
/// does not exist yet: the data directory's probe covers it. One that is a symlink or not a
/// directory is refused, as uploads refuse it.
fn check_storage(data_dir: &Path) -> Result<(), NotReady> {
    probe_writable(data_dir).map_err(|e| not_ready("data directory is not writable", e))?;
    let uploads = data_dir.join(UPLOADS_DIR);
    match std::fs::symlink_metadata(&uploads) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(not_ready("uploads directory is not writable", e)),
        Ok(meta) if !meta.is_dir() => Err(not_ready(
            "uploads directory is not writable",
            "not a directory (or a symlink)",
        )),
        Ok(_) => {
            probe_writable(&uploads).map_err(|e| not_ready("uploads directory is not writable", e))
        }
    }
}

/// The reason `/ready` gives once this process has met a damaged database.
pub const DAMAGED: &str = "database is damaged; restore it from a backup";

impl Shelf {
    /// Whether this process is ready; concurrent callers share one evaluation.
    pub async fn readiness(&self) -> Result<Readiness, NotReady> {
        let arrived = Instant::now();
        let mut last = self.readiness.last.lock().await;
        if let Some((started, verdict)) = last.as_ref()
            && *started >= arrived
        {
            return verdict.clone();
        }
        let started = Instant::now();
        let verdict = self.evaluate_readiness().await;
        *last = Some((started, verdict.clone()));
        verdict
    }

    async fn evaluate_readiness(&self) -> Result<Readiness, NotReady> {
        // A process that met damage writes nothing more (`db::mark_damaged`): it cannot serve
        // writes, whatever the next full check would say.
        if let Some(first) = shelf_db::known_damage() {
            return Err(not_ready(DAMAGED, first));
        }
        // Space first: on a full disk the probes fail too, and this reason says why.
        self.disk_space()
            .check()
            .map_err(|low| not_ready(LOW_SPACE, low))?;
        let data_dir = self.settings.storage.data_dir.clone();
        tokio::task::spawn_blocking(move || check_storage(&data_dir))
            .await
            .map_err(|e| not_ready("data directory is not writable", e))??;
        let status = if self.settings.is_postgres() {
            // The server checks its own pages; readiness asks only that it answers.
            self.db
                .query_one_sql(Statement::from_string(DbBackend::Sqlite, "SELECT 1"))
                .await
                .map_err(|e| not_ready("database is unavailable", e))?;
            schema_status(&self.db)
                .await
                .map_err(unreadable_migrations)?
        } else {
            self.check_sqlite_file().await?
        };
        if !status.unknown.is_empty() {
            return Err(not_ready(
                "database was migrated by a newer shelf",
                status.unknown.join(", "),
            ));
        }
        if !status.pending.is_empty() {
            return Err(not_ready(
                "database needs migrations; run `shelf migrate`",
                status.pending.join(", "),
            ));
        }
        Ok(Readiness {
            applied_migrations: status.applied,
        })
    }

    /// The SQLite file exists, opens on a fresh connection, its schema reads, and the last full
    /// check passed; the migrations it holds, read on that connection.
    async fn check_sqlite_file(&self) -> Result<SchemaStatus, NotReady> {
        let path = &self.settings.storage.database_path;
        match tokio::fs::metadata(path).await {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => return Err(not_ready("database is missing", "not a regular file")),
            Err(e) => return Err(not_ready("database is missing", e)),
        }
        let db = open_fresh(path)
            .await
            .map_err(|e| not_ready("database is unavailable", e))?;
        let read = async {
            db.query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT count(*) FROM sqlite_schema",
            ))
            .await
            .map_err(|e| not_ready("database is unavailable", e))?;
            schema_status(&db).await.map_err(unreadable_migrations)
        }
        .await;
        let _ = db.close().await;
        let status = read?;
        self.full_check_verdict().await?;
        Ok(status)
    }

    /// The verdict of the full check, by the rule of [`full_check_plan`]: a due check starts
    /// on a task of its own (a caller that goes away does not stop it), at most one at a time.
    async fn full_check_verdict(&self) -> Result<(), NotReady> {
        let cache = &self.readiness;
        let last = cache.full.borrow().clone();
        let plan = full_check_plan(
            last.as_ref().map(|v| v.started),
            Instant::now(),
            cache.interval,
        );
        if plan != FullCheck::Reuse && !cache.full_running.swap(true, Ordering::SeqCst) {
            let flag = RunningFlag(cache.full_running.clone());
            let sender = cache.full.clone();
            let path = self.settings.storage.database_path.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                // On a task of its own, so that even a panic publishes a verdict and the
                // callers waiting for one are answered.
                let result = match tokio::spawn(full_sqlite_check(path)).await {
                    Ok(result) => result,
                    Err(e) => Err(not_ready("database is unavailable", e)),
                };
                sender.send_replace(Some(FullVerdict { started, result }));
                drop(flag);
            });
        }
        match (plan, last) {
            (FullCheck::Reuse | FullCheck::RefreshAndReuse, Some(verdict)) => verdict.result,
            (_, seen) => {
                // The running check publishes a verdict newer than the one seen.
                let seen = seen.map(|v| v.started);
                let mut rx = cache.full.subscribe();
                let fresh = rx
                    .wait_for(|v| {
                        v.as_ref()
                            .is_some_and(|v| seen.is_none_or(|s| v.started > s))
                    })
                    .await
                    .map_err(|e| not_ready("database is unavailable", e))?;
                fresh
                    .as_ref()
                    .map_or(Ok(()), |verdict| verdict.result.clone())
            }
        }
    }
}

/// A random suffix for probe and temporary file names without a new dependency: the std
/// hasher is randomly keyed per process.
pub(crate) fn random_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_check_runs_when_due_and_its_verdict_stands_in_between() {
        let t0 = Instant::now();
        let ten = Duration::from_secs(600);
        let at = |secs| t0 + Duration::from_secs(secs);
        assert_eq!(full_check_plan(None, t0, ten), FullCheck::Wait);
        assert_eq!(full_check_plan(Some(t0), t0, ten), FullCheck::Reuse);
        assert_eq!(full_check_plan(Some(t0), at(599), ten), FullCheck::Reuse);
        assert_eq!(
            full_check_plan(Some(t0), at(600), ten),
            FullCheck::RefreshAndReuse
        );
        assert_eq!(
            full_check_plan(Some(t0), at(1199), ten),
            FullCheck::RefreshAndReuse
        );
        assert_eq!(full_check_plan(Some(t0), at(1200), ten), FullCheck::Wait);
        // 0: every call runs the full check and waits for it.
        assert_eq!(
            full_check_plan(Some(t0), t0, Duration::ZERO),
            FullCheck::Wait
        );
    }

    #[test]
    fn the_storage_probe_reaches_the_disk_and_leaves_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(check_storage(dir.path()), Ok(()));
        std::fs::create_dir(dir.path().join(UPLOADS_DIR)).expect("uploads");
        assert_eq!(check_storage(dir.path()), Ok(()));
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("read_dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from(UPLOADS_DIR)]);
        std::fs::remove_dir(dir.path().join(UPLOADS_DIR)).expect("rmdir");
        std::fs::write(dir.path().join(UPLOADS_DIR), b"a file").expect("file");
        assert_eq!(
            check_storage(dir.path()).map_err(|e| e.reason),
            Err("uploads directory is not writable")
        );
        assert_eq!(
            check_storage(&dir.path().join("missing")).map_err(|e| e.reason),
            Err("data directory is not writable")
        );
    }
}
