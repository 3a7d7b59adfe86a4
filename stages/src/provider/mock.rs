//! The deterministic `mock` provider for tests and benchmarks: the same input always gives the
//! same output, with no model and no network. An optional per-call delay makes stages slow
//! enough for crash and cancellation tests. Like a real provider it reports token usage to the
//! metrics, counted deterministically ([`mock_tokens`]), so usage and cost can be tested.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::stop_words::is_keyword_stop_word;
use super::{
    Classification, CleanRequest, CorrectRequest, Provider, ProviderError, Synopsis, slug,
};
use crate::chunk::normalize_whitespace;

#[derive(Debug, Clone, Default)]
pub struct MockProvider {
    /// Sleep this long in every call.
    pub delay: Duration,
}

impl MockProvider {
    async fn pause(&self) {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
    }

    /// Reports one call's usage, as a real provider's answer would.
    fn report(&self, prompt: &[&str], completion: &str) {
        let prompt_tokens = prompt.iter().map(|p| mock_tokens(p)).sum();
        crate::metrics::llm_usage(self.name(), prompt_tokens, mock_tokens(completion));
    }
}

/// The mock's token count of a text: one token per started four characters, the usual rule of
/// thumb for English, so the same text always costs the same.
pub fn mock_tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(4) as u64
}

#[async_trait]
impl Provider for MockProvider {
    fn name(&self) -> &'static str {
        "mock"
    }

    /// Whitespace normalized, like `clean`: deterministic, and never a rewrite.
    async fn correct(&self, request: CorrectRequest<'_>) -> Result<String, ProviderError> {
        self.pause().await;
        let corrected = normalize_whitespace(request.text);
        self.report(&[request.text], &corrected);
        Ok(corrected)
    }

    async fn clean(&self, request: CleanRequest<'_>) -> Result<String, ProviderError> {
        self.pause().await;
        let cleaned = normalize_whitespace(request.text);
        self.report(&[request.context, request.text], &cleaned);
        Ok(cleaned)
    }

    /// A Dewey division chosen by the text's hash: deterministic, not meaningful.
    async fn classify(
        &self,
        text: &str,
        _prompt_version: &str,
    ) -> Result<Classification, ProviderError> {
        self.pause().await;
        let digest = Sha256::digest(text.as_bytes());
        let code = format!("{}{}0", digest[0] % 10, digest[1] % 10);
        self.report(&[text], &code);
        Ok(Classification {
            code,
            confidence: 0.5,
        })
    }

    /// Extractive: the first line as title, the first sentences as summary, the most frequent
    /// longer words as tags.
    async fn summarize(&self, text: &str) -> Result<Synopsis, ProviderError> {
        self.pause().await;
        let title: String = text
            .lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .find(|l| !l.is_empty())
            .unwrap_or("Untitled document")
            .chars()
            .take(120)
            .collect();
        let body: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect();
        let body = body.join("\n");
        let mut summary = String::new();
        for sentence in body.split_inclusive(['.', '!', '?']) {
            let sentence = sentence.split_whitespace().collect::<Vec<_>>().join(" ");
            if summary.len() + sentence.len() > 400 {
                break;
            }
            if !summary.is_empty() {
                summary.push(' ');
            }
            summary.push_str(&sentence);
            if summary.len() > 200 {
                break;
            }
        }
        // Tags skip the same stop words as the local provider's, so neither list drifts.
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for word in text.split(|c: char| !c.is_alphanumeric()) {
            let word = word.to_lowercase();
            if word.chars().count() >= 4
                && !word.chars().all(|c| c.is_ascii_digit())
                && !is_keyword_stop_word(&word)
            {
                *counts.entry(word).or_default() += 1;
            }
        }
        let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let tags: Vec<String> = ranked.into_iter().take(5).map(|(w, _)| w).collect();
        self.report(&[text], &format!("{title}\n{summary}\n{}", tags.join(" ")));
        Ok(Synopsis {
            suggested_stem: slug(&title),
            title,
            summary,
            tags,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn is_deterministic() {
        let p = MockProvider::default();
        let text = "# Horses\n\nHorses are animals. Horses eat hay. Hay is grass.";
        assert_eq!(
            p.classify(text, "dewey_v2").await.unwrap(),
            p.classify(text, "dewey_v2").await.unwrap()
        );
        let s = p.summarize(text).await.unwrap();
        assert_eq!(s.title, "Horses");
        assert_eq!(s.suggested_stem, "horses");
        assert_eq!(s.tags[0], "horses");
        assert_eq!(
            s.summary,
            "Horses are animals. Horses eat hay. Hay is grass."
        );
    }

    #[tokio::test]
    async fn correct_normalizes_whitespace_and_pauses() {
        let p = MockProvider {
            delay: Duration::from_millis(30),
        };
        let started = std::time::Instant::now();
        let request = CorrectRequest {
            text: "Tbe  quick\t fox \n\n\njumps",
            model: "any",
        };
        let once = p.correct(request).await.unwrap();
        assert_eq!(once, "Tbe quick fox\n\njumps");
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert_eq!(p.correct(request).await.unwrap(), once);
    }

    #[test]
    fn tokens_are_counted_per_started_four_characters() {
        assert_eq!(mock_tokens(""), 0);
        assert_eq!(mock_tokens("hay"), 1);
        assert_eq!(mock_tokens("hays"), 1);
        assert_eq!(mock_tokens("horse"), 2);
        assert_eq!(mock_tokens("Ünïcodé!"), 2);
    }

    #[test]
    fn slugs_are_safe() {
        assert_eq!(slug("Hello, World! Ünïcode"), "hello-world-ncode");
        assert_eq!(slug("???"), "document");
    }
}
