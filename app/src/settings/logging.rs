//! The logs and tracing section: the log format (an enum, parsed here once) and filter, and
//! OpenTelemetry span export with its secret headers.

use serde::Serialize;

use super::auth::Secret;
use super::reader::Reader;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(Debug, Clone)]
pub struct LoggingSettings {
    pub format: LogFormat,
    pub level: String,
    /// Whether `SHELF_LOG_LEVEL` was set; one-shot commands log less by default.
    pub level_set: bool,
    pub otel_enabled: bool,
    pub otel_endpoint: Option<String>,
    pub otel_headers: Vec<(String, Secret)>,
    pub otel_service_name: String,
}

pub(super) fn parse(r: &mut Reader) -> LoggingSettings {
    let mut otel_headers = Vec::new();
    if let Some(list) = r.optional("SHELF_OTEL_HEADERS") {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    otel_headers.push((k.trim().to_string(), Secret::new(v.trim())))
                }
                _ => r
                    .problems
                    .push("SHELF_OTEL_HEADERS: expected comma-separated key=value pairs".into()),
            }
        }
    }
    let format = r.choice(
        "SHELF_LOG_FORMAT",
        LogFormat::Text,
        &[("json", LogFormat::Json), ("text", LogFormat::Text)],
    );
    let level = r.raw("SHELF_LOG_LEVEL");
    let logging = LoggingSettings {
        format,
        level_set: level.is_some(),
        level: level.unwrap_or("info").to_string(),
        otel_enabled: r.bool("SHELF_OTEL_ENABLED", false),
        otel_endpoint: r.optional("SHELF_OTEL_ENDPOINT"),
        otel_headers,
        otel_service_name: r.string("SHELF_OTEL_SERVICE_NAME", "shelf"),
    };
    r.check(
        !logging.otel_enabled || logging.otel_endpoint.is_some(),
        "SHELF_OTEL_ENABLED=true needs SHELF_OTEL_ENDPOINT",
    );
    logging
}
