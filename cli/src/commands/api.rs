//! `shelf api`: serves the HTTP API until SIGTERM or SIGINT. Binds first (the public-bind rule
//! needs only settings, so a refused bind creates no data directory or database), then opens
//! the storage (creating and migrating a new database), then prints one line to stdout
//! (`shelf api listening on http://HOST:PORT`), which scripts and tests read for the port when
//! `--port 0` picked one. With `--workers N` (`SHELF_API_WORKERS`) the process also executes
//! queued runs, as `shelf worker --concurrency N` would: a single-process deployment.

use std::process::ExitCode;

use shelf_app::Shelf;
use shelf_app::settings::MAX_API_WORKERS;
use shelf_server::ServerOptions;
use tokio_util::sync::CancellationToken;

use crate::CliResult;
use crate::output::{EXIT_FAILED, Failure};

#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on (default: SHELF_API_HOST, else 127.0.0.1). Anything but loopback
    /// needs an API key and SHELF_API_IMPORT_ROOT.
    #[arg(long)]
    host: Option<String>,
    /// Port (default: SHELF_API_PORT, else 8080; 0 picks a free one).
    #[arg(long)]
    port: Option<u16>,
    /// Queued runs this process executes at once, like `shelf worker --concurrency N`
    /// (default: SHELF_API_WORKERS, else 0: the API only enqueues, and runs wait for
    /// `shelf worker`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=MAX_API_WORKERS as u64))]
    workers: Option<u64>,
}

pub async fn run(args: Args) -> CliResult {
    let settings = super::settings(false)?;
    crate::logging::init(&settings, false, false)?;
    let host = args.host.unwrap_or_else(|| settings.api.host.clone());
    let port = args.port.unwrap_or(settings.api.port);
    // The range check above keeps the flag within MAX_API_WORKERS, so it fits a usize.
    let workers = args
        .workers
        .map_or(settings.api.workers, |n| usize::try_from(n).unwrap_or(0));
    // The bind rule reads only settings: a refused public bind touches no storage.
    let listener = shelf_server::bind(&settings, &host, port)
        .await
        .map_err(super::bind_failure)?;
    let _lock = super::hold_data_dir(&settings)?;
    // A damaged database is refused before anything is written into it (exit 4).
    shelf_app::db::check_at_start(&settings)
        .await
        .map_err(|e| Failure::from_app(e, false))?;
    let shelf = Shelf::open(settings)
        .await
        .map_err(|e| Failure::from_app(e, false))?;
    // Only a process that runs model work checks the model: an API without workers serves
    // uploads, search and pages whatever the model server's state.
    if workers > 0 {
        super::check_model(&shelf, false).await?;
    }
    let shutdown = CancellationToken::new();
    let server = listener.serve(shelf, shutdown.clone(), ServerOptions::default());
    server.start_workers(workers);
    server.start_retention();
    server.start_upload_cleanup();
    server.start_vector_warmup();
    crate::signals::stop_on_signal(shutdown);
    super::announce("shelf api", server.local_addr())?;
    server.run().await.map_err(|e| {
        Failure::new(
            format!("the server failed: {e}"),
            "server_error",
            EXIT_FAILED,
        )
    })?;
    Ok(ExitCode::SUCCESS)
}
