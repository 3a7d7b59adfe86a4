//! Binding and serving: the public-bind rule (anything but loopback needs an API key and
//! `SHELF_API_IMPORT_ROOT`), the listener, the in-process queue workers of `--workers`, the
//! background pruning of superseded runs, the start-up removal of upload leftovers, the relay that wakes event streams for the run
//! events other processes commit, and graceful shutdown: when the token trips, new
//! connections stop, in-flight requests finish, event streams end, in-process runs (the
//! workers' too) go back to the queue, and queued audit events are written, each within a
//! grace period.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use shelf_app::{Settings, Shelf};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::state::{AppState, ServerOptions};

/// How long shutdown waits for open connections, then for background work.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error(
        "refusing to listen on {host}: it is not a loopback address, and a public bind needs {}. \
         Set them, or bind to 127.0.0.1",
        .missing.join(" and ")
    )]
    PublicBindRefused {
        host: String,
        missing: Vec<&'static str>,
    },
    #[error("cannot resolve the listen address {host}: {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen on {host}:{port}: {source}")]
    Listen {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
}

impl BindError {
    /// Refusals of configuration (exit code 2) as opposed to failures of the machine.
    pub fn is_configuration(&self) -> bool {
        matches!(self, BindError::PublicBindRefused { .. })
    }
}

/// What a public bind lacks without credentials.
pub const NEEDS_A_KEY: &str =
    "an API key (SHELF_API_KEY, SHELF_API_KEYS, SHELF_API_KEY_SHA256 or SHELF_API_KEY_HASHES)";

/// What a public bind of the API lacks, if anything.
pub fn public_bind_missing(settings: &Settings) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !settings.auth_enabled() {
        missing.push(NEEDS_A_KEY);
    }
    if settings.api.import_root.is_none() {
        missing.push("SHELF_API_IMPORT_ROOT");
    }
    missing
}

/// A listening socket whose address passed the public-bind rule. It needs nothing of the
/// storage, so a refused bind never creates a data directory or a database.
pub struct Listener {
    listener: TcpListener,
}

/// A server bound to its address, not yet serving.
pub struct BoundServer {
    listener: TcpListener,
    state: AppState,
}

/// The addresses `host` names, at least one.
pub async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, BindError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|source| BindError::Resolve {
            host: host.to_string(),
            source,
        })?
        .collect();
    if addrs.is_empty() {
        return Err(BindError::Resolve {
            host: host.to_string(),
            source: std::io::Error::other("no addresses"),
        });
    }
    Ok(addrs)
}

/// Resolves `host` and binds, unless the address is not loopback and `public_missing` names
/// what a public bind lacks.
pub async fn listen(
    host: &str,
    port: u16,
    public_missing: Vec<&'static str>,
) -> Result<TcpListener, BindError> {
    let addrs = resolve(host, port).await?;
    if addrs.iter().any(|a| !a.ip().is_loopback()) && !public_missing.is_empty() {
        return Err(BindError::PublicBindRefused {
            host: host.to_string(),
            missing: public_missing,
        });
    }
    TcpListener::bind(&addrs[..])
        .await
        .map_err(|source| BindError::Listen {
            host: host.to_string(),
            port,
            source,
        })
}

/// Resolves `host`, applies the public-bind rule (settings only: a refused bind touches no
/// storage), and binds. Port 0 picks a free port.
pub async fn bind(settings: &Settings, host: &str, port: u16) -> Result<Listener, BindError> {
    let listener = listen(host, port, public_bind_missing(settings)).await?;
    Ok(Listener { listener })
}

impl Listener {
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Attaches the opened application (its settings must be the ones the bind was checked
    /// against). Connections that arrived meanwhile wait in the backlog.
    pub fn serve(
        self,
        shelf: Shelf,
        shutdown: CancellationToken,
        options: ServerOptions,
    ) -> BoundServer {
        let state = AppState::new(shelf, shutdown, options);
        // Event streams wait on the process's "run events changed" signal; this feeds it with
        // what workers in other processes commit (PostgreSQL `LISTEN`, a SQLite tail read).
        let db = state.shelf.engine.store().db().clone();
        let tail_every = state.options.events_tail_poll;
        let stop = state.shutdown.clone();
        state
            .tasks
            .spawn(shelf_engine::event_signal::relay(db, tail_every, stop));
        BoundServer {
            listener: self.listener,
            state,
        }
    }
}

impl BoundServer {
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Starts the queue worker `shelf worker` runs, in this process, executing up to `count`
    /// runs at once (`shelf api --workers N`): it claims queued runs and reclaims lapsed
    /// leases like any worker. It stops on the server's shutdown token, releasing its
    /// in-flight runs to the queue with their checkpoints, and the server waits for it as for
    /// other background work. 0 starts none: the API only enqueues.
    pub fn start_workers(&self, count: usize) {
        if count == 0 {
            return;
        }
        let shelf = self.state.shelf.clone();
        let shutdown = self.state.shutdown.clone();
        self.state
            .tasks
            .spawn(async move { shelf.work(Some(count), shutdown).await });
    }

    /// Starts the background pruning of superseded runs (`SHELF_RUN_RETENTION`) every few
    /// minutes, stopped by the server's shutdown token like other background work.
    pub fn start_retention(&self) {
        let shelf = self.state.shelf.clone();
        let shutdown = self.state.shutdown.clone();
        self.state
            .tasks
            .spawn(async move { shelf.prune_runs_periodically(shutdown).await });
    }

    /// Removes, in the background, what killed processes left under `uploads/` (staged
    /// `.part` files and empty upload directories older than
    /// `shelf_app::uploads::LEFTOVER_GRACE`, trash of committed deletes) and logs how many
    /// and how many bytes at info. Younger staging files may belong to another process's
    /// upload in flight and stay.
    pub fn start_upload_cleanup(&self) {
        let shelf = self.state.shelf.clone();
        self.state.tasks.spawn(async move {
            let data_dir = shelf.settings.storage.data_dir.clone();
            let now = std::time::SystemTime::now();
            match shelf_app::uploads::remove_leftovers(&shelf.db, &data_dir, now).await {
                Ok(removed) => tracing::info!(
                    removed = removed.count(),
                    bytes = removed.bytes(),
                    staged_files = removed.staged_files,
                    empty_upload_dirs = removed.empty_upload_dirs,
                    trash_entries = removed.trash_entries,
                    "upload leftovers removed"
                ),
                Err(error) => tracing::warn!(%error, "cannot look for upload leftovers"),
            }
        });
    }

    /// Loads, in the background, the vectors semantic search scans (with an embedding model),
    /// so the first search by meaning does not pay for it (about a second at 100,000
    /// passages).
    pub fn start_vector_warmup(&self) {
        let shelf = self.state.shelf.clone();
        self.state.tasks.spawn(async move {
            match shelf.warm_vectors().await {
                Ok(Some(passages)) => tracing::info!(passages, "search vectors loaded"),
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "cannot load the search vectors yet"),
            }
        });
    }

    /// Serves until the shutdown token trips, then drains (see the module docs).
    pub async fn run(self) -> std::io::Result<()> {
        let BoundServer { listener, state } = self;
        let shutdown = state.shutdown.clone();
        let app = crate::router(state.clone());
        let timeouts = ConnectionTimeouts {
            header_read: Duration::from_secs(state.shelf.settings.api.header_read_timeout_seconds),
            keep_alive: Duration::from_secs(state.shelf.settings.api.keep_alive_timeout_seconds),
        };
        let connections = tokio_util::task::TaskTracker::new();
        loop {
            let (tcp, peer) = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            // Small JSON answers go out at once instead of waiting on Nagle's algorithm.
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY not set");
            }
            connections.spawn(serve_connection(
                tcp,
                peer,
                app.clone(),
                timeouts,
                shutdown.clone(),
            ));
        }
        drop(listener);
        connections.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, connections.wait())
            .await
            .is_err()
        {
            tracing::warn!("connections still open after the grace period; closing them");
        }
        // No request is served any more: let the audit writer finish its queue.
        state.audit.close();
        state.tasks.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, state.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("background work still running after the grace period");
        }
        tracing::info!("api stopped");
        Ok(())
    }
}

/// The slow-client bounds of every connection (`SHELF_API_HEADER_READ_TIMEOUT_SECONDS`,
/// `SHELF_API_KEEP_ALIVE_TIMEOUT_SECONDS`).
#[derive(Debug, Clone, Copy)]
struct ConnectionTimeouts {
    header_read: Duration,
    keep_alive: Duration,
}

/// Serves one HTTP/1.1 connection. hyper closes a connection whose request head is not
/// complete within `header_read` of the connection opening or going idle (its clock needs a
/// timer, which axum::serve does not give it); the watchdog here closes, after any response in
/// flight, a connection that moved no byte either way for `keep_alive`.
async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    app: axum::Router,
    timeouts: ConnectionTimeouts,
    shutdown: CancellationToken,
) {
    let started = Instant::now();
    let activity = Arc::new(AtomicU64::new(0));
    let io = TokioIo::new(Tracked {
        inner: tcp,
        started,
        activity: activity.clone(),
    });
    // What `into_make_service_with_connect_info` would add: the peer, for client_ip.
    let service = tower::ServiceExt::map_request(
        app,
        move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request
        },
    );
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header_read);
    let connection = builder
        .serve_connection(io, TowerToHyperService::new(service))
        .with_upgrades();
    tokio::pin!(connection);
    let mut closing = false;
    loop {
        let idle_for = started
            .elapsed()
            .saturating_sub(Duration::from_millis(activity.load(Ordering::Relaxed)));
        let check_in = timeouts.keep_alive.saturating_sub(idle_for);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            () = shutdown.cancelled(), if !closing => {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            () = tokio::time::sleep(check_in), if !closing => {
                let idle_for = started.elapsed().saturating_sub(Duration::from_millis(
                    activity.load(Ordering::Relaxed),
                ));
                if idle_for >= timeouts.keep_alive {
                    closing = true;
                    // Lets a response in flight finish, then closes.
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// A stream that records when it last moved a byte (milliseconds since `started`).
struct Tracked {
    inner: TcpStream,
    started: Instant,
    activity: Arc<AtomicU64>,
}

impl Tracked {
    fn touch(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.activity.store(now, Ordering::Relaxed);
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.touch();
        }
        result
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
