//! The HTTP side of the `generic-compatible` provider: one chat completion per call, with the
//! prompt-size check, a place under the process's limiter for each request, the time limits,
//! bounded retries with backoff, waits through the server's push-back (429, or 503 with
//! `Retry-After`) that burn no attempt, optional fields dropped when the server refuses them,
//! the answer read as a stream (`stream`) or, from a server that does not stream, as one
//! capped JSON body, and the `ProviderError`s that name the setting to change.

use std::time::{Duration, Instant, SystemTime};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde::Deserialize;
use serde_json::{Value, json};

use super::stream::{self, EventError, StreamError, StreamLimits};
use super::structured::{Refused, Schema, Sent, form_name, refused_field, response_format};
use super::{NAME, OpenAiCompatibleProvider};
use crate::provider::limiter::{CallClass, CallPermit, Outcome};
use crate::provider::{ANSWER_TRUNCATED, Provider, ProviderError};

/// How much of an error answer (status 4xx/5xx) is read to find the error's type.
const ERROR_BODY_CAP: usize = 16 * 1024;

/// The longest wait for an error answer's body once its status has come.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(10);

/// One chat completion to ask for.
pub(super) struct Call<'a> {
    /// Names the call for the limiter (calls of one kind and size take about as long).
    pub kind: &'static str,
    pub model: &'a str,
    /// `(role, content)` in order: the system prompt, the user's, and for a second try the
    /// first answer and the reason it was refused.
    pub messages: &'a [(&'static str, &'a str)],
    /// The answer's bound (`super::bounds`).
    pub max_tokens: u32,
    /// The JSON the answer must be, asked through `response_format` when the server takes it.
    pub schema: Option<Schema>,
}

/// A chat completion's answer.
#[derive(Debug)]
pub(super) struct Completion {
    pub content: String,
    /// The model stopped at `max_tokens` (`finish_reason: "length"`): the content is a part.
    pub truncated: bool,
}

/// The `answer_truncated` error of a call bounded at `max_tokens`.
pub(super) fn truncated(max_tokens: u32) -> ProviderError {
    fatal(
        ANSWER_TRUNCATED,
        format!(
            "the model's answer reached the call's bound of {max_tokens} tokens (max_tokens) and was cut off"
        ),
    )
}

/// One failed HTTP attempt.
struct Failure {
    error: ProviderError,
    /// Worth another attempt within this call (429, 5xx, timeout, connection).
    transient: bool,
    retry_after: Option<Duration>,
    /// What the failure says about the server's load, for the limiter.
    signal: Outcome,
    /// An optional field the server refused: the request is sent again without it.
    refused: Option<Refused>,
}

impl Failure {
    fn fatal(error: ProviderError, signal: Outcome) -> Self {
        Failure {
            error,
            transient: false,
            retry_after: None,
            signal,
            refused: None,
        }
    }

    fn transient(error: ProviderError, retry_after: Option<Duration>, signal: Outcome) -> Self {
        Failure {
            error,
            transient: true,
            retry_after,
            signal,
            refused: None,
        }
    }

    /// The server refused for load and will take the call later: a wait, not a failure.
    fn is_push_back(&self) -> bool {
        self.signal == Outcome::Refused
    }
}

/// An error no further attempt fixes (configuration, refused credential, unknown prompt).
pub(super) fn fatal(code: &'static str, message: impl Into<String>) -> ProviderError {
    ProviderError {
        code,
        message: message.into(),
        retryable: false,
    }
}

/// An error the stage may retry later (the endpoint was down, busy or answered badly).
fn retryable(code: &'static str, message: impl Into<String>) -> ProviderError {
    ProviderError {
        code,
        message: message.into(),
        retryable: true,
    }
}

/// An answer that is not what was asked for: retryable, since another answer may be fine.
pub(super) fn invalid(message: impl Into<String>) -> ProviderError {
    retryable("invalid_response", message)
}

impl OpenAiCompatibleProvider {
    /// One chat completion: the assistant message's text, and whether it was cut at the bound.
    pub(super) async fn complete(&self, call: Call<'_>) -> Result<Completion, ProviderError> {
        let endpoint = self
            .endpoint
            .as_ref()
            .map_err(|m| fatal("provider_not_configured", m.clone()))?;
        let client = self
            .client
            .as_ref()
            .map_err(|m| fatal("provider_not_configured", m.clone()))?;
        let prompt_chars: usize = call.messages.iter().map(|(_, c)| c.chars().count()).sum();
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
        // The class by the (first) user message's size alone: the system prompt is the same
        // for every call of a kind, and the user text is what the answer's length follows.
        let user_len = call
            .messages
            .iter()
            .find(|(role, _)| *role == "user")
            .map_or(0, |(_, c)| c.len());
        let class = CallClass::new(call.kind, user_len);
        let attempts = self.config.max_retries.saturating_add(1);
        let mut attempt = 0u32;
        let mut refusals = 0u32;
        let mut pushed_back = Duration::ZERO;
        loop {
            // Built for each request: a field the server refused is left out of the next.
            let (body, sent) = self.request_body(&call)?;
            // One place under the process's limit per request; none is held while waiting.
            let permit = self.limiter.acquire(class).await;
            let failure = match self
                .attempt(client, endpoint, &body, sent, call.max_tokens, permit)
                .await
            {
                Ok(completion) => return Ok(completion),
                Err(failure) => failure,
            };
            if let Some(refused) = failure.refused {
                // Not a failed attempt: the same request without the field the server does
                // not take. Remembered for every later call, so each field costs one refusal
                // a process, and each refusal removes a field: this ends.
                if self.learned.refused(refused) {
                    tracing::info!(
                        provider = NAME,
                        refused = match refused {
                            Refused::StreamOptions => "stream_options",
                            Refused::ResponseFormat(form) => form_name(form),
                        },
                        now = self.learned.form().map_or("none", form_name),
                        "the language-model server refused an optional request field; asking without it from now on"
                    );
                }
                continue;
            }
            if failure.is_push_back() {
                // The server will take the call later: wait as long as it asks (asking again
                // sooner only earns another refusal), or back off when it does not say, and
                // burn no attempt, for as long as the push-back budget lasts.
                refusals += 1;
                let wait = failure.retry_after.unwrap_or_else(|| {
                    backoff(self.config.initial_backoff, refusals).min(self.config.max_backoff)
                });
                if pushed_back + wait <= self.config.push_back_budget {
                    pushed_back += wait;
                    tracing::debug!(
                        provider = NAME,
                        refusals,
                        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                        "the language-model server pushed back; waiting"
                    );
                    self.limiter.wait_out_push_back(wait).await;
                    continue;
                }
            }
            attempt += 1;
            if !failure.transient || attempt >= attempts {
                let push_back = failure.is_push_back();
                let mut error = failure.error;
                if push_back {
                    error.message = format!(
                        "{} (refused {refusals} times over {} s, SHELF_LLM_PUSH_BACK_SECONDS)",
                        error.message,
                        pushed_back.as_secs()
                    );
                } else if failure.transient && attempts > 1 {
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

    /// The request's JSON, with the optional fields this server has not refused, and which
    /// of them it carries.
    fn request_body(&self, call: &Call<'_>) -> Result<(Vec<u8>, Sent), ProviderError> {
        let messages: Vec<Value> = call
            .messages
            .iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut body = json!({
            "model": call.model,
            "temperature": 0,
            "messages": messages,
            "max_tokens": call.max_tokens,
            "stream": true,
        });
        let mut sent = Sent::default();
        if self.learned.stream_options() {
            // The usage of a streamed answer comes only when asked for (OpenAI, vLLM).
            body["stream_options"] = json!({"include_usage": true});
            sent.stream_options = true;
        }
        if let Some(schema) = call.schema
            && let Some(form) = self.learned.form()
            && let Some(format) = response_format(form, schema)
        {
            body["response_format"] = format;
            sent.form = Some(form);
        }
        let body = serde_json::to_vec(&body)
            .map_err(|e| fatal("internal", format!("could not encode the request: {e}")))?;
        Ok((body, sent))
    }

    /// One request, holding `permit` while the server works on it. A streamed answer holds
    /// it to the stream's end (the server's slot is busy until its last token) and the
    /// limiter learns the latency to there; a server that does not stream frees it when the
    /// status and headers arrive (its headers come when the answer is ready, so its slot is
    /// free by then; reading the body is transfer, which some servers stall on a reused
    /// connection for a delayed acknowledgement). Every return drops the response, which
    /// closes a stream still open: that cancels the generation on the server.
    async fn attempt(
        &self,
        client: &reqwest::Client,
        endpoint: &reqwest::Url,
        body: &[u8],
        sent: Sent,
        max_tokens: u32,
        permit: CallPermit,
    ) -> Result<Completion, Failure> {
        let first_token_by = Instant::now() + self.config.timeout;
        let mut request = client
            .post(endpoint.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::ACCEPT,
                "text/event-stream, application/json",
            )
            .body(body.to_vec());
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose());
        }
        let mut response =
            match tokio::time::timeout_at(first_token_by.into(), request.send()).await {
                Ok(Ok(response)) => response,
                Ok(Err(e)) => {
                    let failure = self.transport_failure(&e);
                    permit.finish(failure.signal);
                    return Err(failure);
                }
                Err(_) => {
                    let failure = self.first_token_timeout();
                    permit.finish(failure.signal);
                    return Err(failure);
                }
            };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let error_body =
                tokio::time::timeout(ERROR_BODY_WAIT, read_capped(&mut response, ERROR_BODY_CAP))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or_default();
            let detail = error_detail(&error_body)
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            let mut failure = self.status_failure(status, &detail, retry_after);
            failure.refused = refused_field(status.as_u16(), &error_body, sent);
            // A refused field says nothing of the server's load (llama-cpp-python refuses
            // one with a 500).
            permit.finish(if failure.refused.is_some() {
                Outcome::Neutral
            } else {
                failure.signal
            });
            return Err(failure);
        }
        if is_event_stream(response.headers()) {
            let limits = StreamLimits {
                first_token_by,
                idle: self.config.idle_timeout,
                max_tokens,
                max_chars: self.config.max_response_chars,
            };
            return match stream::read(&mut response, limits).await {
                Ok(streamed) => {
                    permit.finish(Outcome::Answered);
                    // Without the server's usage (it ignored `stream_options`), each event of
                    // generated text counts as one completion token: llama.cpp sends one a token.
                    let (prompt_tokens, completion_tokens) =
                        streamed.usage.unwrap_or((0, streamed.tokens));
                    self.record_usage(prompt_tokens, completion_tokens);
                    answer(streamed.content, streamed.truncated)
                }
                Err(e) => {
                    let failure = self.stream_failure(e);
                    permit.finish(failure.signal);
                    Err(failure)
                }
            };
        }
        permit.finish(Outcome::Answered);
        let raw = match tokio::time::timeout_at(
            first_token_by.into(),
            read_capped(&mut response, self.config.max_response_chars),
        )
        .await
        {
            Ok(Ok(raw)) => raw,
            Ok(Err(ReadError::TooLarge)) => {
                return Err(Failure::fatal(self.too_large(), Outcome::Answered));
            }
            Ok(Err(ReadError::Transport(e))) => return Err(self.transport_failure(&e)),
            Err(_) => return Err(self.first_token_timeout()),
        };
        let envelope: ChatResponse = serde_json::from_slice(&raw).map_err(|_| {
            Failure::fatal(
                invalid(
                    "the endpoint's answer is not an OpenAI-compatible chat completion (unreadable JSON)",
                ),
                Outcome::Answered,
            )
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
        self.record_usage(prompt_tokens, completion_tokens);
        let choice = envelope.choices.into_iter().next();
        let truncated = choice
            .as_ref()
            .and_then(|c| c.finish_reason.as_deref())
            .is_some_and(|r| r == "length");
        let content = choice
            .and_then(|c| c.message)
            .and_then(|m| m.content)
            .unwrap_or_default();
        answer(content, truncated)
    }

    fn record_usage(&self, prompt_tokens: u64, completion_tokens: u64) {
        self.usage.record(prompt_tokens, completion_tokens);
        crate::metrics::llm_usage(self.name(), prompt_tokens, completion_tokens);
    }

    fn too_large(&self) -> ProviderError {
        fatal(
            "response_too_large",
            format!(
                "the language-model response exceeded SHELF_LLM_MAX_RESPONSE_CHARS={} characters and was cut off; \
                 raise it, or lower SHELF_CHUNK_TARGET_CHARS",
                self.config.max_response_chars
            ),
        )
    }

    /// No answer (or, from a server that does not stream, not the whole answer) within
    /// `SHELF_LLM_TIMEOUT_SECONDS`.
    fn first_token_timeout(&self) -> Failure {
        Failure::transient(
            retryable(
                "provider_timeout",
                format!(
                    "the language-model endpoint {} did not begin answering within {} s; \
                     raise SHELF_LLM_TIMEOUT_SECONDS (the wait for the first token) or check the server",
                    self.shown_endpoint,
                    self.config.timeout.as_secs_f64()
                ),
            ),
            None,
            Outcome::Overloaded,
        )
    }

    /// A streamed answer given up: a stall or a budget spent is a timeout (the server is too
    /// slow under its load, or stuck), a stream cut or an error event a failing server.
    fn stream_failure(&self, error: StreamError) -> Failure {
        let endpoint = &self.shown_endpoint;
        let timeout = |message: String| {
            Failure::transient(
                retryable("provider_timeout", message),
                None,
                Outcome::Overloaded,
            )
        };
        match error {
            StreamError::FirstToken => self.first_token_timeout(),
            StreamError::Idle => timeout(format!(
                "the language-model endpoint {endpoint} stopped sending its answer for {} s; \
                 raise SHELF_LLM_IDLE_TIMEOUT_SECONDS or check the server",
                self.config.idle_timeout.as_secs_f64()
            )),
            StreamError::Budget(allowed) => timeout(format!(
                "the language-model endpoint {endpoint} was still answering after {} s, twice what the \
                 answer's bound takes at the rate it showed, plus 30 s; the server may be looping",
                allowed.as_secs()
            )),
            StreamError::Event(EventError::TooLarge) | StreamError::LineTooLong => {
                Failure::fatal(self.too_large(), Outcome::Answered)
            }
            StreamError::Event(EventError::Unreadable) => Failure::fatal(
                invalid(
                    "an event of the endpoint's streamed answer is not an OpenAI-compatible chat-completion chunk",
                ),
                Outcome::Answered,
            ),
            StreamError::Event(EventError::Server(detail)) => Failure::transient(
                retryable(
                    "provider_unavailable",
                    format!(
                        "the language-model endpoint {endpoint} reported an error while streaming its answer{}",
                        detail.map(|d| format!(" (error: {d})")).unwrap_or_default()
                    ),
                ),
                None,
                Outcome::Overloaded,
            ),
            StreamError::Transport(e) => self.transport_failure(&e),
            // The server's own signal that it serves one request at a time: push-back (the
            // call is sent again without spending an attempt, and the limiter backs off to
            // what the server holds), not a failure of the call.
            StreamError::Interrupted => {
                tracing::debug!(
                    provider = NAME,
                    "the language-model server interrupted a streamed answer to serve another request; sending it again"
                );
                Failure::transient(
                    retryable(
                        "provider_unavailable",
                        format!(
                            "the language-model endpoint {endpoint} kept interrupting its answers to serve other requests \
                             (a server of one model slot, such as llama-cpp-python's with interrupt_requests)"
                        ),
                    ),
                    None,
                    Outcome::Refused,
                )
            }
            StreamError::EndedEarly => Failure::transient(
                retryable(
                    "provider_unavailable",
                    format!(
                        "the language-model endpoint {endpoint} closed the connection before its answer was complete"
                    ),
                ),
                None,
                Outcome::Overloaded,
            ),
        }
    }

    fn transport_failure(&self, error: &reqwest::Error) -> Failure {
        // A timeout is a server too slow under its load; no connection at all says nothing
        // of load but that nobody answers.
        let signal = if error.is_timeout() {
            Outcome::Overloaded
        } else {
            Outcome::Unreachable
        };
        let error = if error.is_timeout() {
            retryable(
                "provider_timeout",
                format!(
                    "the connection to the language-model endpoint {} timed out after {} s; \
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
        Failure::transient(error, None, signal)
    }

    pub(super) fn status_failure_error(&self, status: StatusCode) -> ProviderError {
        self.status_failure(status, "", None).error
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
                Failure::fatal(
                    fatal(
                        "credential_refused",
                        format!(
                            "the language-model endpoint {} refused the credential (HTTP {code}){detail}; {hint}",
                            self.shown_endpoint
                        ),
                    ),
                    status_signal(status, retry_after),
                )
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
                status_signal(status, retry_after),
            ),
            // A 503 that says when to come back is push-back like a 429; without, a failure.
            408 | 500..=599 => Failure::transient(
                retryable(
                    "provider_unavailable",
                    format!(
                        "the language-model endpoint {} failed (HTTP {code}){detail}",
                        self.shown_endpoint
                    ),
                ),
                retry_after,
                status_signal(status, retry_after),
            ),
            404 => Failure::fatal(
                fatal(
                    "endpoint_not_found",
                    format!(
                        "the language-model endpoint {} does not exist (HTTP 404){detail}; check SHELF_LLM_BASE_URL \
                         (OpenAI-compatible servers usually end in /v1) and SHELF_LLM_MODEL",
                        self.shown_endpoint
                    ),
                ),
                status_signal(status, retry_after),
            ),
            _ => Failure::fatal(
                fatal(
                    "provider_rejected",
                    format!(
                        "the language-model endpoint {} rejected the request (HTTP {code}){detail}; check SHELF_LLM_MODEL \
                         and SHELF_LLM_MAX_PROMPT_CHARS",
                        self.shown_endpoint
                    ),
                ),
                status_signal(status, retry_after),
            ),
        }
    }
}

/// An answer as a `Completion`: empty text is no answer, unless the bound cut it (a model
/// that spent its tokens thinking).
fn answer(content: String, truncated: bool) -> Result<Completion, Failure> {
    if content.trim().is_empty() && !truncated {
        return Err(Failure::fatal(
            invalid("the endpoint's chat completion has no message text"),
            Outcome::Answered,
        ));
    }
    Ok(Completion { content, truncated })
}

/// Whether the answer is a server-sent event stream (else it is one JSON body: a server that
/// ignores `stream`).
fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

/// What an error status says about the server's load: 429, and a 503 that says when to come
/// back, are push-back; 408 and other 5xx, a server failing under its load; other statuses
/// say nothing of load.
fn status_signal(status: StatusCode, retry_after: Option<Duration>) -> Outcome {
    match status.as_u16() {
        429 => Outcome::Refused,
        503 if retry_after.is_some() => Outcome::Refused,
        408 | 500..=599 => Outcome::Overloaded,
        _ => Outcome::Neutral,
    }
}

/// `{base}/chat/completions` (a query such as `?api-version=...` is kept), or a message
/// naming the setting to fix.
pub(super) fn chat_completions_url(base: Option<&str>) -> Result<reqwest::Url, String> {
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
pub(super) fn shown_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// The kind of the underlying I/O error, if any (never the error's text, which may name
/// the URL).
pub(super) fn io_reason(error: &reqwest::Error) -> Option<&'static str> {
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

/// `Retry-After` (seconds or an HTTP date) or the non-standard `retry-after-ms`, as a wait
/// from now.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, SystemTime::now())
}

/// The longest wait a header is taken at: a day (a server's typo or a date years ahead must
/// not park a call for ever; the push-back budget ends the wait long before anyway).
const LONGEST_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// [`retry_after`] as seen at `now`. Seconds may carry a fraction (some servers send them);
/// an HTTP date may be in any of the three forms RFC 9110 says a recipient must accept
/// (IMF-fixdate, RFC 850, asctime); a date in the past means "now". Anything else: `None`.
pub fn retry_after_at(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let seconds = |value: &str, scale: f64| {
        let n = value.trim().parse::<f64>().ok()?;
        (n.is_finite() && n >= 0.0)
            .then(|| Duration::from_secs_f64((n / scale).min(LONGEST_RETRY_AFTER.as_secs_f64())))
    };
    if let Some(wait) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| seconds(v, 1000.0))
    {
        return Some(wait);
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Some(wait) = seconds(value, 1.0) {
        return Some(wait);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    let wait = date.duration_since(now).unwrap_or(Duration::ZERO);
    Some(wait.min(LONGEST_RETRY_AFTER))
}

pub(super) enum ReadError {
    TooLarge,
    Transport(reqwest::Error),
}

/// Reads the body, at most `max_chars` UTF-8 characters: stops (and drops the connection) as
/// soon as the body is longer, so no more than one network chunk past the cap is ever held.
pub(super) async fn read_capped(
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
    super::stream::short_ident(value.get("error")?).map(|id| format!("error: {id}"))
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
    #[serde(default)]
    finish_reason: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

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

    /// Headers holding one `name: value`.
    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, value.parse().unwrap());
        h
    }

    #[test]
    fn retry_after_is_read() {
        // 2015-10-21 07:28:00 UTC, the moment of RFC 9110's example dates below.
        let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let at = |name, value: &str| retry_after_at(&headers(name, value), now);
        assert_eq!(retry_after_at(&HeaderMap::new(), now), None);
        assert_eq!(at("retry-after", "2"), Some(Duration::from_secs(2)));
        assert_eq!(at("retry-after", " 120 "), Some(Duration::from_secs(120)));
        assert_eq!(at("retry-after", "1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(at("retry-after", "0"), Some(Duration::ZERO));
        // The three date forms, 90 s after `now`, and a date already past.
        for date in [
            "Wed, 21 Oct 2015 07:29:30 GMT",
            "Wednesday, 21-Oct-15 07:29:30 GMT",
            "Wed Oct 21 07:29:30 2015",
        ] {
            assert_eq!(
                at("retry-after", date),
                Some(Duration::from_secs(90)),
                "{date}"
            );
        }
        assert_eq!(
            at("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT"),
            Some(Duration::ZERO)
        );
        // A date or a number years ahead waits a day at most.
        assert_eq!(
            at("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(LONGEST_RETRY_AFTER)
        );
        assert_eq!(at("retry-after", "1e12"), Some(LONGEST_RETRY_AFTER));
        for bad in ["soon", "-3", "NaN", "inf", "", "Wed, 21 Oct 2015", "2 s"] {
            assert_eq!(at("retry-after", bad), None, "{bad}");
        }
        // The non-standard millisecond header wins when it is readable.
        let mut h = headers("retry-after", "2");
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after_at(&h, now), Some(Duration::from_millis(250)));
        h.insert("retry-after-ms", "later".parse().unwrap());
        assert_eq!(retry_after_at(&h, now), Some(Duration::from_secs(2)));
    }

    proptest::proptest! {
        /// Whatever a server sends, reading it never panics and never waits more than a day.
        #[test]
        fn any_retry_after_is_read_safely(value in "\\PC{0,40}", ms in "\\PC{0,12}", now in 0u64..4_000_000_000) {
            let now = UNIX_EPOCH + Duration::from_secs(now);
            let mut h = HeaderMap::new();
            if let Ok(v) = value.parse() { h.insert(RETRY_AFTER, v); }
            if let Ok(v) = ms.parse() { h.insert("retry-after-ms", v); }
            if let Some(wait) = retry_after_at(&h, now) {
                proptest::prop_assert!(wait <= LONGEST_RETRY_AFTER);
            }
        }

        /// Seconds and dates a server may send are read as the wait they mean.
        #[test]
        fn seconds_and_dates_are_read_exactly(wait in 0u64..86_400, now in 0u64..4_000_000_000) {
            let now = UNIX_EPOCH + Duration::from_secs(now);
            let expected = Some(Duration::from_secs(wait));
            let date = httpdate::fmt_http_date(now + Duration::from_secs(wait));
            proptest::prop_assert_eq!(retry_after_at(&headers("retry-after", &wait.to_string()), now), expected);
            proptest::prop_assert_eq!(retry_after_at(&headers("retry-after", &date), now), expected);
        }
    }

    #[test]
    fn backoff_grows_with_jitter() {
        let b = backoff(Duration::from_millis(100), 3);
        assert!(b >= Duration::from_millis(400) && b <= Duration::from_millis(480));
    }
}
