//! The `generic-compatible` provider: any OpenAI-compatible chat-completions endpoint
//! (`POST {SHELF_LLM_BASE_URL}/chat/completions`), such as OpenAI itself, vLLM, llama.cpp's
//! server, Ollama or LM Studio.
//!
//! Every call checks the prompt size before anything is sent, bounds the answer (`max_tokens`),
//! waits for a place under the process's adaptive limit of requests in flight
//! (`super::limiter`), streams the answer under a first-token, an idle and a total time limit,
//! waits through the server's push-back (429, or 503 with `Retry-After`) without counting it
//! as a failed attempt, retries 5xx, timeouts and connection failures a bounded number of times
//! with exponential backoff (honouring `Retry-After`, capped), and reads at most
//! `SHELF_LLM_MAX_RESPONSE_CHARS` characters of the answer. Classifications and summaries ask
//! for JSON with a schema and are asked once more, with the reason, when the answer is not
//! valid. Prompts, answers and the credential are never logged, and error messages never
//! contain them. Provider-reported token usage is added to a shared counter.
//!
//! Its parts: `config` (settings, API key, usage counter), `client` (HTTP, retries, errors),
//! `stream` (server-sent events and their time limits), `bounds` (`max_tokens`), `structured`
//! (schemas, `response_format` forms, fields the server refused), `check` (the model check),
//! `prompts` and `parse` (answers); this file holds the provider itself.

mod bounds;
mod check;
mod client;
mod config;
mod parse;
mod prompts;
mod stream;
mod structured;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::limiter::Limiter;
use super::{
    Classification, CleanRequest, CorrectRequest, ModelCheck, Provider, ProviderError, Synopsis,
};
use bounds::{CLASSIFY_MAX_TOKENS, SUMMARY_MAX_TOKENS, rewrite_max_tokens};
use client::{Call, Completion, chat_completions_url, fatal, invalid, shown_url, truncated};
use structured::{Learned, Schema};

pub use super::prompt_versions::{
    CLASSIFICATION_PROMPT_VERSIONS, CLEANING_PROMPT_VERSIONS, CORRECTION_PROMPT_VERSION,
    CORRECTION_PROMPT_VERSIONS,
};
pub use client::retry_after;
pub use config::{AUTO_MAX_CONCURRENCY, ApiKey, OpenAiConfig, TokenUsage, UsageCounter};
pub use parse::{extract_json_object, parse_classification, parse_synopsis, tidy_cleaned_answer};
use prompts::document_prompt;
pub use prompts::{
    classification_system_prompt, cleaning_system_prompt, cleaning_user_prompt,
    correction_system_prompt, correction_user_prompt, summary_system_prompt,
};
pub use stream::SseParser;

/// The configuration name of this provider.
pub const NAME: &str = "generic-compatible";

/// The `generic-compatible` provider.
pub struct OpenAiCompatibleProvider {
    config: OpenAiConfig,
    /// The chat-completions URL, or why there is none.
    endpoint: Result<reqwest::Url, String>,
    /// The endpoint without credentials, query or fragment, for messages.
    shown_endpoint: String,
    client: Result<reqwest::Client, String>,
    usage: Arc<UsageCounter>,
    /// The process's one limit of requests in flight.
    limiter: Arc<Limiter>,
    /// What the server was found to refuse (`response_format` forms, `stream_options`).
    learned: Learned,
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

impl OpenAiCompatibleProvider {
    /// Never fails: a missing or bad base URL, or a client that cannot be built, makes every
    /// call fail with a message naming the setting to change.
    pub fn new(config: OpenAiConfig) -> Self {
        let endpoint = chat_completions_url(config.base_url.as_deref());
        let shown_endpoint = match &endpoint {
            Ok(url) => shown_url(url),
            Err(_) => "(not configured)".to_string(),
        };
        // No overall timeout on the client: a streamed answer may take long as long as it
        // flows; each attempt sets its own limits (`stream`).
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeout.min(Duration::from_secs(15)))
            .user_agent(concat!("shelf/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                format!("the HTTP client for the language-model provider could not be set up ({e})")
            });
        OpenAiCompatibleProvider {
            limiter: Limiter::new(config.concurrency),
            config,
            endpoint,
            shown_endpoint,
            client,
            usage: Arc::new(UsageCounter::default()),
            learned: Learned::default(),
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

    /// The limiter every call of this provider goes through (one provider per process).
    pub fn limiter(&self) -> Arc<Limiter> {
        self.limiter.clone()
    }
}

/// The `bad_prompt_version` error for a `kind` of prompt with no text for `version` here.
fn unknown_version(kind: &str, version: &str, known: &[&str]) -> ProviderError {
    fatal(
        "bad_prompt_version",
        format!(
            "unknown {kind} prompt version {version}; use one of {}",
            known.join(", ")
        ),
    )
}

/// A rewrite (cleaning, correction) cut at its bound: an error, never a shorter text.
fn whole(answer: Completion, max_tokens: u32) -> Result<String, ProviderError> {
    if answer.truncated {
        return Err(truncated(max_tokens));
    }
    Ok(answer.content)
}

/// The second question of a JSON call whose first answer was not valid.
fn try_again(reason: &str) -> String {
    format!(
        "That answer was not valid: {reason}. Answer again with one JSON object in the format \
         the instructions give, and nothing else."
    )
}

impl OpenAiCompatibleProvider {
    /// A call whose answer is JSON of `schema`, read by `parse`. An answer that is not valid
    /// (or was cut at the bound) is asked about once more within the call, with the answer
    /// and the reason in the conversation; a second one is `invalid_response`.
    async fn ask_json<T>(
        &self,
        kind: &'static str,
        system: &str,
        user: &str,
        max_tokens: u32,
        schema: Schema,
        parse: fn(&str) -> Result<T, ProviderError>,
    ) -> Result<T, ProviderError> {
        let check = |answer: &Completion| {
            if answer.truncated {
                return Err(format!(
                    "it was cut off at the length limit of {max_tokens} tokens; write a shorter one"
                ));
            }
            parse(&answer.content).map_err(|e| e.message)
        };
        let model = self.config.model.as_str();
        let first = self
            .complete(Call {
                kind,
                model,
                messages: &[("system", system), ("user", user)],
                max_tokens,
                schema: Some(schema),
            })
            .await?;
        let reason = match check(&first) {
            Ok(value) => return Ok(value),
            Err(reason) => reason,
        };
        tracing::debug!(
            provider = NAME,
            kind,
            "the model's answer was not valid; asking once more"
        );
        let again = try_again(&reason);
        let second = self
            .complete(Call {
                kind,
                model,
                messages: &[
                    ("system", system),
                    ("user", user),
                    ("assistant", &first.content),
                    ("user", &again),
                ],
                max_tokens,
                schema: Some(schema),
            })
            .await?;
        // The model was told what was wrong and answered wrong again: at temperature 0 a
        // later attempt would ask the same and get the same, so the stage is not retried
        // (with `on_failure: continue` the run goes on without this answer).
        check(&second).map_err(|reason| ProviderError {
            retryable: false,
            ..invalid(format!("asked twice, {reason}"))
        })
    }
}

#[async_trait]
impl Provider for OpenAiCompatibleProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    /// One page with the `ocr_fix_v1` prompt, on `request.model` when it names one (the
    /// `SHELF_OCR_LLM_MODEL` setting), else on the main model; bounded by the page's length.
    async fn correct(&self, request: CorrectRequest<'_>) -> Result<String, ProviderError> {
        let system = correction_system_prompt(CORRECTION_PROMPT_VERSION).ok_or_else(|| {
            unknown_version(
                "correction",
                CORRECTION_PROMPT_VERSION,
                CORRECTION_PROMPT_VERSIONS,
            )
        })?;
        if request.text.trim().is_empty() {
            return Ok(request.text.to_string());
        }
        let model = match request.model.trim() {
            "" => self.config.model.as_str(),
            model => model,
        };
        let user = correction_user_prompt(request.text);
        let max_tokens = rewrite_max_tokens(request.text);
        let answer = self
            .complete(Call {
                kind: "correct",
                model,
                messages: &[("system", system), ("user", &user)],
                max_tokens,
                schema: None,
            })
            .await?;
        let corrected = tidy_cleaned_answer(&whole(answer, max_tokens)?, "");
        if corrected.is_empty() {
            return Err(invalid("the model returned no corrected text"));
        }
        Ok(corrected)
    }

    /// One chunk, bounded by its own length (not its context's, which is never answered).
    async fn clean(&self, request: CleanRequest<'_>) -> Result<String, ProviderError> {
        let system = cleaning_system_prompt(request.prompt_version).ok_or_else(|| {
            unknown_version("cleaning", request.prompt_version, CLEANING_PROMPT_VERSIONS)
        })?;
        if request.text.trim().is_empty() {
            return Ok(String::new());
        }
        let user = cleaning_user_prompt(&request);
        let max_tokens = rewrite_max_tokens(request.text);
        let answer = self
            .complete(Call {
                kind: "clean",
                model: &self.config.model,
                messages: &[("system", &system), ("user", &user)],
                max_tokens,
                schema: None,
            })
            .await?;
        let cleaned = tidy_cleaned_answer(&whole(answer, max_tokens)?, request.context);
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
            unknown_version(
                "classification",
                prompt_version,
                CLASSIFICATION_PROMPT_VERSIONS,
            )
        })?;
        self.ask_json(
            "classify",
            &system,
            &document_prompt(text),
            CLASSIFY_MAX_TOKENS,
            Schema::Classification,
            parse_classification,
        )
        .await
    }

    async fn summarize(&self, text: &str) -> Result<Synopsis, ProviderError> {
        self.ask_json(
            "summarize",
            summary_system_prompt(),
            &document_prompt(text),
            SUMMARY_MAX_TOKENS,
            Schema::Synopsis,
            parse_synopsis,
        )
        .await
    }

    /// `GET {SHELF_LLM_BASE_URL}/models`, once, bounded to about 10 s (`check`).
    async fn check(&self) -> Result<ModelCheck, ProviderError> {
        self.check_models().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
