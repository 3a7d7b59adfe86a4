//! `shelf export`: one document (`DOC_ID`, the per-document formats) or, with `--okf DIR`,
//! every processed document as an Open Knowledge Format bundle written to disk
//! ([`super::okf`]).

use crate::CliResult;
use crate::output::{EXIT_USAGE, Failure};

#[derive(clap::Args)]
pub struct Args {
    /// The document to export.
    #[arg(required_unless_present = "okf", conflicts_with = "okf")]
    pub doc_id: Option<String>,
    #[command(flatten)]
    pub bundle: super::okf::OkfArgs,
    /// Print the result (or the bundle summary) as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args) -> CliResult {
    if args.bundle.okf.is_some() {
        return super::okf::run(args.bundle, args.json).await;
    }
    // The per-document formats (json, txt, md) are another command's work; until they land,
    // a DOC_ID alone is a usage error rather than a silent no-op.
    let _ = args.doc_id;
    Err(Failure {
        json: args.json,
        ..Failure::new(
            "exporting one document is not available yet; use `shelf export --okf DIR`",
            "bad_request",
            EXIT_USAGE,
        )
    })
}
