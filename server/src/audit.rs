//! Denied requests: each is logged at once as a `shelf.api` warning and queued for
//! `api_audit_events`. A background task writes the queue in batches, so a flood of denials
//! costs one transaction per batch rather than one per request, and never slows the 401/429
//! itself. When the queue is full, events are still logged but not stored, and the drop is
//! counted in the log. The server closes the sink once it stops taking requests; the writer
//! stores everything queued before it and ends.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use shelf_app::Shelf;
use shelf_app::audit::DenialEvent;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

/// Denials waiting to be written. Bounded: storage must not become the bottleneck of a flood.
const QUEUE: usize = 4096;
/// Most rows per transaction.
const BATCH: usize = 256;

pub struct AuditSink {
    /// `None` once closed.
    tx: Mutex<Option<mpsc::Sender<DenialEvent>>>,
    dropped: AtomicU64,
}

impl AuditSink {
    /// Starts the writer on `tasks`; it ends after [`AuditSink::close`], once the queue is
    /// written.
    pub fn start(shelf: Shelf, tasks: &TaskTracker) -> AuditSink {
        let (tx, rx) = mpsc::channel(QUEUE);
        tasks.spawn(write_batches(shelf, rx));
        AuditSink {
            tx: Mutex::new(Some(tx)),
            dropped: AtomicU64::new(0),
        }
    }

    /// No more denials will come: the writer stores what is queued and ends.
    pub fn close(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
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
        let queued = match self.tx.lock() {
            Ok(tx) => tx.as_ref().is_some_and(|tx| tx.try_send(event).is_ok()),
            Err(_) => false,
        };
        if !queued {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // One line per thousand, not one per dropped event.
            if dropped % 1000 == 1 {
                tracing::warn!(target: "shelf.api", dropped, "audit queue full; denials logged but not stored");
            }
        }
    }
}

async fn write_batches(shelf: Shelf, mut rx: mpsc::Receiver<DenialEvent>) {
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(event) => batch.push(event),
                Err(_) => break,
            }
        }
        store(&shelf, &mut batch).await;
    }
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
