//! `shelf export DOC_ID --format json|txt|md`: one document's export (GET
//! /documents/{id}/export), to stdout or, with `--output`, to a file written atomically.
//!
//! The OKF bundle export (`--okf DIR`) is meant to join this command as another option; the
//! document id would then be required unless `--okf` is given.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use shelf_app::ExportFormat;

use crate::CliResult;
use crate::output::{EXIT_FAILED, Failure, OrFail};

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// The document's fields and its cleaned text as one JSON object.
    Json,
    /// The cleaned text verbatim.
    Txt,
    /// The synopsis, classification and tags, then the cleaned text.
    Md,
}

impl From<Format> for ExportFormat {
    fn from(f: Format) -> Self {
        match f {
            Format::Json => ExportFormat::Json,
            Format::Txt => ExportFormat::Txt,
            Format::Md => ExportFormat::Md,
        }
    }
}

#[derive(clap::Args)]
#[command(
    after_help = "The exported text is the cleaned text of the document's latest \
succeeded run. Exit codes: 0 exported, 3 unknown document or no succeeded run, 1 other \
failures."
)]
pub struct Args {
    /// The document to export (`doc_...`).
    document_id: String,
    /// Export format.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
    /// A passage to find in a transcript source (SRT, WebVTT, SBV): JSON and Markdown exports
    /// then carry where it is, with its times (`transcript_citation`).
    #[arg(long, value_name = "QUOTE")]
    citation_quote: Option<String>,
    /// Write the export to this file (atomically: a temporary file beside it, then renamed)
    /// instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Errors as JSON `{detail, code}`.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> CliResult {
    let shelf = super::open(args.json).await?;
    let export = shelf
        .export(
            &args.document_id,
            args.format.into(),
            args.citation_quote.as_deref(),
        )
        .await
        .or_fail(args.json)?;
    match &args.output {
        Some(path) => {
            write_atomically(path, &export.body).map_err(|e| Failure {
                detail: format!("cannot write {}: {e}", path.display()),
                code: "server_error".into(),
                exit: EXIT_FAILED,
                json: args.json,
            })?;
            eprintln!(
                "exported {} to {} (suggested name: {})",
                args.document_id,
                path.display(),
                export.file_name()
            );
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&export.body)
                .and_then(|()| stdout.flush())
                .map_err(|e| {
                    Failure::new(
                        format!("cannot write stdout: {e}"),
                        "server_error",
                        EXIT_FAILED,
                    )
                })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to a temporary file in `path`'s directory, syncs it, then renames it over
/// `path`: a reader sees the old file or the new one, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}
