//! The `generic-compatible` provider: any OpenAI-compatible chat-completions endpoint
//! (`POST {SHELF_LLM_BASE_URL}/chat/completions`), such as OpenAI itself, vLLM, llama.cpp's
//! server, Ollama or LM Studio.
//!
//! Every call checks the prompt size before anything is sent, waits for a place under the
//! process's adaptive limit of requests in flight (`super::limiter`), has a time limit, waits
//! through the server's push-back (429, or 503 with `Retry-After`) without counting it as a
//! failed attempt, retries 5xx, timeouts and connection failures a bounded number of times
//! with exponential backoff (honouring `Retry-After`, capped), and reads at most `SHELF_LLM_MAX_RESPONSE_CHARS`
//! characters of the answer. Prompts, answers and the credential are never logged, and error
//! messages never contain them. Provider-reported token usage is added to a shared counter.
//!
//! Its parts: `config` (settings, API key, usage counter), `client` (HTTP, retries, errors),
//! `prompts` and `parse` (answers); this file holds the provider itself.

mod client;
mod config;
mod parse;
mod prompts;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::limiter::Limiter;
use super::{Classification, CleanRequest, CorrectRequest, Provider, ProviderError, Synopsis};
use client::{chat_completions_url, fatal, invalid, shown_url};

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
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
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

#[async_trait]
impl Provider for OpenAiCompatibleProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    /// One page with the `ocr_fix_v1` prompt, on `request.model` when it names one (the
    /// `SHELF_OCR_LLM_MODEL` setting), else on the main model.
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
        let answer = self
            .complete_with(
                "correct",
                model,
                system,
                &correction_user_prompt(request.text),
            )
            .await?;
        let corrected = tidy_cleaned_answer(&answer, "");
        if corrected.is_empty() {
            return Err(invalid("the model returned no corrected text"));
        }
        Ok(corrected)
    }

    async fn clean(&self, request: CleanRequest<'_>) -> Result<String, ProviderError> {
        let system = cleaning_system_prompt(request.prompt_version).ok_or_else(|| {
            unknown_version("cleaning", request.prompt_version, CLEANING_PROMPT_VERSIONS)
        })?;
        if request.text.trim().is_empty() {
            return Ok(String::new());
        }
        let answer = self
            .complete("clean", &system, &cleaning_user_prompt(&request))
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
            unknown_version(
                "classification",
                prompt_version,
                CLASSIFICATION_PROMPT_VERSIONS,
            )
        })?;
        let answer = self
            .complete("classify", &system, &document_prompt(text))
            .await?;
        parse_classification(&answer)
    }

    async fn summarize(&self, text: &str) -> Result<Synopsis, ProviderError> {
        let answer = self
            .complete("summarize", summary_system_prompt(), &document_prompt(text))
            .await?;
        parse_synopsis(&answer)
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
