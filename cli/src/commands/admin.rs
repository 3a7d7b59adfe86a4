//! `shelf admin ...`: run cancel and retry, queue inspection, the API audit trail; database
//! and workspace administration in [`data`].

mod data;

use crate::output::outln;
use std::process::ExitCode;

use crate::CliResult;
use crate::output::{OrFail, print_json};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Cancel a run: a queued run at once, a running one as soon as its worker sees the flag.
    RunCancel {
        run_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Replay a failed run as a new run, reusing its finished stages.
    RunRetry {
        run_id: String,
        /// Process the new run here and wait (default: queue it for a worker).
        #[arg(long)]
        process: bool,
        #[arg(long)]
        json: bool,
    },
    /// Inspect the durable queue: runs waiting or held by a worker.
    Queue {
        #[arg(long, default_value_t = 50)]
        limit: u64,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        #[arg(long)]
        json: bool,
    },
    /// Denied API requests (authentication, scope, rate limit), newest first.
    ApiAudit {
        #[arg(long, default_value_t = 50)]
        limit: u64,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        #[arg(long)]
        json: bool,
    },
    /// Embed the documents processed before an embedding model was configured (or by another
    /// model): resumable (Ctrl-C stops after the current document; run it again to go on).
    EmbedBackfill {
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Data(data::Command),
}

pub async fn run(command: Command) -> CliResult {
    match command {
        Command::Data(command) => data::run(command).await,
        Command::EmbedBackfill { json } => {
            let shelf = super::open(json).await?;
            let stop = tokio_util::sync::CancellationToken::new();
            crate::signals::stop_on_signal(stop.clone());
            let bar = crate::progress::files_bar(0);
            let done = shelf
                .embed_backfill(stop.clone(), |p| {
                    bar.set_length(p.total.max(p.embedded + p.skipped));
                    bar.set_position(p.embedded + p.skipped);
                    bar.set_message(format!("{} passages", p.passages));
                })
                .await;
            bar.finish_and_clear();
            let done = done.or_fail(json)?;
            let stopped = stop.is_cancelled();
            if json {
                print_json(&serde_json::json!({
                    "embedded": done.embedded, "skipped": done.skipped, "passages": done.passages,
                    "total": done.total, "complete": !stopped,
                }));
            } else {
                outln!(
                    "{} document(s) embedded ({} passages), {} with nothing to embed{}",
                    done.embedded,
                    done.passages,
                    done.skipped,
                    if stopped {
                        "; stopped: run it again to go on"
                    } else {
                        ""
                    }
                );
            }
            Ok(if stopped {
                ExitCode::from(130)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::RunCancel { run_id, json } => {
            let shelf = super::open(json).await?;
            let (outcome, run) = shelf.cancel(&run_id).await.or_fail(json)?;
            if json {
                print_json(
                    &serde_json::json!({ "id": run.id, "status": run.status, "outcome": outcome }),
                );
            } else {
                match outcome {
                    shelf_engine::store::CancelOutcome::Canceled => {
                        outln!("run {} canceled", run.id)
                    }
                    shelf_engine::store::CancelOutcome::Requested => {
                        outln!(
                            "cancel requested; the worker holding run {} will stop it",
                            run.id
                        )
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::RunRetry {
            run_id,
            process,
            json,
        } => {
            let shelf = super::open(json).await?;
            let run = shelf.retry(&run_id).await.or_fail(json)?;
            if process {
                shelf.run_here(&run.id).await.or_fail(json)?;
                return super::runs::show_run(&shelf, &run.id, json, false, true).await;
            }
            if json {
                print_json(&shelf.run_view(&run.id).await.or_fail(json)?);
            } else {
                outln!("run {} queued as a retry of {}", run.id, run_id);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Queue {
            limit,
            offset,
            json,
        } => {
            let shelf = super::open(json).await?;
            let store = shelf.engine.store();
            let counts = store
                .queue_counts()
                .await
                .map_err(shelf_app::AppError::from)
                .or_fail(json)?;
            let (runs, total) = store
                .list_queue(limit.min(1000), offset)
                .await
                .map_err(shelf_app::AppError::from)
                .or_fail(json)?;
            if json {
                let items: Vec<_> = runs
                    .iter()
                    .map(|r| serde_json::json!({
                        "id": r.id, "document_id": r.subject, "status": r.status, "stage": r.stage,
                        "due_at_ms": r.due_at, "lease_owner": r.lease_owner, "claims": r.claims,
                        "reclaims": r.reclaims, "cancel_requested": r.cancel_requested,
                    }))
                    .collect();
                print_json(&serde_json::json!({
                    "counts": counts, "runs": items, "total": total, "limit": limit, "offset": offset,
                }));
            } else {
                outln!(
                    "queued {} (due {}), running {} (expired leases {})",
                    counts.queued,
                    counts.due,
                    counts.running,
                    counts.expired_leases
                );
                for r in &runs {
                    outln!(
                        "{:<21} {:<8} {:<10} owner {:<20} claims {} reclaims {}",
                        r.id,
                        r.status.as_str(),
                        r.stage.as_deref().unwrap_or("-"),
                        r.lease_owner.as_deref().unwrap_or("-"),
                        r.claims,
                        r.reclaims
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::ApiAudit {
            limit,
            offset,
            json,
        } => {
            let shelf = super::open(json).await?;
            let page = shelf
                .audit_events(limit.min(1000), offset)
                .await
                .or_fail(json)?;
            if json {
                print_json(&page);
            } else {
                outln!(
                    "{} denied request(s) in {} row(s); showing {} from offset {}",
                    page.denials,
                    page.total,
                    page.events.len(),
                    page.offset
                );
                for e in &page.events {
                    outln!(
                        "{} x{:<5} {:<18} {:<7} {} client {} credential {} scope {}{}",
                        e.created_at,
                        e.count,
                        e.reason,
                        e.method,
                        e.path,
                        e.client_host.as_deref().unwrap_or("-"),
                        if e.credential_present { "yes" } else { "no" },
                        e.scope.as_deref().unwrap_or("-"),
                        e.retry_after_seconds
                            .map(|s| format!(" retry-after {s}s"))
                            .unwrap_or_default()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
