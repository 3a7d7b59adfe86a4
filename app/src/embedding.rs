//! The local embedding model of this process: loaded once when Shelf opens, from
//! `SHELF_EMBEDDING_MODEL_DIR` (checked then: a bad directory stops the process with a message
//! naming what is wrong), and shared by the `embed` stage and semantic search.

use std::sync::Arc;

use shelf_embed::{Embedder, Options};
use shelf_stages::embed::{Embeddings, PassageEmbedder};

use crate::error::AppError;
use crate::settings::{ConfigError, EmbeddingSettings};

/// `shelf-embed`'s model as the stages and search use it.
struct LocalModel {
    model: Embedder,
    /// The special tokens every encoding adds (`[CLS]`, `[SEP]`), taken off counts so that
    /// counts add up over the pieces of a text.
    special_tokens: usize,
}

impl PassageEmbedder for LocalModel {
    fn identity(&self) -> &str {
        self.model.identity()
    }

    fn count_tokens(&self, text: &str) -> usize {
        // A text the tokenizer refuses is counted generously by its bytes (one token each):
        // its passage stays within the limit, whatever it is.
        self.model
            .count_tokens(text)
            .map_or(text.len(), |n| n.saturating_sub(self.special_tokens))
    }

    fn max_tokens(&self) -> usize {
        self.model.max_tokens()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.model.embed(texts).map_err(|e| e.to_string())
    }
}

/// The model `settings` name, loaded and checked; `None` when none is configured.
pub async fn load(settings: &EmbeddingSettings) -> Result<Option<Embeddings>, AppError> {
    let Some(dir) = settings.model_dir.clone() else {
        return Ok(None);
    };
    let options = Options {
        threads: settings.effective_threads(),
        ..Options::default()
    };
    let shown = dir.display().to_string();
    let loaded = tokio::task::spawn_blocking(move || Embedder::load_with(&dir, options))
        .await
        .map_err(|e| AppError::Internal(format!("loading the embedding model: {e}")))?;
    let model = loaded.map_err(|e| {
        AppError::Config(ConfigError {
            problems: vec![format!("SHELF_EMBEDDING_MODEL_DIR ({shown}): {e}")],
        })
    })?;
    let special_tokens = model.count_tokens("").unwrap_or(0);
    tracing::info!(
        model = model.identity(),
        dims = model.dims(),
        threads = model.threads(),
        "embedding model loaded"
    );
    Ok(Some(Embeddings::new(Arc::new(LocalModel {
        model,
        special_tokens,
    }))))
}
