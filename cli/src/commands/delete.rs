//! `shelf delete DOC_ID`: deletes a document without the server, through the same service as
//! `DELETE /documents/{id}` (the same boundary checks: a symlinked `uploads` directory or parent
//! refuses it; an imported document's source file is never touched).

use crate::output::outln;
use std::process::ExitCode;

use crate::CliResult;
use crate::output::{OrFail, print_json};

#[derive(clap::Args)]
pub struct Args {
    /// The document to delete (`doc_...`).
    document_id: String,
    /// Print `{id, deleted, removed_files}` as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> CliResult {
    let shelf = super::open(args.json).await?;
    let deleted = shelf
        .delete_document(&args.document_id)
        .await
        .or_fail(args.json)?;
    tracing::info!(document_id = %deleted.id, removed_files = deleted.removed_files, "document_deleted");
    if args.json {
        print_json(&serde_json::json!({
            "id": deleted.id,
            "deleted": true,
            "removed_files": deleted.removed_files,
        }));
    } else if deleted.removed_files {
        outln!("deleted {} and its uploaded file", deleted.id);
    } else {
        outln!("deleted {}", deleted.id);
    }
    Ok(ExitCode::SUCCESS)
}
