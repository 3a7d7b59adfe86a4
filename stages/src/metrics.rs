//! The stages' process-wide counters, kept in one place so the operations endpoints
//! (`/metrics`, Prometheus) export them without the stages knowing about either: OCR pages,
//! failures and corrections, conversion failures by error code, and provider-reported token
//! usage. The application registers [`collectors`] in its registry. Counters only grow; rates
//! are derived when the registry is read.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, IntCounter, IntCounterVec, Opts};

/// OCR work done by this process.
#[derive(Debug, Clone)]
pub struct OcrCounters {
    pages_processed: IntCounter,
    page_failures: IntCounter,
    pages_corrected: IntCounter,
    corrections_rejected: IntCounter,
    /// Wall time of `ocr` stages while they recognized pages.
    busy_seconds: Counter,
}

/// Every counter of this crate.
struct StageMetrics {
    ocr: OcrCounters,
    conversion_failures: IntCounterVec,
    llm_requests: IntCounterVec,
    llm_prompt_tokens: IntCounterVec,
    llm_completion_tokens: IntCounterVec,
}

// The names below are constants, so building the counters cannot fail at run time; a typo
// fails every test that touches metrics.
fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric name")
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric name")
}

/// The codes a conversion fails with: the extractors' own and the extract stage's. Each has
/// a series from the start (see [`collectors`]), at 0, so a dashboard or an alert on one
/// works before its first failure. A code outside the list (a database failure's) still
/// counts, from its first.
pub const CONVERSION_FAILURE_CODES: &[&str] = &[
    "converter_failed",
    "converter_unavailable",
    "document_encrypted",
    "document_too_complex",
    "extraction_timeout",
    "extractor_crashed",
    "file_too_large",
    "io_error",
    "malformed_document",
    "no_text_found",
    "pdf_encrypted",
    "source_changed",
    "unsupported_file_type",
];

static METRICS: LazyLock<StageMetrics> = LazyLock::new(|| StageMetrics {
    ocr: OcrCounters {
        pages_processed: counter("shelf_ocr_pages_total", "Pages recognized by OCR."),
        page_failures: counter(
            "shelf_ocr_page_failures_total",
            "Pages OCR could not read (recorded as failed, or failing their document).",
        ),
        pages_corrected: counter(
            "shelf_ocr_pages_corrected_total",
            "OCR pages whose language-model correction was kept.",
        ),
        corrections_rejected: counter(
            "shelf_ocr_corrections_rejected_total",
            "OCR corrections refused because they rewrote the page instead of fixing it.",
        ),
        busy_seconds: Counter::new(
            "shelf_ocr_busy_seconds_total",
            "Wall time ocr stages spent recognizing pages.",
        )
        .expect("valid metric name"),
    },
    conversion_failures: counter_vec(
        "shelf_conversion_failures_total",
        "Documents the extract stage could not convert, by error code.",
        &["code"],
    ),
    llm_requests: counter_vec(
        "shelf_llm_requests_total",
        "Language-model calls that returned an answer, by provider.",
        &["provider"],
    ),
    llm_prompt_tokens: counter_vec(
        "shelf_llm_prompt_tokens_total",
        "Prompt tokens reported by the language-model provider.",
        &["provider"],
    ),
    llm_completion_tokens: counter_vec(
        "shelf_llm_completion_tokens_total",
        "Completion tokens reported by the language-model provider.",
        &["provider"],
    ),
});

/// This process's OCR counters.
pub fn ocr() -> &'static OcrCounters {
    &METRICS.ocr
}

/// Counts a failed conversion. `code` is the stage error's stable code (a bounded set).
pub fn conversion_failed(code: &str) {
    METRICS.conversion_failures.with_label_values(&[code]).inc();
}

/// Gives `provider` its language-model series at 0 (the configured provider, at start), so
/// they exist before its first call.
pub fn declare_llm_provider(provider: &str) {
    for vec in [
        &METRICS.llm_requests,
        &METRICS.llm_prompt_tokens,
        &METRICS.llm_completion_tokens,
    ] {
        vec.with_label_values(&[provider]);
    }
}

/// Counts one answered language-model call and the tokens its provider reported.
pub fn llm_usage(provider: &str, prompt_tokens: u64, completion_tokens: u64) {
    METRICS.llm_requests.with_label_values(&[provider]).inc();
    METRICS
        .llm_prompt_tokens
        .with_label_values(&[provider])
        .inc_by(prompt_tokens);
    METRICS
        .llm_completion_tokens
        .with_label_values(&[provider])
        .inc_by(completion_tokens);
}

/// Prompt and completion tokens counted so far over every provider, for cost estimates.
pub fn llm_tokens() -> (u64, u64) {
    fn sum(vec: &IntCounterVec) -> u64 {
        vec.collect()
            .iter()
            .flat_map(|family| family.get_metric())
            .map(|m| m.get_counter().get_value() as u64)
            .sum()
    }
    (
        sum(&METRICS.llm_prompt_tokens),
        sum(&METRICS.llm_completion_tokens),
    )
}

impl OcrCounters {
    pub fn page_processed(&self) {
        self.pages_processed.inc();
    }

    pub fn page_failed(&self) {
        self.page_failures.inc();
    }

    pub fn page_corrected(&self) {
        self.pages_corrected.inc();
    }

    pub fn correction_rejected(&self) {
        self.corrections_rejected.inc();
    }

    /// Adds the wall time an `ocr` stage spent recognizing.
    pub fn busy(&self, elapsed: Duration) {
        self.busy_seconds.inc_by(elapsed.as_secs_f64());
    }

    /// Pages processed per second of OCR stage time (0 before any).
    pub fn pages_per_second(&self) -> f64 {
        let busy = self.busy_seconds.get();
        if busy > 0.0 {
            self.pages_processed.get() as f64 / busy
        } else {
            0.0
        }
    }
}

/// A gauge whose value is computed from other metrics each time the registry is read (rates,
/// averages, cost estimates), so it can never disagree with the counters it comes from.
pub struct Derived {
    gauge: Gauge,
    compute: Box<dyn Fn() -> f64 + Send + Sync>,
}

impl Derived {
    pub fn new(name: &str, help: &str, compute: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        Derived {
            gauge: Gauge::new(name, help).expect("valid metric name"),
            compute: Box::new(compute),
        }
    }
}

impl Collector for Derived {
    fn desc(&self) -> Vec<&Desc> {
        self.gauge.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.gauge.set((self.compute)());
        self.gauge.collect()
    }
}

/// This crate's collectors, for an application registry. The counters are process-wide:
/// registering them in several registries shares their values. The known conversion failure
/// codes have their series from here on, at 0.
pub fn collectors() -> Vec<Box<dyn Collector>> {
    let m = &*METRICS;
    for code in CONVERSION_FAILURE_CODES {
        m.conversion_failures.with_label_values(&[code]);
    }
    vec![
        Box::new(m.ocr.pages_processed.clone()),
        Box::new(m.ocr.page_failures.clone()),
        Box::new(m.ocr.pages_corrected.clone()),
        Box::new(m.ocr.corrections_rejected.clone()),
        Box::new(m.ocr.busy_seconds.clone()),
        Box::new(Derived::new(
            "shelf_ocr_pages_per_second",
            "Pages recognized per second of ocr stage time (0 before any).",
            || ocr().pages_per_second(),
        )),
        Box::new(m.conversion_failures.clone()),
        Box::new(m.llm_requests.clone()),
        Box::new(m.llm_prompt_tokens.clone()),
        Box::new(m.llm_completion_tokens.clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_collector_registers_once_under_its_own_name() {
        let registry = prometheus::Registry::new();
        for collector in collectors() {
            registry.register(collector).expect("register");
        }
        llm_usage("test-provider", 7, 3);
        conversion_failed("test_code");
        let names: Vec<String> = registry
            .gather()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        for name in [
            "shelf_ocr_pages_total",
            "shelf_ocr_pages_per_second",
            "shelf_conversion_failures_total",
            "shelf_llm_prompt_tokens_total",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
        }
        let (prompt, completion) = llm_tokens();
        assert!(prompt >= 7 && completion >= 3, "{prompt} {completion}");
    }

    #[test]
    fn known_label_values_have_series_before_anything_is_counted() {
        let registry = prometheus::Registry::new();
        for collector in collectors() {
            registry.register(collector).expect("register");
        }
        declare_llm_provider("declared-provider");
        let families = registry.gather();
        let labels_of = |name: &str| -> Vec<String> {
            families
                .iter()
                .filter(|f| f.name() == name)
                .flat_map(|f| f.get_metric())
                .flat_map(|m| m.get_label())
                .map(|l| l.value().to_string())
                .collect()
        };
        let codes = labels_of("shelf_conversion_failures_total");
        for code in CONVERSION_FAILURE_CODES {
            assert!(codes.iter().any(|c| c == code), "{code} missing: {codes:?}");
        }
        for name in [
            "shelf_llm_requests_total",
            "shelf_llm_prompt_tokens_total",
            "shelf_llm_completion_tokens_total",
        ] {
            let providers = labels_of(name);
            assert!(
                providers.iter().any(|p| p == "declared-provider"),
                "{name}: {providers:?}"
            );
        }
    }
}
