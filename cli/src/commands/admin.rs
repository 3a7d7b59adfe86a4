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
    #[command(flatten)]
    Data(data::Command),
}

pub async fn run(command: Command) -> CliResult {
    match command {
        Command::Data(command) => data::run(command).await,
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
