//! `tracing` setup from the settings: `SHELF_LOG_FORMAT` (text or json) and `SHELF_LOG_LEVEL`,
//! to stderr so stdout stays for results.

use std::io::IsTerminal;

use shelf_app::settings::{LogFormat, Settings};
use tracing_subscriber::EnvFilter;

/// `quiet_default` is the level for one-shot commands when `SHELF_LOG_LEVEL` is not set.
pub fn init(settings: &Settings, quiet_default: bool) {
    let level = if settings.log_level_set || !quiet_default {
        settings.log_level.clone()
    } else {
        "warn".to_string()
    };
    let filter = EnvFilter::try_new(&level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match settings.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    for name in &settings.unknown_variables {
        tracing::warn!(variable = %name, "unknown SHELF_ variable ignored");
    }
}
