//! Denied requests: each is logged at once as a `shelf.api` warning and queued for
//! `api_audit_events`. A background task writes the queue in batches, so a flood of denials
//! costs one transaction per batch rather than one per request, and never slows the 401/429
//! itself. When the queue is full, events are still logged but not stored, and the drop is
//! counted in the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shelf_app::Shelf;
use shelf_app::audit::DenialEvent;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Denials waiting to be written. Bounded: storage must not become the bottleneck of a flood.
const QUEUE: usize = 4096;
/// Most rows per transaction.
const BATCH: usize = 256;

#[derive(Clone)]
pub struct AuditSink {
    tx: mpsc::Sender<DenialEvent>,
    dropped: Arc<AtomicU64>,
}

impl AuditSink {
    /// Starts the writer on `tasks`; it drains what is queued and stops when `shutdown` trips.
    pub fn start(shelf: Shelf, tasks: &TaskTracker, shutdown: CancellationToken) -> AuditSink {
        let (tx, rx) = mpsc::channel(QUEUE);
        tasks.spawn(write_batches(shelf, rx, shutdown));
        AuditSink {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Logs the denial and queues it for storage.
    pub fn deny(&self, event: DenialEvent) {
        tracing::warn!(
            target: "shelf.api",
            method = %event.method,
            path = %event.path,
            client_host = event.client_host.as_deref().unwrap_or("-"),
            credential_present = event.credential_present,
            scope = event.scope.as_deref().unwrap_or("-"),
            reason = event.reason.as_str(),
            retry_after_seconds = event.retry_after_seconds,
            "request denied"
        );
        if self.tx.try_send(event).is_err() {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // One line per thousand, not one per dropped event.
            if dropped % 1000 == 1 {
                tracing::warn!(target: "shelf.api", dropped, "audit queue full; denials logged but not stored");
            }
        }
    }
}

async fn write_batches(
    shelf: Shelf,
    mut rx: mpsc::Receiver<DenialEvent>,
    shutdown: CancellationToken,
) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let first = tokio::select! {
            event = rx.recv() => event,
            _ = shutdown.cancelled() => None,
        };
        let Some(first) = first else {
            break;
        };
        batch.push(first);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(event) => batch.push(event),
                Err(_) => break,
            }
        }
        store(&shelf, &mut batch).await;
    }
    // Shutting down: store what is already queued.
    while let Ok(event) = rx.try_recv() {
        batch.push(event);
        if batch.len() >= BATCH {
            store(&shelf, &mut batch).await;
        }
    }
    store(&shelf, &mut batch).await;
}

async fn store(shelf: &Shelf, batch: &mut Vec<DenialEvent>) {
    if batch.is_empty() {
        return;
    }
    if let Err(e) = shelf.record_denials(batch).await {
        tracing::error!(target: "shelf.api", error = %e, rows = batch.len(), "storing audit events failed");
    }
    batch.clear();
}
