//! A claimed run's writes: every one goes through the worker's `LeaseGuard`, fenced by the
//! lease token in the same transaction, so a worker that lost its lease writes nothing.

use super::*;

impl RunStore {
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
                Err(EngineError::Db(error))
                    if shelf_db::is_transient(&error) && self.valid_after(wait * 2) =>
                {
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
        // One transaction that only commits while this worker still holds the run's lease: the
        // fence also extends the lease and reserves the events' sequence numbers.
        let fence = self.store.fence(&self.run_id, self.token, reserved);
        let notify = (reserved > 0)
            .then(|| crate::event_signal::notify_statement(self.store.db.backend(), &self.run_id))
            .flatten();
        let run_id = self.run_id.clone();
        self.store
            .db
            .write(move |tx| {
                Box::pin(async move {
                    let Some(last) = tx.query_i64(&fence).await? else {
                        return Err(EngineError::LeaseLost(run_id));
                    };
                    for statement in statements.iter() {
                        tx.execute(statement).await?;
                    }
                    let first = last - reserved + 1;
                    let inserted = events_insert(&run_id, first, &borrowed(&events));
                    for statement in inserted.iter().chain(&notify) {
                        tx.execute(statement).await?;
                    }
                    Ok(())
                })
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
