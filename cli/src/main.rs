//! The `shelf` command: clap parsing, logging setup and exit codes. Every command is a thin
//! call into the application layer (`shelf-app`).

mod commands;
mod logging;
mod memory;
mod output;
mod progress;
mod redact;
mod signals;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Subcommand};

use crate::output::Failure;

/// Shelf: ingest documents, clean and classify them through pipelines, search them.
#[derive(clap::Parser)]
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
    /// Serve the HTTP API until stopped (creates and migrates a new database).
    Api(commands::api::Args),
    /// Take runs from the durable queue and execute them until stopped.
    Worker(commands::worker::Args),
    /// List runs, or show one run with its stages and events.
    Runs(commands::runs::Args),
    /// Show a document's page records: source, OCR confidence, rotation, errors.
    Pages(commands::pages::Args),
    /// Full-text search over cleaned (or raw) text.
    Search(commands::search::Args),
    /// Delete a document, its runs, texts and index rows, and the upload file it owns
    /// (DELETE /documents/{id}, without the server).
    Delete(commands::delete::Args),
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

/// `shelf --version`: the fields of `GET /version` on one line, `key=value` after the version.
fn version_line() -> String {
    let v = shelf_server::routes::service::version_info();
    format!(
        "{} git_sha={} schema_version={} okf_version={}",
        v.version, v.git_sha, v.schema_version, v.okf_version
    )
}

fn main() -> ExitCode {
    memory::limit_malloc_arenas();
    memory::limit_candle_threads();
    output::quiet_broken_pipe_panics();
    // clap takes a `&'static str` here; the one line lives as long as the process anyway.
    let version: &'static str = Box::leak(version_line().into_boxed_str());
    let matches = Cli::command().version(version).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            output::errln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        let result = match cli.command {
            Command::Migrate(args) => commands::migrate::run(args).await,
            Command::Import(args) => commands::import::run(args).await,
            Command::Process(args) => commands::process::run(args).await,
            Command::Api(args) => commands::api::run(args).await,
            Command::Worker(args) => commands::worker::run(args).await,
            Command::Runs(args) => commands::runs::run(args).await,
            Command::Pages(args) => commands::pages::run(args).await,
            Command::Search(args) => commands::search::run(args).await,
            Command::Delete(args) => commands::delete::run(args).await,
            Command::Export(args) => commands::export::run(args).await,
            Command::Pipeline(command) => commands::pipeline::run(command).await,
            Command::Admin(command) => commands::admin::run(command).await,
            Command::Health(args) => commands::health::run(args).await,
        };
        // Spans still buffered are exported before the process ends, whatever the outcome.
        logging::shutdown().await;
        result
    });
    // A command that met a damaged database exits 4, whatever else went wrong with it, so
    // scripts can tell "restore from a backup" from an ordinary failure.
    let damaged = shelf_db::known_damage().is_some();
    match result {
        Ok(code) if damaged && code != ExitCode::SUCCESS => {
            ExitCode::from(output::EXIT_DATABASE_CORRUPT)
        }
        Ok(code) => code,
        Err(failure) if damaged => failure.after_damage().report(),
        Err(failure) => failure.report(),
    }
}

pub type CliResult = Result<ExitCode, Failure>;
