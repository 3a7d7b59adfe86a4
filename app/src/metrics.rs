//! This process's metrics: one Prometheus registry holding the run and queue counters (fed by
//! the engine through [`RunHooks`](shelf_engine::RunHooks), see `hooks`), the stages' counters
//! (`shelf_stages::metrics`), the derived gauges (average queue wait, estimated LLM cost) and
//! whatever a front end registers (the API's request counters). `/metrics` (JSON) and
//! `/metrics/prometheus` (text) both read [`Metrics::gather`], so they always agree.

use std::sync::Arc;
use std::time::Duration;

use prometheus::core::Collector;
use prometheus::proto::{MetricFamily, MetricType};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
};
use prometheus::{Opts, Registry, TextEncoder};
use serde_json::{Map, Value, json};
use shelf_engine::{RunStatus, StageStatus};
use shelf_stages::metrics::Derived;

use crate::settings::Settings;

/// Buckets for work that takes from milliseconds to an hour (stages, queue waits), in seconds.
pub const LONG_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0,
];

/// The content type of the Prometheus text exposition format.
pub const PROMETHEUS_CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// The registry and the counters this crate feeds.
pub struct Metrics {
    registry: Registry,
    runs_finished: IntCounterVec,
    runs_with_warnings: IntCounter,
    stage_failures_continued: IntCounterVec,
    stage_duration: HistogramVec,
    queue_claims: IntCounter,
    queue_reclaims: IntCounter,
    queue_claim_failures: IntCounter,
    queue_wait: Histogram,
    storage_refusals: IntCounter,
    claims_paused: IntGauge,
}

/// Per-1K-token prices of the language model, for the cost estimate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TokenPrices {
    pub prompt_per_1k_usd: f64,
    pub completion_per_1k_usd: f64,
}

impl TokenPrices {
    pub fn from_settings(settings: &Settings) -> Self {
        TokenPrices {
            prompt_per_1k_usd: settings.llm.prompt_cost_per_1k_tokens_usd,
            completion_per_1k_usd: settings.llm.completion_cost_per_1k_tokens_usd,
        }
    }

    pub fn cost_usd(&self, prompt_tokens: u64, completion_tokens: u64) -> f64 {
        prompt_tokens as f64 / 1000.0 * self.prompt_per_1k_usd
            + completion_tokens as f64 / 1000.0 * self.completion_per_1k_usd
    }
}

/// A failure to add collectors to the registry: two metrics with one name.
#[derive(Debug, thiserror::Error)]
#[error("metric registration failed: {0}")]
pub struct RegisterError(#[from] prometheus::Error);

impl RegisterError {
    /// The very same collector was registered before.
    pub fn is_already_registered(&self) -> bool {
        matches!(self.0, prometheus::Error::AlreadyReg)
    }
}

// Constant names and buckets: building these cannot fail at run time.
fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric name")
}

impl Metrics {
    pub fn new(prices: TokenPrices) -> Arc<Metrics> {
        let queue_wait = Histogram::with_opts(
            HistogramOpts::new(
                "shelf_queue_wait_seconds",
                "Time from a run becoming due (queued, retry due, lease expired) to its claim.",
            )
            .buckets(LONG_BUCKETS.to_vec()),
        )
        .expect("valid metric");
        let metrics = Metrics {
            registry: Registry::new(),
            runs_finished: IntCounterVec::new(
                Opts::new(
                    "shelf_runs_finished_total",
                    "Runs that reached a terminal state in this process, by status.",
                ),
                &["status"],
            )
            .expect("valid metric"),
            runs_with_warnings: counter(
                "shelf_runs_succeeded_with_warnings_total",
                "Runs that succeeded with at least one stage failed and continued past \
                 (on_failure: continue); they are counted as succeeded too.",
            ),
            stage_failures_continued: IntCounterVec::new(
                Opts::new(
                    "shelf_stage_failures_continued_total",
                    "Stages that failed for good and were continued past (on_failure: continue), \
                     by stage kind and stable error code.",
                ),
                &["kind", "code"],
            )
            .expect("valid metric"),
            stage_duration: HistogramVec::new(
                HistogramOpts::new(
                    "shelf_stage_duration_seconds",
                    "Duration of each stage attempt, by stage name and outcome.",
                )
                .buckets(LONG_BUCKETS.to_vec()),
                &["stage", "status"],
            )
            .expect("valid metric"),
            queue_claims: counter(
                "shelf_queue_claims_total",
                "Runs claimed from the durable queue (first claims, resumptions and reclaims).",
            ),
            queue_reclaims: counter(
                "shelf_queue_reclaims_total",
                "Claims of running runs whose worker's lease had expired.",
            ),
            queue_claim_failures: counter(
                "shelf_queue_claim_failures_total",
                "Attempts to claim from the queue that failed (database busy or refusing).",
            ),
            queue_wait,
            storage_refusals: counter(
                "shelf_storage_refusals_total",
                "Uploads, batches and imports refused because a volume Shelf writes to was \
                 below SHELF_MIN_FREE_BYTES.",
            ),
            claims_paused: IntGauge::new(
                "shelf_worker_claims_paused",
                "1 while this process's workers claim no new run because a volume is below \
                 SHELF_MIN_FREE_BYTES, else 0.",
            )
            .expect("valid metric"),
        };
        // Terminal statuses start at 0, so a rate over them exists before the first run ends.
        for status in [RunStatus::Succeeded, RunStatus::Failed, RunStatus::Canceled] {
            metrics.runs_finished.with_label_values(&[status.as_str()]);
        }
        let wait = metrics.queue_wait.clone();
        let own: Vec<Box<dyn Collector>> = vec![
            Box::new(metrics.runs_finished.clone()),
            Box::new(metrics.runs_with_warnings.clone()),
            Box::new(metrics.stage_failures_continued.clone()),
            Box::new(metrics.stage_duration.clone()),
            Box::new(metrics.queue_claims.clone()),
            Box::new(metrics.queue_reclaims.clone()),
            Box::new(metrics.queue_claim_failures.clone()),
            Box::new(metrics.queue_wait.clone()),
            Box::new(metrics.storage_refusals.clone()),
            Box::new(metrics.claims_paused.clone()),
            Box::new(Derived::new(
                "shelf_queue_wait_seconds_average",
                "Average queue wait of the claims so far (0 before any).",
                move || average(wait.get_sample_sum(), wait.get_sample_count()),
            )),
            Box::new(Derived::new(
                "shelf_llm_estimated_cost_usd",
                "Estimated language-model cost of the tokens counted so far, from \
                 SHELF_LLM_PROMPT_COST_PER_1K_TOKENS_USD and \
                 SHELF_LLM_COMPLETION_COST_PER_1K_TOKENS_USD.",
                move || {
                    let (prompt, completion) = shelf_stages::metrics::llm_tokens();
                    prices.cost_usd(prompt, completion)
                },
            )),
        ];
        for collector in own.into_iter().chain(shelf_stages::metrics::collectors()) {
            // Every name above is distinct; a clash is a programming error caught by tests.
            metrics
                .registry
                .register(collector)
                .expect("distinct metric names");
        }
        Arc::new(metrics)
    }

    /// Adds a front end's collectors (the API's request counters).
    pub fn register(&self, collector: Box<dyn Collector>) -> Result<(), RegisterError> {
        Ok(self.registry.register(collector)?)
    }

    pub fn gather(&self) -> Vec<MetricFamily> {
        self.registry.gather()
    }

    /// Adds `shelf_storage_free_bytes`: the free bytes of the data directory's volume, read
    /// when the metrics are gathered (so it is never stale).
    pub fn watch_free_space(&self, space: crate::disk::DiskSpace) {
        let gauge = Derived::new(
            "shelf_storage_free_bytes",
            "Bytes free for Shelf on the data directory's volume (statvfs f_bavail), read at \
             each scrape.",
            move || space.free_bytes().map_or(0.0, |b| b as f64),
        );
        if let Err(error) = self.registry.register(Box::new(gauge)) {
            tracing::error!(%error, "free-space metric not registered");
        }
    }

    /// Adds the series of the process's limiter of language-model requests (limit, in
    /// flight, waiting, calls by outcome, push-back waits, latency).
    pub fn watch_llm_limiter(&self, limiter: &Arc<shelf_stages::provider::limiter::Limiter>) {
        for collector in limiter.collectors() {
            if let Err(error) = self.registry.register(collector) {
                tracing::error!(%error, "language-model limiter metric not registered");
            }
        }
    }

    /// An upload, batch or import refused for want of disk space.
    pub fn storage_refused(&self) {
        self.storage_refusals.inc();
    }

    /// Whether this process's workers pause claiming for want of disk space.
    pub fn set_claims_paused(&self, paused: bool) {
        self.claims_paused.set(i64::from(paused));
    }

    // ---- what the engine reports (through `DocumentHooks`) ----

    pub fn claimed(&self, reclaimed: bool, wait: Duration) {
        self.queue_claims.inc();
        if reclaimed {
            self.queue_reclaims.inc();
        }
        self.queue_wait.observe(wait.as_secs_f64());
    }

    pub fn claim_failed(&self) {
        self.queue_claim_failures.inc();
    }

    pub fn run_finished(&self, status: RunStatus) {
        self.runs_finished
            .with_label_values(&[status.as_str()])
            .inc();
    }

    pub fn run_succeeded_with_warnings(&self) {
        self.runs_with_warnings.inc();
    }

    /// A stage of `kind` failed for good with `code` and its run went on without it.
    pub fn stage_failure_continued(&self, kind: &str, code: &str) {
        self.stage_failures_continued
            .with_label_values(&[kind, code])
            .inc();
    }

    pub fn stage_finished(&self, stage: &str, status: StageStatus, duration: Duration) {
        self.stage_duration
            .with_label_values(&[stage, status.as_str()])
            .observe(duration.as_secs_f64());
    }

    // ---- the two renderings ----

    /// The Prometheus text exposition format (version 0.0.4).
    pub fn prometheus_text(&self) -> String {
        let mut out = Vec::new();
        // Writing into a Vec cannot fail, and the families come from our own registry.
        if let Err(error) = TextEncoder::new().encode(&self.gather(), &mut out) {
            tracing::error!(%error, "encoding metrics failed");
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The same families as JSON: `{"metrics": {name: {type, help, samples}}}`.
    pub fn json(&self) -> Value {
        let families: Map<String, Value> = self
            .gather()
            .iter()
            .map(|family| (family.name().to_string(), family_json(family)))
            .collect();
        json!({ "metrics": families })
    }
}

fn average(sum: f64, count: u64) -> f64 {
    if count == 0 { 0.0 } else { sum / count as f64 }
}

fn type_name(kind: MetricType) -> &'static str {
    match kind {
        MetricType::COUNTER => "counter",
        MetricType::GAUGE => "gauge",
        MetricType::HISTOGRAM => "histogram",
        MetricType::SUMMARY => "summary",
        MetricType::UNTYPED => "untyped",
    }
}

/// One family: counters and gauges have a `value` per label set; histograms their `count`,
/// `sum`, `mean` and cumulative `buckets` (`le` upper bounds, the `+Inf` one being `count`).
fn family_json(family: &MetricFamily) -> Value {
    let kind = family.get_field_type();
    let samples: Vec<Value> = family
        .get_metric()
        .iter()
        .map(|metric| {
            let labels: Map<String, Value> = metric
                .get_label()
                .iter()
                .map(|l| (l.name().to_string(), Value::from(l.value())))
                .collect();
            match kind {
                MetricType::HISTOGRAM => {
                    let h = metric.get_histogram();
                    let buckets: Vec<Value> = h
                        .get_bucket()
                        .iter()
                        .map(|b| json!({"le": b.upper_bound(), "count": b.cumulative_count()}))
                        .collect();
                    json!({
                        "labels": labels,
                        "count": h.get_sample_count(),
                        "sum": h.get_sample_sum(),
                        "mean": average(h.get_sample_sum(), h.get_sample_count()),
                        "buckets": buckets,
                    })
                }
                MetricType::GAUGE => {
                    json!({"labels": labels, "value": metric.get_gauge().get_value()})
                }
                _ => json!({"labels": labels, "value": metric.get_counter().get_value()}),
            }
        })
        .collect();
    json!({
        "type": type_name(kind),
        "help": family.help(),
        "samples": samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family<'a>(json: &'a Value, name: &str) -> &'a Value {
        &json["metrics"][name]
    }

    #[test]
    fn both_renderings_carry_the_same_counters() {
        let metrics = Metrics::new(TokenPrices::default());
        metrics.claimed(false, Duration::from_millis(500));
        metrics.claimed(true, Duration::from_millis(1500));
        metrics.claim_failed();
        metrics.run_finished(RunStatus::Succeeded);
        metrics.stage_finished("extract", StageStatus::Succeeded, Duration::from_millis(20));
        metrics.stage_failure_continued("classify", "invalid_response");
        metrics.run_succeeded_with_warnings();
        let json = metrics.json();
        assert_eq!(family(&json, "shelf_queue_claims_total")["type"], "counter");
        for (name, expected) in [
            ("shelf_queue_claims_total", 2.0),
            ("shelf_queue_reclaims_total", 1.0),
            ("shelf_queue_claim_failures_total", 1.0),
            ("shelf_queue_wait_seconds_average", 1.0),
            ("shelf_runs_succeeded_with_warnings_total", 1.0),
            ("shelf_stage_failures_continued_total", 1.0),
        ] {
            assert_eq!(
                family(&json, name)["samples"][0]["value"],
                expected,
                "{name}"
            );
        }
        let runs = family(&json, "shelf_runs_finished_total")["samples"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let count = |status: &str| {
            runs.iter()
                .find(|s| s["labels"]["status"] == status)
                .map(|s| s["value"].clone())
        };
        assert_eq!(count("succeeded"), Some(json!(1.0)));
        assert_eq!(count("failed"), Some(json!(0.0)));
        let stage = &family(&json, "shelf_stage_duration_seconds")["samples"][0];
        assert_eq!(stage["labels"]["stage"], "extract");
        assert_eq!(stage["count"], 1);
        assert!(
            stage["buckets"]
                .as_array()
                .is_some_and(|b| b.len() == LONG_BUCKETS.len())
        );

        let text = metrics.prometheus_text();
        assert!(
            text.contains("# TYPE shelf_queue_claims_total counter"),
            "{text}"
        );
        assert!(text.contains("shelf_queue_claims_total 2\n"), "{text}");
        assert!(
            text.contains(
                "shelf_stage_failures_continued_total{code=\"invalid_response\",kind=\"classify\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("shelf_queue_wait_seconds_average 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "shelf_stage_duration_seconds_count{stage=\"extract\",status=\"succeeded\"} 1"
            ),
            "{text}"
        );
        // Every family of the JSON is in the text, and no other.
        let json_names: Vec<&String> = json["metrics"]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        let text_names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        assert_eq!(json_names.len(), text_names.len());
        for name in json_names {
            assert!(text_names.contains(&name.as_str()), "{name}");
        }
    }

    #[test]
    fn storage_metrics_start_at_zero_and_follow_the_disk() {
        let metrics = Metrics::new(TokenPrices::default());
        let dir = tempfile::tempdir().expect("tempdir");
        metrics.watch_free_space(crate::disk::DiskSpace::new(vec![dir.path().into()], None));
        let json = metrics.json();
        assert_eq!(
            family(&json, "shelf_storage_refusals_total")["samples"][0]["value"],
            0.0
        );
        assert_eq!(
            family(&json, "shelf_worker_claims_paused")["samples"][0]["value"],
            0.0
        );
        let free = family(&json, "shelf_storage_free_bytes")["samples"][0]["value"]
            .as_f64()
            .unwrap_or(0.0);
        assert!(free > 0.0, "{json}");
        assert_eq!(family(&json, "shelf_storage_free_bytes")["type"], "gauge");
        metrics.storage_refused();
        metrics.set_claims_paused(true);
        let json = metrics.json();
        assert_eq!(
            family(&json, "shelf_storage_refusals_total")["samples"][0]["value"],
            1.0
        );
        assert_eq!(
            family(&json, "shelf_worker_claims_paused")["samples"][0]["value"],
            1.0
        );
    }

    #[test]
    fn the_cost_estimate_uses_both_prices() {
        let prices = TokenPrices {
            prompt_per_1k_usd: 0.5,
            completion_per_1k_usd: 1.5,
        };
        assert_eq!(prices.cost_usd(2000, 1000), 2.5);
        assert_eq!(TokenPrices::default().cost_usd(2000, 1000), 0.0);
    }

    #[test]
    fn the_model_limiter_is_exported_from_its_first_scrape() {
        use shelf_stages::provider::limiter::{LimitConfig, Limiter};
        let metrics = Metrics::new(TokenPrices::default());
        let limiter = Limiter::new(LimitConfig::new(1, 64, 16));
        metrics.watch_llm_limiter(&limiter);
        let json = metrics.json();
        for name in [
            "shelf_llm_concurrency_limit",
            "shelf_llm_in_flight",
            "shelf_llm_waiting",
            "shelf_llm_latency_p50_seconds",
            "shelf_llm_latency_p95_seconds",
            "shelf_llm_calls_total",
            "shelf_llm_pushback_wait_seconds_total",
            "shelf_llm_call_seconds",
        ] {
            assert!(!family(&json, name).is_null(), "{name} missing");
        }
        let text = metrics.prometheus_text();
        assert!(text.contains("shelf_llm_concurrency_limit 16"), "{text}");
        assert!(
            text.contains("shelf_llm_calls_total{outcome=\"refused\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn a_second_collector_of_the_same_name_is_refused() {
        let metrics = Metrics::new(TokenPrices::default());
        let again = counter("shelf_queue_claims_total", "again");
        assert!(metrics.register(Box::new(again)).is_err());
    }
}
