//! Choosing the language-model provider from the settings.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shelf_stages::provider::{Classification, CleanRequest, MockProvider, Synopsis};
use shelf_stages::{Provider, ProviderError};

use crate::settings::{LlmProvider, Settings};

pub fn from_settings(settings: &Settings) -> Arc<dyn Provider> {
    match settings.llm_provider {
        LlmProvider::Mock => Arc::new(MockProvider {
            delay: Duration::from_millis(settings.llm_mock_delay_ms),
        }),
        LlmProvider::GenericCompatible => Arc::new(Unavailable {
            name: "generic-compatible",
        }),
        LlmProvider::Local => Arc::new(Unavailable { name: "local" }),
    }
}

/// A provider this build does not ship yet. Every call fails the stage with an error that
/// says which setting to change, so a run never hangs and never fakes output.
struct Unavailable {
    name: &'static str,
}

impl Unavailable {
    fn error(&self) -> ProviderError {
        ProviderError {
            code: "provider_unavailable",
            message: format!(
                "the {} language-model provider is not available in this version of shelf; set SHELF_LLM_PROVIDER=mock",
                self.name
            ),
            retryable: false,
        }
    }
}

#[async_trait]
impl Provider for Unavailable {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn clean(&self, _request: CleanRequest<'_>) -> Result<String, ProviderError> {
        Err(self.error())
    }

    async fn classify(
        &self,
        _text: &str,
        _prompt_version: &str,
    ) -> Result<Classification, ProviderError> {
        Err(self.error())
    }

    async fn summarize(&self, _text: &str) -> Result<Synopsis, ProviderError> {
        Err(self.error())
    }
}
