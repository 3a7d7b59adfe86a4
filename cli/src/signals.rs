//! Stopping long-running commands cleanly on SIGTERM or SIGINT.

use tokio_util::sync::CancellationToken;

/// Registers SIGTERM and SIGINT handlers now, before the caller announces it is ready (a
/// signal arriving right after startup must not kill the process), and trips `shutdown` when
/// one arrives.
pub fn stop_on_signal(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        tokio::spawn(async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
            tracing::info!("shutdown requested");
            shutdown.cancel();
        });
    }
    #[cfg(not(unix))]
    {
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("shutdown requested");
            shutdown.cancel();
        });
    }
}
