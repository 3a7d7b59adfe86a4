//! `shelf export`: one document (`DOC_ID --format json|txt|md`, GET /documents/{id}/export)
//! to stdout or, with `--output`, to a file written atomically; or, with `--okf DIR`, every
//! processed document as an Open Knowledge Format bundle written to disk ([`super::okf`]).

use crate::output::errln;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use shelf_app::ExportFormat;

use crate::CliResult;
use crate::output::{EXIT_FAILED, EXIT_USAGE, Failure, OrFail};

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
succeeded run. Exit codes: 0 exported, 3 unknown document or no succeeded run, 2 bad usage \
or output directory, 1 other failures."
)]
pub struct Args {
    /// The document to export (`doc_...`); not with `--okf`.
    #[arg(required_unless_present = "okf", conflicts_with = "okf")]
    document_id: Option<String>,
    /// Export format.
    #[arg(long, value_enum, default_value = "json", conflicts_with = "okf")]
    format: Format,
    /// A passage to find in a transcript source (SRT, WebVTT, SBV): JSON and Markdown exports
    /// then carry where it is, with its times (`transcript_citation`).
    #[arg(long, value_name = "QUOTE", conflicts_with = "okf")]
    citation_quote: Option<String>,
    /// Write the export to this file (atomically: a temporary file beside it, then renamed)
    /// instead of stdout.
    #[arg(long, short, value_name = "FILE", conflicts_with = "okf")]
    output: Option<PathBuf>,
    #[command(flatten)]
    bundle: super::okf::OkfArgs,
    /// Errors as JSON `{detail, code}`; with `--okf`, the bundle summary as JSON too.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> CliResult {
    if args.bundle.okf.is_some() {
        return super::okf::run(args.bundle, args.json).await;
    }
    let Some(document_id) = args.document_id.as_deref() else {
        return Err(Failure {
            json: args.json,
            ..Failure::new("give a DOC_ID or --okf DIR", "bad_request", EXIT_USAGE)
        });
    };
    let shelf = super::open(args.json).await?;
    let export = shelf
        .export(
            document_id,
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
            errln!(
                "exported {} to {} (suggested name: {})",
                document_id,
                path.display(),
                export.file_name()
            );
        }
        // A closed pipe ends the process quietly (`output::EXIT_BROKEN_PIPE`).
        None => crate::output::write_stdout(&export.body),
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
