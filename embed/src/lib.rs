//! Shelf's sentence embeddings: a sentence-transformers BERT directory loaded from local files,
//! checked at load, and run on the CPU with candle in a bounded thread pool. It knows nothing of
//! documents, passages or the database: texts in, unit vectors out.
//!
//! Modules: `config` (reading and checking the directory's JSON files), `identity` (the
//! weights' digest, cached beside the model). This file holds the public types, loading and the
//! batched forward pass with pooling.

mod config;
mod identity;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::BertModel;
use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationParams};

pub use config::Pooling;

/// Why a model directory was refused or a batch could not be embedded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding model directory {0} does not exist or is not a directory")]
    NotADirectory(PathBuf),
    #[error("embedding model file {0} is missing")]
    MissingFile(PathBuf),
    #[error("embedding model file {path} cannot be read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("embedding model file {path} is invalid: {reason}")]
    InvalidFile { path: PathBuf, reason: String },
    #[error("embedding model in {path} is not supported: {reason}")]
    Unsupported { path: PathBuf, reason: String },
    #[error("embedding model weights in {path} do not match config.json: {reason}")]
    Weights { path: PathBuf, reason: String },
    #[error("embedding failed: {0}")]
    Inference(String),
}

impl EmbedError {
    /// The stable code of the HTTP edge and of a failed run's record.
    pub fn code(&self) -> &'static str {
        match self {
            EmbedError::Inference(_) => "embedding_failed",
            _ => "embedding_model_invalid",
        }
    }
}

/// How an [`Embedder`] runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Threads of the embedder's own rayon pool, which runs the tokenizer, one batch per thread,
    /// and candle's matmuls (gemm splits its work into tasks of the *current* rayon pool). At
    /// least 1. One thing escapes it: candle runs large element-wise operations (GELU, adds;
    /// about a tenth of the work) on its own process-wide pool of `CANDLE_NUM_THREADS - 1`
    /// extra threads (default: physical cores - 1), sized once from the environment; a process
    /// that must bound those too sets `CANDLE_NUM_THREADS` before it starts.
    pub threads: usize,
    /// Texts per forward pass (after sorting by length, so a batch pads little). At least 1.
    pub batch_size: usize,
}

impl Default for Options {
    /// All cores but one (at least one), so that a worker leaves a core to the API; batches of 16.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Options {
            threads: cores.saturating_sub(1).max(1),
            batch_size: 16,
        }
    }
}

/// A loaded, checked embedding model. `Send + Sync`: load it once per process and share it
/// (`Arc<Embedder>`); concurrent calls share its bounded pool.
pub struct Embedder {
    model: BertModel,
    /// Truncates at `max_tokens`, no padding (batches are padded here).
    tokenizer: Tokenizer,
    /// The same tokenizer without truncation, to count what a text would really take.
    counter: Tokenizer,
    pooling: Pooling,
    normalize: bool,
    dims: usize,
    max_tokens: usize,
    pad_id: u32,
    identity: String,
    batch_size: usize,
    pool: rayon::ThreadPool,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("identity", &self.identity)
            .field("max_tokens", &self.max_tokens)
            .field("threads", &self.pool.current_num_threads())
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads and checks a sentence-transformers directory: config.json (BERT), model.safetensors
    /// (memory-mapped once: `VarBuilder::from_mmaped_safetensors`), tokenizer.json, the pooling config
    /// (1_Pooling/config.json: mean or cls; normalisation from modules.json's Normalize module or the
    /// model's known default). Refuses a bad directory with EmbedError naming what is wrong (missing file,
    /// wrong tensor shape, tokenizer that does not load, unsupported architecture or pooling).
    pub fn load(dir: &Path) -> Result<Embedder, EmbedError> {
        Embedder::load_with(dir, Options::default())
    }

    /// [`Embedder::load`] with explicit [`Options`] (thread count, batch size).
    pub fn load_with(dir: &Path, options: Options) -> Result<Embedder, EmbedError> {
        if !dir.is_dir() {
            return Err(EmbedError::NotADirectory(dir.to_path_buf()));
        }
        let layout = config::read(dir)?;
        let weights = dir.join("model.safetensors");
        let tokenizer_path = dir.join("tokenizer.json");
        config::require(&weights)?;
        config::require(&tokenizer_path)?;

        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| EmbedError::InvalidFile {
                path: tokenizer_path.clone(),
                reason: e.to_string(),
            })?;
        let vocab = tokenizer.get_vocab_size(true);
        if vocab == 0 || vocab > layout.bert.vocab_size {
            return Err(EmbedError::InvalidFile {
                path: tokenizer_path,
                reason: format!(
                    "its vocabulary has {vocab} tokens, the model's embedding table {}",
                    layout.bert.vocab_size
                ),
            });
        }
        // tokenizer.json may carry its own truncation and fixed padding (all-MiniLM-L6-v2's says
        // 128 and pads to 128): the sentence-transformers configuration is what counts.
        tokenizer.with_padding(None);
        let mut counter = tokenizer.clone();
        counter
            .with_truncation(None)
            .map_err(|e| EmbedError::InvalidFile {
                path: tokenizer_path.clone(),
                reason: e.to_string(),
            })?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: layout.max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| EmbedError::InvalidFile {
                path: tokenizer_path.clone(),
                reason: e.to_string(),
            })?;
        let pad_id = tokenizer
            .token_to_id("[PAD]")
            .unwrap_or(layout.bert.pad_token_id as u32);

        let digest = identity::weights_digest(&weights)?;
        let model = load_bert(&weights, &layout.bert)?;

        let threads = options.threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("shelf-embed-{i}"))
            .build()
            .map_err(|e| EmbedError::Inference(format!("cannot start {threads} threads: {e}")))?;

        let dims = layout.bert.hidden_size;
        let identity = format!(
            "{}@{}/{}/{}/{}",
            layout.name,
            &digest[..16],
            dims,
            layout.pooling.as_str(),
            if layout.normalize { "norm" } else { "raw" }
        );
        Ok(Embedder {
            model,
            tokenizer,
            counter,
            pooling: layout.pooling,
            normalize: layout.normalize,
            dims,
            max_tokens: layout.max_tokens,
            pad_id,
            identity,
            batch_size: options.batch_size.max(1),
            pool,
        })
    }

    /// Embeds texts in batches (batch size internal, e.g. 16-32), truncating at the model's max
    /// sequence length; each vector L2-normalised when the model says so. Blocking CPU work: callers
    /// run it on a blocking thread.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.pool.install(|| {
            catch_unwind(AssertUnwindSafe(|| self.embed_in_pool(texts))).unwrap_or_else(|_| {
                Err(EmbedError::Inference(
                    "the model panicked on this batch".into(),
                ))
            })
        })
    }

    /// The vectors' length (the model's hidden size).
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Tokens (word pieces, with special tokens) a text would take, for the passage splitter's budget.
    /// Not truncated: a text longer than [`Embedder::max_tokens`] counts all its tokens.
    pub fn count_tokens(&self, text: &str) -> Result<usize, EmbedError> {
        self.counter
            .encode(text, true)
            .map(|e| e.len())
            .map_err(|e| EmbedError::Inference(format!("tokenizer: {e}")))
    }

    /// The model's max sequence length in tokens (special tokens included); longer texts are
    /// truncated when embedded.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// What identifies the vectors this model makes: e.g. "all-MiniLM-L6-v2@<first 16 hex of the safetensors SHA-256>/384/mean/norm".
    /// Stored with each vector; a different identity marks old vectors stale.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Threads of the embedder's pool.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    fn embed_in_pool(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Inference(format!("tokenizer: {e}")))?;
        // Longest first, so each batch holds texts of similar length and pads little; masked
        // padding does not change a text's vector, only the work.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encodings[i].len()));
        // Batches run side by side on the pool's threads: candle parallelises a large matmul
        // itself, but not the per-head attention products nor the small ones, so one batch per
        // thread is what keeps every thread of the pool busy.
        let batches: Vec<&[usize]> = order.chunks(self.batch_size).collect();
        let vectors: Vec<Vec<Vec<f32>>> = batches
            .par_iter()
            .map(|batch| {
                let ids: Vec<&[u32]> = batch.iter().map(|&i| encodings[i].get_ids()).collect();
                self.forward(&ids)
                    .map_err(|e| EmbedError::Inference(e.to_string()))
            })
            .collect::<Result<_, _>>()?;
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (batch, vs) in batches.iter().zip(vectors) {
            for (&i, v) in batch.iter().zip(vs) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// One padded batch through BERT, pooled and (if the model says so) normalised.
    fn forward(&self, ids: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let rows = ids.len();
        // An empty encoding cannot happen with special tokens, but a width of 0 must not reach
        // the model either.
        let width = ids.iter().map(|t| t.len()).max().unwrap_or(0).max(1);
        let mut flat_ids = Vec::with_capacity(rows * width);
        let mut flat_mask = Vec::with_capacity(rows * width);
        for t in ids {
            flat_ids.extend_from_slice(t);
            flat_ids.extend(std::iter::repeat_n(self.pad_id, width - t.len()));
            flat_mask.extend(std::iter::repeat_n(1u32, t.len()));
            flat_mask.extend(std::iter::repeat_n(0u32, width - t.len()));
        }
        let device = Device::Cpu;
        let input_ids = Tensor::from_vec(flat_ids, (rows, width), &device)?;
        let mask = Tensor::from_vec(flat_mask, (rows, width), &device)?;
        let token_type_ids = input_ids.zeros_like()?;
        let hidden = self
            .model
            .forward(&input_ids, &token_type_ids, Some(&mask))?;
        let pooled = match self.pooling {
            Pooling::Mean => {
                // sentence-transformers' masked mean: sum over real tokens / their count
                let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let sum = hidden.broadcast_mul(&m)?.sum(1)?;
                let count = m.sum(1)?.clamp(1e-9f32, f32::MAX)?;
                sum.broadcast_div(&count)?
            }
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
        };
        let pooled = if self.normalize {
            // F.normalize: v / max(||v||, 1e-12)
            let norm = pooled
                .sqr()?
                .sum_keepdim(1)?
                .sqrt()?
                .clamp(1e-12f32, f32::MAX)?;
            pooled.broadcast_div(&norm)?
        } else {
            pooled
        };
        pooled.to_vec2::<f32>()
    }
}

/// BERT from the safetensors file, each tensor's shape checked against config.json by candle's
/// `VarBuilder::get` (a mismatch is an error naming the tensor).
fn load_bert(
    weights: &Path,
    bert: &candle_transformers::models::bert::Config,
) -> Result<BertModel, EmbedError> {
    let invalid = |reason: String| EmbedError::InvalidFile {
        path: weights.to_path_buf(),
        reason,
    };
    let loaded = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the file is mapped read-only for the duration of this call only (the
        // VarBuilder copies each tensor into memory it owns and is dropped before returning).
        // Shelf never writes a model file, and the fetch script installs a model directory by
        // renaming a complete one into place, so the mapped file does not change under us.
        let vb = unsafe {
            VarBuilder::from_mmaped_safetensors(
                &[weights],
                candle_transformers::models::bert::DTYPE,
                &Device::Cpu,
            )
        }
        .map_err(|e| invalid(e.to_string()))?;
        BertModel::load(vb, bert).map_err(|e| EmbedError::Weights {
            path: weights.to_path_buf(),
            reason: e.to_string(),
        })
    }));
    loaded.unwrap_or_else(|_| Err(invalid("loading the tensors panicked".into())))
}
