//! `shelf search QUERY`: BM25 full-text search (POST /search; `--details` is POST
//! /search/results; `--facets` is POST /search/facets), with the endpoints' filters.

use crate::output::{errln, outln};
use std::process::ExitCode;

use shelf_documents::SearchBody;

use crate::CliResult;
use crate::output::{EXIT_USAGE, Failure, OrFail, print_json};

#[derive(clap::Args)]
pub struct Args {
    /// What to look for. Punctuation is fine; "quoted words" must appear together.
    query: String,
    #[arg(long, default_value_t = 20)]
    limit: u64,
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Ranked results with snippets and pagination metadata.
    #[arg(long)]
    details: bool,
    /// Treat the whole query as one phrase.
    #[arg(long)]
    phrase: bool,
    /// Search the cleaned text (default) or the raw extracted source.
    #[arg(long, default_value = "cleaned", value_parser = ["cleaned", "raw"])]
    scope: String,
    /// keyword (BM25), semantic (nearest passages by the local embedding model) or hybrid
    /// (both, fused); the last two need SHELF_EMBEDDING_MODEL_DIR.
    #[arg(long, default_value = "keyword", value_parser = ["keyword", "semantic", "hybrid"])]
    mode: String,
    /// Only this exact Dewey code.
    #[arg(long)]
    classification: Option<String>,
    /// Only codes under this prefix (e.g. 636 for 636 and 636.1).
    #[arg(long)]
    classification_prefix: Option<String>,
    /// Only documents in this status (ingested, processing, ready, failed).
    #[arg(long)]
    status: Option<String>,
    /// Only documents whose file name contains this (case-insensitive).
    #[arg(long, value_name = "TEXT")]
    filename: Option<String>,
    /// Only documents added at or after this time (RFC 3339, e.g. 2026-11-01T00:00:00Z).
    #[arg(long, value_name = "TIME")]
    after: Option<String>,
    /// Only documents added at or before this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    before: Option<String>,
    /// Counts of the matching documents by classification, status, source and file name
    /// instead of the documents; `--limit` is then the most values per facet.
    #[arg(long, conflicts_with = "details")]
    facets: bool,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> CliResult {
    let shelf = super::open(args.json).await?;
    let request = SearchBody {
        query: args.query.clone(),
        limit: Some(args.limit),
        offset: Some(args.offset),
        phrase: args.phrase,
        scope: Some(args.scope.clone()),
        mode: Some(args.mode.clone()),
        classification_code: args.classification.clone(),
        classification_prefix: args.classification_prefix.clone(),
        document_status: args.status.clone(),
        filename_contains: args.filename.clone(),
        created_after: args.after.clone(),
        created_before: args.before.clone(),
        ..SearchBody::default()
    }
    .into_request()
    // A filter the endpoints would answer 422 is a usage error here.
    .map_err(|e| Failure {
        exit: EXIT_USAGE,
        ..Failure::from_app(e.into(), args.json)
    })?;
    if args.facets {
        let facets = shelf
            .search_facets(&request, Some(args.limit))
            .await
            .or_fail(args.json)?;
        if args.json {
            print_json(&facets);
        } else {
            let groups = [
                ("classification", &facets.classifications),
                ("status", &facets.statuses),
                ("source", &facets.sources),
                ("filename", &facets.filenames),
            ];
            for (name, counts) in groups {
                outln!("{name}:");
                for facet in counts {
                    let label = facet
                        .label
                        .as_deref()
                        .map(|l| format!("  {l}"))
                        .unwrap_or_default();
                    outln!("  {:>6}  {}{label}", facet.count, facet.value);
                }
            }
        }
    } else if args.details {
        let page = shelf
            .search_results_cited(&request)
            .await
            .or_fail(args.json)?;
        if args.json {
            print_json(&page);
        } else {
            for cited in &page.results {
                let hit = &cited.hit;
                outln!(
                    "{}  {:.3}  {}  {}",
                    hit.document_id,
                    hit.score,
                    hit.classification_code.as_deref().unwrap_or("-"),
                    hit.filename
                );
                outln!(
                    "    {}",
                    hit.snippet.split_whitespace().collect::<Vec<_>>().join(" ")
                );
                if let Some(c) = &cited.transcript_citation {
                    outln!(
                        "    at {}-{} ({} match): {}",
                        shelf_documents::citations::clock(c.start_seconds),
                        shelf_documents::citations::clock(c.end_seconds),
                        c.strategy.as_str(),
                        c.text
                    );
                }
            }
            outln!(
                "{} of {} result(s) (offset {}, limit {})",
                page.results.len(),
                page.total,
                page.offset,
                page.limit
            );
        }
    } else {
        let ids = shelf.search_ids(&request).await.or_fail(args.json)?;
        if args.json {
            print_json(&ids);
        } else {
            for id in &ids.document_ids {
                outln!("{id}");
            }
            errln!("{} of {} document(s)", ids.document_ids.len(), ids.total);
        }
    }
    Ok(ExitCode::SUCCESS)
}
