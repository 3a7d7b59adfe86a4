//! The language-model provider behind OCR correction, cleaning, classification and summaries. Stages depend on
//! this trait only; which provider runs is configuration.

pub mod limiter;
pub mod local;
pub mod mock;
mod ocr_fix;
pub mod openai;
pub mod prompt_versions;
mod stop_words;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use mock::MockProvider;

/// A provider failure. Messages never contain prompts, outputs or credentials.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub code: &'static str,
    pub message: String,
    /// Timeouts, 429 and 5xx are worth another attempt; bad configuration is not.
    pub retryable: bool,
}

/// The code of an answer the model stopped because it reached the call's `max_tokens` bound
/// (`finish_reason: "length"`): never a success, and no HTTP-level retry fixes it. `clean` and
/// `correct` treat it like an unfaithful answer (asked once more, then the source is kept).
pub const ANSWER_TRUNCATED: &str = "answer_truncated";

/// The code of a configured model the server does not list (`Provider::check`).
pub const MODEL_NOT_FOUND: &str = "model_not_found";

impl ProviderError {
    /// Whether the answer was cut at the call's bound ([`ANSWER_TRUNCATED`]).
    pub fn is_truncated(&self) -> bool {
        self.code == ANSWER_TRUNCATED
    }
}

/// What [`Provider::check`] found out about the configured model(s) before any work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ModelCheck {
    /// The provider calls no model server (`mock`, `local`).
    NotNeeded,
    /// The server listed every configured model.
    Verified { models: Vec<String> },
    /// The server could not say (no model list, an unreadable one, a busy server): the
    /// first call will tell. `note` says why, for logs and `/ready`.
    Unverified { note: String },
}

/// One chunk to copy-edit.
#[derive(Debug, Clone, Copy)]
pub struct CleanRequest<'a> {
    pub text: &'a str,
    /// Text just before the chunk, for orientation only; never echoed back.
    pub context: &'a str,
    pub prompt_version: &'a str,
}

/// One OCR page to correct.
#[derive(Debug, Clone, Copy)]
pub struct CorrectRequest<'a> {
    pub text: &'a str,
    /// The model to use (`SHELF_OCR_LLM_MODEL`); empty means the provider's main model.
    pub model: &'a str,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    /// A Dewey code such as `636.1`.
    pub code: String,
    pub confidence: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Synopsis {
    pub title: String,
    pub summary: String,
    pub tags: Vec<String>,
    pub suggested_stem: String,
}

#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's configuration name (`mock`, `generic-compatible`, ...).
    fn name(&self) -> &'static str;

    /// Copy-edits one chunk: fixes spacing, hyphenation and obvious typos, keeps every word of
    /// content, number and identifier.
    async fn clean(&self, request: CleanRequest<'_>) -> Result<String, ProviderError>;

    /// Fixes OCR errors in one page (misread characters, words split across lines) and
    /// nothing else: no rewording, no reflowing beyond rejoined words.
    async fn correct(&self, request: CorrectRequest<'_>) -> Result<String, ProviderError>;

    async fn classify(
        &self,
        text: &str,
        prompt_version: &str,
    ) -> Result<Classification, ProviderError>;

    async fn summarize(&self, text: &str) -> Result<Synopsis, ProviderError>;

    /// Checks, once before work starts, that the configured model(s) exist where the calls
    /// will go. Providers without a model server have nothing to check.
    async fn check(&self) -> Result<ModelCheck, ProviderError> {
        Ok(ModelCheck::NotNeeded)
    }
}

/// A file-name stem from a title: lowercase ASCII words joined by `-`, at most 80 characters.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for word in title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let ascii: String = word
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if ascii.is_empty() {
            continue;
        }
        if out.len() + ascii.len() + 1 > 80 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&ascii);
    }
    if out.is_empty() {
        "document".to_string()
    } else {
        out
    }
}
