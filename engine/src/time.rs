//! Clock helpers: queue times are integer epoch milliseconds, user-facing times RFC 3339 text.

use chrono::{SecondsFormat, Utc};

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}
