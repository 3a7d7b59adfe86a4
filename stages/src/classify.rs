//! `classify`: asks the provider for a Dewey code for the cleaned text, and checks it.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use shelf_documents::{DocumentStore, dewey};
use shelf_engine::{Stage, StageContext, StageError};

use crate::StageDeps;
use crate::errors::{from_documents, from_provider, missing_input, prompt_version};
use crate::provider::Provider;
use crate::provider::prompt_versions::CLASSIFICATION_PROMPT_VERSIONS;

/// How much of the cleaned text the classifier reads.
const CLASSIFY_CHARS: usize = 20_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyOptions {
    /// `dewey_v1` or `dewey_v2`; empty means the `SHELF_CLASSIFICATION_PROMPT_VERSION` setting.
    pub prompt_version: String,
}

pub struct Classify {
    documents: DocumentStore,
    provider: Arc<dyn Provider>,
    default_prompt_version: String,
}

impl Classify {
    pub fn new(deps: &StageDeps) -> Self {
        Classify {
            documents: deps.documents.clone(),
            provider: deps.provider.clone(),
            default_prompt_version: deps.classification_prompt_version.clone(),
        }
    }
}

/// The first `max` characters of the text a stage reads from upstream `cleaned_text_id`.
pub(crate) async fn cleaned_prefix(
    documents: &DocumentStore,
    ctx: &StageContext,
    max: usize,
) -> Result<String, StageError> {
    let id = ctx
        .inputs
        .find_str("cleaned_text_id")
        .ok_or_else(|| missing_input("cleaned_text_id"))?;
    let text = shelf_documents::get_text(&documents.db, id)
        .await
        .map_err(from_documents)?
        .ok_or_else(|| StageError::fatal("missing_input", format!("text {id} no longer exists")))?;
    Ok(text.body.chars().take(max).collect())
}

#[async_trait]
impl Stage for Classify {
    const KIND: &'static str = "classify";
    type Options = ClassifyOptions;

    async fn run(
        &self,
        options: &ClassifyOptions,
        ctx: &StageContext,
    ) -> Result<Value, StageError> {
        let prompt_version = prompt_version(
            &options.prompt_version,
            &self.default_prompt_version,
            CLASSIFICATION_PROMPT_VERSIONS,
        )?;
        let text = cleaned_prefix(&self.documents, ctx, CLASSIFY_CHARS).await?;
        let result = self
            .provider
            .classify(&text, prompt_version)
            .await
            .map_err(from_provider)?;
        let code = result.code.trim().to_string();
        if !dewey::is_valid_code(&code) {
            return Err(StageError::retryable(
                "invalid_classification",
                "the provider returned something that is not a Dewey code",
            ));
        }
        Ok(json!({
            "classification": {
                "code": code,
                "label": dewey::label(&code),
                "confidence": result.confidence.clamp(0.0, 1.0),
            }
        }))
    }
}
