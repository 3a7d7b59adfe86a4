//! The one typed configuration of Shelf, built once from `SHELF_*` variables. Parsing takes the
//! variables as input (tests never touch the process environment), reports every bad variable
//! at once, and keeps secrets in a wrapper that never prints.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A secret value: `Debug` and `Display` print `[redacted]`, and it is never serialized.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// A database URL, or any text that may hold one (a driver's error), with every form of
/// password in it replaced by `***`: for `/config`, `--json`, messages and logs.
pub use shelf_engine::secrets::without_password;

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Read,
    Write,
}

/// A configured API credential: a key, or the SHA-256 of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    Key { scope: Scope, key: Secret },
    Hash { scope: Scope, sha256: [u8; 32] },
}

impl Credential {
    pub fn scope(&self) -> Scope {
        match self {
            Credential::Key { scope, .. } | Credential::Hash { scope, .. } => *scope,
        }
    }

    /// The SHA-256 every comparison uses, so keys and hashes compare the same constant-time way.
    pub fn digest(&self) -> [u8; 32] {
        match self {
            Credential::Key { key, .. } => Sha256::digest(key.expose().as_bytes()).into(),
            Credential::Hash { sha256, .. } => *sha256,
        }
    }
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LlmProvider {
    GenericCompatible,
    Mock,
    Local,
}

impl LlmProvider {
    /// Runs a worker executes at once unless `SHELF_WORKER_CONCURRENCY` says otherwise. With
    /// the in-process providers a run is CPU and SQLite work in short steps; four at once keep
    /// two cores busy while each waits for the single writer (docs/PERFORMANCE.md, Throughput:
    /// 2 → 4 raised runs/s by about a fifth). A remote model's stages wait on the network and
    /// on the provider's rate limits, which the operator knows; two stays their default.
    pub fn default_worker_concurrency(self) -> usize {
        match self {
            LlmProvider::Mock | LlmProvider::Local => 4,
            LlmProvider::GenericCompatible => 2,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Json,
    Text,
}

/// Most in-process executors `shelf api` takes (`SHELF_API_WORKERS`, `--workers`): a bound
/// that catches a mistyped count before it opens that many runs at once.
pub const MAX_API_WORKERS: usize = 256;

#[derive(Debug, Clone)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub database_path: PathBuf,
    /// `SHELF_DATABASE_URL`: a `postgres://` URL selects PostgreSQL instead of the SQLite file
    /// at `database_path` (it may hold a password, so it is a secret).
    pub database_url: Option<Secret>,
    /// The passwords `database_url` holds, in every form (`shelf_engine::secrets`): the log
    /// writer removes them wherever they appear.
    pub database_passwords: Vec<Secret>,
    /// The pool size on either backend (`SHELF_DATABASE_MAX_CONNECTIONS`).
    pub database_max_connections: u32,
    /// `SHELF_DATABASE_START_CHECK_MAX_BYTES`: `shelf api`, `shelf worker` and `shelf import`
    /// run `PRAGMA quick_check` at start on a SQLite file up to this size (0: never).
    pub database_start_check_max_bytes: u64,
    pub job_backend: String,
    pub pipeline: String,
    pub pipelines_dir: Option<PathBuf>,

    pub worker_concurrency: usize,
    pub worker_lease_seconds: u64,
    pub worker_heartbeat_ms: u64,
    pub worker_poll_ms: u64,
    pub worker_max_reclaims: u32,
    /// Runs kept per document (`SHELF_RUN_RETENTION`, at least 1): older finished runs are
    /// pruned with their texts, page records and events, except the latest succeeded run and
    /// the retry chains of runs that stay (`crate::retention`).
    pub run_retention: u32,
    /// `SHELF_MIN_FREE_BYTES`: below this many free bytes on a volume Shelf writes to, uploads
    /// and imports are refused and workers claim no new run. `None` (unset): 1 GiB or 5% of
    /// the volume, whichever is smaller (`crate::disk::floor`); `Some(0)` turns the check off.
    pub min_free_bytes: Option<u64>,
    /// `SHELF_READY_FULL_CHECK_SECONDS`: `/ready` runs the full `PRAGMA quick_check` at most
    /// this often and reuses its verdict in between; 0 runs it on every call.
    pub ready_full_check_seconds: u64,

    pub llm_provider: LlmProvider,
    pub llm_model: String,
    pub llm_base_url: Option<String>,
    pub llm_api_key_env: String,
    pub llm_api_key: Option<Secret>,
    pub llm_timeout_seconds: u64,
    pub llm_max_concurrency: usize,
    pub llm_max_prompt_chars: usize,
    pub llm_max_response_chars: usize,
    pub llm_prompt_cost_per_1k_tokens_usd: f64,
    pub llm_completion_cost_per_1k_tokens_usd: f64,
    pub llm_mock_delay_ms: u64,
    pub cleaning_prompt_version: String,
    pub classification_prompt_version: String,
    pub chunk_target_chars: usize,
    pub chunk_overlap_chars: usize,
    pub extract_max_bytes: u64,
    pub extract_timeout_seconds: u64,
    pub extract_cache: bool,

    pub ocr_timeout_seconds: u64,
    /// Tesseract languages, `+`-joined (`eng`, `eng+deu`); each needs its language pack.
    pub ocr_languages: String,
    pub ocr_preserve_page_images: bool,
    pub ocr_rotation_retry: bool,
    pub ocr_pdf_dpi: u32,
    pub ocr_pdf_max_pages: u32,
    pub ocr_llm_correction: String,
    pub ocr_llm_model: String,
    pub ocr_low_confidence_threshold: f64,
    pub ocr_page_concurrency: usize,
    pub ocr_fail_on_page_error: bool,
    pub universal_max_input_bytes: u64,
    pub universal_timeout_seconds: u64,

    pub api_host: String,
    pub api_port: u16,
    pub api_credentials: Vec<Credential>,
    pub api_max_request_bytes: u64,
    pub api_max_upload_bytes: u64,
    pub api_max_batch_files: usize,
    pub api_max_batch_bytes: u64,
    pub api_max_import_files: usize,
    pub api_max_import_bytes: u64,
    pub api_max_import_manifest_bytes: u64,
    pub api_max_content_chars: usize,
    pub api_rate_limit_per_minute: u32,
    /// IPv6 clients are one client per network of this prefix length (the rate limit, the
    /// stream cap and the audit trail's aggregation): one host usually holds a whole /64.
    pub api_client_ipv6_prefix: u8,
    /// Event streams one client (its credential, else its address) may hold open; 0: no cap.
    pub api_max_streams_per_client: usize,
    /// An event stream ends after this long with a `retry:` hint; the client resumes it with
    /// `Last-Event-ID`.
    pub api_stream_max_seconds: u64,
    pub api_audit_retention_days: u32,
    pub api_import_root: Option<PathBuf>,
    pub api_trusted_proxy_cidrs: Vec<IpNet>,
    /// A connection must deliver a complete request head within this long of opening or of
    /// its previous response (slow-header clients cannot hold connections).
    pub api_header_read_timeout_seconds: u64,
    /// A connection with no bytes either way for this long is closed once its response (if
    /// any) is sent.
    pub api_keep_alive_timeout_seconds: u64,
    /// Queue executors `shelf api` runs in its own process (`--workers` overrides): each
    /// claims queued runs like `shelf worker`. 0, the default, keeps the API to enqueueing.
    pub api_workers: usize,

    pub log_format: LogFormat,
    pub log_level: String,
    /// Whether `SHELF_LOG_LEVEL` was set; one-shot commands log less by default.
    pub log_level_set: bool,
    pub otel_enabled: bool,
    pub otel_endpoint: Option<String>,
    pub otel_headers: Vec<(String, Secret)>,
    pub otel_service_name: String,

    /// `SHELF_*` variables that name no setting (likely typos), reported as warnings.
    pub unknown_variables: Vec<String>,
}

/// Every bad variable, each with what was expected.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid configuration:\n  {}", .problems.join("\n  "))]
pub struct ConfigError {
    pub problems: Vec<String>,
}

struct Reader<'a> {
    vars: &'a HashMap<String, String>,
    used: Vec<&'static str>,
    problems: Vec<String>,
}

impl<'a> Reader<'a> {
    fn raw(&mut self, key: &'static str) -> Option<&'a str> {
        self.used.push(key);
        self.vars
            .get(key)
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
    }

    fn string(&mut self, key: &'static str, default: &str) -> String {
        self.raw(key).unwrap_or(default).to_string()
    }

    fn optional(&mut self, key: &'static str) -> Option<String> {
        self.raw(key).map(str::to_string)
    }

    fn parse<T: FromStr>(&mut self, key: &'static str, default: T, expected: &str) -> T {
        match self.raw(key) {
            None => default,
            Some(text) => match text.replace('_', "").parse() {
                Ok(v) => v,
                Err(_) => {
                    self.problems
                        .push(format!("{key}={text}: expected {expected}"));
                    default
                }
            },
        }
    }

    fn bool(&mut self, key: &'static str, default: bool) -> bool {
        match self.raw(key).map(|s| s.to_ascii_lowercase()) {
            None => default,
            Some(v) => match v.as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => {
                    self.problems
                        .push(format!("{key}={v}: expected true or false"));
                    default
                }
            },
        }
    }

    fn one_of(&mut self, key: &'static str, default: &str, allowed: &[&str]) -> String {
        let value = self.string(key, default);
        if !allowed.contains(&value.as_str()) {
            self.problems.push(format!(
                "{key}={value}: expected one of {}",
                allowed.join(", ")
            ));
            return default.to_string();
        }
        value
    }
}

fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let bytes = hex::decode(text.trim().to_ascii_lowercase()).ok()?;
    bytes.try_into().ok()
}

/// `read:<x>` / `write:<x>` / `<x>` (write).
fn split_scope(entry: &str) -> (Scope, &str) {
    if let Some(rest) = entry.strip_prefix("read:") {
        (Scope::Read, rest)
    } else if let Some(rest) = entry.strip_prefix("write:") {
        (Scope::Write, rest)
    } else {
        (Scope::Write, entry)
    }
}

fn default_data_dir(vars: &HashMap<String, String>) -> PathBuf {
    if let Some(xdg) = vars.get("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("shelf");
    }
    match vars.get("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/share/shelf"),
        None => PathBuf::from("shelf-data"),
    }
}

impl Settings {
    /// The database this process opens: PostgreSQL when `SHELF_DATABASE_URL` is set, else the
    /// SQLite file.
    pub fn database_target(&self) -> shelf_engine::db::DatabaseTarget {
        match &self.database_url {
            Some(url) => shelf_engine::db::DatabaseTarget::Postgres(url.expose().to_string()),
            None => shelf_engine::db::DatabaseTarget::Sqlite(self.database_path.clone()),
        }
    }

    /// Where the database is, for messages: the file, or the URL without its password.
    pub fn database_display(&self) -> String {
        match &self.database_url {
            Some(url) => without_password(url.expose()),
            None => self.database_path.display().to_string(),
        }
    }

    pub fn is_postgres(&self) -> bool {
        self.database_url.is_some()
    }

    /// Settings from the process environment. Only binaries call this.
    pub fn from_process_env() -> Result<Settings, ConfigError> {
        let vars: HashMap<String, String> = std::env::vars().collect();
        Settings::from_vars(&vars)
    }

    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Settings, ConfigError> {
        let mut r = Reader {
            vars,
            used: Vec::new(),
            problems: Vec::new(),
        };
        let data_dir = r
            .optional("SHELF_DATA_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| default_data_dir(vars));
        let database_path = r
            .optional("SHELF_DATABASE_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| data_dir.join("shelf.sqlite"));
        let database_url = r
            .optional("SHELF_DATABASE_URL")
            .map(|v| Secret::new(v.trim()));
        if let Some(url) = &database_url
            && !is_postgres_url(url.expose())
        {
            r.problems.push(
                "SHELF_DATABASE_URL: expected a postgres:// or postgresql:// URL (leave it unset \
                 for the SQLite file at SHELF_DATABASE_PATH)"
                    .into(),
            );
        }
        let default_job_backend = if database_url.is_some() {
            "postgres"
        } else {
            "sqlite"
        };
        let bytes = "a whole number of bytes";
        let count = "a whole number";

        let llm_provider = match r
            .one_of(
                "SHELF_LLM_PROVIDER",
                "generic-compatible",
                &["generic-compatible", "mock", "local"],
            )
            .as_str()
        {
            "mock" => LlmProvider::Mock,
            "local" => LlmProvider::Local,
            _ => LlmProvider::GenericCompatible,
        };
        let llm_api_key_env = r.string("SHELF_LLM_API_KEY_ENV", "OPENAI_API_KEY");
        let llm_api_key = vars
            .get(&llm_api_key_env)
            .filter(|v| !v.trim().is_empty())
            .map(|v| Secret::new(v.trim()));

        let mut api_credentials = Vec::new();
        if let Some(key) = r.optional("SHELF_API_KEY") {
            api_credentials.push(Credential::Key {
                scope: Scope::Write,
                key: Secret::new(key),
            });
        }
        if let Some(list) = r.optional("SHELF_API_KEYS") {
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let (scope, key) = split_scope(entry);
                if key.is_empty() {
                    r.problems
                        .push("SHELF_API_KEYS: an entry has a scope but no key".into());
                } else {
                    api_credentials.push(Credential::Key {
                        scope,
                        key: Secret::new(key),
                    });
                }
            }
        }
        if let Some(hash) = r.optional("SHELF_API_KEY_SHA256") {
            match parse_sha256(&hash) {
                Some(sha256) => api_credentials.push(Credential::Hash {
                    scope: Scope::Write,
                    sha256,
                }),
                None => r
                    .problems
                    .push("SHELF_API_KEY_SHA256: expected 64 hexadecimal digits".into()),
            }
        }
        if let Some(list) = r.optional("SHELF_API_KEY_HASHES") {
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let (scope, hash) = split_scope(entry);
                match parse_sha256(hash) {
                    Some(sha256) => api_credentials.push(Credential::Hash { scope, sha256 }),
                    None => r.problems.push(
                        "SHELF_API_KEY_HASHES: each entry must be [read:|write:]<64 hex digits>"
                            .into(),
                    ),
                }
            }
        }
        let mut api_trusted_proxy_cidrs = Vec::new();
        if let Some(list) = r.optional("SHELF_API_TRUSTED_PROXY_CIDRS") {
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                match entry.parse::<IpNet>() {
                    Ok(net) => api_trusted_proxy_cidrs.push(net),
                    Err(e) => r
                        .problems
                        .push(format!("SHELF_API_TRUSTED_PROXY_CIDRS: {e}")),
                }
            }
        }
        let mut otel_headers = Vec::new();
        if let Some(list) = r.optional("SHELF_OTEL_HEADERS") {
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                match entry.split_once('=') {
                    Some((k, v)) if !k.trim().is_empty() => {
                        otel_headers.push((k.trim().to_string(), Secret::new(v.trim())))
                    }
                    _ => r.problems.push(
                        "SHELF_OTEL_HEADERS: expected comma-separated key=value pairs".into(),
                    ),
                }
            }
        }
        let log_format = match r
            .one_of("SHELF_LOG_FORMAT", "text", &["json", "text"])
            .as_str()
        {
            "json" => LogFormat::Json,
            _ => LogFormat::Text,
        };

        let settings = Settings {
            database_max_connections: r.parse("SHELF_DATABASE_MAX_CONNECTIONS", 8, count),
            database_start_check_max_bytes: r.parse(
                "SHELF_DATABASE_START_CHECK_MAX_BYTES",
                64 * 1024 * 1024,
                bytes,
            ),
            job_backend: r.one_of(
                "SHELF_JOB_BACKEND",
                default_job_backend,
                &[default_job_backend],
            ),
            pipeline: r.string("SHELF_PIPELINE", "default"),
            pipelines_dir: r.optional("SHELF_PIPELINES_DIR").map(PathBuf::from),
            worker_concurrency: r.parse(
                "SHELF_WORKER_CONCURRENCY",
                llm_provider.default_worker_concurrency(),
                count,
            ),
            worker_lease_seconds: r.parse("SHELF_WORKER_LEASE_SECONDS", 30, count),
            worker_heartbeat_ms: r.parse("SHELF_WORKER_HEARTBEAT_MS", 1000, count),
            worker_poll_ms: r.parse("SHELF_WORKER_POLL_MS", 100, count),
            worker_max_reclaims: r.parse("SHELF_WORKER_MAX_RECLAIMS", 3, count),
            run_retention: r.parse("SHELF_RUN_RETENTION", 3, count),
            // Unset means the default floor, which depends on the volume (`crate::disk::floor`).
            min_free_bytes: r
                .raw("SHELF_MIN_FREE_BYTES")
                .is_some()
                .then(|| r.parse("SHELF_MIN_FREE_BYTES", 0, bytes)),
            ready_full_check_seconds: r.parse("SHELF_READY_FULL_CHECK_SECONDS", 600, count),
            llm_provider,
            llm_model: r.string("SHELF_LLM_MODEL", "gpt-4o-mini"),
            llm_base_url: r.optional("SHELF_LLM_BASE_URL"),
            llm_api_key_env,
            llm_api_key,
            llm_timeout_seconds: r.parse("SHELF_LLM_TIMEOUT_SECONDS", 120, count),
            llm_max_concurrency: r.parse("SHELF_LLM_MAX_CONCURRENCY", 8, count),
            llm_max_prompt_chars: r.parse("SHELF_LLM_MAX_PROMPT_CHARS", 2_097_152, count),
            llm_max_response_chars: r.parse("SHELF_LLM_MAX_RESPONSE_CHARS", 2_097_152, count),
            llm_prompt_cost_per_1k_tokens_usd: r.parse(
                "SHELF_LLM_PROMPT_COST_PER_1K_TOKENS_USD",
                0.0,
                "a number",
            ),
            llm_completion_cost_per_1k_tokens_usd: r.parse(
                "SHELF_LLM_COMPLETION_COST_PER_1K_TOKENS_USD",
                0.0,
                "a number",
            ),
            llm_mock_delay_ms: r.parse("SHELF_LLM_MOCK_DELAY_MS", 0, count),
            cleaning_prompt_version: r.one_of(
                "SHELF_CLEANING_PROMPT_VERSION",
                "cmos_v4",
                &["cmos_v1", "cmos_v2", "cmos_v3", "cmos_v4"],
            ),
            classification_prompt_version: r.one_of(
                "SHELF_CLASSIFICATION_PROMPT_VERSION",
                "dewey_v2",
                &["dewey_v1", "dewey_v2"],
            ),
            chunk_target_chars: r.parse("SHELF_CHUNK_TARGET_CHARS", 12_000, count),
            chunk_overlap_chars: r.parse("SHELF_CHUNK_OVERLAP_CHARS", 800, count),
            extract_max_bytes: r.parse("SHELF_EXTRACT_MAX_BYTES", 104_857_600, bytes),
            extract_timeout_seconds: r.parse("SHELF_EXTRACT_TIMEOUT_SECONDS", 300, count),
            extract_cache: r.bool("SHELF_EXTRACT_CACHE", true),
            ocr_timeout_seconds: r.parse("SHELF_OCR_TIMEOUT_SECONDS", 120, count),
            ocr_languages: r.string("SHELF_OCR_LANGUAGES", "eng"),
            ocr_preserve_page_images: r.bool("SHELF_OCR_PRESERVE_PAGE_IMAGES", false),
            ocr_rotation_retry: r.bool("SHELF_OCR_ROTATION_RETRY", false),
            ocr_pdf_dpi: r.parse("SHELF_OCR_PDF_DPI", 200, count),
            ocr_pdf_max_pages: r.parse("SHELF_OCR_PDF_MAX_PAGES", 1000, count),
            ocr_llm_correction: r.one_of(
                "SHELF_OCR_LLM_CORRECTION",
                "always",
                &["always", "low-confidence", "never"],
            ),
            ocr_llm_model: r.string("SHELF_OCR_LLM_MODEL", ""),
            ocr_low_confidence_threshold: r.parse(
                "SHELF_OCR_LOW_CONFIDENCE_THRESHOLD",
                85.0,
                "a number",
            ),
            ocr_page_concurrency: r.parse("SHELF_OCR_PAGE_CONCURRENCY", 2, count),
            ocr_fail_on_page_error: r.bool("SHELF_OCR_FAIL_ON_PAGE_ERROR", true),
            universal_max_input_bytes: r.parse(
                "SHELF_UNIVERSAL_MAX_INPUT_BYTES",
                52_428_800,
                bytes,
            ),
            universal_timeout_seconds: r.parse("SHELF_UNIVERSAL_TIMEOUT_SECONDS", 120, count),
            api_host: r.string("SHELF_API_HOST", "127.0.0.1"),
            api_port: r.parse("SHELF_API_PORT", 8080, "a port number (0-65535)"),
            api_credentials,
            api_max_request_bytes: r.parse("SHELF_API_MAX_REQUEST_BYTES", 1_073_741_824, bytes),
            api_max_upload_bytes: r.parse("SHELF_API_MAX_UPLOAD_BYTES", 104_857_600, bytes),
            api_max_batch_files: r.parse("SHELF_API_MAX_BATCH_FILES", 100, count),
            api_max_batch_bytes: r.parse("SHELF_API_MAX_BATCH_BYTES", 1_073_741_824, bytes),
            api_max_import_files: r.parse("SHELF_API_MAX_IMPORT_FILES", 1000, count),
            api_max_import_bytes: r.parse("SHELF_API_MAX_IMPORT_BYTES", 1_073_741_824, bytes),
            api_max_import_manifest_bytes: r.parse(
                "SHELF_API_MAX_IMPORT_MANIFEST_BYTES",
                10_485_760,
                bytes,
            ),
            api_max_content_chars: r.parse("SHELF_API_MAX_CONTENT_CHARS", 2_097_152, count),
            api_rate_limit_per_minute: r.parse("SHELF_API_RATE_LIMIT_PER_MINUTE", 0, count),
            api_client_ipv6_prefix: r.parse(
                "SHELF_API_CLIENT_IPV6_PREFIX",
                64,
                "a prefix length (1-128)",
            ),
            api_max_streams_per_client: r.parse("SHELF_API_MAX_STREAMS_PER_CLIENT", 8, count),
            api_stream_max_seconds: r.parse("SHELF_API_STREAM_MAX_SECONDS", 300, count),
            api_audit_retention_days: r.parse("SHELF_API_AUDIT_RETENTION_DAYS", 90, count),
            api_import_root: r.optional("SHELF_API_IMPORT_ROOT").map(PathBuf::from),
            api_trusted_proxy_cidrs,
            api_header_read_timeout_seconds: r.parse(
                "SHELF_API_HEADER_READ_TIMEOUT_SECONDS",
                10,
                count,
            ),
            api_keep_alive_timeout_seconds: r.parse(
                "SHELF_API_KEEP_ALIVE_TIMEOUT_SECONDS",
                75,
                count,
            ),
            api_workers: r.parse("SHELF_API_WORKERS", 0, count),
            log_format,
            log_level_set: vars
                .get("SHELF_LOG_LEVEL")
                .is_some_and(|v| !v.trim().is_empty()),
            log_level: r.string("SHELF_LOG_LEVEL", "info"),
            otel_enabled: r.bool("SHELF_OTEL_ENABLED", false),
            otel_endpoint: r.optional("SHELF_OTEL_ENDPOINT"),
            otel_headers,
            otel_service_name: r.string("SHELF_OTEL_SERVICE_NAME", "shelf"),
            data_dir,
            database_path,
            database_passwords: database_url
                .as_ref()
                .map(|url| shelf_engine::secrets::passwords_in(url.expose()))
                .unwrap_or_default()
                .into_iter()
                .map(Secret::new)
                .collect(),
            database_url,
            unknown_variables: Vec::new(),
        };
        let mut problems = r.problems;
        if settings.worker_concurrency == 0 {
            problems.push("SHELF_WORKER_CONCURRENCY must be at least 1".into());
        }
        if settings.api_workers > MAX_API_WORKERS {
            problems.push(format!(
                "SHELF_API_WORKERS must be between 0 and {MAX_API_WORKERS}"
            ));
        }
        if settings.run_retention == 0 {
            problems.push(
                "SHELF_RUN_RETENTION must be at least 1 (the latest run of a document stays)"
                    .into(),
            );
        }
        if settings.llm_max_concurrency == 0 {
            problems.push("SHELF_LLM_MAX_CONCURRENCY must be at least 1".into());
        }
        if settings.worker_lease_seconds == 0 {
            problems.push("SHELF_WORKER_LEASE_SECONDS must be at least 1".into());
        }
        if settings.worker_heartbeat_ms == 0
            || settings.worker_heartbeat_ms >= settings.worker_lease_seconds.saturating_mul(1000)
        {
            problems.push(
                "SHELF_WORKER_HEARTBEAT_MS must be above 0 and below SHELF_WORKER_LEASE_SECONDS"
                    .into(),
            );
        }
        if settings.chunk_target_chars < 100
            || settings.chunk_overlap_chars >= settings.chunk_target_chars
        {
            problems.push(
                "SHELF_CHUNK_TARGET_CHARS must be at least 100 and above SHELF_CHUNK_OVERLAP_CHARS"
                    .into(),
            );
        }
        if settings.api_header_read_timeout_seconds == 0
            || settings.api_keep_alive_timeout_seconds == 0
        {
            problems.push(
                "SHELF_API_HEADER_READ_TIMEOUT_SECONDS and SHELF_API_KEEP_ALIVE_TIMEOUT_SECONDS must be at least 1"
                    .into(),
            );
        }
        if !(1..=128).contains(&settings.api_client_ipv6_prefix) {
            problems.push("SHELF_API_CLIENT_IPV6_PREFIX must be between 1 and 128".into());
        }
        // A day at most: a stream resumes seamlessly, and the deadline stays far from any
        // overflow of the clock's arithmetic.
        if !(1..=86_400).contains(&settings.api_stream_max_seconds) {
            problems.push("SHELF_API_STREAM_MAX_SECONDS must be between 1 and 86400".into());
        }
        if settings.ocr_timeout_seconds == 0 || settings.ocr_page_concurrency == 0 {
            problems.push(
                "SHELF_OCR_TIMEOUT_SECONDS and SHELF_OCR_PAGE_CONCURRENCY must be at least 1"
                    .into(),
            );
        }
        if !(50..=1200).contains(&settings.ocr_pdf_dpi) {
            problems.push("SHELF_OCR_PDF_DPI must be between 50 and 1200".into());
        }
        if !(0.0..=100.0).contains(&settings.ocr_low_confidence_threshold) {
            problems.push("SHELF_OCR_LOW_CONFIDENCE_THRESHOLD must be between 0 and 100".into());
        }
        let language =
            |l: &str| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !settings.ocr_languages.split('+').all(language) {
            problems.push(format!(
                "SHELF_OCR_LANGUAGES={}: expected Tesseract language codes joined by + (eng, eng+deu)",
                settings.ocr_languages
            ));
        }
        if settings.otel_enabled && settings.otel_endpoint.is_none() {
            problems.push("SHELF_OTEL_ENABLED=true needs SHELF_OTEL_ENDPOINT".into());
        }
        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        let mut unknown: Vec<String> = vars
            .keys()
            .filter(|k| k.starts_with("SHELF_") && !r.used.contains(&k.as_str()))
            .cloned()
            .collect();
        unknown.sort();
        Ok(Settings {
            unknown_variables: unknown,
            ..settings
        })
    }

    /// Whether any API credential is configured (then every protected route needs one).
    pub fn auth_enabled(&self) -> bool {
        !self.api_credentials.is_empty()
    }

    /// Every secret value the settings hold (API keys, the provider credential, OTLP header
    /// values), for the log redactor to remove wherever one would appear.
    pub fn secrets(&self) -> Vec<&str> {
        let keys = self.api_credentials.iter().filter_map(|c| match c {
            Credential::Key { key, .. } => Some(key.expose()),
            Credential::Hash { .. } => None,
        });
        keys.chain(self.llm_api_key.iter().map(Secret::expose))
            .chain(self.otel_headers.iter().map(|(_, v)| v.expose()))
            .chain(self.database_passwords.iter().map(Secret::expose))
            .collect()
    }

    /// The effective settings for `/config`, secrets excluded: keys show only how many there
    /// are, the provider credential only whether it is set.
    pub fn redacted(&self) -> Value {
        let scopes: BTreeMap<&str, usize> =
            self.api_credentials
                .iter()
                .fold(BTreeMap::new(), |mut m, c| {
                    *m.entry(match c.scope() {
                        Scope::Read => "read",
                        Scope::Write => "write",
                    })
                    .or_default() += 1;
                    m
                });
        json!({
            "storage": {
                "data_dir": self.data_dir,
                "database_path": self.database_path,
                "database_url": self.database_url.as_ref().map(|u| without_password(u.expose())),
                "database_backend": if self.database_url.is_some() { "postgres" } else { "sqlite" },
                "job_backend": self.job_backend,
                "run_retention": self.run_retention,
                "min_free_bytes": self.min_free_bytes,
                "ready_full_check_seconds": self.ready_full_check_seconds,
            },
            "pipelines": {
                "pipeline": self.pipeline,
                "pipelines_dir": self.pipelines_dir,
            },
            "worker": {
                "concurrency": self.worker_concurrency,
                "lease_seconds": self.worker_lease_seconds,
                "heartbeat_ms": self.worker_heartbeat_ms,
                "poll_ms": self.worker_poll_ms,
                "max_reclaims": self.worker_max_reclaims,
            },
            "llm": {
                "provider": self.llm_provider,
                "model": self.llm_model,
                "base_url": self.llm_base_url,
                "api_key_env": self.llm_api_key_env,
                "api_key_set": self.llm_api_key.is_some(),
                "timeout_seconds": self.llm_timeout_seconds,
                "max_concurrency": self.llm_max_concurrency,
                "max_prompt_chars": self.llm_max_prompt_chars,
                "max_response_chars": self.llm_max_response_chars,
                "prompt_cost_per_1k_tokens_usd": self.llm_prompt_cost_per_1k_tokens_usd,
                "completion_cost_per_1k_tokens_usd": self.llm_completion_cost_per_1k_tokens_usd,
                "cleaning_prompt_version": self.cleaning_prompt_version,
                "classification_prompt_version": self.classification_prompt_version,
            },
            "chunking": {
                "target_chars": self.chunk_target_chars,
                "overlap_chars": self.chunk_overlap_chars,
            },
            "extraction": {
                "max_bytes": self.extract_max_bytes,
                "timeout_seconds": self.extract_timeout_seconds,
                "cache": self.extract_cache,
                "engines": extraction_engines(),
                "universal_max_input_bytes": self.universal_max_input_bytes,
                "universal_timeout_seconds": self.universal_timeout_seconds,
            },
            "ocr": {
                "timeout_seconds": self.ocr_timeout_seconds,
                "languages": self.ocr_languages,
                "preserve_page_images": self.ocr_preserve_page_images,
                "rotation_retry": self.ocr_rotation_retry,
                "pdf_dpi": self.ocr_pdf_dpi,
                "pdf_max_pages": self.ocr_pdf_max_pages,
                "llm_correction": self.ocr_llm_correction,
                "llm_model": self.ocr_llm_model,
                "low_confidence_threshold": self.ocr_low_confidence_threshold,
                "page_concurrency": self.ocr_page_concurrency,
                "fail_on_page_error": self.ocr_fail_on_page_error,
            },
            "api": {
                "host": self.api_host,
                "port": self.api_port,
                "credentials": scopes,
                "max_request_bytes": self.api_max_request_bytes,
                "max_upload_bytes": self.api_max_upload_bytes,
                "max_batch_files": self.api_max_batch_files,
                "max_batch_bytes": self.api_max_batch_bytes,
                "max_import_files": self.api_max_import_files,
                "max_import_bytes": self.api_max_import_bytes,
                "max_import_manifest_bytes": self.api_max_import_manifest_bytes,
                "max_content_chars": self.api_max_content_chars,
                "rate_limit_per_minute": self.api_rate_limit_per_minute,
                "client_ipv6_prefix": self.api_client_ipv6_prefix,
                "max_streams_per_client": self.api_max_streams_per_client,
                "stream_max_seconds": self.api_stream_max_seconds,
                "audit_retention_days": self.api_audit_retention_days,
                "import_root": self.api_import_root,
                "trusted_proxy_cidrs": self.api_trusted_proxy_cidrs.iter().map(|n| format!("{}/{}", n.addr, n.prefix)).collect::<Vec<_>>(),
                "header_read_timeout_seconds": self.api_header_read_timeout_seconds,
                "keep_alive_timeout_seconds": self.api_keep_alive_timeout_seconds,
                "workers": self.api_workers,
            },
            "logging": {
                "format": self.log_format,
                "level": self.log_level,
                "otel_enabled": self.otel_enabled,
                "otel_endpoint": self.otel_endpoint,
                "otel_header_names": self.otel_headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                "otel_service_name": self.otel_service_name,
            },
        })
    }
}

/// Each accepted extension's extraction engine, for `/config`.
fn extraction_engines() -> serde_json::Map<String, serde_json::Value> {
    shelf_documents::formats::ACCEPTED_FORMATS
        .iter()
        .map(|format| (format.extension.to_string(), format.kind.engine().into()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn secrets_lists_every_secret_value() {
        let s = Settings::from_vars(&vars(&[
            ("HOME", "/home/u"),
            ("SHELF_API_KEYS", "read:reader-key,writer-key"),
            ("SHELF_OTEL_HEADERS", "x-team=team-token"),
        ]))
        .unwrap();
        let mut secrets = s.secrets();
        secrets.sort();
        assert_eq!(secrets, vec!["reader-key", "team-token", "writer-key"]);
    }

    #[test]
    fn defaults_follow_the_spec() {
        let s = Settings::from_vars(&vars(&[("HOME", "/home/u")])).unwrap();
        assert_eq!(s.data_dir, PathBuf::from("/home/u/.local/share/shelf"));
        assert_eq!(
            s.database_path,
            PathBuf::from("/home/u/.local/share/shelf/shelf.sqlite")
        );
        assert_eq!(s.api_max_upload_bytes, 104_857_600);
        assert_eq!(s.api_port, 8080);
        assert_eq!(s.llm_provider, LlmProvider::GenericCompatible);
        assert_eq!(s.cleaning_prompt_version, "cmos_v4");
        assert_eq!(s.run_retention, 3);
        assert!(!s.auth_enabled());
    }

    #[test]
    fn the_free_space_floor_and_the_full_check_interval_parse() {
        let s = Settings::from_vars(&vars(&[("HOME", "/home/u")])).unwrap();
        assert_eq!(s.min_free_bytes, None, "unset: the default floor");
        assert_eq!(s.ready_full_check_seconds, 600);
        let s = Settings::from_vars(&vars(&[
            ("SHELF_MIN_FREE_BYTES", "2_147_483_648"),
            ("SHELF_READY_FULL_CHECK_SECONDS", "0"),
        ]))
        .unwrap();
        assert_eq!(s.min_free_bytes, Some(2_147_483_648));
        assert_eq!(s.ready_full_check_seconds, 0);
        let off = Settings::from_vars(&vars(&[("SHELF_MIN_FREE_BYTES", "0")])).unwrap();
        assert_eq!(off.min_free_bytes, Some(0));
        assert!(
            off.unknown_variables.is_empty(),
            "{:?}",
            off.unknown_variables
        );
        let bad = Settings::from_vars(&vars(&[("SHELF_MIN_FREE_BYTES", "1GB")])).unwrap_err();
        assert!(
            bad.problems
                .iter()
                .any(|p| p.contains("SHELF_MIN_FREE_BYTES")),
            "{bad}"
        );
    }

    #[test]
    fn run_retention_keeps_at_least_one_run() {
        let of = |value: &str| {
            Settings::from_vars(&vars(&[
                ("HOME", "/home/u"),
                ("SHELF_RUN_RETENTION", value),
            ]))
        };
        assert_eq!(of("10").map(|s| s.run_retention).ok(), Some(10));
        for bad in ["0", "-1", "many"] {
            let e = of(bad).expect_err(bad);
            assert!(
                e.problems.iter().any(|p| p.contains("SHELF_RUN_RETENTION")),
                "{bad}: {:?}",
                e.problems
            );
        }
    }

    #[test]
    fn worker_concurrency_defaults_to_the_provider_and_yields_to_the_variable() {
        let of = |pairs: &[(&str, &str)]| {
            let mut all = vec![("HOME", "/home/u")];
            all.extend_from_slice(pairs);
            Settings::from_vars(&vars(&all)).unwrap().worker_concurrency
        };
        assert_eq!(of(&[]), 2);
        assert_eq!(of(&[("SHELF_LLM_PROVIDER", "mock")]), 4);
        assert_eq!(of(&[("SHELF_LLM_PROVIDER", "local")]), 4);
        assert_eq!(
            of(&[
                ("SHELF_LLM_PROVIDER", "mock"),
                ("SHELF_WORKER_CONCURRENCY", "3")
            ]),
            3
        );
    }

    #[test]
    fn load_limits_default_and_are_bounded() {
        let of = |pairs: &[(&str, &str)]| {
            let mut all = vec![("HOME", "/home/u")];
            all.extend_from_slice(pairs);
            Settings::from_vars(&vars(&all))
        };
        let s = of(&[]).unwrap();
        assert_eq!(s.api_client_ipv6_prefix, 64);
        assert_eq!(s.api_max_streams_per_client, 8);
        assert_eq!(s.api_stream_max_seconds, 300);
        let s = of(&[
            ("SHELF_API_CLIENT_IPV6_PREFIX", "56"),
            ("SHELF_API_MAX_STREAMS_PER_CLIENT", "0"),
            ("SHELF_API_STREAM_MAX_SECONDS", "30"),
        ])
        .unwrap();
        assert_eq!(
            (
                s.api_client_ipv6_prefix,
                s.api_max_streams_per_client,
                s.api_stream_max_seconds
            ),
            (56, 0, 30)
        );
        for (name, bad) in [
            ("SHELF_API_CLIENT_IPV6_PREFIX", "0"),
            ("SHELF_API_CLIENT_IPV6_PREFIX", "129"),
            ("SHELF_API_STREAM_MAX_SECONDS", "0"),
            ("SHELF_API_STREAM_MAX_SECONDS", "86401"),
            ("SHELF_API_MAX_STREAMS_PER_CLIENT", "-1"),
        ] {
            let e = of(&[(name, bad)]).unwrap_err();
            assert!(e.to_string().contains(name), "{name}={bad}: {e}");
        }
    }

    #[test]
    fn api_workers_default_to_none_and_are_bounded() {
        let of = |value: Option<&str>| {
            let mut all = vec![("HOME", "/home/u")];
            all.extend(value.map(|v| ("SHELF_API_WORKERS", v)));
            Settings::from_vars(&vars(&all))
        };
        assert_eq!(of(None).unwrap().api_workers, 0);
        assert_eq!(of(Some("3")).unwrap().api_workers, 3);
        assert_eq!(of(Some("256")).unwrap().api_workers, 256);
        for bad in ["257", "-1", "two"] {
            let e = of(Some(bad)).unwrap_err();
            assert!(e.to_string().contains("SHELF_API_WORKERS"), "{bad}: {e}");
        }
    }

    #[test]
    fn every_bad_variable_is_reported_at_once() {
        let e = Settings::from_vars(&vars(&[
            ("SHELF_API_PORT", "eighty"),
            ("SHELF_LLM_PROVIDER", "gpt"),
            ("SHELF_OCR_ROTATION_RETRY", "maybe"),
            ("SHELF_API_KEY_HASHES", "read:nothex"),
        ]))
        .unwrap_err();
        assert_eq!(e.problems.len(), 4, "{e}");
        assert!(e.to_string().contains("SHELF_API_PORT=eighty"));
    }

    #[test]
    fn scoped_keys_and_hashes_parse() {
        let hash = hex::encode(Sha256::digest(b"h1"));
        let s = Settings::from_vars(&vars(&[
            ("SHELF_API_KEY", "k0"),
            ("SHELF_API_KEYS", "read:r1, write:w1, plain"),
            ("SHELF_API_KEY_HASHES", &format!("read:{hash}")),
        ]))
        .unwrap();
        let scopes: Vec<Scope> = s.api_credentials.iter().map(Credential::scope).collect();
        assert_eq!(
            scopes,
            [
                Scope::Write,
                Scope::Read,
                Scope::Write,
                Scope::Write,
                Scope::Read
            ]
        );
        assert_eq!(
            s.api_credentials[4].digest(),
            <[u8; 32]>::from(Sha256::digest(b"h1"))
        );
        let shown = s.redacted().to_string();
        assert!(!shown.contains("k0") && !shown.contains("r1") && !shown.contains(&hash));
    }

    #[test]
    fn secrets_never_print() {
        let s = Settings::from_vars(&vars(&[
            ("SHELF_API_KEY", "supersecret"),
            ("OPENAI_API_KEY", "sk-abc"),
        ]))
        .unwrap();
        let debug = format!("{s:?}");
        assert!(!debug.contains("supersecret") && !debug.contains("sk-abc"));
        assert!(!s.redacted().to_string().contains("sk-abc"));
    }

    #[test]
    fn cidrs_match() {
        let net: IpNet = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains("10.1.2.3".parse().unwrap()));
        assert!(!net.contains("11.1.2.3".parse().unwrap()));
        assert!(net.contains("::ffff:10.0.0.1".parse().unwrap()));
        let one: IpNet = "::1".parse().unwrap();
        assert!(one.contains("::1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<IpNet>().is_err());
    }

    #[test]
    fn unknown_shelf_variables_are_flagged() {
        let s = Settings::from_vars(&vars(&[("SHELF_API_PROT", "1")])).unwrap();
        assert_eq!(s.unknown_variables, ["SHELF_API_PROT"]);
    }

    #[test]
    fn database_url_selects_postgres_and_hides_its_password() {
        let mut vars = HashMap::new();
        vars.insert("SHELF_DATA_DIR".to_string(), "/d".to_string());
        let s = Settings::from_vars(&vars).unwrap();
        assert!(!s.is_postgres());
        assert_eq!(s.job_backend, "sqlite");
        vars.insert(
            "SHELF_DATABASE_URL".to_string(),
            "postgres://shelf:hunter2@db.example:5432/shelf?sslmode=require".to_string(),
        );
        let s = Settings::from_vars(&vars).unwrap();
        assert!(s.is_postgres());
        assert_eq!(s.job_backend, "postgres");
        assert_eq!(
            s.database_display(),
            "postgres://shelf:***@db.example:5432/shelf?sslmode=require"
        );
        assert!(!s.redacted().to_string().contains("hunter2"));
        assert!(s.secrets().contains(&"hunter2"));
        // The query-parameter form, any case, hidden from `/config` and messages alike.
        vars.insert(
            "SHELF_DATABASE_URL".to_string(),
            "postgres://shelf@db.example/shelf?sslmode=require&PASSWORD=SECRETX".to_string(),
        );
        let s = Settings::from_vars(&vars).unwrap();
        assert_eq!(
            s.database_display(),
            "postgres://shelf@db.example/shelf?sslmode=require&PASSWORD=***"
        );
        assert!(!s.redacted().to_string().contains("SECRETX"));
        assert!(!format!("{s:?}").contains("SECRETX"));
        assert!(s.secrets().contains(&"SECRETX"));
        vars.insert("SHELF_DATABASE_URL".to_string(), "mysql://x/y".to_string());
        assert!(Settings::from_vars(&vars).is_err());
    }
}
