//! `embed`: cuts a run's cleaned text into passages (a transcript into groups of cues, so a hit
//! can cite a time), embeds them with the local model, and hands passages and vectors to the
//! engine's `write_on_success`, so they replace the document's old ones in the transaction that
//! records the stage's success. Skipped (not failed) in a process without a model.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use shelf_documents::{DocumentStore, Passage};
use shelf_engine::{Stage, StageContext, StageError};
use tokio::sync::Semaphore;

use crate::StageDeps;
use crate::errors::{from_documents, missing_input};

/// A sentence-embedding model, as the stage and search need it (the app wraps the candle
/// model of `shelf-embed` in it; tests use a small deterministic one).
pub trait PassageEmbedder: Send + Sync + 'static {
    /// What identifies the vectors this model makes (stored with each one; another identity
    /// makes them stale).
    fn identity(&self) -> &str;
    /// Tokens the model's tokenizer makes of `text` (without special tokens).
    fn count_tokens(&self, text: &str) -> usize;
    /// The model's sequence limit, special tokens included.
    fn max_tokens(&self) -> usize;
    /// One vector per text. Blocking CPU work.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
}

/// The model of this process, with the permit that keeps its inference to one batch at a
/// time: the model's own threads use the cores it was given, and runs taking turns batch by
/// batch leaves the rest of the process (the API) its share.
#[derive(Clone)]
pub struct Embeddings {
    model: Arc<dyn PassageEmbedder>,
    turn: Arc<Semaphore>,
    /// Recent queries' vectors: a results page and its facets, the next page, the same search
    /// again all ask for the same vector, and a forward pass costs ~15 ms of a core.
    queries: Arc<std::sync::Mutex<QueryCache>>,
}

/// Query vectors by query text, at most [`QUERY_CACHE`] of them: the oldest half goes when
/// it is full.
#[derive(Default)]
struct QueryCache {
    vectors: std::collections::HashMap<String, (u64, Vec<f32>)>,
    clock: u64,
}

/// Query vectors kept per process (384 floats each: about 1.5 MiB in all).
const QUERY_CACHE: usize = 1024;

impl QueryCache {
    fn get(&mut self, query: &str) -> Option<Vec<f32>> {
        self.clock += 1;
        let clock = self.clock;
        self.vectors.get_mut(query).map(|(used, v)| {
            *used = clock;
            v.clone()
        })
    }

    fn put(&mut self, query: &str, vector: Vec<f32>) {
        if self.vectors.len() >= QUERY_CACHE {
            let mut uses: Vec<u64> = self.vectors.values().map(|(u, _)| *u).collect();
            uses.sort_unstable();
            let median = uses[uses.len() / 2];
            self.vectors.retain(|_, (u, _)| *u > median);
        }
        self.clock += 1;
        self.vectors.insert(query.to_string(), (self.clock, vector));
    }
}

/// Passages embedded per turn.
const BATCH: usize = 32;

impl Embeddings {
    pub fn new(model: Arc<dyn PassageEmbedder>) -> Self {
        Embeddings {
            model,
            turn: Arc::new(Semaphore::new(1)),
            queries: Arc::default(),
        }
    }

    pub fn identity(&self) -> &str {
        self.model.identity()
    }

    pub fn model(&self) -> &Arc<dyn PassageEmbedder> {
        &self.model
    }

    /// Embeds `texts` on a blocking thread, one batch per turn.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, String> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            let _turn = self
                .turn
                .acquire()
                .await
                .map_err(|_| "the embedding model was shut down".to_string())?;
            let model = self.model.clone();
            let batch = batch.to_vec();
            let out = tokio::task::spawn_blocking(move || {
                let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
                model.embed(&refs)
            })
            .await
            .map_err(|e| format!("embedding thread failed: {e}"))??;
            vectors.extend(out);
        }
        Ok(vectors)
    }

    /// A search query's vector (no turn taken: one short text, and a person is waiting);
    /// recent queries' vectors come from a small cache.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>, String> {
        if let Some(vector) = self.cached(|c| c.get(query)) {
            return Ok(vector);
        }
        let model = self.model.clone();
        let text = query.to_string();
        let mut out = tokio::task::spawn_blocking(move || model.embed(&[text.as_str()]))
            .await
            .map_err(|e| format!("embedding thread failed: {e}"))??;
        let vector = out
            .pop()
            .ok_or_else(|| "the model returned no vector".to_string())?;
        self.cached(|c| c.put(query, vector.clone()));
        Ok(vector)
    }

    fn cached<T>(&self, f: impl FnOnce(&mut QueryCache) -> T) -> T {
        f(&mut self.queries.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// `text`'s passages (a transcript's when `segments` is not empty) within the model's
    /// sequence limit.
    pub fn passages(
        &self,
        text: &str,
        segments: &[shelf_documents::Segment],
        options: &EmbedOptions,
    ) -> Vec<Passage> {
        let model = self.model.clone();
        let budget = move |t: &str| model.count_tokens(t);
        // Room for [CLS] and [SEP].
        let max = options
            .passage_tokens
            .min(self.model.max_tokens().saturating_sub(2))
            .max(16);
        let overlap = options.overlap_tokens.min(max / 2);
        if segments.is_empty() {
            shelf_documents::split_passages(text, &budget, max, overlap)
        } else {
            shelf_documents::split_transcript(segments, &budget, max, overlap)
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbedOptions {
    /// Tokens per passage (at most the model's limit).
    pub passage_tokens: usize,
    /// Tokens of the previous passage's last sentences that start the next one.
    pub overlap_tokens: usize,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        EmbedOptions {
            passage_tokens: 256,
            overlap_tokens: 32,
        }
    }
}

pub struct Embed {
    documents: DocumentStore,
    embeddings: Option<Embeddings>,
}

impl Embed {
    pub fn new(deps: &StageDeps) -> Self {
        Embed {
            documents: deps.documents.clone(),
            embeddings: deps.embeddings.clone(),
        }
    }
}

#[async_trait]
impl Stage for Embed {
    const KIND: &'static str = "embed";
    type Options = EmbedOptions;

    fn unavailable(&self) -> Option<String> {
        self.embeddings
            .is_none()
            .then(|| "no embedding model is configured (SHELF_EMBEDDING_MODEL_DIR)".to_string())
    }

    async fn run(&self, options: &EmbedOptions, ctx: &StageContext) -> Result<Value, StageError> {
        let Some(embeddings) = &self.embeddings else {
            return Err(StageError::fatal(
                "embedding_unavailable",
                "no embedding model is configured (SHELF_EMBEDDING_MODEL_DIR)",
            ));
        };
        let id = ctx
            .inputs
            .find_str("cleaned_text_id")
            .ok_or_else(|| missing_input("cleaned_text_id"))?;
        let text = shelf_documents::get_text(&self.documents.db, id)
            .await
            .map_err(from_documents)?
            .ok_or_else(|| {
                StageError::fatal("missing_input", format!("text {id} no longer exists"))
            })?;
        let segments = shelf_documents::segments(&self.documents.db, &ctx.subject)
            .await
            .map_err(from_documents)?;
        let passages = embeddings.passages(&text.body, &segments, options);
        let mut vectors = Vec::with_capacity(passages.len());
        for batch in passages.chunks(BATCH) {
            if ctx.cancel.is_cancelled() {
                return Err(StageError::canceled());
            }
            let texts = batch.iter().map(|p| p.text.clone()).collect();
            let out = embeddings
                .embed(texts)
                .await
                .map_err(|e| StageError::retryable("embedding_failed", e))?;
            vectors.extend(out);
        }
        let count = passages.len();
        let pairs: Vec<(Passage, Vec<f32>)> = passages.into_iter().zip(vectors).collect();
        if pairs.len() != count {
            return Err(StageError::fatal(
                "embedding_failed",
                "the model returned fewer vectors than passages",
            ));
        }
        for statement in shelf_documents::put_passages_statements(
            &ctx.subject,
            &ctx.run_id,
            embeddings.identity(),
            &pairs,
        )
        .map_err(from_documents)?
        {
            ctx.write_on_success(statement);
        }
        Ok(json!({
            "passages": count,
            "model": embeddings.identity(),
            "transcript": !segments.is_empty(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts its calls; a vector of the text's length.
    struct Counting(std::sync::atomic::AtomicUsize);

    impl PassageEmbedder for Counting {
        fn identity(&self) -> &str {
            "counting"
        }
        fn count_tokens(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
        fn max_tokens(&self) -> usize {
            256
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    #[tokio::test]
    async fn a_repeated_query_is_embedded_once_and_the_cache_stays_bounded() {
        let model = Arc::new(Counting(Default::default()));
        let embeddings = Embeddings::new(model.clone());
        let calls = || model.0.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(embeddings.embed_query("horses").await, Ok(vec![6.0]));
        assert_eq!(embeddings.embed_query("horses").await, Ok(vec![6.0]));
        assert_eq!(calls(), 1);
        for i in 0..(QUERY_CACHE * 2) {
            embeddings
                .embed_query(&format!("q{i}"))
                .await
                .expect("embed");
            // The one in constant use stays.
            embeddings.embed_query("horses").await.expect("embed");
        }
        assert_eq!(calls(), 1 + QUERY_CACHE * 2);
        assert!(embeddings.cached(|c| c.vectors.len()) <= QUERY_CACHE);
    }
}
