//! Persistence of runs, stage checkpoints, partial checkpoints and run events: the records,
//! the store and its reads here; a new run (`create`), the durable queue's claim and heartbeat
//! (`claim`), cancel (`cancel`) and a claimed run's fenced writes (`lease`) beside it. Every
//! write transaction takes the write lock up front and is a handful of statements; every
//! worker write is fenced by the run's lease token.

mod cancel;
mod claim;
mod create;
mod lease;

pub use lease::LeaseGuard;
pub(crate) use lease::Write;

use chrono::{DateTime, SecondsFormat, Utc};
use shelf_db::sql::SqlExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, DbErr, QueryResult, Statement,
    Value as SqlValue,
};
use serde::Serialize;
use serde_json::Value;

use crate::clock::QueueClock;
use crate::error::EngineError;
use crate::pipeline::CompiledPipeline;
use crate::state::{RunStatus, StageStatus};
use crate::time::now_rfc3339;
use shelf_db::Database;

pub(crate) fn stmt(sql: &str, values: Vec<SqlValue>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

/// ` FOR UPDATE` on PostgreSQL, nothing on SQLite: appended to a read that a write of the same
/// transaction depends on. SQLite's IMMEDIATE transaction already holds the one write lock;
/// PostgreSQL (READ COMMITTED) needs the row locked, or another transaction may change it in
/// between.
pub(crate) fn row_lock(conn: &impl ConnectionTrait) -> &'static str {
    if shelf_db::sql::is_postgres(conn) {
        " FOR UPDATE"
    } else {
        ""
    }
}

/// The statements that wake idle workers when a transaction puts a run on the queue: a
/// `NOTIFY` on PostgreSQL (delivered at commit, and not at all on rollback), nothing on SQLite,
/// whose workers poll.
pub(crate) fn wake_statements(backend: DbBackend) -> Vec<Statement> {
    if backend == DbBackend::Postgres {
        vec![Statement::from_string(
            DbBackend::Postgres,
            format!("NOTIFY {}", crate::wake::CHANNEL),
        )]
    } else {
        Vec::new()
    }
}

use shelf_db::begin_write;

#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub id: String,
    pub subject: String,
    pub pipeline: String,
    pub pipeline_sha256: String,
    #[serde(skip)]
    pub pipeline_yaml: String,
    pub input: Value,
    pub status: RunStatus,
    pub stage: Option<String>,
    pub error: Option<String>,
    pub attempt: i64,
    pub retry_of: Option<String>,
    pub cancel_requested: bool,
    pub due_at: i64,
    pub lease_owner: Option<String>,
    pub lease_token: i64,
    pub claims: i64,
    pub reclaims: i64,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub enqueued_at: i64,
    /// The W3C `traceparent` of whatever created the run (opaque to the engine), so the
    /// executor's spans continue that trace.
    #[serde(skip)]
    pub trace_parent: Option<String>,
}

impl RunRecord {
    /// The stable code of the stage that failed this run (`extract`'s `pdf_encrypted`, say),
    /// read from its error; none while it has not failed by a stage.
    pub fn error_code(&self) -> Option<&str> {
        self.error
            .as_deref()
            .and_then(crate::lifecycle::stage_failure_code)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct StageRecord {
    pub name: String,
    pub kind: String,
    pub position: i64,
    pub status: StageStatus,
    pub attempts: i64,
    #[serde(skip)]
    pub output: Option<Value>,
    pub error: Option<String>,
    pub reused_from: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub duration_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventRecord {
    pub sequence: i64,
    pub stage: String,
    pub kind: String,
    pub message: String,
    pub created_at: String,
}

/// A run handed to a worker: the run as claimed and the lease token its writes must carry.
#[derive(Debug, Clone)]
pub struct Claim {
    pub run: RunRecord,
    pub token: i64,
    pub reclaimed: bool,
    /// How long the run waited for this claim: the claim time minus the time it became due
    /// (queued, retry due, or lease expired).
    pub queue_wait: Duration,
}

/// What `cancel` did: a queued (or abandoned) run is canceled at once, a running one is flagged
/// for the worker that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelOutcome {
    Canceled,
    Requested,
}

pub struct NewRun<'a> {
    pub subject: &'a str,
    pub pipeline: &'a CompiledPipeline,
    pub input: Value,
    /// See [`RunRecord::trace_parent`].
    pub trace_parent: Option<String>,
    /// The subject's check, first in the transaction that creates the run (see
    /// [`SubjectGuard`]); `None` when the caller's subjects never go away.
    pub guard: Option<SubjectGuard>,
}

/// What the transaction creating a run checks of its subject before it writes anything, so a
/// run is never created for a subject deleted meanwhile (the engine does not know what a
/// subject is: the application says how to lock and find one, see
/// [`crate::RunHooks::subject_guard`]).
pub struct SubjectGuard {
    /// Run first: the lock the subject's deletion takes too (PostgreSQL; nothing on SQLite,
    /// where the creating transaction holds the database's write lock), so a deletion in flight
    /// and the creation wait for each other: the deletion then sees the run and removes it, or
    /// the creation finds the subject gone.
    pub lock: Vec<Statement>,
    /// A write on the subject's row (e.g. its status): when it changes no row, the subject is
    /// gone, the transaction is rolled back and the creation fails with
    /// [`EngineError::SubjectNotFound`].
    pub touch: Statement,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueCounts {
    pub queued: i64,
    pub due: i64,
    pub running: i64,
    pub expired_leases: i64,
}

/// The columns a [`RunRecord`] is read from, named rather than `*`: a pooled connection that
/// has not yet seen a migration prepares `SELECT *` with the old column list, SQLite re-prepares
/// it with the new one when it runs, and sqlx indexes past the column metadata it kept (a
/// panic in its worker thread). A named column it does not know yet fails the prepare instead,
/// which SQLite retries with the fresh schema.
const RUN_COLUMNS: &str = "id, subject, pipeline, pipeline_yaml, pipeline_sha256, input, status, stage, error, \
     attempt, retry_of, cancel_requested, due_at, lease_owner, lease_token, claims, reclaims, \
     enqueued_at, created_at, started_at, finished_at, trace_parent";

fn get<T: sea_orm::TryGetable>(row: &QueryResult, col: &str) -> Result<T, DbErr> {
    row.try_get::<T>("", col)
}

fn run_from_row(row: &QueryResult) -> Result<RunRecord, EngineError> {
    let id: String = get(row, "id")?;
    let status_text: String = get(row, "status")?;
    let status = RunStatus::parse(&status_text).ok_or_else(|| EngineError::Corrupt {
        id: id.clone(),
        detail: format!("unknown run status `{status_text}`"),
    })?;
    let input_text: String = get(row, "input")?;
    Ok(RunRecord {
        subject: get(row, "subject")?,
        pipeline: get(row, "pipeline")?,
        pipeline_sha256: get(row, "pipeline_sha256")?,
        pipeline_yaml: get(row, "pipeline_yaml")?,
        input: serde_json::from_str(&input_text).unwrap_or(Value::Null),
        status,
        stage: get(row, "stage")?,
        error: get(row, "error")?,
        attempt: get(row, "attempt")?,
        retry_of: get(row, "retry_of")?,
        cancel_requested: get::<i64>(row, "cancel_requested")? != 0,
        due_at: get(row, "due_at")?,
        lease_owner: get(row, "lease_owner")?,
        lease_token: get(row, "lease_token")?,
        claims: get(row, "claims")?,
        reclaims: get(row, "reclaims")?,
        created_at: get(row, "created_at")?,
        started_at: get(row, "started_at")?,
        finished_at: get(row, "finished_at")?,
        enqueued_at: get(row, "enqueued_at")?,
        trace_parent: get(row, "trace_parent")?,
        id,
    })
}

fn stage_from_row(row: &QueryResult) -> Result<StageRecord, EngineError> {
    let name: String = get(row, "name")?;
    let status_text: String = get(row, "status")?;
    let status = StageStatus::parse(&status_text).ok_or_else(|| EngineError::Corrupt {
        id: name.clone(),
        detail: format!("unknown stage status `{status_text}`"),
    })?;
    let output: Option<String> = get(row, "output")?;
    Ok(StageRecord {
        kind: get(row, "kind")?,
        position: get(row, "position")?,
        status,
        attempts: get(row, "attempts")?,
        output: output.and_then(|t| serde_json::from_str(&t).ok()),
        error: get(row, "error")?,
        reused_from: get(row, "reused_from")?,
        started_at: get(row, "started_at")?,
        finished_at: get(row, "finished_at")?,
        duration_ms: get(row, "duration_ms")?,
        name,
    })
}

fn event_from_row(row: &QueryResult) -> Result<EventRecord, EngineError> {
    Ok(EventRecord {
        sequence: get(row, "sequence")?,
        stage: get(row, "stage")?,
        kind: get(row, "kind")?,
        message: get(row, "message")?,
        created_at: get(row, "created_at")?,
    })
}

/// Appends a run event with the next gap-free sequence number of the run, inside the caller's
/// transaction so the event commits with the state change it describes.
pub(crate) async fn append_event(
    txn: &impl ConnectionTrait,
    run_id: &str,
    stage: &str,
    kind: &str,
    message: &str,
) -> Result<i64, EngineError> {
    let row = txn
        .query_one_sql(stmt(
            "UPDATE runs SET last_event_seq = last_event_seq + 1 WHERE id = ? RETURNING last_event_seq",
            vec![run_id.into()],
        ))
        .await?
        .ok_or_else(|| EngineError::RunNotFound(run_id.to_string()))?;
    let sequence: i64 = get(&row, "last_event_seq")?;
    txn.execute_sql(stmt(
        "INSERT INTO run_events (run_id, sequence, stage, kind, message, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        vec![
            run_id.into(),
            sequence.into(),
            stage.into(),
            kind.into(),
            message.into(),
            now_rfc3339().into(),
        ],
    ))
    .await?;
    Ok(sequence)
}

pub fn new_run_id() -> String {
    format!("run_{:016x}", fastrand::u64(..))
}

#[derive(Clone)]
pub struct RunStore {
    /// The pool and the write path of the hot writes (new runs, claims, fenced writes); on a
    /// SQLite file their writer thread starts with the first of them.
    db: Database,
    lease: Duration,
    clock: QueueClock,
}

impl RunStore {
    pub fn new(db: DatabaseConnection, lease: Duration) -> Self {
        Self::with_clock(db, lease, QueueClock::system())
    }

    /// A store whose due times and leases follow `clock` (a test's skewed or manual clock).
    pub fn with_clock(db: DatabaseConnection, lease: Duration, clock: QueueClock) -> Self {
        RunStore {
            db: Database::new(db),
            lease,
            clock,
        }
    }

    /// Now in the queue's time (see [`QueueClock`]).
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Now in the queue's time, after measuring the offset from the database's clock if the
    /// last measure is stale (PostgreSQL): for writes of due times and lease ends.
    pub async fn now_synced(&self) -> i64 {
        self.clock.sync_if_stale(self.db.conn()).await;
        self.clock.now_ms()
    }

    pub fn db(&self) -> &DatabaseConnection {
        self.db.conn()
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    pub(crate) fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX / 2)
    }

    pub async fn get_run(&self, id: &str) -> Result<Option<RunRecord>, EngineError> {
        let row = self
            .db
            .query_one_sql(stmt(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?"),
                vec![id.into()],
            ))
            .await?;
        row.as_ref().map(run_from_row).transpose()
    }

    /// Runs, newest first, optionally of one subject, with the total count.
    pub async fn list_runs(
        &self,
        subject: Option<&str>,
        limit: u64,
        offset: u64,
    ) -> Result<(Vec<RunRecord>, u64), EngineError> {
        let (filter, values): (&str, Vec<SqlValue>) = match subject {
            Some(s) => ("WHERE subject = ?", vec![s.into()]),
            None => ("", vec![]),
        };
        let total_row = self
            .db
            .query_one_sql(stmt(
                &format!("SELECT COUNT(*) AS n FROM runs {filter}"),
                values.clone(),
            ))
            .await?;
        let total = match total_row {
            Some(row) => get::<i64>(&row, "n")?.max(0) as u64,
            None => 0,
        };
        let mut page_values = values;
        page_values.push((limit.min(i64::MAX as u64) as i64).into());
        page_values.push((offset.min(i64::MAX as u64) as i64).into());
        let rows = self
            .db
            .query_all_sql(stmt(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM runs {filter} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
                ),
                page_values,
            ))
            .await?;
        let runs = rows.iter().map(run_from_row).collect::<Result<_, _>>()?;
        Ok((runs, total))
    }

    /// Failed runs that finished at or after `since`, newest first (then by id), at most
    /// `limit`: what the operations page counts by error code. The partial index
    /// `runs_failed_finished` keeps it a walk over failed runs only.
    pub async fn recent_failures(
        &self,
        since: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<RunRecord>, EngineError> {
        let rows = self
            .db
            .query_all_sql(stmt(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE status = 'failed' AND finished_at >= ? \
                     ORDER BY finished_at DESC, id DESC LIMIT ?"
                ),
                vec![
                    since.to_rfc3339_opts(SecondsFormat::Millis, true).into(),
                    (limit.min(i64::MAX as u64) as i64).into(),
                ],
            ))
            .await?;
        rows.iter().map(run_from_row).collect()
    }

    /// Runs a worker may take or holds, oldest due first.
    pub async fn list_queue(
        &self,
        limit: u64,
        offset: u64,
    ) -> Result<(Vec<RunRecord>, u64), EngineError> {
        let total_row = self
            .db
            .query_one_sql(stmt(
                "SELECT COUNT(*) AS n FROM runs WHERE status IN ('queued', 'running')",
                vec![],
            ))
            .await?;
        let total = match total_row {
            Some(row) => get::<i64>(&row, "n")?.max(0) as u64,
            None => 0,
        };
        let rows = self
            .db
            .query_all_sql(stmt(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE status IN ('queued', 'running') ORDER BY due_at LIMIT ? OFFSET ?"),
                vec![
                    (limit.min(i64::MAX as u64) as i64).into(),
                    (offset.min(i64::MAX as u64) as i64).into(),
                ],
            ))
            .await?;
        let runs = rows.iter().map(run_from_row).collect::<Result<_, _>>()?;
        Ok((runs, total))
    }

    pub async fn queue_counts(&self) -> Result<QueueCounts, EngineError> {
        let now = self.now_synced().await;
        let row = self
            .db
            .query_one_sql(stmt(
                // CASE rather than summing the comparison: PostgreSQL's comparisons are
                // booleans, which it does not add up; SUM over integers is BIGINT on both.
                "SELECT \
                   COALESCE(SUM(CASE WHEN status = 'queued' THEN 1 ELSE 0 END), 0) AS queued, \
                   COALESCE(SUM(CASE WHEN status = 'queued' AND due_at <= ? THEN 1 ELSE 0 END), 0) AS due, \
                   COALESCE(SUM(CASE WHEN status = 'running' THEN 1 ELSE 0 END), 0) AS running, \
                   COALESCE(SUM(CASE WHEN status = 'running' AND due_at <= ? THEN 1 ELSE 0 END), 0) AS expired \
                 FROM runs WHERE status IN ('queued', 'running')",
                vec![now.into(), now.into()],
            ))
            .await?;
        let Some(row) = row else {
            return Ok(QueueCounts {
                queued: 0,
                due: 0,
                running: 0,
                expired_leases: 0,
            });
        };
        Ok(QueueCounts {
            queued: get(&row, "queued")?,
            due: get(&row, "due")?,
            running: get(&row, "running")?,
            expired_leases: get(&row, "expired")?,
        })
    }

    /// The earliest due time among runs a worker could take, if any: a cheap indexed read that
    /// idle workers poll instead of attempting write transactions. A run waiting behind an
    /// earlier run of its subject is not one a worker could take: counting it would have idle
    /// workers try a claim at every poll for as long as the earlier run lasts.
    pub async fn next_due_at(&self) -> Result<Option<i64>, EngineError> {
        let row = self
            .db
            .query_one_sql(stmt(
                "SELECT r.due_at AS due FROM runs r WHERE r.status IN ('queued', 'running') \
                 AND NOT EXISTS (SELECT 1 FROM runs e WHERE e.subject = r.subject \
                   AND e.status IN ('queued', 'running') AND e.rowid < r.rowid) \
                 ORDER BY r.due_at LIMIT 1",
                vec![],
            ))
            .await?;
        Ok(match row {
            Some(row) => get::<Option<i64>>(&row, "due")?,
            None => None,
        })
    }

    pub async fn stages(&self, run_id: &str) -> Result<Vec<StageRecord>, EngineError> {
        let rows = self
            .db
            .query_all_sql(stmt(
                "SELECT * FROM run_stages WHERE run_id = ? ORDER BY position",
                vec![run_id.into()],
            ))
            .await?;
        rows.iter().map(stage_from_row).collect()
    }

    /// Events with a sequence greater than `after`, in order. Sequences are gap-free from 1, so
    /// an offset of N is `after = N`.
    pub async fn events(
        &self,
        run_id: &str,
        after: i64,
        limit: u64,
    ) -> Result<Vec<EventRecord>, EngineError> {
        let rows = self
            .db
            .query_all_sql(stmt(
                "SELECT * FROM run_events WHERE run_id = ? AND sequence > ? ORDER BY sequence LIMIT ?",
                vec![
                    run_id.into(),
                    after.into(),
                    (limit.min(i64::MAX as u64) as i64).into(),
                ],
            ))
            .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// How many partial checkpoints each stage of a run has saved.
    pub async fn part_counts(&self, run_id: &str) -> Result<Vec<(String, i64)>, EngineError> {
        let rows = self
            .db
            .query_all_sql(stmt(
                "SELECT stage, COUNT(*) AS n FROM run_stage_parts WHERE run_id = ? GROUP BY stage",
                vec![run_id.into()],
            ))
            .await?;
        rows.iter()
            .map(|r| Ok((get(r, "stage")?, get(r, "n")?)))
            .collect()
    }

    pub(crate) async fn get_part(
        &self,
        run_id: &str,
        stage: &str,
        key: &str,
    ) -> Result<Option<String>, EngineError> {
        let row = self
            .db
            .query_one_sql(stmt(
                "SELECT value FROM run_stage_parts WHERE run_id = ? AND stage = ? AND key = ?",
                vec![run_id.into(), stage.into(), key.into()],
            ))
            .await?;
        Ok(match row {
            Some(row) => Some(get(&row, "value")?),
            None => None,
        })
    }
}

/// The one statement that inserts `events` with the sequence numbers `first..`; none for no
/// events.
fn events_insert(run_id: &str, first: i64, events: &[(&str, &str, &str)]) -> Option<Statement> {
    if events.is_empty() {
        return None;
    }
    let created = now_rfc3339();
    let mut sql = String::from(
        "INSERT INTO run_events (run_id, sequence, stage, kind, message, created_at) VALUES ",
    );
    let mut values: Vec<SqlValue> = Vec::with_capacity(events.len() * 6);
    for (i, (stage, kind, message)) in events.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str("(?, ?, ?, ?, ?, ?)");
        values.extend([
            run_id.into(),
            (first + i as i64).into(),
            (*stage).into(),
            (*kind).into(),
            (*message).into(),
            created.clone().into(),
        ]);
    }
    Some(stmt(&sql, values))
}

fn borrowed(events: &[(String, String, String)]) -> Vec<(&str, &str, &str)> {
    events
        .iter()
        .map(|(stage, kind, message)| (stage.as_str(), kind.as_str(), message.as_str()))
        .collect()
}
