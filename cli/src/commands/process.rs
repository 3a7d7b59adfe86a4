//! `shelf process DOC_ID`: create a run for an ingested document and process it here (default)
//! or queue it for a worker. SIGINT or SIGTERM releases a run being processed here back to the
//! queue, checkpoints kept, and exits 130 or 143.

use crate::output::errln;
use std::process::ExitCode;

use shelf_app::ProcessingMode;
use tokio_util::sync::CancellationToken;

use crate::CliResult;
use crate::output::{EXIT_FAILED, OrFail};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Mode {
    /// Run the pipeline in this process and wait for it.
    Process,
    /// Queue the run for `shelf worker`.
    Queue,
}

#[derive(clap::Args)]
pub struct Args {
    /// The document to process (`doc_...`).
    document_id: String,
    #[arg(long, value_enum, default_value = "process")]
    mode: Mode,
    /// Pipeline to run (default: SHELF_PIPELINE, else `default`).
    #[arg(long)]
    pipeline: Option<String>,
    /// Print the run as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> CliResult {
    let shelf = super::open(args.json).await?;
    let mode = match args.mode {
        Mode::Process => ProcessingMode::Process,
        Mode::Queue => ProcessingMode::Queue,
    };
    if mode == ProcessingMode::Process {
        super::check_model(&shelf, args.json).await?;
    }
    // Ctrl-C or SIGTERM stops the work here instead of killing the process: the engine puts
    // the run back in the queue with its checkpoints (not a reclaim), so `shelf worker`
    // finishes it without redoing finished stages. `--mode queue` has no work here to stop.
    let shutdown = CancellationToken::new();
    let received = match args.mode {
        Mode::Process => Some(crate::signals::stop_on_signal(shutdown.clone())),
        Mode::Queue => None,
    };
    let bar = crate::progress::bar(1);
    let work = shelf.process_until(&args.document_id, args.pipeline.as_deref(), mode, shutdown);
    let run = crate::progress::track(&shelf, &bar, &args.document_id, &args.document_id, work)
        .await
        .or_fail(args.json)?
        .ok_or_else(|| {
            crate::output::Failure::new("no run was created", "run_submission_failed", EXIT_FAILED)
        })?;
    bar.finish_and_clear();
    // The exit code says whether the run failed.
    let shown = super::runs::show_run(&shelf, &run.id, args.json, false, true).await?;
    // A signal that came after the run ended changed nothing: the run's outcome stands.
    match received.and_then(|r| r.exit_code()) {
        Some(code) if !run.status.is_terminal() => {
            errln!(
                "interrupted: run {} is back in the queue with its checkpoints; `shelf worker` finishes it",
                run.id
            );
            Ok(ExitCode::from(code))
        }
        _ => Ok(shown),
    }
}
