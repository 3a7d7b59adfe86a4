//! `shelf worker`: executes queued runs until SIGINT or SIGTERM; in-flight runs then go back
//! to the queue with their checkpoints.

use std::process::ExitCode;

use shelf_app::Shelf;
use tokio_util::sync::CancellationToken;

use crate::CliResult;
use crate::output::Failure;

#[derive(clap::Args)]
pub struct Args {
    /// Runs executed at once (default: SHELF_WORKER_CONCURRENCY, else 2).
    #[arg(long, short)]
    concurrency: Option<usize>,
}

pub async fn run(args: Args) -> CliResult {
    let settings = super::settings(false)?;
    crate::logging::init(&settings, false);
    let concurrency = args
        .concurrency
        .unwrap_or(settings.worker_concurrency)
        .max(1);
    let shelf = Shelf::open(settings)
        .await
        .map_err(|e| Failure::from_app(e, false))?;
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    shelf.work(concurrency, shutdown).await;
    Ok(ExitCode::SUCCESS)
}

pub async fn stop_on_signal(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        } else {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutdown requested");
    shutdown.cancel();
}
