//! The embedding section: where the local sentence-embedding model is (`embed` stage, semantic
//! and hybrid search, "more like this"), and how many cores its inference may use.

use std::path::PathBuf;

use super::reader::{COUNT, Reader};

#[derive(Debug, Clone)]
pub struct EmbeddingSettings {
    /// `SHELF_EMBEDDING_MODEL_DIR`: a sentence-transformers directory. Unset: no embeddings
    /// (the `embed` stage is skipped, search stays keyword).
    pub model_dir: Option<PathBuf>,
    /// `SHELF_EMBEDDING_THREADS`: inference threads per process; 0 (default) leaves one core
    /// to the rest of the process (at least one thread).
    pub threads: usize,
}

impl EmbeddingSettings {
    /// The threads inference uses here.
    pub fn effective_threads(&self) -> usize {
        if self.threads > 0 {
            return self.threads;
        }
        std::thread::available_parallelism()
            .map_or(1, |n| n.get().saturating_sub(1))
            .max(1)
    }
}

pub(super) fn parse(r: &mut Reader) -> EmbeddingSettings {
    let embedding = EmbeddingSettings {
        model_dir: r
            .optional("SHELF_EMBEDDING_MODEL_DIR")
            .filter(|d| !d.trim().is_empty())
            .map(PathBuf::from),
        threads: r.parse("SHELF_EMBEDDING_THREADS", 0, COUNT),
    };
    r.check(
        embedding.threads <= 256,
        "SHELF_EMBEDDING_THREADS must be at most 256",
    );
    embedding
}
