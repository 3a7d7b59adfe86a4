//! `shelf runs [RUN_ID]`: list runs, or show one with its stages and events; `--follow`
//! prints events as they happen until the run ends. A run's status is printed with its
//! warnings (`succeeded (1 warning: classify failed: invalid_response)`; `warnings` with
//! `--json`). The list warns (on stderr, or as `queue_warning` with `--json`) when runs wait
//! and no worker claims them.

use crate::output::{errln, outln};
use std::process::ExitCode;
use std::time::Duration;

use shelf_app::Shelf;
use shelf_engine::RunStatus;

use crate::CliResult;
use crate::output::{EXIT_FAILED, OrFail, print_json};

#[derive(clap::Args)]
pub struct Args {
    /// Show this run instead of listing.
    run_id: Option<String>,
    /// Only runs of this document.
    #[arg(long)]
    document: Option<String>,
    #[arg(long, default_value_t = 20)]
    limit: u64,
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// With a run id: print its events as they happen until the run ends.
    #[arg(long, short)]
    follow: bool,
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> CliResult {
    let shelf = super::open(args.json).await?;
    match &args.run_id {
        Some(id) => show(&shelf, id, args.json, args.follow).await,
        None => {
            let (runs, total) = shelf
                .list_runs(args.document.as_deref(), args.limit.min(1000), args.offset)
                .await
                .or_fail(args.json)?;
            let warning = queue_warning(&shelf).await;
            if args.json {
                print_json(&serde_json::json!({
                    "runs": runs, "total": total, "limit": args.limit, "offset": args.offset,
                    "queue_warning": warning,
                }));
            } else {
                if let Some(warning) = &warning {
                    errln!("warning: {warning}");
                }
                let statuses: Vec<String> = runs.iter().map(|r| r.status_line()).collect();
                // As wide as the longest status of the page: one with warnings is long.
                let width = statuses.iter().map(String::len).max().unwrap_or(0).max(10);
                outln!(
                    "{:<21} {:<width$} {:<10} {:<21} CREATED",
                    "RUN",
                    "STATUS",
                    "STAGE",
                    "DOCUMENT"
                );
                for (r, status) in runs.iter().zip(&statuses) {
                    outln!(
                        "{:<21} {:<width$} {:<10} {:<21} {}",
                        r.id,
                        status,
                        r.stage.as_deref().unwrap_or("-"),
                        r.document_id,
                        r.created_at
                    );
                }
                outln!("{} of {total} run(s)", runs.len());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The queue's warning, if runs wait with nothing claiming them. Listing runs does not fail
/// over it: a failed read is logged and no warning is given.
async fn queue_warning(shelf: &Shelf) -> Option<String> {
    match shelf.queue_report().await {
        Ok(report) => report.warning,
        Err(error) => {
            tracing::warn!(%error, "reading the queue's health failed");
            None
        }
    }
}

/// Prints one run (and follows it). When the caller waited for the run (`--follow`, `shelf
/// process`), the exit code says whether it failed; a plain look at a run exits 0.
pub async fn show(shelf: &Shelf, id: &str, json: bool, follow: bool) -> CliResult {
    show_run(shelf, id, json, follow, follow).await
}

pub async fn show_run(
    shelf: &Shelf,
    id: &str,
    json: bool,
    follow: bool,
    exit_on_status: bool,
) -> CliResult {
    let mut after = 0i64;
    if !json
        && shelf
            .run(id)
            .await
            .is_ok_and(|r| r.status == RunStatus::Queued)
    {
        // Said first: a followed run that nothing will claim would otherwise wait in silence.
        if let Some(warning) = queue_warning(shelf).await {
            errln!("warning: {warning}");
        }
    }
    if follow && !json {
        loop {
            let events = shelf.events(id, after as u64, 500).await.or_fail(json)?;
            for e in &events {
                outln!(
                    "{:>4} {} {:<10} {}",
                    e.sequence,
                    e.created_at,
                    e.stage,
                    e.message
                );
                after = e.sequence;
            }
            let run = shelf.run(id).await.or_fail(json)?;
            if run.status.is_terminal() && events.is_empty() {
                break;
            }
            if events.is_empty() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let detail = shelf.run_detail(id, 1000).await.or_fail(json)?;
    if json {
        print_json(&detail);
    } else {
        let run = &detail.run;
        outln!(
            "run {}  {}  document {}",
            run.id,
            run.status_line(),
            run.document_id
        );
        outln!(
            "  pipeline {} (sha256 {})  attempt {}{}",
            run.pipeline,
            &run.pipeline_sha256[..12.min(run.pipeline_sha256.len())],
            run.attempt,
            run.retry_of
                .as_deref()
                .map(|r| format!(" retry of {r}"))
                .unwrap_or_default()
        );
        if let Some(error) = &run.error {
            outln!("  error: {error}");
        }
        outln!(
            "  {:<10} {:<10} {:>8} {:>10}",
            "STAGE",
            "STATUS",
            "ATTEMPTS",
            "MS"
        );
        for s in run.stages.iter().flatten() {
            outln!(
                "  {:<10} {:<10} {:>8} {:>10}{}",
                s.name,
                s.status,
                s.attempts,
                s.duration_ms
                    .map(|d| d.to_string())
                    .unwrap_or_else(|| "-".into()),
                s.error
                    .as_deref()
                    .map(|e| format!("  {e}"))
                    .unwrap_or_default()
            );
        }
        if !follow {
            outln!("  events:");
            for e in &detail.events {
                outln!(
                    "  {:>4} {} {:<10} {}",
                    e.sequence,
                    e.created_at,
                    e.stage,
                    e.message
                );
            }
        }
    }
    Ok(match detail.run.status.as_str() {
        "failed" | "canceled" if exit_on_status => ExitCode::from(EXIT_FAILED),
        _ => ExitCode::SUCCESS,
    })
}
