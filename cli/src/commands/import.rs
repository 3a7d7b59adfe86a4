//! `shelf import PATH`: the CLI's `POST /imports`. Ingests a file or the files of a directory
//! in place, processes, queues or only stores each, and converts it to Markdown or text in the
//! output mode asked for, with a manifest that `--resume` continues after Ctrl-C or a crash.
//! `--watch` keeps importing what lands in a hot folder. The CLI is local: any path its user
//! gives is accepted (no import root), but symlinks are never followed.

use crate::output::{errln, outln};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use shelf_app::imports::{
    Boundary, FileRecord, FileStatus, ImportError, ImportLimits, ImportReport, ImportRequest,
    Progress, ReportStatus,
};
use tokio_util::sync::CancellationToken;

use crate::CliResult;
use crate::output::{EXIT_FAILED, EXIT_NOT_FOUND, EXIT_USAGE, Failure, print_json};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Mode {
    /// Run the pipeline in this process and wait for it.
    Process,
    /// Queue a run for `shelf worker`.
    Queue,
    /// Only ingest and convert.
    None,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Process => "process",
            Mode::Queue => "queue",
            Mode::None => "none",
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Md,
    Txt,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum OutputMode {
    /// `<data_dir>/converted` (a subdirectory per directory import).
    Workspace,
    /// Under `--output-dir`.
    NewDirectory,
    /// Beside each source.
    Original,
    /// In `shelf-converted/` beside the sources.
    Subdirectory,
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
    /// Format of the converted files.
    #[arg(long, value_enum, default_value = "md")]
    format: Format,
    /// Where converted files go.
    #[arg(long, value_enum, default_value = "workspace")]
    output_mode: OutputMode,
    /// The directory of `--output-mode new-directory` (created when missing).
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// Replace existing outputs (otherwise their files are skipped).
    #[arg(long)]
    overwrite: bool,
    /// Write the import report here after every file.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Take over the manifest's converted files and do only the rest.
    #[arg(long, requires = "manifest")]
    resume: bool,
    /// Keep watching PATH (a directory) and import each new file once it stops growing.
    /// Without `--manifest`, the manifest is `<data_dir>/hot-folders/<name>-<hash>.json`.
    #[arg(long)]
    watch: bool,
    /// How often `--watch` looks at the folder, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(50..))]
    poll_ms: u64,
    /// Print the import report as JSON.
    #[arg(long)]
    json: bool,
}

fn path_arg(path: &std::path::Path) -> String {
    path.display().to_string()
}

pub async fn run(args: Args) -> CliResult {
    let shelf = super::open(args.json).await?;
    // A damaged database is refused before anything is imported into it (exit 4).
    shelf_app::db::check_at_start(&shelf.settings)
        .await
        .map_err(|e| Failure::from_app(e, args.json))?;
    if matches!(args.mode, Mode::Process) {
        super::check_model(&shelf, args.json).await?;
    }
    let mut manifest = args.manifest.clone();
    if args.watch && manifest.is_none() {
        let dir = shelf.settings.storage.layout().hot_folders();
        let path =
            shelf_app::imports::manifest::hot_folder_manifest(&dir, &args.path).map_err(|e| {
                Failure {
                    detail: format!("cannot create {}: {e}", dir.display()),
                    code: "server_error".into(),
                    exit: EXIT_FAILED,
                    json: args.json,
                }
            })?;
        manifest = Some(path);
    }
    let request = ImportRequest {
        source_dir: path_arg(&args.path),
        format: Some(
            match args.format {
                Format::Md => "md",
                Format::Txt => "txt",
            }
            .into(),
        ),
        output_mode: Some(
            match args.output_mode {
                OutputMode::Workspace => "workspace",
                OutputMode::NewDirectory => "new-directory",
                OutputMode::Original => "original",
                OutputMode::Subdirectory => "subdirectory",
            }
            .into(),
        ),
        output_dir: args.output_dir.as_deref().map(path_arg),
        recursive: Some(args.recursive),
        overwrite: Some(args.overwrite),
        processing_mode: Some(args.mode.as_str().into()),
        manifest_path: manifest.as_deref().map(path_arg),
        resume: Some(args.resume || args.watch),
        pipeline: args.pipeline.clone(),
    };
    // Local: no import root and no file or byte cap; manifests keep the API's read cap.
    let limits = ImportLimits {
        max_files: None,
        max_bytes: None,
        max_manifest_bytes: shelf.settings.api.max_import_manifest_bytes,
    };
    // Ctrl-C stops after the current file: the manifest keeps every finished file for
    // `--resume`, and a run cut short goes back to the queue for `shelf worker`.
    let shutdown = CancellationToken::new();
    crate::signals::stop_on_signal(shutdown.clone());
    let bar = crate::progress::files_bar(0);
    let json = args.json;
    let mut on_file = |p: Progress<'_>| {
        bar.set_length(p.total.max(p.done));
        bar.set_position(p.done);
        bar.set_message(p.record.path.clone());
        if !json {
            bar.suspend(|| print_record(p.record));
        }
    };
    let report = if args.watch {
        if !json {
            errln!(
                "watching {} (Ctrl-C stops; manifest {})",
                args.path.display(),
                manifest.as_deref().map(path_arg).unwrap_or_default()
            );
        }
        shelf
            .watch_folder(
                &request,
                &Boundary::Local,
                limits,
                Duration::from_millis(args.poll_ms),
                &shutdown,
                &mut on_file,
            )
            .await
    } else {
        shelf
            .import(&request, &Boundary::Local, limits, &shutdown, &mut on_file)
            .await
    };
    bar.finish_and_clear();
    let report = report.map_err(|e| failure(e, json))?;
    if json {
        print_json(&report);
    } else {
        print_summary(&report);
    }
    let s = &report.summary;
    Ok(
        if s.failed > 0
            || s.runs_failed > 0
            || report.status == ReportStatus::Interrupted && !args.watch
        {
            ExitCode::from(EXIT_FAILED)
        } else {
            ExitCode::SUCCESS
        },
    )
}

fn failure(e: ImportError, json: bool) -> Failure {
    let exit = match e.code() {
        "invalid_import_path" => EXIT_NOT_FOUND,
        "validation_error" | "invalid_manifest_path" | "invalid_output_dir" => EXIT_USAGE,
        _ => EXIT_FAILED,
    };
    let detail = if e.is_user_error() {
        e.to_string()
    } else {
        format!("import failed: {e}")
    };
    Failure {
        detail,
        code: e.code().into(),
        exit,
        json,
    }
}

fn print_record(record: &FileRecord) {
    let id = record.document_id.as_deref().unwrap_or("-");
    match (&record.status, &record.error) {
        (FileStatus::Converted, _) => {
            let run = match (&record.run_id, &record.run_status) {
                (Some(run), Some(status)) => format!(
                    "  run {run} {}",
                    shelf_engine::warnings::status_line(status, &record.run_warnings)
                ),
                _ => String::new(),
            };
            let reused = if record.reused { " (done before)" } else { "" };
            outln!(
                "{id}  {} -> {}{run}{reused}",
                record.path,
                record.output.as_deref().unwrap_or("")
            );
        }
        (_, Some(error)) => outln!("{id}  {}: {} ({})", record.path, error.detail, error.code),
        (_, None) => outln!("{id}  {}", record.path),
    }
}

fn print_summary(report: &ImportReport) {
    let s = &report.summary;
    outln!(
        "{} file(s): {} converted ({} done before), {} skipped, {} failed; {} ingested ({} already known); runs: {} succeeded, {} failed, {} queued{}",
        s.files,
        s.converted,
        s.reused,
        s.skipped,
        s.failed,
        s.ingested,
        s.duplicates,
        s.runs_succeeded,
        s.runs_failed,
        s.runs_queued,
        if report.status == ReportStatus::Interrupted {
            "; interrupted (run again with --manifest and --resume to finish)"
        } else {
            ""
        }
    );
}
