//! Progress for long CLI work: a spinner that shows the stage a document's newest run is in,
//! drawn on stderr only when it is a terminal.

use std::future::Future;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use shelf_app::Shelf;

pub fn bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{pos}/{len}] {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// A bar over files with their rate and the time left (imports).
pub fn files_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{pos}/{len}] {per_sec} ETA {eta} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// Awaits `work` while showing `label: stage` of the document's newest run on `bar`.
pub async fn track<T>(
    shelf: &Shelf,
    bar: &ProgressBar,
    label: &str,
    document_id: &str,
    work: impl Future<Output = T>,
) -> T {
    tokio::pin!(work);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            done = &mut work => return done,
            _ = tick.tick() => {
                if let Ok((runs, _)) = shelf.list_runs(Some(document_id), 1, 0).await
                    && let Some(run) = runs.first()
                {
                    bar.set_message(format!(
                        "{label}: {} {}",
                        run.status_line(),
                        run.stage.as_deref().unwrap_or("")
                    ));
                }
            }
        }
    }
}
