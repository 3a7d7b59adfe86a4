//! Claiming the next due run: one write transaction picks it, takes its lease (bumping the
//! lease token, so two workers never hold one run) and records the claim; the heartbeat
//! extends the lease.

use super::*;

impl RunStore {
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
        // The whole claim is one write transaction; the claimed run is read back once it has
        // committed.
        let pick = self.pick_statement(only, now, self.db.backend() == DbBackend::Postgres);
        let worker = worker.to_string();
        let lease_end = now + self.lease_ms();
        let backend = self.db.backend();
        let claimed = self
            .db
            .write(move |tx| {
                Box::pin(async move {
                    let picked = tx.query_row(&pick, |row| (row.text(0), row.int(1))).await?;
                    let Some((id, due_at)) = picked else {
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
                    let Some(c) = tx
                        .query_row(&update, |row| ClaimedRow {
                            subject: row.text(0).unwrap_or_default(),
                            claims: row.int(1),
                            reclaims: row.int(2),
                            reclaimed: row.int(3) != 0,
                            sequence: row.int(4),
                        })
                        .await?
                    else {
                        return Ok(None);
                    };
                    let (kind, message) = claim_event(&worker, c.reclaimed, c.claims, c.reclaims);
                    let event = [("run", kind, message.as_str())];
                    let statements = events_insert(&id, c.sequence, &event)
                        .into_iter()
                        .chain(on_claim(&c.subject))
                        .chain(crate::event_signal::notify_statement(backend, &id));
                    for statement in statements {
                        tx.execute(&statement).await?;
                    }
                    Ok::<_, EngineError>(Some((id, due_at, c.reclaimed)))
                })
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
