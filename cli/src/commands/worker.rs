//! `shelf worker`: executes queued runs until SIGINT or SIGTERM; in-flight runs then go back
//! to the queue with their checkpoints. Meanwhile it prunes superseded runs every few minutes
//! (`SHELF_RUN_RETENTION`). With `--metrics-port` it also serves its metrics
//! (`/metrics`, `/metrics/prometheus`) and prints one line to stdout once bound
//! (`shelf worker metrics listening on http://HOST:PORT`), which tests read when port 0 picked one.

use std::process::ExitCode;

use shelf_app::Shelf;
use tokio_util::sync::CancellationToken;

use crate::CliResult;
use crate::output::Failure;

#[derive(clap::Args)]
pub struct Args {
    /// Runs executed at once (default: SHELF_WORKER_CONCURRENCY, else 4 with the mock and
    /// local providers; with a remote model, as many as its server takes, up to
    /// SHELF_WORKER_MAX_RUNS).
    #[arg(long, short, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: Option<u64>,
    /// Serve this worker's metrics on this port (0 picks a free one). A worker serves no
    /// other HTTP.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Address of the metrics listener. Anything but loopback needs an API key, and when keys
    /// are configured the endpoints need a write-scope key, as on the API.
    #[arg(long, default_value = "127.0.0.1", requires = "metrics_port")]
    metrics_host: String,
}

pub async fn run(args: Args) -> CliResult {
    let settings = super::settings(false)?;
    crate::logging::init(&settings, false, false)?;
    let concurrency = args
        .concurrency
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .or(settings.worker.concurrency);
    let _lock = super::hold_data_dir(&settings)?;
    // A damaged database is refused before anything is written into it (exit 4).
    shelf_app::db::check_at_start(&settings)
        .await
        .map_err(|e| Failure::from_app(e, false))?;
    let shelf = Shelf::open(settings)
        .await
        .map_err(|e| Failure::from_app(e, false))?;
    super::check_model(&shelf, false).await?;
    let shutdown = CancellationToken::new();
    let metrics_server = match args.metrics_port {
        Some(port) => {
            Some(serve_metrics(&shelf, &args.metrics_host, port, shutdown.clone()).await?)
        }
        None => None,
    };
    crate::signals::stop_on_signal(shutdown.clone());
    let retention = {
        let (shelf, shutdown) = (shelf.clone(), shutdown.clone());
        tokio::spawn(async move { shelf.prune_runs_periodically(shutdown).await })
    };
    shelf.work(concurrency, shutdown).await;
    if let Some(server) = metrics_server {
        let _ = server.await;
    }
    // It stops between two transactions once the token has tripped.
    let _ = retention.await;
    Ok(ExitCode::SUCCESS)
}

/// Binds the metrics listener, announces it, and serves it in the background until shutdown.
async fn serve_metrics(
    shelf: &Shelf,
    host: &str,
    port: u16,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, Failure> {
    let server = shelf_server::metrics::bind_worker_metrics(shelf, host, port)
        .await
        .map_err(super::bind_failure)?;
    super::announce("shelf worker metrics", server.local_addr())?;
    Ok(tokio::spawn(async move {
        if let Err(error) = server.serve(shutdown).await {
            tracing::error!(%error, "the metrics listener failed");
        }
    }))
}
