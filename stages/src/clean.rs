//! `clean`: copy-edits the text with the language model, chunk by chunk. Chunks are cleaned
//! concurrently and each of a text of several is checkpointed, so a resumed run pays for no
//! chunk twice. A chunk the model summarized instead of copy-editing, or whose answer was cut
//! at its length bound (`answer_truncated`), is retried once, then replaced by its normalized
//! source with a warning event.

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use shelf_documents::{DocumentStore, TEXT_KIND_CLEANED};

use crate::texts::save_stage_text;
use shelf_engine::{Stage, StageContext, StageError};
use std::sync::Arc;

use crate::StageDeps;
use crate::chunk::{self, Chunk, ChunkSettings, fidelity_problem, normalize_whitespace};
use crate::errors::{from_documents, from_provider, missing_input, prompt_version};
use crate::provider::prompt_versions::CLEANING_PROMPT_VERSIONS;
use crate::provider::{CleanRequest, Provider};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CleanOptions {
    /// One of `cmos_v1` to `cmos_v4`; empty means the `SHELF_CLEANING_PROMPT_VERSION` setting.
    pub prompt_version: String,
}

pub struct Clean {
    documents: DocumentStore,
    provider: Arc<dyn Provider>,
    chunking: ChunkSettings,
    concurrency: usize,
    default_prompt_version: String,
}

impl Clean {
    pub fn new(deps: &StageDeps) -> Self {
        Clean {
            documents: deps.documents.clone(),
            provider: deps.provider.clone(),
            chunking: deps.chunking,
            concurrency: deps.llm_concurrency.max(1),
            default_prompt_version: deps.cleaning_prompt_version.clone(),
        }
    }
}

/// A chunk's checkpoint.
#[derive(Debug, Serialize, Deserialize)]
struct CleanedChunk {
    text: String,
    fallback: bool,
}

#[async_trait]
impl Stage for Clean {
    const KIND: &'static str = "clean";
    type Options = CleanOptions;

    async fn run(&self, options: &CleanOptions, ctx: &StageContext) -> Result<Value, StageError> {
        let prompt_version = prompt_version(
            &options.prompt_version,
            &self.default_prompt_version,
            CLEANING_PROMPT_VERSIONS,
        )?;
        let text_id = ctx
            .inputs
            .find_str("text_id")
            .ok_or_else(|| missing_input("text_id"))?;
        let source = shelf_documents::get_text(&self.documents.db, text_id)
            .await
            .map_err(from_documents)?
            .ok_or_else(|| {
                StageError::fatal("missing_input", format!("text {text_id} no longer exists"))
            })?;
        let chunks = chunk::split(&source.body, self.chunking);
        let total = chunks.len();
        let pending: Vec<_> = chunks
            .iter()
            .map(|c| self.clean_chunk(ctx, c, prompt_version, total))
            .collect();
        // The first failed chunk fails the stage: `try_collect` returns at once and drops the
        // chunks still in flight, and no further chunk is sent, so no call is paid for whose
        // answer would be thrown away.
        let results: Vec<(CleanedChunk, bool)> = futures::stream::iter(pending)
            .buffered(self.concurrency)
            .try_collect()
            .await?;
        let mut cleaned = Vec::with_capacity(total);
        let mut fallbacks = 0;
        let mut reused = 0;
        for (chunk, was_reused) in results {
            fallbacks += usize::from(chunk.fallback);
            reused += usize::from(was_reused);
            cleaned.push(chunk.text);
        }
        if reused > 0 {
            ctx.event(
                "chunks_reused",
                format!("{reused} of {total} chunks reused from checkpoints"),
            )
            .await?;
        }
        let body = chunk::join(&chunks, &cleaned);
        let saved = save_stage_text(ctx, &source.document_id, TEXT_KIND_CLEANED, body);
        Ok(json!({
            "cleaned_text_id": saved.id,
            "text_id": saved.id,
            "chars": saved.chars,
            "chunks": total,
            "fallback_chunks": fallbacks,
            "reused_chunks": reused,
            "provider": self.provider.name(),
            "prompt_version": prompt_version,
        }))
    }
}

impl Clean {
    async fn clean_chunk(
        &self,
        ctx: &StageContext,
        chunk: &Chunk,
        prompt_version: &str,
        total: usize,
    ) -> Result<(CleanedChunk, bool), StageError> {
        // The key names the chunk's content, so a changed chunking never reuses a wrong piece.
        let digest = hex::encode(&Sha256::digest(format!("{prompt_version}\0{}", chunk.text))[..8]);
        let key = format!("chunk-{}-{digest}", chunk.index);
        // A text of one chunk needs no checkpoint of its own: the stage's success, committed as
        // the chunk is done, is that checkpoint, and the write and read it saves are a fifth of
        // a short document's database round trips.
        let checkpointed = total > 1;
        if checkpointed && let Some(done) = ctx.part::<CleanedChunk>(&key).await? {
            return Ok((done, true));
        }
        let request = CleanRequest {
            text: &chunk.text,
            context: &chunk.context,
            prompt_version,
        };
        let mut problem = String::new();
        let mut result = None;
        for _ in 0..2 {
            let cleaned = match self.provider.clean(request).await {
                Ok(cleaned) => cleaned,
                // A part of the chunk is no more a cleaned chunk than a summary is.
                Err(e) if e.is_truncated() => {
                    problem = "the answer was cut off at its length bound".into();
                    continue;
                }
                Err(e) => return Err(from_provider(e)),
            };
            match fidelity_problem(&chunk.text, &cleaned) {
                None => {
                    result = Some(CleanedChunk {
                        text: cleaned,
                        fallback: false,
                    });
                    break;
                }
                Some(p) => problem = p,
            }
        }
        let done = match result {
            Some(done) => done,
            None => {
                ctx.event(
                    "stage_warning",
                    format!(
                        "chunk {} of {total} kept as normalized source: the cleaned text was not faithful ({problem})",
                        chunk.index + 1
                    ),
                )
                .await?;
                CleanedChunk {
                    text: normalize_whitespace(&chunk.text),
                    fallback: true,
                }
            }
        };
        if checkpointed {
            ctx.save_part(&key, &done).await?;
        }
        Ok((done, false))
    }
}
