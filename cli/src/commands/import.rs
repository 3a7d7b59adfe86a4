//! `shelf import PATH`: ingest a file or every file of a directory, then process each
//! document here, queue it for a worker, or only store it.

use indicatif::ProgressBar;
use serde::Serialize;
use shelf_app::{ProcessingMode, Shelf};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

use crate::CliResult;
use crate::output::{EXIT_FAILED, EXIT_NOT_FOUND, Failure, print_json};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Mode {
    /// Run the pipeline in this process and wait for it.
    Process,
    /// Queue a run for `shelf worker`.
    Queue,
    /// Only ingest.
    None,
}

impl From<Mode> for ProcessingMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Process => ProcessingMode::Process,
            Mode::Queue => ProcessingMode::Queue,
            Mode::None => ProcessingMode::None,
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// A file, or a directory whose files are imported.
    path: PathBuf,
    /// What happens after ingest.
    #[arg(long, value_enum, default_value = "process")]
    mode: Mode,
    /// Pipeline to run (default: SHELF_PIPELINE, else `default`).
    #[arg(long)]
    pipeline: Option<String>,
    /// Descend into subdirectories.
    #[arg(long, short)]
    recursive: bool,
    /// Print the import report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Record {
    path: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    document_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filename: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicate: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<serde_json::Value>,
}

#[derive(Serialize, Default)]
struct Summary {
    files: usize,
    ingested: usize,
    duplicates: usize,
    failed: usize,
    runs_succeeded: usize,
    runs_failed: usize,
    runs_queued: usize,
}

fn collect(path: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for entry in entries {
        let hidden = entry
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        let meta = std::fs::symlink_metadata(&entry)?;
        if hidden || meta.file_type().is_symlink() {
            continue;
        }
        if meta.is_dir() {
            if recursive {
                collect(&entry, recursive, out)?;
            }
        } else if meta.is_file() {
            out.push(entry);
        }
    }
    Ok(())
}

pub async fn run(args: Args) -> CliResult {
    let shelf = super::open(args.json).await?;
    let meta = std::fs::metadata(&args.path).map_err(|e| Failure {
        detail: format!("cannot read {}: {e}", args.path.display()),
        code: "not_found".into(),
        exit: EXIT_NOT_FOUND,
        json: args.json,
    })?;
    let mut files = Vec::new();
    if meta.is_dir() {
        collect(&args.path, args.recursive, &mut files).map_err(|e| Failure {
            detail: format!("cannot list {}: {e}", args.path.display()),
            code: "invalid_import_path".into(),
            exit: EXIT_FAILED,
            json: args.json,
        })?;
    } else {
        files.push(args.path.clone());
    }

    let bar = crate::progress::bar(files.len() as u64);
    // Ctrl-C stops after the current file; its run goes back to the queue for `shelf worker`.
    let shutdown = CancellationToken::new();
    crate::signals::stop_on_signal(shutdown.clone());
    let mut summary = Summary {
        files: files.len(),
        ..Summary::default()
    };
    let mut records = Vec::with_capacity(files.len());
    for file in &files {
        bar.set_message(file.display().to_string());
        if shutdown.is_cancelled() {
            break;
        }
        let record = import_one(&shelf, file, &args, &bar, &shutdown).await;
        match record.status {
            "failed" => summary.failed += 1,
            _ => summary.ingested += 1,
        }
        summary.duplicates += usize::from(record.duplicate == Some(true));
        match record.run_status.as_deref() {
            Some("succeeded") => summary.runs_succeeded += 1,
            Some("queued") => summary.runs_queued += 1,
            Some(_) => summary.runs_failed += 1,
            None => {}
        }
        if !args.json {
            bar.suspend(|| print_record(&record));
        }
        records.push(record);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if args.json {
        print_json(&serde_json::json!({ "summary": summary, "files": records }));
    } else {
        println!(
            "{} file(s): {} ingested ({} already known), {} failed; runs: {} succeeded, {} failed, {} queued",
            summary.files,
            summary.ingested,
            summary.duplicates,
            summary.failed,
            summary.runs_succeeded,
            summary.runs_failed,
            summary.runs_queued
        );
    }
    Ok(if summary.failed > 0 || summary.runs_failed > 0 {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_record(record: &Record) {
    match (&record.document_id, &record.error) {
        (Some(id), None) => {
            let run = match (&record.run_id, &record.run_status) {
                (Some(run), Some(status)) => format!("  run {run} {status}"),
                _ => String::new(),
            };
            let dup = if record.duplicate == Some(true) {
                " (already known)"
            } else {
                ""
            };
            println!(
                "{id}  {}{dup}{run}",
                record.filename.as_deref().unwrap_or("")
            );
        }
        (id, Some(error)) => println!(
            "{}  {}: {}",
            id.as_deref().unwrap_or("failed"),
            record.path,
            error
                .get("detail")
                .and_then(|d| d.as_str())
                .unwrap_or("error")
        ),
        (None, None) => println!("{}", record.path),
    }
}

async fn import_one(
    shelf: &Shelf,
    file: &Path,
    args: &Args,
    bar: &ProgressBar,
    shutdown: &CancellationToken,
) -> Record {
    let mut record = Record {
        path: file.display().to_string(),
        status: "failed",
        document_id: None,
        filename: None,
        duplicate: None,
        run_id: None,
        run_status: None,
        error: None,
    };
    let error_json = |e: &shelf_app::AppError| {
        let detail = if e.is_user_error() {
            e.to_string()
        } else {
            "Document ingest failed".to_string()
        };
        serde_json::json!({ "detail": detail, "code": e.code() })
    };
    let ingested = match shelf.ingest_path(file).await {
        Ok(i) => i,
        Err(e) => {
            record.error = Some(error_json(&e));
            return record;
        }
    };
    record.status = "ingested";
    record.document_id = Some(ingested.document.id.clone());
    record.filename = Some(ingested.document.filename.clone());
    record.duplicate = Some(ingested.duplicate);
    let mode: ProcessingMode = args.mode.into();
    let label = file.display().to_string();
    let work = shelf.process_until(
        &ingested.document.id,
        args.pipeline.as_deref(),
        mode,
        shutdown.clone(),
    );
    match crate::progress::track(shelf, bar, &label, &ingested.document.id, work).await {
        Ok(Some(run)) => {
            record.run_id = Some(run.id.clone());
            record.run_status = Some(run.status.as_str().to_string());
            if let Some(error) = run.error {
                record.error = Some(serde_json::json!({ "detail": error, "code": "run_failed" }));
            }
        }
        Ok(None) => {}
        Err(e) => {
            record.run_status = Some("failed".into());
            record.error = Some(serde_json::json!({ "detail": e.to_string(), "code": e.code() }));
        }
    }
    record
}
