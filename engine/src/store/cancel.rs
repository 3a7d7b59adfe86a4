//! Canceling a run: at once when it is queued or its worker is gone, by a flag the worker
//! reads on its next heartbeat when it is running.

use super::*;

impl RunStore {
    /// Cancels a queued run (or one whose worker is gone) at once; flags a running run so the
    /// worker holding it stops.
    pub async fn cancel(
        &self,
        run_id: &str,
        on_cancel: impl Fn(&str) -> Vec<Statement>,
    ) -> Result<CancelOutcome, EngineError> {
        let now = self.now_synced().await;
        let txn = begin_write(self.db.conn()).await?;
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
}
