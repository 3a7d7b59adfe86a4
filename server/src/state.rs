//! What every handler and middleware shares: the application handle, the credentials as
//! digests, the rate limiter and the event streams' cap, the audit sink, and the shutdown
//! token plus task tracker that let background work (in-process runs, audit writes) end
//! cleanly.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use shelf_app::Shelf;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::audit::AuditSink;
use crate::auth::Credentials;
use crate::rate_limit::{RateLimiter, StreamSlots};

/// Knobs that are not settings because only tests change them.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// How often an event stream looks for new events when nothing woke it: the fallback for
    /// what no signal covers (a notification lost while the listener reconnects, a run deleted
    /// under the stream).
    pub sse_poll: Duration,
    /// How often, on SQLite, the process reads the tail of `run_events` for the events other
    /// processes (`shelf worker`) commit, while any stream is open: once for all its streams.
    pub events_tail_poll: Duration,
    /// How often an idle event stream sends a comment, so proxies keep it open.
    pub sse_heartbeat: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            sse_poll: Duration::from_secs(2),
            events_tail_poll: Duration::from_millis(250),
            sse_heartbeat: Duration::from_secs(15),
        }
    }
}

pub struct Inner {
    pub shelf: Shelf,
    /// SHA-256 of every configured key (hashed once here), with its scope.
    pub credentials: Credentials,
    pub limiter: RateLimiter,
    /// `SHELF_API_MAX_STREAMS_PER_CLIENT`.
    pub streams: StreamSlots,
    pub audit: AuditSink,
    /// Trips on SIGTERM/SIGINT: event streams end, in-process runs go back to the queue.
    pub shutdown: CancellationToken,
    /// Background work the server waits for before it exits.
    pub tasks: TaskTracker,
    pub options: ServerOptions,
}

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

impl AppState {
    /// Must be called inside a tokio runtime (it starts the audit writer).
    pub fn new(shelf: Shelf, shutdown: CancellationToken, options: ServerOptions) -> AppState {
        let tasks = TaskTracker::new();
        let credentials = crate::auth::credential_digests(&shelf.settings);
        let limiter = RateLimiter::new(shelf.settings.api.rate_limit_per_minute);
        let streams = StreamSlots::new(
            shelf.settings.api.max_streams_per_client,
            Duration::from_secs(shelf.settings.api.stream_max_seconds),
        );
        crate::metrics::register(&shelf.metrics);
        let audit = AuditSink::start(shelf.clone(), &tasks);
        AppState(Arc::new(Inner {
            shelf,
            credentials,
            limiter,
            streams,
            audit,
            shutdown,
            tasks,
            options,
        }))
    }

    pub fn auth_enabled(&self) -> bool {
        !self.credentials.is_empty()
    }
}

impl Deref for AppState {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}
