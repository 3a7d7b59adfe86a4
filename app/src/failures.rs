//! Recent failures by code, for the operations page: the failed runs of a time window grouped
//! by the stable code of the stage that failed them, so an operator sees at once which kind of
//! failure dominates (a provider outage, encrypted PDFs, OCR) and opens its latest run.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::error::AppError;
use crate::shelf::Shelf;

/// Most failed runs counted: the newest of the window. Bounds the page's cost however many runs
/// failed; the counts then describe the latest failures, which are what an operator acts on.
pub const MAX_FAILURES_COUNTED: u64 = 1000;

/// The code given to runs failed otherwise than by a stage's coded error (reclaims exhausted,
/// say).
pub const UNKNOWN_CODE: &str = "unknown";

/// Failed runs of one code in the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureCount {
    /// The failing stage's code (`RunRecord::error_code`), or [`UNKNOWN_CODE`].
    pub code: String,
    pub count: u64,
    /// The newest failed run of this code.
    pub latest_run_id: String,
    /// When it finished (RFC 3339, as stored).
    pub latest_at: String,
}

impl Shelf {
    /// The failed runs that finished at or after `now - window`, at most the newest
    /// [`MAX_FAILURES_COUNTED`], counted by code: most frequent first, then by code.
    pub async fn failures_by_code(
        &self,
        now: DateTime<Utc>,
        window: Duration,
    ) -> Result<Vec<FailureCount>, AppError> {
        let runs = self
            .engine
            .store()
            .recent_failures(now - window, MAX_FAILURES_COUNTED)
            .await?;
        let mut by_code: HashMap<String, FailureCount> = HashMap::new();
        // Newest first: the first run met of a code is its latest.
        for run in runs {
            let code = run.error_code().unwrap_or(UNKNOWN_CODE).to_string();
            by_code
                .entry(code.clone())
                .or_insert_with(|| FailureCount {
                    code,
                    count: 0,
                    latest_run_id: run.id.clone(),
                    latest_at: run.finished_at.clone().unwrap_or_default(),
                })
                .count += 1;
        }
        let mut counts: Vec<FailureCount> = by_code.into_values().collect();
        counts.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.code.cmp(&b.code)));
        Ok(counts)
    }
}
