//! Stopping long-running commands cleanly on SIGTERM or SIGINT.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio_util::sync::CancellationToken;

/// SIGINT's and SIGTERM's numbers, the same on every Unix.
const SIGINT: u8 = 2;
const SIGTERM: u8 = 15;

/// Which signal stopped the command, once one has.
#[derive(Clone, Default)]
pub struct Received(Arc<AtomicU8>);

impl Received {
    fn record(&self, signal: u8) {
        let _ = self
            .0
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The exit code a shell reports for a process that signal ended (128 + its number: 130
    /// for SIGINT, 143 for SIGTERM), so that a script sees an interrupted command as
    /// interrupted even though it stopped cleanly; `None` while no signal arrived.
    pub fn exit_code(&self) -> Option<u8> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(128 + signal),
        }
    }
}

/// Registers SIGTERM and SIGINT handlers now, before the caller announces it is ready (a
/// signal arriving right after startup must not kill the process), and trips `shutdown` when
/// one arrives. The returned handle says which one did.
pub fn stop_on_signal(shutdown: CancellationToken) -> Received {
    let received = Received::default();
    let noted = received.clone();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        tokio::spawn(async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => noted.record(SIGTERM),
                        _ = int.recv() => noted.record(SIGINT),
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                    noted.record(SIGINT);
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
            noted.record(SIGINT);
            tracing::info!("shutdown requested");
            shutdown.cancel();
        });
    }
    received
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_is_the_first_signals_shell_code() {
        let received = Received::default();
        assert_eq!(received.exit_code(), None);
        received.record(SIGTERM);
        // A second signal while stopping does not change what stopped the command.
        received.record(SIGINT);
        assert_eq!(received.exit_code(), Some(143));
        let interrupted = Received::default();
        interrupted.record(SIGINT);
        assert_eq!(interrupted.exit_code(), Some(130));
    }
}
