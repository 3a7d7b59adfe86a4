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
    let _lock = super::hold_data_dir(&settings)?;
    let shelf = Shelf::open(settings)
        .await
        .map_err(|e| Failure::from_app(e, false))?;
    let shutdown = CancellationToken::new();
    crate::signals::stop_on_signal(shutdown.clone());
    shelf.work(concurrency, shutdown).await;
    Ok(ExitCode::SUCCESS)
}
