//! The `shelf` command: clap parsing, logging setup and exit codes. Every command is a thin
//! call into the application layer (`shelf-app`).

mod commands;
mod logging;
mod output;
mod progress;
mod signals;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::output::Failure;

/// Shelf: ingest documents, clean and classify them through pipelines, search them.
#[derive(Parser)]
#[command(name = "shelf", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply pending database migrations.
    Migrate(commands::migrate::Args),
    /// Ingest a file or a directory, then process, queue or just store it.
    Import(commands::import::Args),
    /// Create a run for an ingested document (POST /runs).
    Process(commands::process::Args),
    /// Serve the HTTP API until stopped (needs `shelf migrate` first).
    Api(commands::api::Args),
    /// Take runs from the durable queue and execute them until stopped.
    Worker(commands::worker::Args),
    /// List runs, or show one run with its stages and events.
    Runs(commands::runs::Args),
    /// Show a document's page records: source, OCR confidence, rotation, errors.
    Pages(commands::pages::Args),
    /// Full-text search over cleaned (or raw) text.
    Search(commands::search::Args),
    /// Export one document as JSON, plain text or Markdown (GET /documents/{id}/export), or
    /// with `--okf DIR` an Open Knowledge Format bundle.
    Export(commands::export::Args),
    /// Check and draw pipeline files.
    #[command(subcommand)]
    Pipeline(commands::pipeline::Command),
    /// Administration: run cancel and retry, queue inspection, database checks, backups and
    /// restores.
    #[command(subcommand)]
    Admin(commands::admin::Command),
    /// Ask a running API whether it is healthy (GET /health); exits 1 when it is not.
    Health(commands::health::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Migrate(args) => commands::migrate::run(args).await,
            Command::Import(args) => commands::import::run(args).await,
            Command::Process(args) => commands::process::run(args).await,
            Command::Api(args) => commands::api::run(args).await,
            Command::Worker(args) => commands::worker::run(args).await,
            Command::Runs(args) => commands::runs::run(args).await,
            Command::Pages(args) => commands::pages::run(args).await,
            Command::Search(args) => commands::search::run(args).await,
            Command::Export(args) => commands::export::run(args).await,
            Command::Pipeline(command) => commands::pipeline::run(command).await,
            Command::Admin(command) => commands::admin::run(command).await,
            Command::Health(args) => commands::health::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

pub type CliResult = Result<ExitCode, Failure>;
