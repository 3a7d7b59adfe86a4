//! `shelf pages DOC_ID`: the page records of a document's latest run that recorded pages (the
//! same listing as `GET /documents/{id}/pages`): one line per page and a summary line.

use crate::output::outln;
use std::process::ExitCode;

use shelf_documents::{ListedPage, PageListing, PageSummary};

use crate::CliResult;
use crate::output::{OrFail, print_json};

#[derive(clap::Args)]
pub struct Args {
    /// The document (`doc_…`).
    document_id: String,
    /// Pages to show, 1 to 1000.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1000))]
    limit: u64,
    /// Pages to skip.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Only failed pages and pages with an error or warnings.
    #[arg(long)]
    failures_only: bool,
    /// Print the listing as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> CliResult {
    let shelf = super::open(args.json).await?;
    let listing = shelf
        .pages(
            &args.document_id,
            args.limit,
            args.offset,
            args.failures_only,
        )
        .await
        .or_fail(args.json)?;
    if args.json {
        print_json(&listing);
    } else {
        print_table(&listing);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(listing: &PageListing) {
    let Some(run_id) = &listing.run_id else {
        outln!(
            "document {} has no page records (not a PDF or image, or not processed yet)",
            listing.document_id
        );
        return;
    };
    outln!("document {}  run {run_id}", listing.document_id);
    outln!(
        "{:>6} {:<10} {:>10} {:>8} {:>8} {:>8} {:<9} NOTES",
        "PAGE",
        "SOURCE",
        "CONFIDENCE",
        "ROTATION",
        "CHARS",
        "ATTEMPTS",
        "CORRECTED"
    );
    for page in &listing.pages {
        outln!("{}", row(page));
    }
    outln!(
        "{} of {} page(s) shown{}",
        listing.pages.len(),
        listing.total,
        if listing.total < listing.summary.pages {
            " (failures only)"
        } else {
            ""
        }
    );
    outln!("{}", summary_line(&listing.summary));
}

fn row(page: &ListedPage) -> String {
    let dash = || "-".to_string();
    let mut notes: Vec<String> = Vec::new();
    if let Some(error) = &page.error {
        notes.push(format!("error: {error}"));
    }
    notes.extend(page.warnings.iter().map(|w| format!("warning: {w}")));
    format!(
        "{:>6} {:<10} {:>10} {:>8} {:>8} {:>8} {:<9} {}",
        page.number,
        page.source.as_str(),
        page.confidence.map_or_else(dash, |c| format!("{c:.1}")),
        page.rotation_degrees.map_or_else(dash, |r| format!("{r}°")),
        page.chars,
        page.attempts,
        if page.corrected { "yes" } else { "no" },
        if notes.is_empty() {
            dash()
        } else {
            notes.join("; ")
        }
    )
}

fn summary_line(s: &PageSummary) -> String {
    format!(
        "{} page(s): {} text layer, {} OCR, {} failed, {} pending; {} corrected, {} with \
         warnings; average OCR confidence {}; {} attempt(s)",
        s.pages,
        s.text_layer,
        s.ocr,
        s.failed,
        s.pending,
        s.corrected,
        s.with_warnings,
        s.average_confidence
            .map_or_else(|| "-".to_string(), |c| format!("{c:.1}")),
        s.attempts
    )
}

#[cfg(test)]
mod tests {
    use shelf_documents::PageSource;

    use super::*;

    #[test]
    fn rows_show_notes_and_dashes() {
        let page = ListedPage {
            number: 3,
            source: PageSource::Failed,
            confidence: None,
            rotation_degrees: None,
            chars: 0,
            attempts: 1,
            corrected: false,
            warnings: vec!["dark scan".into()],
            error: Some("ocr_timeout: slow".into()),
            image_path: None,
        };
        let line = row(&page);
        assert!(line.contains("failed"), "{line}");
        assert!(
            line.ends_with("error: ocr_timeout: slow; warning: dark scan"),
            "{line}"
        );
        let summary = summary_line(&PageSummary {
            pages: 2,
            ocr: 1,
            average_confidence: Some(91.25),
            ..PageSummary::default()
        });
        assert!(
            summary.starts_with("2 page(s): 0 text layer, 1 OCR"),
            "{summary}"
        );
        assert!(summary.contains("confidence 91.2"), "{summary}");
    }
}
