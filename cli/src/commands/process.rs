//! `shelf process DOC_ID`: create a run for an ingested document and process it here (default)
//! or queue it for a worker.

use shelf_app::ProcessingMode;

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
    let bar = crate::progress::bar(1);
    let work = shelf.process(&args.document_id, args.pipeline.as_deref(), mode);
    let run = crate::progress::track(&shelf, &bar, &args.document_id, &args.document_id, work)
        .await
        .or_fail(args.json)?
        .ok_or_else(|| {
            crate::output::Failure::new("no run was created", "run_submission_failed", EXIT_FAILED)
        })?;
    bar.finish_and_clear();
    // The exit code says whether the run failed.
    super::runs::show_run(&shelf, &run.id, args.json, false, true).await
}
