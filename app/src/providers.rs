//! Choosing the language-model provider from the settings.

use std::sync::Arc;
use std::time::Duration;

use shelf_stages::Provider;
use shelf_stages::provider::MockProvider;
use shelf_stages::provider::limiter::{INITIAL_LIMIT, LimitConfig, Limiter};
use shelf_stages::provider::local::LocalProvider;
use shelf_stages::provider::openai::{
    ApiKey, OpenAiCompatibleProvider, OpenAiConfig, UsageCounter,
};

use crate::settings::{LlmProvider, Settings};

/// The configured provider, its token counter when it reports usage, and the limiter of its
/// requests in flight when it has one (only `generic-compatible` does: `mock` and `local`
/// spend no tokens and wait on no server).
#[derive(Clone)]
pub struct ProviderHandle {
    pub provider: Arc<dyn Provider>,
    pub usage: Option<Arc<UsageCounter>>,
    pub limiter: Option<Arc<Limiter>>,
}

pub fn from_settings(settings: &Settings) -> Arc<dyn Provider> {
    build(settings).provider
}

pub fn build(settings: &Settings) -> ProviderHandle {
    match settings.llm.provider {
        LlmProvider::Mock => ProviderHandle {
            provider: Arc::new(MockProvider {
                delay: Duration::from_millis(settings.llm.mock_delay_ms),
            }),
            usage: None,
            limiter: None,
        },
        LlmProvider::Local => ProviderHandle {
            provider: Arc::new(LocalProvider::new()),
            usage: None,
            limiter: None,
        },
        LlmProvider::GenericCompatible => {
            // A missing base URL is not a startup error (commands that never call the model
            // still work); every call then fails with a message naming SHELF_LLM_BASE_URL.
            let provider = OpenAiCompatibleProvider::new(openai_config(settings));
            let usage = provider.usage_counter();
            let limiter = provider.limiter();
            ProviderHandle {
                provider: Arc::new(provider),
                usage: Some(usage),
                limiter: Some(limiter),
            }
        }
    }
}

/// The `generic-compatible` configuration from the `SHELF_LLM_*` settings.
pub fn openai_config(settings: &Settings) -> OpenAiConfig {
    OpenAiConfig {
        base_url: settings.llm.base_url.clone(),
        api_key: settings
            .llm
            .api_key
            .as_ref()
            .map(|key| ApiKey::new(key.expose())),
        api_key_env: settings.llm.api_key_env.clone(),
        model: settings.llm.model.clone(),
        correction_model: Some(settings.ocr.llm_model.clone()).filter(|m| !m.trim().is_empty()),
        timeout: Duration::from_secs(settings.llm.timeout_seconds.max(1)),
        idle_timeout: Duration::from_secs(settings.llm.idle_timeout_seconds.max(1)),
        max_prompt_chars: settings.llm.max_prompt_chars,
        max_response_chars: settings.llm.max_response_chars,
        push_back_budget: Duration::from_secs(settings.llm.push_back_seconds),
        concurrency: LimitConfig::new(
            settings.llm.min_concurrency,
            settings.llm.concurrency_ceiling(),
            INITIAL_LIMIT,
        ),
        ..OpenAiConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use shelf_stages::provider::CleanRequest;

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let vars: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_vars(&vars).unwrap()
    }

    #[tokio::test]
    async fn each_setting_picks_its_provider() {
        let mock = build(&settings(&[("SHELF_LLM_PROVIDER", "mock")]));
        assert_eq!(mock.provider.name(), "mock");
        assert!(mock.usage.is_none());
        let local = build(&settings(&[("SHELF_LLM_PROVIDER", "local")]));
        assert_eq!(local.provider.name(), "local");
        let c = local
            .provider
            .classify(
                "Horses need hay and pasture; a mare carries her foal for eleven months.",
                "dewey_v2",
            )
            .await
            .unwrap();
        assert_eq!(c.code, "636");
        let generic = build(&settings(&[]));
        assert_eq!(generic.provider.name(), "generic-compatible");
        assert!(generic.usage.is_some());
    }

    #[tokio::test]
    async fn generic_compatible_without_a_base_url_says_what_to_set() {
        let provider = from_settings(&settings(&[("SHELF_LLM_PROVIDER", "generic-compatible")]));
        let e = provider
            .clean(CleanRequest {
                text: "text",
                context: "",
                prompt_version: "cmos_v4",
            })
            .await
            .unwrap_err();
        assert_eq!(e.code, "provider_not_configured");
        assert!(!e.retryable);
        assert!(e.message.contains("SHELF_LLM_BASE_URL"), "{}", e.message);
    }

    #[test]
    fn settings_reach_the_generic_provider_config() {
        let s = settings(&[
            ("SHELF_LLM_BASE_URL", "http://127.0.0.1:8000/v1"),
            ("SHELF_LLM_API_KEY_ENV", "MY_KEY"),
            ("MY_KEY", "sk-from-env"),
            ("SHELF_LLM_MODEL", "llama"),
            ("SHELF_LLM_TIMEOUT_SECONDS", "7"),
            ("SHELF_LLM_IDLE_TIMEOUT_SECONDS", "9"),
            ("SHELF_OCR_LLM_MODEL", "ocr-model"),
            ("SHELF_LLM_MAX_PROMPT_CHARS", "1000"),
            ("SHELF_LLM_MAX_RESPONSE_CHARS", "2000"),
        ]);
        let c = openai_config(&s);
        assert_eq!(c.base_url.as_deref(), Some("http://127.0.0.1:8000/v1"));
        assert_eq!(c.api_key, Some(ApiKey::new("sk-from-env")));
        assert_eq!(c.api_key_env, "MY_KEY");
        assert_eq!(c.model, "llama");
        assert_eq!(c.timeout, Duration::from_secs(7));
        assert_eq!(c.idle_timeout, Duration::from_secs(9));
        assert_eq!(c.correction_model.as_deref(), Some("ocr-model"));
        assert_eq!(
            openai_config(&settings(&[])).idle_timeout,
            Duration::from_secs(60)
        );
        assert_eq!(openai_config(&settings(&[])).correction_model, None);
        assert_eq!((c.max_prompt_chars, c.max_response_chars), (1000, 2000));
        assert!(!format!("{c:?}").contains("sk-from-env"));
    }
}
