//! The `generic-compatible` provider: any OpenAI-compatible chat-completions endpoint
//! (`POST {SHELF_LLM_BASE_URL}/chat/completions`), such as OpenAI itself, vLLM, llama.cpp's
//! server, Ollama or LM Studio.
//!
//! Every call checks the prompt size before anything is sent, has a time limit, retries 429,
//! 5xx, timeouts and connection failures a bounded number of times with exponential backoff
//! (honouring `Retry-After`, capped), and reads at most `SHELF_LLM_MAX_RESPONSE_CHARS`
//! characters of the answer. Prompts, answers and the credential are never logged, and error
//! messages never contain them. Provider-reported token usage is added to a shared counter.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shelf_documents::dewey;

use super::{
    Classification, CleanRequest, CorrectRequest, Provider, ProviderError, Synopsis, slug,
};

/// The configuration name of this provider.
pub const NAME: &str = "generic-compatible";

/// The cleaning prompt versions this provider knows.
pub const CLEANING_PROMPT_VERSIONS: &[&str] = &["cmos_v1", "cmos_v2", "cmos_v3", "cmos_v4"];

/// The OCR-correction prompt versions this provider knows.
pub const CORRECTION_PROMPT_VERSIONS: &[&str] = &["ocr_fix_v1"];

/// The OCR-correction prompt every `correct` call uses (a new version is added beside it,
/// never edited in place, so a stored result can name the prompt that made it).
pub const CORRECTION_PROMPT_VERSION: &str = "ocr_fix_v1";

/// The classification prompt versions this provider knows.
pub const CLASSIFICATION_PROMPT_VERSIONS: &[&str] = &["dewey_v1", "dewey_v2"];

/// How much of an error answer (status 4xx/5xx) is read to find the error's type.
const ERROR_BODY_CAP: usize = 16 * 1024;

/// An API key. `Debug` prints `[redacted]`; the value is only ever put in the
/// `Authorization` header, which is marked sensitive.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(value: impl Into<String>) -> Self {
        ApiKey(value.into())
    }

    fn expose(&self) -> &str {
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
    /// `SHELF_LLM_TIMEOUT_SECONDS`: the limit for one HTTP attempt, from connecting until the
    /// whole answer is read.
    pub timeout: Duration,
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
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            base_url: None,
            api_key: None,
            api_key_env: "OPENAI_API_KEY".into(),
            model: "gpt-4o-mini".into(),
            timeout: Duration::from_secs(120),
            max_prompt_chars: 2_097_152,
            max_response_chars: 2_097_152,
            max_retries: 3,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
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

/// The `generic-compatible` provider.
pub struct OpenAiCompatibleProvider {
    config: OpenAiConfig,
    /// The chat-completions URL, or why there is none.
    endpoint: Result<reqwest::Url, String>,
    /// The endpoint without credentials, query or fragment, for messages.
    shown_endpoint: String,
    client: Result<reqwest::Client, String>,
    usage: Arc<UsageCounter>,
}

impl fmt::Debug for OpenAiCompatibleProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatibleProvider")
            .field("endpoint", &self.shown_endpoint)
            .field("model", &self.config.model)
            .field("api_key_set", &self.config.api_key.is_some())
            .finish_non_exhaustive()
    }
}

/// One failed HTTP attempt.
struct Failure {
    error: ProviderError,
    /// Worth another attempt within this call (429, 5xx, timeout, connection).
    transient: bool,
    retry_after: Option<Duration>,
}

impl Failure {
    fn fatal(error: ProviderError) -> Self {
        Failure {
            error,
            transient: false,
            retry_after: None,
        }
    }

    fn transient(error: ProviderError, retry_after: Option<Duration>) -> Self {
        Failure {
            error,
            transient: true,
            retry_after,
        }
    }
}

fn fatal(code: &'static str, message: impl Into<String>) -> ProviderError {
    ProviderError {
        code,
        message: message.into(),
        retryable: false,
    }
}

fn retryable(code: &'static str, message: impl Into<String>) -> ProviderError {
    ProviderError {
        code,
        message: message.into(),
        retryable: true,
    }
}

fn invalid(message: impl Into<String>) -> ProviderError {
    retryable("invalid_response", message)
}

impl OpenAiCompatibleProvider {
    /// Never fails: a missing or bad base URL, or a client that cannot be built, makes every
    /// call fail with a message naming the setting to change.
    pub fn new(config: OpenAiConfig) -> Self {
        let endpoint = chat_completions_url(config.base_url.as_deref());
        let shown_endpoint = match &endpoint {
            Ok(url) => shown_url(url),
            Err(_) => "(not configured)".to_string(),
        };
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(15)))
            .user_agent(concat!("shelf/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                format!("the HTTP client for the language-model provider could not be set up ({e})")
            });
        OpenAiCompatibleProvider {
            config,
            endpoint,
            shown_endpoint,
            client,
            usage: Arc::new(UsageCounter::default()),
        }
    }

    /// Counts into `usage` instead of a counter of its own (to share one with metrics).
    pub fn with_usage_counter(mut self, usage: Arc<UsageCounter>) -> Self {
        self.usage = usage;
        self
    }

    /// Token usage reported by the provider so far.
    pub fn usage(&self) -> TokenUsage {
        self.usage.snapshot()
    }

    /// The counter itself, for a metrics exporter.
    pub fn usage_counter(&self) -> Arc<UsageCounter> {
        self.usage.clone()
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// One chat completion with the main model (`SHELF_LLM_MODEL`).
    async fn complete(&self, system: &str, user: &str) -> Result<String, ProviderError> {
        self.complete_with(&self.config.model, system, user).await
    }

    /// One chat completion with `model`: the assistant message's text.
    async fn complete_with(
        &self,
        model: &str,
        system: &str,
        user: &str,
    ) -> Result<String, ProviderError> {
        let endpoint = self
            .endpoint
            .as_ref()
            .map_err(|m| fatal("provider_not_configured", m.clone()))?;
        let client = self
            .client
            .as_ref()
            .map_err(|m| fatal("provider_not_configured", m.clone()))?;
        let prompt_chars = system.chars().count() + user.chars().count();
        if prompt_chars > self.config.max_prompt_chars {
            return Err(fatal(
                "prompt_too_large",
                format!(
                    "the prompt has {prompt_chars} characters, more than SHELF_LLM_MAX_PROMPT_CHARS={}; \
                     raise it or lower SHELF_CHUNK_TARGET_CHARS",
                    self.config.max_prompt_chars
                ),
            ));
        }
        let body = json!({
            "model": model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        });
        let body = serde_json::to_vec(&body)
            .map_err(|e| fatal("internal", format!("could not encode the request: {e}")))?;
        let attempts = self.config.max_retries.saturating_add(1);
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let failure = match self.attempt(client, endpoint, &body).await {
                Ok(content) => return Ok(content),
                Err(failure) => failure,
            };
            if !failure.transient || attempt >= attempts {
                let mut error = failure.error;
                if failure.transient && attempts > 1 {
                    error.message =
                        format!("{} (gave up after {attempts} attempts)", error.message);
                }
                return Err(error);
            }
            let wait = failure
                .retry_after
                .unwrap_or_else(|| backoff(self.config.initial_backoff, attempt))
                .min(self.config.max_backoff);
            tracing::warn!(
                provider = NAME,
                code = failure.error.code,
                attempt,
                of = attempts,
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                "language-model call failed; retrying"
            );
            tokio::time::sleep(wait).await;
        }
    }

    async fn attempt(
        &self,
        client: &reqwest::Client,
        endpoint: &reqwest::Url,
        body: &[u8],
    ) -> Result<String, Failure> {
        let mut request = client
            .post(endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body.to_vec());
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose());
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| self.transport_failure(&e))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let detail = read_capped(&mut response, ERROR_BODY_CAP)
                .await
                .ok()
                .and_then(|b| error_detail(&b))
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            return Err(self.status_failure(status, &detail, retry_after));
        }
        let raw = match read_capped(&mut response, self.config.max_response_chars).await {
            Ok(raw) => raw,
            Err(ReadError::TooLarge) => {
                return Err(Failure::fatal(fatal(
                    "response_too_large",
                    format!(
                        "the language-model response exceeded SHELF_LLM_MAX_RESPONSE_CHARS={} characters and was cut off; \
                         raise it, or lower SHELF_CHUNK_TARGET_CHARS",
                        self.config.max_response_chars
                    ),
                )));
            }
            Err(ReadError::Transport(e)) => return Err(self.transport_failure(&e)),
        };
        let envelope: ChatResponse = serde_json::from_slice(&raw).map_err(|_| {
            Failure::fatal(invalid(
                "the endpoint's answer is not an OpenAI-compatible chat completion (unreadable JSON)",
            ))
        })?;
        let (prompt_tokens, completion_tokens) = envelope
            .usage
            .map(|u| {
                (
                    u.prompt_tokens.unwrap_or(0),
                    u.completion_tokens.unwrap_or(0),
                )
            })
            .unwrap_or((0, 0));
        self.usage.record(prompt_tokens, completion_tokens);
        crate::metrics::llm_usage(self.name(), prompt_tokens, completion_tokens);
        let content = envelope
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message)
            .and_then(|m| m.content)
            .unwrap_or_default();
        if content.trim().is_empty() {
            return Err(Failure::fatal(invalid(
                "the endpoint's chat completion has no message text",
            )));
        }
        Ok(content)
    }

    fn transport_failure(&self, error: &reqwest::Error) -> Failure {
        let error = if error.is_timeout() {
            retryable(
                "provider_timeout",
                format!(
                    "no complete answer from the language-model endpoint {} within {} s; \
                     raise SHELF_LLM_TIMEOUT_SECONDS or check the server",
                    self.shown_endpoint,
                    self.config.timeout.as_secs_f64()
                ),
            )
        } else if error.is_connect() {
            retryable(
                "provider_unreachable",
                format!(
                    "cannot reach the language-model endpoint {} ({}); check SHELF_LLM_BASE_URL and that the server is running",
                    self.shown_endpoint,
                    io_reason(error).unwrap_or("connection failed")
                ),
            )
        } else {
            retryable(
                "provider_unreachable",
                format!(
                    "the connection to the language-model endpoint {} failed ({}); check SHELF_LLM_BASE_URL",
                    self.shown_endpoint,
                    io_reason(error).unwrap_or("transport error")
                ),
            )
        };
        Failure::transient(error, None)
    }

    fn status_failure(
        &self,
        status: StatusCode,
        detail: &str,
        retry_after: Option<Duration>,
    ) -> Failure {
        let code = status.as_u16();
        match code {
            401 | 403 => {
                let hint = if self.config.api_key.is_some() {
                    format!(
                        "check the key in {} (the variable SHELF_LLM_API_KEY_ENV names)",
                        self.config.api_key_env
                    )
                } else {
                    format!(
                        "no key is set: put one in {} or point SHELF_LLM_API_KEY_ENV at the variable that holds it",
                        self.config.api_key_env
                    )
                };
                Failure::fatal(fatal(
                    "credential_refused",
                    format!(
                        "the language-model endpoint {} refused the credential (HTTP {code}){detail}; {hint}",
                        self.shown_endpoint
                    ),
                ))
            }
            429 => Failure::transient(
                retryable(
                    "rate_limited",
                    format!(
                        "the language-model endpoint {} is rate limiting (HTTP 429){detail}; \
                         lower SHELF_LLM_MAX_CONCURRENCY if this persists",
                        self.shown_endpoint
                    ),
                ),
                retry_after,
            ),
            408 | 500..=599 => Failure::transient(
                retryable(
                    "provider_unavailable",
                    format!(
                        "the language-model endpoint {} failed (HTTP {code}){detail}",
                        self.shown_endpoint
                    ),
                ),
                retry_after,
            ),
            404 => Failure::fatal(fatal(
                "endpoint_not_found",
                format!(
                    "the language-model endpoint {} does not exist (HTTP 404){detail}; check SHELF_LLM_BASE_URL \
                     (OpenAI-compatible servers usually end in /v1) and SHELF_LLM_MODEL",
                    self.shown_endpoint
                ),
            )),
            _ => Failure::fatal(fatal(
                "provider_rejected",
                format!(
                    "the language-model endpoint {} rejected the request (HTTP {code}){detail}; check SHELF_LLM_MODEL \
                     and SHELF_LLM_MAX_PROMPT_CHARS",
                    self.shown_endpoint
                ),
            )),
        }
    }
}

/// `{base}/chat/completions` (a query such as `?api-version=...` is kept), or a message
/// naming the setting to fix.
fn chat_completions_url(base: Option<&str>) -> Result<reqwest::Url, String> {
    let base = base.map(str::trim).filter(|b| !b.is_empty()).ok_or_else(|| {
        "no language-model endpoint is configured: set SHELF_LLM_BASE_URL to an OpenAI-compatible base URL \
         (for example https://api.openai.com/v1 or http://127.0.0.1:8000/v1), \
         or set SHELF_LLM_PROVIDER=local to work offline without a model"
            .to_string()
    })?;
    let mut url = reqwest::Url::parse(base).map_err(|_| {
        "SHELF_LLM_BASE_URL is not a valid URL; use an http:// or https:// base URL such as https://api.openai.com/v1"
            .to_string()
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(
            "SHELF_LLM_BASE_URL must be an http:// or https:// URL such as https://api.openai.com/v1"
                .to_string(),
        );
    }
    let path = url.path().trim_end_matches('/').to_string();
    if !path.ends_with("/chat/completions") {
        url.set_path(&format!("{path}/chat/completions"));
    }
    url.set_fragment(None);
    Ok(url)
}

/// A URL without user, password, query or fragment.
fn shown_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// The kind of the underlying I/O error, if any (never the error's text, which may name
/// the URL).
fn io_reason(error: &reqwest::Error) -> Option<&'static str> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused",
                std::io::ErrorKind::ConnectionReset => "connection reset",
                std::io::ErrorKind::ConnectionAborted => "connection aborted",
                std::io::ErrorKind::NotFound => "host not found",
                std::io::ErrorKind::TimedOut => "timed out",
                std::io::ErrorKind::UnexpectedEof => "connection closed early",
                _ => "I/O error",
            });
        }
        source = e.source();
    }
    None
}

/// Exponential backoff for the `attempt`-th failure (1-based), with up to 20% jitter.
fn backoff(initial: Duration, attempt: u32) -> Duration {
    let base = initial.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let jitter = base.mul_f64(fastrand::f64() * 0.2);
    base.saturating_add(jitter)
}

/// `Retry-After` (seconds or an HTTP date) or the non-standard `retry-after-ms`.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(86_400.0)));
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::from_secs_f64(seconds.min(86_400.0)));
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

enum ReadError {
    TooLarge,
    Transport(reqwest::Error),
}

/// Reads the body, at most `max_chars` UTF-8 characters: stops (and drops the connection) as
/// soon as the body is longer, so no more than one network chunk past the cap is ever held.
async fn read_capped(
    response: &mut reqwest::Response,
    max_chars: usize,
) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::new();
    let mut chars = 0usize;
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transport)? {
        // Every byte that is not a UTF-8 continuation byte starts a character.
        chars += chunk.iter().filter(|b| (**b & 0xC0) != 0x80).count();
        if chars > max_chars {
            return Err(ReadError::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The error type or code of an OpenAI-style error body, when it is a short identifier (the
/// free-text message is left out: some servers echo the input in it).
fn error_detail(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    let ident = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| {
                !s.is_empty()
                    && s.len() <= 64
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            })
            .map(str::to_string)
    };
    ident(error.get("code"))
        .or_else(|| ident(error.get("type")))
        .map(|id| format!("error: {id}"))
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<ChatChoice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct ChatChoice {
    #[serde(default)]
    message: Option<ChatMessage>,
}

#[derive(Deserialize)]
struct ChatMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// Prompts

const CLEAN_BASE: &str = "You are a copy editor applying The Chicago Manual of Style (CMOS). \
You receive one piece of a longer document, between the markers <<<TEXT and TEXT>>>. \
Copy-edit it; do not summarize, shorten, expand, translate or comment on it.

Rules for every edit:
- Keep every sentence and every word of content, in the original order and language.
- Keep every number, date, amount, code, URL and e-mail address exactly as written (never spell numerals out or convert them).
- Fix spacing: collapse runs of spaces, remove spaces before punctuation, one space after it.
- Rejoin words split by a line-end hyphen (\"exam-\\nple\" becomes \"example\").
- Fix obvious typing and OCR errors only when the intended word is certain.";

const CLEAN_V2: &str = "
- Rejoin lines that were hard-wrapped inside a paragraph; keep real paragraph breaks as one blank line.
- Apply CMOS punctuation: consistent quotation marks, commas and periods inside closing quotation marks, \
no double spaces, ellipses as three periods.
- Keep headings, list items and table rows as they are, one per line.";

const CLEAN_V3: &str = "
- Apply CMOS typography: em dashes without surrounding spaces, en dashes in number ranges, \
curly quotation marks and apostrophes.
- Apply CMOS capitalization and hyphenation of compound modifiers where it is unambiguous.
- Keep Markdown markup (#, -, *, |, links) and keep the author's wording, spelling variety and voice.";

const CLEAN_V4: &str = "
- Strict fidelity: the edited text must be within 10% of the original's length; when unsure about an edit, leave the text as it is.
- Never drop page content such as captions, footnotes, headers or numbers, and never add headings, notes or explanations.";

const CLEAN_OUTPUT: &str = "

The text between <<<CONTEXT and CONTEXT>>>, if any, comes just before the piece and is for orientation only: \
never copy-edit it and never repeat it in your answer.
Answer with the edited text only: no preface, no explanation, no markers, no code fences.";

/// The system prompt for a cleaning prompt version; each version adds stricter rules.
pub fn cleaning_system_prompt(version: &str) -> Option<String> {
    let extra: &[&str] = match version {
        "cmos_v1" => &[],
        "cmos_v2" => &[CLEAN_V2],
        "cmos_v3" => &[CLEAN_V2, CLEAN_V3],
        "cmos_v4" => &[CLEAN_V2, CLEAN_V3, CLEAN_V4],
        _ => return None,
    };
    let mut prompt = CLEAN_BASE.to_string();
    for part in extra {
        prompt.push_str(part);
    }
    prompt.push_str(CLEAN_OUTPUT);
    Some(prompt)
}

/// The user message for one chunk.
pub fn cleaning_user_prompt(request: &CleanRequest<'_>) -> String {
    let mut out = String::new();
    if !request.context.trim().is_empty() {
        out.push_str("<<<CONTEXT\n");
        out.push_str(request.context);
        out.push_str("\nCONTEXT>>>\n\n");
    }
    out.push_str("<<<TEXT\n");
    out.push_str(request.text);
    out.push_str("\nTEXT>>>");
    out
}

const CORRECT_V1: &str = "You are proofreading the text that optical character recognition (OCR) read from \
one scanned page, given between the markers <<<TEXT and TEXT>>>. Fix OCR errors only: do not copy-edit, reword, \
summarize, shorten, complete, translate or comment on the text.

Fix only these:
- Misread characters inside words, when the intended word is certain (for example \"rn\" read for \"m\", \
\"0\" for \"o\", \"1\" or \"I\" for \"l\", \"vv\" for \"w\", \"cl\" for \"d\", \"li\" for \"h\").
- Words hyphenated or split across line ends: rejoin them (\"infor-\\nmation\" becomes \"information\").
- Stray symbols that are scanning noise (specks read as dots, commas, quotes or bars where the text has none).

Keep everything else exactly as it is:
- The wording and the order of the words; the spelling variety and the language.
- The line structure: one line for each line of the page, except where a split word was rejoined.
- Every number, date, amount, code, name, URL and e-mail address, character for character.
When unsure whether something is an OCR error, leave it as it is.
Answer with the corrected text only: no preface, no explanation, no markers, no code fences.";

/// The system prompt for an OCR-correction prompt version.
pub fn correction_system_prompt(version: &str) -> Option<&'static str> {
    match version {
        "ocr_fix_v1" => Some(CORRECT_V1),
        _ => None,
    }
}

/// The user message for one OCR page.
pub fn correction_user_prompt(text: &str) -> String {
    format!("<<<TEXT\n{text}\nTEXT>>>")
}

const CLASSIFY_BASE: &str = "You are a librarian classifying documents with the Dewey Decimal Classification (DDC). \
Read the document between <<<DOCUMENT and DOCUMENT>>> and choose the single most specific DDC number you are sure of: \
a three-digit class such as 636, optionally with decimals such as 636.1. \
Answer with one JSON object and nothing else, for example {\"code\": \"636.1\", \"confidence\": 0.8}, \
where code is a string and confidence is a number from 0 to 1 saying how sure you are.";

/// The system prompt for a classification prompt version: `dewey_v2` adds the hundred
/// divisions of the DDC summary.
pub fn classification_system_prompt(version: &str) -> Option<String> {
    match version {
        "dewey_v1" => Some(CLASSIFY_BASE.to_string()),
        "dewey_v2" => {
            let mut prompt = CLASSIFY_BASE.to_string();
            prompt.push_str(
                "\n\nThe hundred DDC divisions, for orientation (answer with a more specific number when the document allows, \
                 and never with 040, which is unassigned):\n",
            );
            for (code, label) in dewey::all() {
                prompt.push_str(&code);
                prompt.push(' ');
                prompt.push_str(&label);
                prompt.push('\n');
            }
            Some(prompt)
        }
        _ => None,
    }
}

const SUMMARIZE_PROMPT: &str = "You are a librarian cataloguing a document. Read the document between <<<DOCUMENT and DOCUMENT>>> \
and answer with one JSON object and nothing else:
{\"title\": \"...\", \"summary\": \"...\", \"tags\": [\"...\"], \"suggested_stem\": \"...\"}
- title: the document's own title if it has one, else a short descriptive title (at most 12 words), in the document's language.
- summary: two to four plain sentences (at most 400 characters) on what the document says.
- tags: three to eight lowercase subject keywords.
- suggested_stem: a file name stem from the title: lowercase ASCII words joined by hyphens, at most 60 characters.";

/// The system prompt for summaries.
pub fn summary_system_prompt() -> &'static str {
    SUMMARIZE_PROMPT
}

fn document_prompt(text: &str) -> String {
    format!("<<<DOCUMENT\n{text}\nDOCUMENT>>>")
}

// ---------------------------------------------------------------------------------------------
// Parsing answers

/// The cleaned text of an answer: a code fence or echoed markers around the whole answer,
/// and an echoed context at its start, are removed.
pub fn tidy_cleaned_answer(answer: &str, context: &str) -> String {
    let mut text = answer.trim();
    if let Some(inner) = strip_fence(text) {
        text = inner.trim();
    }
    if let Some(rest) = text.strip_prefix("<<<TEXT") {
        text = rest.trim_start_matches([' ', '\t']);
        text = text.strip_prefix('\n').unwrap_or(text);
        text = text.strip_suffix("TEXT>>>").unwrap_or(text).trim_end();
    }
    if let Some(rest) = text.strip_prefix("<<<CONTEXT")
        && let Some(end) = rest.find("CONTEXT>>>")
    {
        text = rest[end + "CONTEXT>>>".len()..].trim_start();
        if let Some(rest) = text.strip_prefix("<<<TEXT") {
            text = rest.trim_start();
            text = text.strip_suffix("TEXT>>>").unwrap_or(text).trim_end();
        }
    }
    let context = context.trim();
    if context.chars().count() >= 40
        && let Some(rest) = text.strip_prefix(context)
    {
        text = rest.trim_start();
    }
    text.to_string()
}

/// The inside of a code fence that wraps the whole text.
fn strip_fence(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("```")?;
    let body_start = rest.find('\n')? + 1;
    let body = rest[body_start..].trim_end();
    body.strip_suffix("```")
}

/// The first JSON object in an answer, skipping code fences and prose before or after it.
pub fn extract_json_object(answer: &str) -> Option<serde_json::Map<String, Value>> {
    let text = answer.trim();
    let text = strip_fence(text).unwrap_or(text);
    for (tried, (start, _)) in text.match_indices('{').enumerate() {
        if tried >= 64 {
            break;
        }
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(map))) = values.next() {
            return Some(map);
        }
    }
    None
}

/// A Dewey code from a JSON string or number (`636.1`, `"636.1"`, `"DDC 636.1"`, `6` → `006`).
fn dewey_code(value: &Value) -> Option<String> {
    let raw = match value {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let raw = raw
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()?
        .trim_end_matches('.')
        .to_string();
    let (head, tail) = match raw.split_once('.') {
        Some((h, t)) => (h.to_string(), Some(t.to_string())),
        None => (raw.clone(), None),
    };
    if head.is_empty() || head.len() > 3 {
        return None;
    }
    let mut code = format!("{head:0>3}");
    if let Some(tail) = tail.filter(|t| !t.is_empty()) {
        code.push('.');
        code.push_str(&tail);
    }
    dewey::is_valid_code(&code).then_some(code)
}

/// A classification answer, validated: a real Dewey code and a confidence in 0..=1
/// (percentages are accepted). Anything else is a retryable `invalid_response`.
pub fn parse_classification(answer: &str) -> Result<Classification, ProviderError> {
    let map = extract_json_object(answer)
        .ok_or_else(|| invalid("the classification answer contains no JSON object"))?;
    let code = map
        .get("code")
        .or_else(|| map.get("dewey"))
        .or_else(|| map.get("class"))
        .and_then(dewey_code)
        .ok_or_else(|| invalid("the classification answer has no valid Dewey code"))?;
    let confidence = match map.get("confidence") {
        None | Some(Value::Null) => 0.5,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(Value::String(s)) => s.trim().trim_end_matches('%').parse().unwrap_or(f64::NAN),
        Some(_) => f64::NAN,
    };
    let confidence = if confidence > 1.0 && confidence <= 100.0 {
        confidence / 100.0
    } else {
        confidence
    };
    if !(0.0..=1.0).contains(&confidence) {
        return Err(invalid(
            "the classification answer's confidence is not a number from 0 to 1",
        ));
    }
    Ok(Classification { code, confidence })
}

/// A summary answer, validated: a non-empty title, a summary, tags (an array, or one
/// comma-separated string) and a safe stem (derived from the title when missing).
pub fn parse_synopsis(answer: &str) -> Result<Synopsis, ProviderError> {
    let map = extract_json_object(answer)
        .ok_or_else(|| invalid("the summary answer contains no JSON object"))?;
    let string = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let title = string("title")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| invalid("the summary answer has no title"))?;
    let summary = string("summary").ok_or_else(|| invalid("the summary answer has no summary"))?;
    let tags: Vec<String> = match map.get("tags") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty())
            .collect(),
        Some(Value::String(list)) => list
            .split(',')
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty())
            .collect(),
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err(invalid("the summary answer's tags are not a list")),
    };
    let stem = string("suggested_stem").unwrap_or_default();
    let suggested_stem = slug(if stem.is_empty() { &title } else { &stem });
    Ok(Synopsis {
        title,
        summary,
        tags,
        suggested_stem,
    })
}

#[async_trait]
impl Provider for OpenAiCompatibleProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    /// One page with the `ocr_fix_v1` prompt, on `request.model` when it names one (the
    /// `SHELF_OCR_LLM_MODEL` setting), else on the main model.
    async fn correct(&self, request: CorrectRequest<'_>) -> Result<String, ProviderError> {
        let system = correction_system_prompt(CORRECTION_PROMPT_VERSION).ok_or_else(|| {
            fatal(
                "bad_prompt_version",
                format!(
                    "unknown correction prompt version {CORRECTION_PROMPT_VERSION}; use one of {}",
                    CORRECTION_PROMPT_VERSIONS.join(", ")
                ),
            )
        })?;
        if request.text.trim().is_empty() {
            return Ok(request.text.to_string());
        }
        let model = match request.model.trim() {
            "" => self.config.model.as_str(),
            model => model,
        };
        let answer = self
            .complete_with(model, system, &correction_user_prompt(request.text))
            .await?;
        let corrected = tidy_cleaned_answer(&answer, "");
        if corrected.is_empty() {
            return Err(invalid("the model returned no corrected text"));
        }
        Ok(corrected)
    }

    async fn clean(&self, request: CleanRequest<'_>) -> Result<String, ProviderError> {
        let system = cleaning_system_prompt(request.prompt_version).ok_or_else(|| {
            fatal(
                "bad_prompt_version",
                format!(
                    "unknown cleaning prompt version {}; use one of {}",
                    request.prompt_version,
                    CLEANING_PROMPT_VERSIONS.join(", ")
                ),
            )
        })?;
        if request.text.trim().is_empty() {
            return Ok(String::new());
        }
        let answer = self
            .complete(&system, &cleaning_user_prompt(&request))
            .await?;
        let cleaned = tidy_cleaned_answer(&answer, request.context);
        if cleaned.is_empty() {
            return Err(invalid("the model returned no cleaned text"));
        }
        Ok(cleaned)
    }

    async fn classify(
        &self,
        text: &str,
        prompt_version: &str,
    ) -> Result<Classification, ProviderError> {
        let system = classification_system_prompt(prompt_version).ok_or_else(|| {
            fatal(
                "bad_prompt_version",
                format!(
                    "unknown classification prompt version {prompt_version}; use one of {}",
                    CLASSIFICATION_PROMPT_VERSIONS.join(", ")
                ),
            )
        })?;
        let answer = self.complete(&system, &document_prompt(text)).await?;
        parse_classification(&answer)
    }

    async fn summarize(&self, text: &str) -> Result<Synopsis, ProviderError> {
        let answer = self
            .complete(summary_system_prompt(), &document_prompt(text))
            .await?;
        parse_synopsis(&answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_in_fences_and_prose() {
        let c = parse_classification("```json\n{\"code\": \"636.1\", \"confidence\": 0.8}\n```")
            .unwrap();
        assert_eq!(c.code, "636.1");
        assert!((c.confidence - 0.8).abs() < 1e-9);
        let c = parse_classification(
            "Sure! Based on the text {it is about horses}, here you go: {\"code\": 636, \"confidence\": \"85%\"} Hope that helps.",
        )
        .unwrap();
        assert_eq!(c.code, "636");
        assert!((c.confidence - 0.85).abs() < 1e-9);
        let c = parse_classification("{\"code\": \"DDC 4.678\"}").unwrap();
        assert_eq!(c.code, "004.678");
        assert_eq!(c.confidence, 0.5);
    }

    #[test]
    fn bad_classifications_are_retryable() {
        for bad in [
            "I think it is about horses.",
            "{\"code\": \"horses\", \"confidence\": 0.9}",
            "{\"code\": \"6361\", \"confidence\": 0.9}",
            "{\"code\": \"636\", \"confidence\": 7000}",
            "{\"code\": \"636\", \"confidence\": -0.1}",
            "{\"code\": [636]}",
        ] {
            let e = parse_classification(bad).unwrap_err();
            assert!(e.retryable, "{bad}");
            assert_eq!(e.code, "invalid_response");
        }
    }

    #[test]
    fn synopses_are_validated() {
        let s = parse_synopsis(
            "Here it is:\n{\"title\": \"Horse  Care\", \"summary\": \"How to keep horses.\", \"tags\": \"Horses, Care\", \"suggested_stem\": \"../../etc/passwd\"}",
        )
        .unwrap();
        assert_eq!(s.title, "Horse Care");
        assert_eq!(s.tags, ["horses", "care"]);
        assert_eq!(s.suggested_stem, "etc-passwd");
        let s = parse_synopsis("{\"title\": \"Horse Care\", \"summary\": \"x\", \"tags\": []}")
            .unwrap();
        assert_eq!(s.suggested_stem, "horse-care");
        assert!(
            parse_synopsis("{\"summary\": \"x\"}")
                .unwrap_err()
                .retryable
        );
        assert!(
            parse_synopsis("{\"title\": \"t\", \"summary\": \"x\", \"tags\": 3}")
                .unwrap_err()
                .retryable
        );
    }

    #[test]
    fn prompts_get_stricter_and_v2_lists_divisions() {
        let lengths: Vec<usize> = CLEANING_PROMPT_VERSIONS
            .iter()
            .map(|v| cleaning_system_prompt(v).unwrap().len())
            .collect();
        assert!(lengths.windows(2).all(|w| w[0] < w[1]), "{lengths:?}");
        assert!(cleaning_system_prompt("cmos_v9").is_none());
        let v1 = classification_system_prompt("dewey_v1").unwrap();
        let v2 = classification_system_prompt("dewey_v2").unwrap();
        assert!(!v1.contains("590 Animals"));
        assert!(v2.contains("630 Agriculture") && v2.contains("990 History of other areas"));
    }

    #[test]
    fn the_correction_prompt_fixes_ocr_errors_only() {
        for version in CORRECTION_PROMPT_VERSIONS {
            assert!(correction_system_prompt(version).is_some(), "{version}");
        }
        assert!(CORRECTION_PROMPT_VERSIONS.contains(&CORRECTION_PROMPT_VERSION));
        assert!(correction_system_prompt("ocr_fix_v9").is_none());
        let v1 = correction_system_prompt("ocr_fix_v1").unwrap();
        for needle in [
            "Fix OCR errors only",
            "Misread characters",
            "split across line ends",
            "Stray symbols",
            "line structure",
            "number, date",
            "name",
            "corrected text only",
        ] {
            assert!(v1.contains(needle), "{needle}");
        }
        assert_eq!(
            correction_user_prompt("c0ld\nday"),
            "<<<TEXT\nc0ld\nday\nTEXT>>>"
        );
    }

    #[test]
    fn cleaned_answers_lose_wrappers_and_echoed_context() {
        let context = "This is the preceding paragraph, long enough to be recognised.";
        assert_eq!(
            tidy_cleaned_answer("```\nHello there.\n```", context),
            "Hello there."
        );
        assert_eq!(
            tidy_cleaned_answer("<<<TEXT\nHello there.\nTEXT>>>", context),
            "Hello there."
        );
        assert_eq!(
            tidy_cleaned_answer(&format!("{context}\n\nHello there."), context),
            "Hello there."
        );
    }

    #[test]
    fn base_urls_are_checked() {
        assert!(
            chat_completions_url(None)
                .unwrap_err()
                .contains("SHELF_LLM_BASE_URL")
        );
        assert_eq!(
            chat_completions_url(Some("http://127.0.0.1:8000/v1/"))
                .unwrap()
                .as_str(),
            "http://127.0.0.1:8000/v1/chat/completions"
        );
        assert_eq!(
            chat_completions_url(Some("https://x.test/v1/chat/completions"))
                .unwrap()
                .as_str(),
            "https://x.test/v1/chat/completions"
        );
        assert!(chat_completions_url(Some("ftp://x.test")).is_err());
        assert!(chat_completions_url(Some("not a url")).is_err());
        let url = chat_completions_url(Some("https://user:pw@x.test/v1?k=secret")).unwrap();
        assert_eq!(shown_url(&url), "https://x.test/v1/chat/completions");
    }

    #[test]
    fn retry_after_is_read() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let b = backoff(Duration::from_millis(100), 3);
        assert!(b >= Duration::from_millis(400) && b <= Duration::from_millis(480));
    }

    #[test]
    fn keys_never_print() {
        let config = OpenAiConfig {
            api_key: Some(ApiKey::new("sk-very-secret")),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..OpenAiConfig::default()
        };
        assert!(!format!("{config:?}").contains("sk-very-secret"));
        let provider = OpenAiCompatibleProvider::new(config);
        assert!(!format!("{provider:?}").contains("sk-very-secret"));
    }
}
