//! Persistence of runs, stage checkpoints, partial checkpoints and run events, and the durable
//! queue's claim, heartbeat and lease fencing. Every write transaction starts IMMEDIATE and is a
//! handful of statements; every worker write is fenced by the run's lease token.

use crate::sql::SqlExt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
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
use crate::writer::Writer;

pub(crate) fn stmt(sql: &str, values: Vec<SqlValue>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

/// ` FOR UPDATE` on PostgreSQL, nothing on SQLite: appended to a read that a write of the same
/// transaction depends on. SQLite's IMMEDIATE transaction already holds the one write lock;
/// PostgreSQL (READ COMMITTED) needs the row locked, or another transaction may change it in
/// between.
pub(crate) fn row_lock(conn: &impl ConnectionTrait) -> &'static str {
    if crate::sql::is_postgres(conn) {
        " FOR UPDATE"
    } else {
        ""
    }
}

/// The statements that wake idle workers when a transaction puts a run on the queue: a
/// `NOTIFY` on PostgreSQL (delivered at commit, and not at all on rollback), nothing on SQLite,
/// whose workers poll.
pub(crate) fn wake_statements(conn: &impl ConnectionTrait) -> Vec<Statement> {
    if crate::sql::is_postgres(conn) {
        vec![Statement::from_string(
            DbBackend::Postgres,
            format!("NOTIFY {}", crate::wake::CHANNEL),
        )]
    } else {
        Vec::new()
    }
}

pub use crate::db::{WriteTxn, begin_write};

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
    db: DatabaseConnection,
    lease: Duration,
    clock: QueueClock,
    /// On a SQLite file, the thread that runs the fenced writes of claimed runs: started by
    /// the first such write, so a process that never claims a run (the API) has none.
    writer: Arc<OnceLock<Option<Arc<Writer>>>>,
}

impl RunStore {
    pub fn new(db: DatabaseConnection, lease: Duration) -> Self {
        Self::with_clock(db, lease, QueueClock::system())
    }

    /// A store whose due times and leases follow `clock` (a test's skewed or manual clock).
    pub fn with_clock(db: DatabaseConnection, lease: Duration, clock: QueueClock) -> Self {
        RunStore {
            db,
            lease,
            clock,
            writer: Arc::default(),
        }
    }

    /// Now in the queue's time (see [`QueueClock`]).
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Now in the queue's time, after measuring the offset from the database's clock if the
    /// last measure is stale (PostgreSQL): for writes of due times and lease ends.
    pub async fn now_synced(&self) -> i64 {
        self.clock.sync_if_stale(&self.db).await;
        self.clock.now_ms()
    }

    fn writer(&self) -> Option<&Arc<Writer>> {
        self.writer
            .get_or_init(|| crate::db::writer_for(&self.db))
            .as_ref()
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    pub(crate) fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX / 2)
    }

    /// Creates a run and enqueues it in one transaction, together with the caller's own
    /// statements (Shelf marks the document as processing there).
    pub async fn create_run(
        &self,
        new: NewRun<'_>,
        retry_of: Option<&RunRecord>,
        extra: Vec<Statement>,
    ) -> Result<RunRecord, EngineError> {
        let id = new_run_id();
        let now = self.now_synced().await;
        let created = now_rfc3339();
        let subject = new.subject.to_string();
        let guard = new.guard;
        // The new run, its stages and its first event (sequence 1) in one round trip.
        let mut statements = vec![stmt(
            "INSERT INTO runs (id, subject, pipeline, pipeline_yaml, pipeline_sha256, input, status, attempt, retry_of, due_at, enqueued_at, created_at, trace_parent, last_event_seq) \
             VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, 1)",
            vec![
                id.clone().into(),
                new.subject.into(),
                new.pipeline.name.clone().into(),
                new.pipeline.source.clone().into(),
                new.pipeline.sha256.clone().into(),
                new.input.to_string().into(),
                retry_of.map(|r| r.attempt + 1).unwrap_or(1).into(),
                retry_of.map(|r| r.id.clone()).into(),
                now.into(),
                now.into(),
                created.clone().into(),
                new.trace_parent.clone().into(),
            ],
        )];
        if !new.pipeline.stages.is_empty() {
            let rows = vec!["(?, ?, ?, ?, 'pending')"; new.pipeline.stages.len()].join(", ");
            let mut values: Vec<SqlValue> = Vec::with_capacity(new.pipeline.stages.len() * 4);
            for (position, stage) in new.pipeline.stages.iter().enumerate() {
                values.extend([
                    id.clone().into(),
                    stage.name.clone().into(),
                    stage.kind.clone().into(),
                    (position as i64).into(),
                ]);
            }
            statements.push(stmt(
                &format!(
                    "INSERT INTO run_stages (run_id, name, kind, position, status) VALUES {rows}"
                ),
                values,
            ));
        }
        let queued = format!(
            "run queued on pipeline {} (sha256 {})",
            new.pipeline.name,
            &new.pipeline.sha256[..12.min(new.pipeline.sha256.len())]
        );
        statements.extend(events_insert(&id, 1, &[("run", "run_queued", &queued)]));
        if retry_of.is_none()
            && let Some(writer) = self.writer()
        {
            // A new run is only inserts: on SQLite they run whole on the writer thread.
            statements.extend(extra);
            writer
                .transaction(move |txn| {
                    if let Some(guard) = &guard {
                        for statement in &guard.lock {
                            txn.execute(statement)?;
                        }
                        if txn.execute(&guard.touch)? == 0 {
                            return Err(EngineError::SubjectNotFound(subject));
                        }
                    }
                    for statement in &statements {
                        txn.execute(statement)?;
                    }
                    Ok::<_, EngineError>(())
                })
                .await?;
            crate::event_signal::notify(&id);
            return self
                .get_run(&id)
                .await?
                .ok_or_else(|| EngineError::RunNotFound(id));
        }
        let txn = begin_write(&self.db).await?;
        if let Some(guard) = guard {
            // First, before any row lock of a run: the subject's deletion takes its lock first
            // too, then the runs' (PostgreSQL), so the two never wait for each other in a cycle.
            for statement in guard.lock {
                txn.execute_sql(statement).await?;
            }
            if txn.execute_sql(guard.touch).await?.rows_affected() == 0 {
                txn.rollback().await?;
                return Err(EngineError::SubjectNotFound(subject));
            }
        }
        if let Some(old) = retry_of {
            // Re-check inside the write lock: two concurrent retries must not both succeed.
            let row = txn
                .query_one_sql(stmt(
                    &format!("SELECT status FROM runs WHERE id = ?{}", row_lock(&txn)),
                    vec![old.id.clone().into()],
                ))
                .await?
                .ok_or_else(|| EngineError::RunNotFound(old.id.clone()))?;
            // Under the old run's lock (PostgreSQL) or the write lock (SQLite): a failed run is
            // retried once, and retrying it again answers that retry.
            let existing = txn
                .query_one_sql(stmt(
                    "SELECT id FROM runs WHERE retry_of = ? ORDER BY rowid LIMIT 1",
                    vec![old.id.clone().into()],
                ))
                .await?;
            if let Some(row) = existing {
                txn.rollback().await?;
                let id: String = get(&row, "id")?;
                return self
                    .get_run(&id)
                    .await?
                    .ok_or_else(|| EngineError::RunNotFound(id));
            }
            let status: String = get(&row, "status")?;
            if status != RunStatus::Failed.as_str() {
                return Err(EngineError::RunNotFailed {
                    id: old.id.clone(),
                    status,
                });
            }
        }
        if retry_of.is_some() {
            txn.execute_all_sql(std::mem::take(&mut statements)).await?;
        }
        if let Some(old) = retry_of {
            // Reuse the checkpoints of every stage that succeeded, and every partial
            // checkpoint, so the retry pays for no finished work twice.
            let copied = txn
                .query_all_sql(stmt(
                    "UPDATE run_stages SET status = 'succeeded', \
                       attempts = (SELECT o.attempts FROM run_stages o WHERE o.run_id = ? AND o.name = run_stages.name), \
                       output = (SELECT o.output FROM run_stages o WHERE o.run_id = ? AND o.name = run_stages.name), \
                       duration_ms = (SELECT o.duration_ms FROM run_stages o WHERE o.run_id = ? AND o.name = run_stages.name), \
                       reused_from = ?, finished_at = ? \
                     WHERE run_id = ? AND name IN (SELECT name FROM run_stages WHERE run_id = ? AND status = 'succeeded') \
                     RETURNING name",
                    vec![
                        old.id.clone().into(),
                        old.id.clone().into(),
                        old.id.clone().into(),
                        old.id.clone().into(),
                        created.clone().into(),
                        id.clone().into(),
                        old.id.clone().into(),
                    ],
                ))
                .await?;
            txn.execute_sql(stmt(
                "INSERT INTO run_stage_parts (run_id, stage, key, value) SELECT ?, stage, key, value FROM run_stage_parts WHERE run_id = ?",
                vec![id.clone().into(), old.id.clone().into()],
            ))
            .await?;
            let mut names = Vec::new();
            for row in &copied {
                names.push(get::<String>(row, "name")?);
            }
            names.sort();
            let reused = if names.is_empty() {
                "no checkpoints to reuse".to_string()
            } else {
                format!("reusing checkpoints of {}", names.join(", "))
            };
            append_event(
                &txn,
                &id,
                "run",
                "run_retry_of",
                &format!("retry of {}; {reused}", old.id),
            )
            .await?;
        }
        statements.extend(extra);
        statements.extend(wake_statements(&txn));
        statements.extend(crate::event_signal::notify_statement(
            txn.get_database_backend(),
            &id,
        ));
        txn.execute_all_sql(statements).await?;
        txn.commit().await?;
        crate::event_signal::notify(&id);
        self.get_run(&id)
            .await?
            .ok_or_else(|| EngineError::RunNotFound(id))
    }

    /// Takes the next due run (or `only` that run): a queued run whose due time has come, or a
    /// running run whose lease expired. One `UPDATE ... RETURNING` claims it and bumps the lease
    /// token, so two workers can never hold the same run.
    pub async fn claim(
        &self,
        worker: &str,
        only: Option<&str>,
        on_claim: impl Fn(&str) -> Vec<Statement> + Send + 'static,
    ) -> Result<Option<Claim>, EngineError> {
        let now = self.now_synced().await;
        let Some(writer) = self.writer() else {
            return self.claim_pooled(worker, only, now, on_claim).await;
        };
        // On SQLite the whole claim runs on the writer thread (one hand-off instead of one per
        // statement); the claimed run is read back once it has committed.
        let pick = self.pick_statement(only, now, false);
        let worker = worker.to_string();
        let lease_end = now + self.lease_ms();
        let claimed = writer
            .transaction(move |txn| -> Result<_, EngineError> {
                let Some((id, due_at)) = txn.query_row(&pick, |row| (row.text(0), row.int(1)))?
                else {
                    return Ok(None);
                };
                let id = id.unwrap_or_default();
                let update = claim_update(
                    &worker,
                    now,
                    lease_end,
                    &id,
                    "subject, claims, reclaims, last_claim_reclaimed, last_event_seq",
                );
                let Some(c) = txn.query_row(&update, |row| ClaimedRow {
                    subject: row.text(0).unwrap_or_default(),
                    claims: row.int(1),
                    reclaims: row.int(2),
                    reclaimed: row.int(3) != 0,
                    sequence: row.int(4),
                })?
                else {
                    return Ok(None);
                };
                let (kind, message) = claim_event(&worker, c.reclaimed, c.claims, c.reclaims);
                let event = [("run", kind, message.as_str())];
                if let Some(insert) = events_insert(&id, c.sequence, &event) {
                    txn.execute(&insert)?;
                }
                for statement in on_claim(&c.subject) {
                    txn.execute(&statement)?;
                }
                Ok(Some((id, due_at, c.reclaimed)))
            })
            .await?;
        let Some((id, due_at, reclaimed)) = claimed else {
            return Ok(None);
        };
        crate::event_signal::notify(&id);
        let run = self
            .get_run(&id)
            .await?
            .ok_or_else(|| EngineError::RunNotFound(id))?;
        Ok(Some(Claim {
            token: run.lease_token,
            reclaimed,
            queue_wait: Duration::from_millis(u64::try_from(now - due_at).unwrap_or(0)),
            run,
        }))
    }

    /// The next due run's id and due time. Only the earliest unfinished run of a subject may
    /// be claimed, so runs of one subject never execute at once and end in the order they were
    /// created; with `only`, the run to claim is that run or the earlier run of its subject that
    /// must end first.
    fn pick_statement(&self, only: Option<&str>, now: i64, postgres: bool) -> Statement {
        let (filter, mut values): (&str, Vec<SqlValue>) = match only {
            Some(id) => (
                "AND r.subject = (SELECT subject FROM runs WHERE id = ?)",
                vec![id.into()],
            ),
            None => ("", vec![]),
        };
        // The due time is read before the update moves it to the lease's end: the claim's
        // queue wait is measured from it. On SQLite the IMMEDIATE transaction holds the write lock, so
        // no other worker can claim the row in between.
        let pick = format!(
            "SELECT r.id AS id, r.due_at AS due_at FROM runs r \
             WHERE r.status IN ('queued', 'running') AND r.due_at <= ? {filter} \
             AND NOT EXISTS (SELECT 1 FROM runs e WHERE e.subject = r.subject \
               AND e.status IN ('queued', 'running') AND e.rowid < r.rowid) \
             ORDER BY r.due_at LIMIT 1{}",
            // PostgreSQL has no database write lock: the row lock keeps two workers from
            // claiming one run, and SKIP LOCKED lets each take the next free run instead. A row
            // that commits a change while it is being locked is re-checked against the WHERE
            // clause (READ COMMITTED), so a run just claimed elsewhere (its due time moved to
            // the lease's end) is not picked again. The unique index of running runs per
            // subject refuses whatever slips past the NOT EXISTS on a snapshot.
            if postgres {
                " FOR UPDATE OF r SKIP LOCKED"
            } else {
                ""
            }
        );
        let mut pick_values: Vec<SqlValue> = vec![now.into()];
        pick_values.append(&mut values);
        stmt(&pick, pick_values)
    }

    /// The claim through sea-orm's pool (PostgreSQL, or SQLite in memory).
    async fn claim_pooled(
        &self,
        worker: &str,
        only: Option<&str>,
        now: i64,
        on_claim: impl Fn(&str) -> Vec<Statement>,
    ) -> Result<Option<Claim>, EngineError> {
        let txn = begin_write(&self.db).await?;
        let pick = self.pick_statement(only, now, crate::sql::is_postgres(&txn));
        let Some(picked) = txn.query_one_sql(pick).await? else {
            txn.rollback().await?;
            return Ok(None);
        };
        let id: String = get(&picked, "id")?;
        let due_at: i64 = get(&picked, "due_at")?;
        let returning = format!("{RUN_COLUMNS}, last_claim_reclaimed, last_event_seq");
        let update = claim_update(worker, now, now + self.lease_ms(), &id, &returning);
        let Some(row) = txn.query_one_sql(update).await? else {
            txn.rollback().await?;
            return Ok(None);
        };
        let sequence: i64 = get(&row, "last_event_seq")?;
        let reclaimed = get::<i64>(&row, "last_claim_reclaimed")? != 0;
        let run = run_from_row(&row)?;
        let (kind, message) = claim_event(worker, reclaimed, run.claims, run.reclaims);
        let mut statements: Vec<Statement> =
            events_insert(&id, sequence, &[("run", kind, message.as_str())])
                .into_iter()
                .collect();
        statements.extend(on_claim(&run.subject));
        statements.extend(crate::event_signal::notify_statement(
            txn.get_database_backend(),
            &id,
        ));
        txn.execute_all_sql(statements).await?;
        txn.commit().await?;
        crate::event_signal::notify(&id);
        Ok(Some(Claim {
            token: run.lease_token,
            reclaimed,
            queue_wait: Duration::from_millis(u64::try_from(now - due_at).unwrap_or(0)),
            run,
        }))
    }

    /// Extends the lease and reads the cancel flag. `LeaseLost` means another worker owns the
    /// run (or it ended): the caller must stop at once.
    pub async fn heartbeat(&self, run_id: &str, token: i64) -> Result<bool, EngineError> {
        let now = self.now_synced().await;
        let row = self
            .db
            .query_one_sql(stmt(
                "UPDATE runs SET due_at = ? WHERE id = ? AND lease_token = ? AND status = 'running' RETURNING cancel_requested",
                vec![
                    (now + self.lease_ms()).into(),
                    run_id.into(),
                    token.into(),
                ],
            ))
            .await?;
        match row {
            Some(row) => Ok(get::<i64>(&row, "cancel_requested")? != 0),
            None => Err(EngineError::LeaseLost(run_id.to_string())),
        }
    }

    /// Cancels a queued run (or one whose worker is gone) at once; flags a running run so the
    /// worker holding it stops.
    pub async fn cancel(
        &self,
        run_id: &str,
        on_cancel: impl Fn(&str) -> Vec<Statement>,
    ) -> Result<CancelOutcome, EngineError> {
        let now = self.now_synced().await;
        let txn = begin_write(&self.db).await?;
        // On PostgreSQL nothing holds a database write lock: the row lock keeps a claim, a
        // heartbeat or the run's end from slipping in between this read and the write below
        // (which would otherwise cancel a run that just finished).
        let row = txn
            .query_one_sql(stmt(
                &format!(
                    "SELECT status, due_at, subject FROM runs WHERE id = ?{}",
                    row_lock(&txn)
                ),
                vec![run_id.into()],
            ))
            .await?
            .ok_or_else(|| EngineError::RunNotFound(run_id.to_string()))?;
        let status_text: String = get(&row, "status")?;
        let status = RunStatus::parse(&status_text).ok_or_else(|| EngineError::Corrupt {
            id: run_id.to_string(),
            detail: format!("unknown run status `{status_text}`"),
        })?;
        let due_at: i64 = get(&row, "due_at")?;
        let subject: String = get(&row, "subject")?;
        if status.is_terminal() {
            return Err(EngineError::RunTerminal {
                id: run_id.to_string(),
                status: status_text,
            });
        }
        let abandoned = status == RunStatus::Running && due_at <= now;
        let outcome = if status == RunStatus::Queued || abandoned {
            // Bumping the token fences off a worker that might still wake up.
            txn.execute_sql(stmt(
                "UPDATE runs SET status = 'canceled', cancel_requested = 1, finished_at = ?, lease_owner = NULL, \
                 lease_token = lease_token + 1 WHERE id = ? AND status IN ('queued', 'running')",
                vec![now_rfc3339().into(), run_id.into()],
            ))
            .await?;
            txn.execute_sql(stmt(
                "UPDATE run_stages SET status = 'canceled' WHERE run_id = ? AND status IN ('pending', 'running')",
                vec![run_id.into()],
            ))
            .await?;
            append_event(&txn, run_id, "run", "run_canceled", "run canceled").await?;
            for s in on_cancel(&subject) {
                txn.execute_sql(s).await?;
            }
            CancelOutcome::Canceled
        } else {
            txn.execute_sql(stmt(
                "UPDATE runs SET cancel_requested = 1 WHERE id = ? AND status = 'running'",
                vec![run_id.into()],
            ))
            .await?;
            append_event(
                &txn,
                run_id,
                "run",
                "cancel_requested",
                "cancel requested; the worker holding the run will stop it",
            )
            .await?;
            CancelOutcome::Requested
        };
        if let Some(notify) =
            crate::event_signal::notify_statement(txn.get_database_backend(), run_id)
        {
            txn.execute_sql(notify).await?;
        }
        txn.commit().await?;
        crate::event_signal::notify(run_id);
        Ok(outcome)
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

    /// A transaction that only commits if this worker still holds the run's lease. The one
    /// fence statement also extends the lease and reserves `events` event sequence numbers;
    /// it returns the first of them.
    pub(crate) async fn fenced(
        &self,
        run_id: &str,
        token: i64,
        events: usize,
    ) -> Result<(WriteTxn, i64), EngineError> {
        let txn = begin_write(&self.db).await?;
        let reserved = events as i64;
        let row = txn
            .query_one_sql(self.fence(run_id, token, reserved))
            .await?;
        match row {
            Some(row) => {
                let last: i64 = get(&row, "last_event_seq")?;
                Ok((txn, last - reserved + 1))
            }
            None => {
                txn.rollback().await?;
                Err(EngineError::LeaseLost(run_id.to_string()))
            }
        }
    }

    /// The fence of a claimed run's write: extends the lease and reserves `reserved` event
    /// sequence numbers, returning the last one, only while `token` still holds the lease.
    fn fence(&self, run_id: &str, token: i64, reserved: i64) -> Statement {
        stmt(
            "UPDATE runs SET due_at = ?, last_event_seq = last_event_seq + ? \
             WHERE id = ? AND lease_token = ? AND status = 'running' RETURNING last_event_seq",
            vec![
                (self.now() + self.lease_ms()).into(),
                reserved.into(),
                run_id.into(),
                token.into(),
            ],
        )
    }
}

/// Claims run `id` for `worker` until `lease_end` and reserves the sequence number of its
/// claim event, returning the columns `returning`.
fn claim_update(worker: &str, now: i64, lease_end: i64, id: &str, returning: &str) -> Statement {
    let sql = format!(
        "UPDATE runs SET \
           last_claim_reclaimed = (CASE WHEN status = 'running' THEN 1 ELSE 0 END), \
           reclaims = reclaims + (CASE WHEN status = 'running' THEN 1 ELSE 0 END), \
           status = 'running', lease_owner = ?, lease_token = lease_token + 1, due_at = ?, \
           claims = claims + 1, started_at = COALESCE(started_at, ?), claimed_at = ?, \
           last_event_seq = last_event_seq + 1 \
         WHERE id = ? RETURNING {returning}"
    );
    stmt(
        &sql,
        vec![
            worker.into(),
            lease_end.into(),
            now_rfc3339().into(),
            now.into(),
            id.into(),
        ],
    )
}

/// The claimed run's columns the writer reads back.
struct ClaimedRow {
    subject: String,
    claims: i64,
    reclaims: i64,
    reclaimed: bool,
    sequence: i64,
}

/// The event that opens a claim: a first start, a resume, or a reclaim after a lost lease.
fn claim_event(
    worker: &str,
    reclaimed: bool,
    claims: i64,
    reclaims: i64,
) -> (&'static str, String) {
    if reclaimed {
        (
            "run_reclaimed",
            format!(
                "lease of the previous worker expired; reclaimed by worker {worker} (reclaim {reclaims})"
            ),
        )
    } else if claims == 1 {
        ("run_started", format!("run started by worker {worker}"))
    } else {
        ("run_resumed", format!("run resumed by worker {worker}"))
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

/// A worker's handle on a claimed run: every write goes through it and is refused once the
/// lease token no longer matches.
#[derive(Clone)]
pub struct LeaseGuard {
    pub(crate) store: RunStore,
    pub(crate) run_id: String,
    pub(crate) token: i64,
    /// When the lease ends as far as this process knows (epoch ms): the claim's lease end,
    /// moved on by every renewal. A write refused for a passing reason is retried until then.
    lease_until: Arc<AtomicI64>,
}

/// One fenced write: statements, then events, committed together.
#[derive(Default, Clone)]
pub(crate) struct Write {
    pub statements: Vec<Statement>,
    pub events: Vec<(String, &'static str, String)>,
}

impl Write {
    pub(crate) fn push(&mut self, write: Write) {
        self.statements.extend(write.statements);
        self.events.extend(write.events);
    }
}

/// How long a fenced write refused for a passing reason waits before the next try, at first
/// and at most.
const WRITE_RETRY_FIRST: Duration = Duration::from_millis(50);
const WRITE_RETRY_MAX: Duration = Duration::from_secs(1);

impl LeaseGuard {
    pub(crate) fn new(store: RunStore, run_id: String, token: i64, lease_until: i64) -> Self {
        LeaseGuard {
            store,
            run_id,
            token,
            lease_until: Arc::new(AtomicI64::new(lease_until)),
        }
    }

    /// A renewal that started at `started` (epoch ms) committed: the lease runs a full term
    /// from then.
    pub(crate) fn renewed_at(&self, started: i64) {
        self.lease_until.fetch_max(
            started.saturating_add(self.store.lease_ms()),
            Ordering::SeqCst,
        );
    }

    /// Whether the lease is still ours `after` from now, as far as this process knows.
    pub(crate) fn valid_after(&self, after: Duration) -> bool {
        let after = i64::try_from(after.as_millis()).unwrap_or(i64::MAX);
        self.store.now().saturating_add(after) < self.lease_until.load(Ordering::SeqCst)
    }

    /// Commits `write` and its events in one fenced transaction: all of it, or nothing and
    /// [`EngineError::LeaseLost`] once another worker holds the run.
    pub(crate) async fn apply(&self, write: Write) -> Result<(), EngineError> {
        let events = write
            .events
            .into_iter()
            .map(|(stage, kind, message)| (stage, kind.to_string(), message))
            .collect();
        self.write(write.statements, events).await
    }

    pub(crate) async fn event(
        &self,
        stage: &str,
        kind: &str,
        message: &str,
    ) -> Result<(), EngineError> {
        let event = (stage.to_string(), kind.to_string(), message.to_string());
        self.write(Vec::new(), vec![event]).await
    }

    /// Commits one fenced write. A refusal that passes (a busy or locked database, a dropped
    /// connection, a serialization failure) is retried with backoff while the lease is still
    /// ours, so a hiccup never makes the run give up work it has done; once the lease would
    /// end first, the error goes to the executor, which releases the claim.
    async fn write(
        &self,
        statements: Vec<Statement>,
        events: Vec<(String, String, String)>,
    ) -> Result<(), EngineError> {
        // Shared, not copied: a retry sends the same statements again, and the first try (the
        // usual case) copies nothing of the texts a stage handed over.
        let statements = Arc::new(statements);
        let events = Arc::new(events);
        let mut wait = WRITE_RETRY_FIRST;
        loop {
            let started = self.store.now();
            match self.write_once(statements.clone(), events.clone()).await {
                Ok(()) => {
                    self.renewed_at(started);
                    return Ok(());
                }
                Err(error) if crate::db::is_transient(&error) && self.valid_after(wait * 2) => {
                    tracing::warn!(run_id = %self.run_id, %error, retry_in_ms = wait.as_millis() as u64, "fenced write refused; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(WRITE_RETRY_MAX);
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn write_once(
        &self,
        statements: Arc<Vec<Statement>>,
        events: Arc<Vec<(String, String, String)>>,
    ) -> Result<(), EngineError> {
        let reserved = events.len() as i64;
        let Some(writer) = self.store.writer() else {
            let (txn, first) = self
                .store
                .fenced(&self.run_id, self.token, events.len())
                .await?;
            let mut statements = Vec::clone(&statements);
            statements.extend(events_insert(&self.run_id, first, &borrowed(&events)));
            if reserved > 0 {
                statements.extend(crate::event_signal::notify_statement(
                    txn.get_database_backend(),
                    &self.run_id,
                ));
            }
            txn.execute_all_sql(statements).await?;
            txn.commit().await?;
            if reserved > 0 {
                crate::event_signal::notify(&self.run_id);
            }
            return Ok(());
        };
        // The same transaction, run whole on the writer thread.
        let fence = self.store.fence(&self.run_id, self.token, reserved);
        let run_id = self.run_id.clone();
        writer
            .transaction(move |txn| {
                let Some(last) = txn.query_i64(&fence)? else {
                    return Err(EngineError::LeaseLost(run_id));
                };
                for statement in statements.iter() {
                    txn.execute(statement)?;
                }
                let first = last - reserved + 1;
                if let Some(insert) = events_insert(&run_id, first, &borrowed(&events)) {
                    txn.execute(&insert)?;
                }
                Ok(())
            })
            .await?;
        if reserved > 0 {
            crate::event_signal::notify(&self.run_id);
        }
        Ok(())
    }

    pub(crate) async fn get_part(
        &self,
        stage: &str,
        key: &str,
    ) -> Result<Option<String>, EngineError> {
        self.store.get_part(&self.run_id, stage, key).await
    }

    pub(crate) async fn put_part(
        &self,
        stage: &str,
        key: &str,
        value: &str,
    ) -> Result<(), EngineError> {
        self.apply(Write {
            statements: vec![stmt(
                "INSERT INTO run_stage_parts (run_id, stage, key, value) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (run_id, stage, key) DO UPDATE SET value = excluded.value",
                vec![
                    self.run_id.clone().into(),
                    stage.into(),
                    key.into(),
                    value.into(),
                ],
            )],
            events: vec![],
        })
        .await
    }
}
