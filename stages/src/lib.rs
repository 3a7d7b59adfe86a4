//! Shelf's concrete pipeline stages, one file each, and the clients they need (language-model
//! providers). Adding a stage: one file here, one line in [`registry`], one YAML entry.

pub mod chunk;
pub mod classify;
pub mod clean;
pub mod correct;
pub mod embed;
pub mod errors;
pub mod extract;
pub mod index;
pub mod metrics;
pub mod ocr;
pub mod provider;
pub mod summarize;
mod texts;

use std::sync::Arc;

use shelf_documents::DocumentStore;
use shelf_engine::Registry;

pub use provider::{Provider, ProviderError};

/// What the stages share: the document store, the language-model provider and the embedding
/// model.
#[derive(Clone)]
pub struct StageDeps {
    pub documents: DocumentStore,
    pub provider: Arc<dyn Provider>,
    pub chunking: chunk::ChunkSettings,
    /// How many chunks one clean stage sends to the provider at once.
    pub llm_concurrency: usize,
    /// How `extract` reads files: size cap, extractor limits, cache.
    pub extraction: extract::ExtractionSettings,
    /// How `ocr` recognizes pages (`SHELF_OCR_*`).
    pub ocr: ocr::OcrStageSettings,
    /// Which OCR pages `correct` sends to the model, and which model.
    pub correction: correct::CorrectionSettings,
    /// `SHELF_CLEANING_PROMPT_VERSION`, used when a stage's options do not name one.
    pub cleaning_prompt_version: String,
    /// `SHELF_CLASSIFICATION_PROMPT_VERSION`, likewise.
    pub classification_prompt_version: String,
    /// The local embedding model (`SHELF_EMBEDDING_MODEL_DIR`); `None`: `embed` is skipped.
    pub embeddings: Option<embed::Embeddings>,
}

/// Every stage kind Shelf ships.
pub fn registry(deps: &StageDeps) -> Registry {
    let mut registry = Registry::new();
    registry
        .register(extract::Extract::new(deps))
        .register(ocr::Ocr::new(deps))
        .register(correct::Correct::new(deps))
        .register(clean::Clean::new(deps))
        .register(classify::Classify::new(deps))
        .register(summarize::Summarize::new(deps))
        .register(embed::Embed::new(deps))
        .register(index::Index::new(deps));
    registry
}
