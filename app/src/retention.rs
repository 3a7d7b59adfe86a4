//! Run retention in the application: the superseded runs of every document go with their texts
//! and page records (`shelf_engine::retention` picks them, `shelf_documents::retention` names
//! the document rows), in transactions of a few dozen runs with a pause between them, as a
//! background task of `shelf worker` and `shelf api`, and in full in `shelf admin db-maintain`.

use std::time::{Duration, Instant};

use shelf_documents::PrunedRunOf;
use shelf_engine::retention::RetentionPass;
use shelf_engine::{EngineError, RunStore};
use tokio_util::sync::CancellationToken;

/// Runs pruned per transaction: each is a few texts, its page records, stages and events, so
/// a batch holds the write lock for milliseconds, not for as long as a writer would notice.
pub const BATCH_RUNS: usize = 50;
/// The background pass's pause between two transactions, so the workers' writes take their
/// turns in between.
pub const PAUSE: Duration = Duration::from_millis(100);
/// How often the background task starts a pass.
pub const INTERVAL: Duration = Duration::from_secs(300);
/// The first pass after a process starts: soon, but after its start-up.
pub const FIRST_PASS_AFTER: Duration = Duration::from_secs(60);

/// Prunes every superseded run, keeping `keep` runs per document (and what the engine always
/// keeps), `BATCH_RUNS` per transaction with `pause` between transactions, until nothing is
/// left or `stop` trips. Returns how many runs went.
pub async fn prune(
    store: &RunStore,
    keep: u32,
    pause: Duration,
    stop: &CancellationToken,
) -> Result<u64, EngineError> {
    let mut pass = RetentionPass::new(keep, BATCH_RUNS);
    let mut total = 0u64;
    while !stop.is_cancelled() {
        let pruned = store
            .prune_superseded(&mut pass, |runs| {
                let runs: Vec<PrunedRunOf<'_>> = runs
                    .iter()
                    .map(|run| PrunedRunOf {
                        run_id: &run.id,
                        document_id: &run.subject,
                    })
                    .collect();
                shelf_documents::pruned_run_statements(&runs)
            })
            .await?;
        if pruned == 0 {
            break;
        }
        total += u64::try_from(pruned).unwrap_or(u64::MAX);
        if !pause.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => break,
            }
        }
    }
    Ok(total)
}

/// The background task: a pass every [`INTERVAL`] until `shutdown` trips (a pass in progress
/// stops between two transactions). A failed pass is logged; the next one starts over.
pub async fn prune_periodically(store: RunStore, keep: u32, shutdown: CancellationToken) {
    let mut wait = FIRST_PASS_AFTER;
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => return,
        }
        wait = INTERVAL;
        let started = Instant::now();
        match prune(&store, keep, PAUSE, &shutdown).await {
            Ok(0) => tracing::debug!(keep, "no superseded runs to prune"),
            Ok(pruned) => tracing::info!(
                pruned_runs = pruned,
                keep,
                elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "pruned superseded runs"
            ),
            Err(error) => {
                tracing::warn!(%error, "pruning superseded runs failed; the next pass tries again")
            }
        }
    }
}
