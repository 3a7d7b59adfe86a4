//! The `local` provider: real, offline work with no model at all. Cleaning is rule-based and
//! conservative (it must pass the fidelity check): whitespace normalization, ligatures spelled
//! out, words broken across line ends rejoined, hard-wrapped lines inside paragraphs rejoined.
//! OCR correction is rule-based too (`ocr_fix`): only fixes a word list can verify.
//! Classification scores a keyword table per Dewey division by term frequency. Titles,
//! summaries and tags are extractive. Everything is deterministic.
//!
//! Its parts: `clean` (cleaning), `classify` (with its keyword table, `dewey_keywords`),
//! `synopsis` (title, summary, tags), and `words`, the word helpers the last two share.

mod classify;
mod clean;
mod dewey_keywords;
mod synopsis;
#[cfg(test)]
mod testdata;
mod words;

use async_trait::async_trait;

use super::{
    Classification, CleanRequest, CorrectRequest, Provider, ProviderError, Synopsis, ocr_fix,
};

pub use classify::classify_text;
pub use clean::clean_text;
pub use synopsis::{SUMMARY_CHARS, synopsis, title};

/// The configuration name of this provider.
pub const NAME: &str = "local";

#[derive(Debug, Clone, Copy, Default)]
pub struct LocalProvider;

impl LocalProvider {
    pub fn new() -> Self {
        LocalProvider
    }
}

#[async_trait]
impl Provider for LocalProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Rule-based and honest: only rejoined words and character confusions a word list can
    /// verify (see `ocr_fix`); a page with nothing verifiable comes back unchanged.
    async fn correct(&self, request: CorrectRequest<'_>) -> Result<String, ProviderError> {
        Ok(ocr_fix::correct_ocr(request.text))
    }

    async fn clean(&self, request: CleanRequest<'_>) -> Result<String, ProviderError> {
        Ok(clean_text(request.text))
    }

    async fn classify(
        &self,
        text: &str,
        _prompt_version: &str,
    ) -> Result<Classification, ProviderError> {
        Ok(classify_text(text))
    }

    async fn summarize(&self, text: &str) -> Result<Synopsis, ProviderError> {
        Ok(synopsis(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::prompt_versions::{CMOS_V4, DEWEY_V1};
    use testdata::HORSES;

    #[tokio::test]
    async fn provider_calls_work() {
        let p = LocalProvider::new();
        assert_eq!(p.name(), "local");
        let cleaned = p
            .clean(CleanRequest {
                text: "a  b-\nc",
                context: "",
                prompt_version: CMOS_V4,
            })
            .await
            .unwrap();
        assert_eq!(cleaned, "a bc");
        assert_eq!(p.classify(HORSES, DEWEY_V1).await.unwrap().code, "636");
        assert_eq!(p.summarize(HORSES).await.unwrap().title, "Keeping Horses");
        let corrected = p
            .correct(CorrectRequest {
                text: "The rnorning infor-\nmation",
                model: "",
            })
            .await
            .unwrap();
        assert_eq!(corrected, "The morning information");
        let clean_page = "Nothing here to fix, 1998.";
        let same = p
            .correct(CorrectRequest {
                text: clean_page,
                model: "ignored",
            })
            .await
            .unwrap();
        assert_eq!(
            same, clean_page,
            "an unchanged page tells the stage nothing was found"
        );
    }
}
