//! Binding and serving: the public-bind rule (anything but loopback needs an API key and
//! `SHELF_API_IMPORT_ROOT`), the listener, and graceful shutdown: when the token trips, new
//! connections stop, in-flight requests finish, event streams end, in-process runs go back to
//! the queue, and queued audit events are written, each within a grace period.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::time::Duration;

use axum::serve::ListenerExt;
use shelf_app::Shelf;
use tokio::net::TcpListener;
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

/// What a public bind lacks, if anything.
pub fn public_bind_missing(shelf: &Shelf) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !shelf.settings.auth_enabled() {
        missing.push(
            "an API key (SHELF_API_KEY, SHELF_API_KEYS, SHELF_API_KEY_SHA256 or SHELF_API_KEY_HASHES)",
        );
    }
    if shelf.settings.api_import_root.is_none() {
        missing.push("SHELF_API_IMPORT_ROOT");
    }
    missing
}

/// A server bound to its address, not yet serving.
pub struct BoundServer {
    listener: TcpListener,
    state: AppState,
}

/// Resolves `host`, applies the public-bind rule, and binds. Port 0 picks a free port.
pub async fn bind(
    shelf: Shelf,
    host: &str,
    port: u16,
    shutdown: CancellationToken,
    options: ServerOptions,
) -> Result<BoundServer, BindError> {
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
    if addrs.iter().any(|a| !a.ip().is_loopback()) {
        let missing = public_bind_missing(&shelf);
        if !missing.is_empty() {
            return Err(BindError::PublicBindRefused {
                host: host.to_string(),
                missing,
            });
        }
    }
    let listener = TcpListener::bind(&addrs[..])
        .await
        .map_err(|source| BindError::Listen {
            host: host.to_string(),
            port,
            source,
        })?;
    let state = AppState::new(shelf, shutdown, options);
    Ok(BoundServer { listener, state })
}

impl BoundServer {
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the shutdown token trips, then drains (see the module docs).
    pub async fn run(self) -> std::io::Result<()> {
        let BoundServer { listener, state } = self;
        let shutdown = state.shutdown.clone();
        let app = crate::router(state.clone());
        // Small JSON answers go out at once instead of waiting on Nagle's algorithm.
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY not set");
            }
        });
        let serve = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown.clone().cancelled_owned())
        .into_future();
        let grace = async {
            shutdown.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            result = serve => result?,
            () = grace => tracing::warn!("connections still open after the grace period; closing them"),
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
