//! The stages' process-wide counters, kept in one place so the operations endpoints
//! (`/metrics`, Prometheus) export them without the stages knowing about either. Counters
//! only grow; rates are derived from a snapshot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

/// OCR work done by this process.
#[derive(Debug, Default)]
pub struct OcrCounters {
    pages_processed: AtomicU64,
    page_failures: AtomicU64,
    pages_corrected: AtomicU64,
    corrections_rejected: AtomicU64,
    /// Wall time of `ocr` stages while they recognized pages, in microseconds.
    busy_micros: AtomicU64,
}

/// A reading of [`OcrCounters`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OcrSnapshot {
    /// Pages recognized (successfully) by OCR.
    pub pages_processed: u64,
    /// Pages OCR could not read (recorded as failed, or failing their document).
    pub page_failures: u64,
    /// Pages whose language-model correction was kept.
    pub pages_corrected: u64,
    /// Corrections refused because they rewrote the page instead of fixing it.
    pub corrections_rejected: u64,
    /// Pages processed per second of OCR stage time (0 before any).
    pub pages_per_second: f64,
}

static OCR: OcrCounters = OcrCounters {
    pages_processed: AtomicU64::new(0),
    page_failures: AtomicU64::new(0),
    pages_corrected: AtomicU64::new(0),
    corrections_rejected: AtomicU64::new(0),
    busy_micros: AtomicU64::new(0),
};

/// This process's OCR counters.
pub fn ocr() -> &'static OcrCounters {
    &OCR
}

impl OcrCounters {
    pub fn page_processed(&self) {
        self.pages_processed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn page_failed(&self) {
        self.page_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn page_corrected(&self) {
        self.pages_corrected.fetch_add(1, Ordering::Relaxed);
    }

    pub fn correction_rejected(&self) {
        self.corrections_rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds the wall time an `ocr` stage spent recognizing.
    pub fn busy(&self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.busy_micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> OcrSnapshot {
        let pages = self.pages_processed.load(Ordering::Relaxed);
        let busy = self.busy_micros.load(Ordering::Relaxed) as f64 / 1e6;
        OcrSnapshot {
            pages_processed: pages,
            page_failures: self.page_failures.load(Ordering::Relaxed),
            pages_corrected: self.pages_corrected.load(Ordering::Relaxed),
            corrections_rejected: self.corrections_rejected.load(Ordering::Relaxed),
            pages_per_second: if busy > 0.0 { pages as f64 / busy } else { 0.0 },
        }
    }
}
