//! `summarize`: asks the provider for a title, a summary, tags and a file-name stem.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use shelf_documents::DocumentStore;
use shelf_engine::{Stage, StageContext, StageError};

use crate::StageDeps;
use crate::classify::cleaned_prefix;
use crate::errors::from_provider;
use crate::provider::{Provider, slug};

const SUMMARIZE_CHARS: usize = 20_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummarizeOptions {}

pub struct Summarize {
    documents: DocumentStore,
    provider: Arc<dyn Provider>,
}

impl Summarize {
    pub fn new(deps: &StageDeps) -> Self {
        Summarize {
            documents: deps.documents.clone(),
            provider: deps.provider.clone(),
        }
    }
}

#[async_trait]
impl Stage for Summarize {
    const KIND: &'static str = "summarize";
    type Options = SummarizeOptions;

    async fn run(
        &self,
        _options: &SummarizeOptions,
        ctx: &StageContext,
    ) -> Result<Value, StageError> {
        let text = cleaned_prefix(&self.documents, ctx, SUMMARIZE_CHARS).await?;
        let synopsis = self
            .provider
            .summarize(&text)
            .await
            .map_err(from_provider)?;
        let title: String = synopsis.title.trim().chars().take(200).collect();
        let summary: String = synopsis.summary.trim().chars().take(2000).collect();
        let mut tags: Vec<String> = synopsis
            .tags
            .iter()
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty() && t.chars().count() <= 64)
            .collect();
        tags.dedup();
        tags.truncate(12);
        // The stem becomes a file name: never trust it as given.
        let stem = slug(if synopsis.suggested_stem.trim().is_empty() {
            &title
        } else {
            &synopsis.suggested_stem
        });
        Ok(json!({
            "synopsis": {
                "title": title,
                "summary": summary,
                "tags": tags,
                "suggested_stem": stem,
            }
        }))
    }
}
