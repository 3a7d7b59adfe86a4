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
