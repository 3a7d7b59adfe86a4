//! What every handler and middleware shares: the application handle, the credentials as
//! digests, the rate limiter, the audit sink, and the shutdown token plus task tracker that
//! let background work (in-process runs, audit writes) end cleanly.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use shelf_app::Shelf;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::audit::AuditSink;
use crate::auth::Credentials;
use crate::rate_limit::RateLimiter;

/// Knobs that are not settings because only tests change them.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// How often an event stream looks for new events.
    pub sse_poll: Duration,
    /// How often an idle event stream sends a comment, so proxies keep it open.
    pub sse_heartbeat: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            sse_poll: Duration::from_millis(250),
            sse_heartbeat: Duration::from_secs(15),
        }
    }
}

pub struct Inner {
    pub shelf: Shelf,
    /// SHA-256 of every configured key (hashed once here), with its scope.
    pub credentials: Credentials,
    pub limiter: RateLimiter,
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
        let limiter = RateLimiter::new(shelf.settings.api_rate_limit_per_minute);
        crate::metrics::register(&shelf.metrics);
        let audit = AuditSink::start(shelf.clone(), &tasks);
        AppState(Arc::new(Inner {
            shelf,
            credentials,
            limiter,
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
