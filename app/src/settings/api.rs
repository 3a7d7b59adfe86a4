//! The `SHELF_API_*` section: the bind address, credentials, request and upload caps, rate
//! and stream limits, trusted proxies, connection timeouts and the API's own executors.

use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;

use super::auth::{self, Credential};
use super::reader::{BYTES, COUNT, Reader};

/// Most in-process executors `shelf api` takes (`SHELF_API_WORKERS`, `--workers`): a bound
/// that catches a mistyped count before it opens that many runs at once.
pub const MAX_API_WORKERS: usize = 256;

/// An IP network from `SHELF_API_TRUSTED_PROXY_CIDRS`: an address, or address/prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl IpNet {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            _ => ip,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(self.prefix))
                };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(self.prefix))
                };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for IpNet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("`{s}` is not an IP address or CIDR"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("`{s}` has a bad prefix length"))?,
        };
        Ok(IpNet { addr, prefix })
    }
}

#[derive(Debug, Clone)]
pub struct ApiSettings {
    pub host: String,
    pub port: u16,
    pub credentials: Vec<Credential>,
    pub max_request_bytes: u64,
    pub max_upload_bytes: u64,
    pub max_batch_files: usize,
    pub max_batch_bytes: u64,
    pub max_import_files: usize,
    pub max_import_bytes: u64,
    pub max_import_manifest_bytes: u64,
    pub max_content_chars: usize,
    pub rate_limit_per_minute: u32,
    /// IPv6 clients are one client per network of this prefix length (the rate limit, the
    /// stream cap and the audit trail's aggregation): one host usually holds a whole /64.
    pub client_ipv6_prefix: u8,
    /// Event streams one client (its credential, else its address) may hold open; 0: no cap.
    pub max_streams_per_client: usize,
    /// An event stream ends after this long with a `retry:` hint; the client resumes it with
    /// `Last-Event-ID`.
    pub stream_max_seconds: u64,
    pub audit_retention_days: u32,
    pub import_root: Option<PathBuf>,
    pub trusted_proxy_cidrs: Vec<IpNet>,
    /// A connection must deliver a complete request head within this long of opening or of
    /// its previous response (slow-header clients cannot hold connections).
    pub header_read_timeout_seconds: u64,
    /// A connection with no bytes either way for this long is closed once its response (if
    /// any) is sent.
    pub keep_alive_timeout_seconds: u64,
    /// Queue executors `shelf api` runs in its own process (`--workers` overrides): each
    /// claims queued runs like `shelf worker`. 0, the default, keeps the API to enqueueing.
    pub workers: usize,
    /// A web page session (the cookie a sign-in exchanges a key for) ends this many hours
    /// after it was opened, whatever the browser does with the cookie.
    pub session_hours: u32,
}

impl ApiSettings {
    /// Whether any API credential is configured (then every protected route needs one).
    pub fn auth_enabled(&self) -> bool {
        !self.credentials.is_empty()
    }
}

pub(super) fn parse(r: &mut Reader) -> ApiSettings {
    let credentials = auth::parse(r);
    let mut trusted_proxy_cidrs = Vec::new();
    if let Some(list) = r.optional("SHELF_API_TRUSTED_PROXY_CIDRS") {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry.parse::<IpNet>() {
                Ok(net) => trusted_proxy_cidrs.push(net),
                Err(e) => r
                    .problems
                    .push(format!("SHELF_API_TRUSTED_PROXY_CIDRS: {e}")),
            }
        }
    }
    let api = ApiSettings {
        host: r.string("SHELF_API_HOST", "127.0.0.1"),
        port: r.parse("SHELF_API_PORT", 8080, "a port number (0-65535)"),
        credentials,
        max_request_bytes: r.parse("SHELF_API_MAX_REQUEST_BYTES", 1_073_741_824, BYTES),
        max_upload_bytes: r.parse("SHELF_API_MAX_UPLOAD_BYTES", 104_857_600, BYTES),
        max_batch_files: r.parse("SHELF_API_MAX_BATCH_FILES", 100, COUNT),
        max_batch_bytes: r.parse("SHELF_API_MAX_BATCH_BYTES", 1_073_741_824, BYTES),
        max_import_files: r.parse("SHELF_API_MAX_IMPORT_FILES", 1000, COUNT),
        max_import_bytes: r.parse("SHELF_API_MAX_IMPORT_BYTES", 1_073_741_824, BYTES),
        max_import_manifest_bytes: r.parse(
            "SHELF_API_MAX_IMPORT_MANIFEST_BYTES",
            10_485_760,
            BYTES,
        ),
        max_content_chars: r.parse("SHELF_API_MAX_CONTENT_CHARS", 2_097_152, COUNT),
        rate_limit_per_minute: r.parse("SHELF_API_RATE_LIMIT_PER_MINUTE", 0, COUNT),
        client_ipv6_prefix: r.parse(
            "SHELF_API_CLIENT_IPV6_PREFIX",
            64,
            "a prefix length (1-128)",
        ),
        max_streams_per_client: r.parse("SHELF_API_MAX_STREAMS_PER_CLIENT", 8, COUNT),
        stream_max_seconds: r.parse("SHELF_API_STREAM_MAX_SECONDS", 300, COUNT),
        audit_retention_days: r.parse("SHELF_API_AUDIT_RETENTION_DAYS", 90, COUNT),
        import_root: r.optional("SHELF_API_IMPORT_ROOT").map(PathBuf::from),
        trusted_proxy_cidrs,
        header_read_timeout_seconds: r.parse("SHELF_API_HEADER_READ_TIMEOUT_SECONDS", 10, COUNT),
        keep_alive_timeout_seconds: r.parse("SHELF_API_KEEP_ALIVE_TIMEOUT_SECONDS", 75, COUNT),
        workers: r.parse("SHELF_API_WORKERS", 0, COUNT),
        session_hours: r.parse("SHELF_API_SESSION_HOURS", 12, COUNT),
    };
    r.check(
        api.workers <= MAX_API_WORKERS,
        format!("SHELF_API_WORKERS must be between 0 and {MAX_API_WORKERS}"),
    );
    r.check(
        api.header_read_timeout_seconds != 0 && api.keep_alive_timeout_seconds != 0,
        "SHELF_API_HEADER_READ_TIMEOUT_SECONDS and SHELF_API_KEEP_ALIVE_TIMEOUT_SECONDS must be at least 1",
    );
    r.check(
        (1..=128).contains(&api.client_ipv6_prefix),
        "SHELF_API_CLIENT_IPV6_PREFIX must be between 1 and 128",
    );
    // A day at most: a stream resumes seamlessly, and the deadline stays far from any
    // overflow of the clock's arithmetic.
    r.check(
        (1..=86_400).contains(&api.stream_max_seconds),
        "SHELF_API_STREAM_MAX_SECONDS must be between 1 and 86400",
    );
    // A month at most: a stolen cookie must not outlive the key's rotation by much more.
    r.check(
        (1..=720).contains(&api.session_hours),
        "SHELF_API_SESSION_HOURS must be between 1 and 720",
    );
    api
}
