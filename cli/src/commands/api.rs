//! `shelf api`: serves the HTTP API until SIGTERM or SIGINT. Prints one line to stdout once
//! bound (`shelf api listening on http://HOST:PORT`), which scripts and tests read for the
//! port when `--port 0` picked one.

use std::io::Write;
use std::process::ExitCode;

use shelf_app::Shelf;
use shelf_server::ServerOptions;
use tokio_util::sync::CancellationToken;

use crate::CliResult;
use crate::output::{EXIT_FAILED, EXIT_USAGE, Failure};

#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on (default: SHELF_API_HOST, else 127.0.0.1). Anything but loopback
    /// needs an API key and SHELF_API_IMPORT_ROOT.
    #[arg(long)]
    host: Option<String>,
    /// Port (default: SHELF_API_PORT, else 8080; 0 picks a free one).
    #[arg(long)]
    port: Option<u16>,
}

pub async fn run(args: Args) -> CliResult {
    let settings = super::settings(false)?;
    crate::logging::init(&settings, false);
    let host = args.host.unwrap_or_else(|| settings.api_host.clone());
    let port = args.port.unwrap_or(settings.api_port);
    let _lock = super::hold_data_dir(&settings)?;
    let shelf = Shelf::open(settings).await.map_err(|e| {
        let mut failure = Failure::from_app(e, false);
        failure.detail = format!(
            "{} (the API needs a migrated database: run `shelf migrate` first)",
            failure.detail
        );
        failure
    })?;
    let shutdown = CancellationToken::new();
    let server = shelf_server::bind(
        shelf,
        &host,
        port,
        shutdown.clone(),
        ServerOptions::default(),
    )
    .await
    .map_err(|e| {
        let exit = if e.is_configuration() {
            EXIT_USAGE
        } else {
            EXIT_FAILED
        };
        Failure::new(e.to_string(), "bind_failed", exit)
    })?;
    let addr = server.local_addr().map_err(|e| {
        Failure::new(
            format!("cannot read the bound address: {e}"),
            "bind_failed",
            EXIT_FAILED,
        )
    })?;
    crate::signals::stop_on_signal(shutdown);
    tracing::info!(%addr, "api listening");
    let mut stdout = std::io::stdout().lock();
    // The one line on stdout; logs go to stderr.
    let _ = writeln!(stdout, "shelf api listening on http://{addr}");
    let _ = stdout.flush();
    drop(stdout);
    server.run().await.map_err(|e| {
        Failure::new(
            format!("the server failed: {e}"),
            "server_error",
            EXIT_FAILED,
        )
    })?;
    Ok(ExitCode::SUCCESS)
}
