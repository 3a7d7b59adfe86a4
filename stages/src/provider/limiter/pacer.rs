//! How many runs a queue worker keeps in flight with a remote model: enough that calls are
//! always waiting for the limiter (so a place freed at the server is used at once), no more
//! than that. The engine asks before each claim ([`shelf_engine::ClaimPacer`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::Limiter;

/// Claims follow the limiter of the process's model calls.
pub struct ModelPacer {
    limiter: Arc<Limiter>,
    /// Runs claimed whatever the model's state: the runs doing other work (extraction, OCR,
    /// indexing) at once, as a worker with an in-process provider keeps.
    base_runs: usize,
}

impl ModelPacer {
    pub fn new(limiter: Arc<Limiter>, base_runs: usize) -> Self {
        ModelPacer {
            limiter,
            base_runs: base_runs.max(1),
        }
    }

    /// The rule, on the numbers alone: below `base` runs, always; beyond, only while few
    /// runs are doing something other than waiting for the model (`base` plus a quarter of
    /// the limit: extraction, checkpoints and indexing between calls, so a worker busy with
    /// OCR does not pile up scans) and few calls wait for a place (a quarter of the limit, at
    /// least two: enough to fill each place the moment it frees). `calls` counts the calls
    /// out, in line, and waiting out a refusal.
    fn wants(&self, runs: usize, limit: usize, calls: usize, waiting: usize) -> bool {
        if runs < self.base_runs {
            return true;
        }
        let elsewhere = runs.saturating_sub(calls);
        elsewhere < self.base_runs + limit / 4 && waiting < (limit / 4).max(2)
    }
}

impl shelf_engine::ClaimPacer for ModelPacer {
    fn wants_another(&self, in_flight: usize) -> bool {
        let waiting = self.limiter.waiting();
        let calls = self.limiter.in_flight() + waiting + self.limiter.pushed_back();
        self.wants(in_flight, self.limiter.limit(), calls, waiting)
    }

    fn changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.limiter.changed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::limiter::LimitConfig;

    #[test]
    fn runs_follow_the_calls() {
        let pacer = ModelPacer::new(Limiter::new(LimitConfig::new(1, 64, 8)), 4);
        // Up to the base, whatever the model does.
        assert!(pacer.wants(3, 8, 0, 0));
        // Six runs, none in a model call yet (extracting): wait for them.
        assert!(!pacer.wants(6, 8, 0, 0));
        assert!(pacer.wants(5, 8, 0, 0));
        // Every run in a call and the limit has room: one more.
        assert!(pacer.wants(4, 8, 4, 0));
        assert!(pacer.wants(10, 32, 9, 1));
        // Enough calls wait for a place: no more runs.
        assert!(!pacer.wants(20, 8, 10, 2));
        assert!(!pacer.wants(40, 32, 40, 8));
        assert!(pacer.wants(40, 32, 39, 7));
        // Runs busy elsewhere (OCR): the base and a quarter of the limit only.
        assert!(!pacer.wants(20, 32, 8, 0));
        assert!(pacer.wants(19, 32, 8, 0));
    }
}
