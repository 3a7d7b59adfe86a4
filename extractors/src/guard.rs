//! Running an extractor safely: panics become [`ExtractError::crashed`], and a deadline plus a
//! cancel flag bound its time. Parsers check [`Control::check`] between pieces of work
//! (pages, entries, rows, elements), and subprocesses are killed when it trips, so the
//! thread that runs an extraction is handed back soon after its deadline.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::ExtractError;

/// Cancellation and deadline of one extraction, shared with whoever may cancel it.
#[derive(Debug, Clone, Default)]
pub struct Control {
    cancel: Arc<AtomicBool>,
    deadline: Option<Instant>,
}

impl Control {
    /// A control with no deadline, cancelled through `flag`.
    pub fn new(flag: Arc<AtomicBool>) -> Self {
        Control {
            cancel: flag,
            deadline: None,
        }
    }

    /// The same cancel flag with a deadline `timeout` from now (the earlier one wins).
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        let deadline = Instant::now().checked_add(timeout);
        let deadline = match (self.deadline, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Control {
            cancel: self.cancel.clone(),
            deadline,
        }
    }

    /// Asks the extraction to stop.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn is_canceled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Time left before the deadline (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// `Err` once the extraction is cancelled or past its deadline. Call it between pieces of
    /// work; it is cheap.
    pub fn check(&self) -> Result<(), ExtractError> {
        if self.is_canceled() {
            return Err(ExtractError::canceled());
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(ExtractError::timed_out(
                "extraction took longer than its time limit",
            ));
        }
        Ok(())
    }
}

/// Runs `work` with a deadline `timeout` from now, turning a panic into
/// [`ExtractError::crashed`] (the panic message goes to stderr through the panic hook, never
/// into the error).
pub fn run_guarded<T>(
    control: &Control,
    timeout: Duration,
    work: impl FnOnce(&Control) -> Result<T, ExtractError>,
) -> Result<T, ExtractError> {
    let control = control.with_timeout(timeout);
    control.check()?;
    match catch_unwind(AssertUnwindSafe(|| work(&control))) {
        Ok(result) => result,
        Err(_) => Err(ExtractError::crashed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_errors() {
        let result: Result<(), _> =
            run_guarded(&Control::default(), Duration::from_secs(5), |_| {
                panic!("boom")
            });
        assert_eq!(result.unwrap_err().code, "extractor_crashed");
    }

    #[test]
    fn deadlines_and_cancel_trip_check() {
        let control = Control::default().with_timeout(Duration::ZERO);
        assert_eq!(control.check().unwrap_err().code, "extraction_timeout");
        let control = Control::default();
        control.cancel();
        assert_eq!(control.check().unwrap_err().code, "canceled");
    }
}
