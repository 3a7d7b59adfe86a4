//! A new run and its retry: the run, its stages and its first event in one write transaction,
//! a retry reusing the checkpoints of the failed run it replaces.

use shelf_db::Tx;

use super::*;

impl RunStore {
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
        statements.extend(extra);
        statements.extend(wake_statements(self.db.backend()));
        statements.extend(crate::event_signal::notify_statement(
            self.db.backend(),
            &id,
        ));
        let retried = retry_of.map(|old| old.id.clone());
        let run_id = id.clone();
        let earlier = self
            .db
            .write(move |tx| {
                Box::pin(async move {
                    if let Some(guard) = &guard {
                        // First, before any row lock of a run: the subject's deletion takes its lock
                        // first too, then the runs' (PostgreSQL), so the two never wait for each
                        // other in a cycle.
                        for statement in &guard.lock {
                            tx.execute(statement).await?;
                        }
                        if tx.execute(&guard.touch).await? == 0 {
                            return Err(EngineError::SubjectNotFound(subject));
                        }
                    }
                    if let Some(old) = &retried
                        && let Some(earlier) = check_retry(tx, old).await?
                    {
                        return Ok(Some(earlier));
                    }
                    for statement in &statements {
                        tx.execute(statement).await?;
                    }
                    if let Some(old) = &retried {
                        reuse_checkpoints(tx, old, &run_id, &created).await?;
                    }
                    Ok::<_, EngineError>(None)
                })
            })
            .await?;
        // A retry asked for twice answers the first retry.
        let id = earlier.unwrap_or(id);
        crate::event_signal::notify(&id);
        self.get_run(&id)
            .await?
            .ok_or_else(|| EngineError::RunNotFound(id))
    }
}

/// Checks, inside a retry's transaction, that run `old` may be retried: it must exist and have
/// failed. Returns the retry made earlier, if there is one (a run is retried once, and retrying
/// it again answers that retry).
async fn check_retry(tx: &mut Tx<'_>, old: &str) -> Result<Option<String>, EngineError> {
    // Re-checked under the write lock (SQLite) or the old run's row lock (PostgreSQL): two
    // concurrent retries must not both succeed.
    let lock = if tx.is_postgres() { " FOR UPDATE" } else { "" };
    let status = tx
        .query_row(
            &stmt(
                &format!("SELECT status FROM runs WHERE id = ?{lock}"),
                vec![old.into()],
            ),
            |row| row.text(0).unwrap_or_default(),
        )
        .await?
        .ok_or_else(|| EngineError::RunNotFound(old.to_string()))?;
    let existing = tx
        .query_row(
            &stmt(
                "SELECT id FROM runs WHERE retry_of = ? ORDER BY rowid LIMIT 1",
                vec![old.into()],
            ),
            |row| row.text(0).unwrap_or_default(),
        )
        .await?;
    if existing.is_some() {
        return Ok(existing);
    }
    if status != RunStatus::Failed.as_str() {
        return Err(EngineError::RunNotFailed {
            id: old.to_string(),
            status,
        });
    }
    Ok(None)
}

/// Makes retry `id` of run `old` reuse the checkpoints of every stage that succeeded, and
/// every partial checkpoint, so the retry pays for no finished work twice; records which.
async fn reuse_checkpoints(
    tx: &mut Tx<'_>,
    old: &str,
    id: &str,
    created: &str,
) -> Result<(), EngineError> {
    let mut names = tx.query_rows(
        &stmt(
            "UPDATE run_stages SET status = 'succeeded', \
               attempts = (SELECT o.attempts FROM run_stages o WHERE o.run_id = ? AND o.name = run_stages.name), \
               output = (SELECT o.output FROM run_stages o WHERE o.run_id = ? AND o.name = run_stages.name), \
               duration_ms = (SELECT o.duration_ms FROM run_stages o WHERE o.run_id = ? AND o.name = run_stages.name), \
               reused_from = ?, finished_at = ? \
             WHERE run_id = ? AND name IN (SELECT name FROM run_stages WHERE run_id = ? AND status = 'succeeded') \
             RETURNING name",
            vec![
                old.into(),
                old.into(),
                old.into(),
                old.into(),
                created.into(),
                id.into(),
                old.into(),
            ],
        ),
        |row| row.text(0).unwrap_or_default(),
    )
    .await?;
    tx.execute(&stmt(
        "INSERT INTO run_stage_parts (run_id, stage, key, value) SELECT ?, stage, key, value FROM run_stage_parts WHERE run_id = ?",
        vec![id.into(), old.into()],
    ))
    .await?;
    names.sort();
    let reused = if names.is_empty() {
        "no checkpoints to reuse".to_string()
    } else {
        format!("reusing checkpoints of {}", names.join(", "))
    };
    let sequence = tx
        .query_i64(&stmt(
            "UPDATE runs SET last_event_seq = last_event_seq + 1 WHERE id = ? RETURNING last_event_seq",
            vec![id.into()],
        ))
        .await?
        .ok_or_else(|| EngineError::RunNotFound(id.to_string()))?;
    let message = format!("retry of {old}; {reused}");
    if let Some(insert) = events_insert(id, sequence, &[("run", "run_retry_of", &message)]) {
        tx.execute(&insert).await?;
    }
    Ok(())
}
