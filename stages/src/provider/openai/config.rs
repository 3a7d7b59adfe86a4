//! The `generic-compatible` provider's configuration (built by `shelf-app` from the
//! `SHELF_LLM_*` settings), its redacted API key, and the token-usage counter it reports to.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::provider::limiter::{INITIAL_LIMIT, LimitConfig};

/// The ceiling of the limit when `SHELF_LLM_MAX_CONCURRENCY` is `auto`: far above what one
/// server gives one client, a bound against a runaway.
pub const AUTO_MAX_CONCURRENCY: usize = 128;

/// An API key. `Debug` prints `[redacted]`; the value is only ever put in the
/// `Authorization` header, which is marked sensitive.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(value: impl Into<String>) -> Self {
        ApiKey(value.into())
    }

    pub(super) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Everything the provider needs; `shelf-app` builds it from the `SHELF_LLM_*` settings.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// `SHELF_LLM_BASE_URL`, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`.
    pub base_url: Option<String>,
    /// The credential read from the variable `SHELF_LLM_API_KEY_ENV` names; none sends no
    /// `Authorization` header (fine for most local servers).
    pub api_key: Option<ApiKey>,
    /// The name of that variable, for error messages only.
    pub api_key_env: String,
    /// `SHELF_LLM_MODEL`.
    pub model: String,
    /// `SHELF_LLM_MODEL`'s companion for OCR correction, `SHELF_OCR_LLM_MODEL` (none or empty:
    /// correction uses `model`); only [`crate::provider::Provider::check`] reads it here, the
    /// `correct` stage names it in each call.
    pub correction_model: Option<String>,
    /// `SHELF_LLM_TIMEOUT_SECONDS`: the wait for the answer to begin, from sending until the
    /// first token of a streamed answer (the server's queue and its reading of the prompt), or
    /// until the whole answer of a server that does not stream.
    pub timeout: Duration,
    /// `SHELF_LLM_IDLE_TIMEOUT_SECONDS`: once a streamed answer has begun, the longest wait for
    /// its next event; a server that stops sending for this long has failed the attempt.
    pub idle_timeout: Duration,
    /// `SHELF_LLM_MAX_PROMPT_CHARS`: system plus user prompt, checked before any call.
    pub max_prompt_chars: usize,
    /// `SHELF_LLM_MAX_RESPONSE_CHARS`: the most characters of a response body ever read.
    pub max_response_chars: usize,
    /// Further attempts after a 429, 5xx, timeout or connection failure.
    pub max_retries: u32,
    /// The first backoff; each further one doubles.
    pub initial_backoff: Duration,
    /// The longest single wait, whether from backoff or from `Retry-After`.
    pub max_backoff: Duration,
    /// `SHELF_LLM_PUSH_BACK_SECONDS`: how long one call keeps waiting through the server's
    /// refusals (429, or 503 with `Retry-After`) before they count as a failed attempt.
    pub push_back_budget: Duration,
    /// The bounds of the process's limit of requests in flight (`SHELF_LLM_MIN_CONCURRENCY`,
    /// `SHELF_LLM_MAX_CONCURRENCY`); equal bounds pin it.
    pub concurrency: LimitConfig,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            base_url: None,
            api_key: None,
            api_key_env: "OPENAI_API_KEY".into(),
            model: "gpt-4o-mini".into(),
            correction_model: None,
            timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            max_prompt_chars: 2_097_152,
            max_response_chars: 2_097_152,
            max_retries: 3,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            push_back_budget: Duration::from_secs(600),
            concurrency: LimitConfig::new(1, AUTO_MAX_CONCURRENCY, INITIAL_LIMIT),
        }
    }
}

/// Provider-reported token usage, summed over every successful call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TokenUsage {
    /// Answers that reached the provider and came back with status 2xx.
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl TokenUsage {
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// A shareable token counter (for metrics): cheap to clone through an `Arc`, safe to read
/// while calls are running.
#[derive(Debug, Default)]
pub struct UsageCounter {
    requests: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
}

impl UsageCounter {
    pub fn record(&self, prompt_tokens: u64, completion_tokens: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.prompt_tokens
            .fetch_add(prompt_tokens, Ordering::Relaxed);
        self.completion_tokens
            .fetch_add(completion_tokens, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> TokenUsage {
        TokenUsage {
            requests: self.requests.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            completion_tokens: self.completion_tokens.load(Ordering::Relaxed),
        }
    }
}
