//! `tracing` setup from the settings, for every command: logs to stderr (so stdout stays for
//! results) as `SHELF_LOG_FORMAT` text or JSON at `SHELF_LOG_LEVEL`, through the redacting
//! writer; and, with `SHELF_OTEL_ENABLED`, spans exported over OTLP/HTTP until [`shutdown`]
//! flushes them.

use crate::output::errln;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::runtime::Tokio;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use shelf_app::settings::{LogFormat, Settings};
use tracing_subscriber::filter::{FilterFn, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::output::{EXIT_USAGE, Failure};
use crate::redact::{RedactingMakeWriter, Redactor};

/// The exporter of this process, kept for [`shutdown`].
static PROVIDER: Mutex<Option<SdkTracerProvider>> = Mutex::new(None);

/// How long one export may take before it is abandoned.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// `quiet_default` is the level for one-shot commands when `SHELF_LOG_LEVEL` is not set; `json`
/// says how a configuration error is reported.
pub fn init(settings: &Settings, quiet_default: bool, json: bool) -> Result<(), Failure> {
    let level = if settings.logging.level_set || !quiet_default {
        settings.logging.level.clone()
    } else {
        "warn".to_string()
    };
    let filter = EnvFilter::try_new(&level).map_err(|e| {
        configuration(
            json,
            format!(
                "SHELF_LOG_LEVEL: `{level}` is not a log filter ({e}); use a level such as `info` \
             or directives such as `info,shelf_engine=debug`"
            ),
        )
    })?;
    let writer = RedactingMakeWriter::new(std::io::stderr, Redactor::new(settings.secrets()));
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(settings.logging.format == LogFormat::Text && std::io::stderr().is_terminal())
        .with_writer(writer);
    let fmt = match settings.logging.format {
        LogFormat::Json => fmt.json().with_filter(filter).boxed(),
        LogFormat::Text => fmt.with_filter(filter).boxed(),
    };
    let otel = if settings.logging.otel_enabled {
        Some(otel_layer(settings).map_err(|detail| configuration(json, detail))?)
    } else {
        None
    };
    // A second init in one process (tests) keeps the first subscriber.
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init();
    for name in &settings.unknown_variables {
        tracing::warn!(variable = %name, "unknown SHELF_ variable ignored");
    }
    Ok(())
}

/// Exports Shelf's own INFO spans (requests, queue claims, stages) and nothing else: not the
/// log events inside them (those go to the redacted log only), and not the HTTP client's spans
/// (the exporter's own requests would trace themselves).
fn otel_layer<S>(settings: &Settings) -> Result<Box<dyn Layer<S> + Send + Sync>, String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    let endpoint = traces_endpoint(
        settings
            .logging
            .otel_endpoint
            .as_deref()
            .unwrap_or_default(),
    );
    let headers: HashMap<String, String> = settings
        .logging
        .otel_headers
        .iter()
        .map(|(k, v)| (k.clone(), v.expose().to_string()))
        .collect();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(&endpoint)
        .with_headers(headers)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("SHELF_OTEL_ENDPOINT `{endpoint}`: {e}"))?;
    // The tokio batch processor: the SDK's default one runs its own thread without a reactor,
    // where the async HTTP client panics ("no reactor running") and nothing is exported.
    let processor = BatchSpanProcessor::builder(exporter, Tokio).build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(
            Resource::builder()
                .with_service_name(settings.logging.otel_service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("shelf");
    if let Ok(mut slot) = PROVIDER.lock() {
        *slot = Some(provider);
    }
    let spans_only = FilterFn::new(|meta| meta.is_span());
    let shelf_only = Targets::new().with_target("shelf", LevelFilter::INFO);
    Ok(tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(shelf_only)
        .with_filter(spans_only)
        .boxed())
}

/// `SHELF_OTEL_ENDPOINT` as the collector's base URL (`http://host:4318`, the usual form) gets
/// the traces path; a URL with a path is used as it is.
fn traces_endpoint(configured: &str) -> String {
    let trimmed = configured.trim_end_matches('/');
    let has_path = trimmed
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('/'));
    if has_path {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v1/traces")
    }
}

/// Exports the spans still buffered and stops the exporter; every command ends through here.
pub async fn shutdown() {
    let provider = PROVIDER.lock().ok().and_then(|mut slot| slot.take());
    if let Some(provider) = provider {
        // The processor's shutdown blocks on its export task, which needs this runtime free.
        let result = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = result {
            errln!("warning: exporting the last spans failed: {e}");
        }
    }
}

fn configuration(json: bool, detail: String) -> Failure {
    Failure {
        detail,
        code: "invalid_configuration".into(),
        exit: EXIT_USAGE,
        json,
    }
}

#[cfg(test)]
mod tests {
    use super::traces_endpoint;

    #[test]
    fn a_base_url_gets_the_traces_path() {
        assert_eq!(
            traces_endpoint("http://collector:4318"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_endpoint("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_endpoint("https://otel.example/custom/traces"),
            "https://otel.example/custom/traces"
        );
    }
}
