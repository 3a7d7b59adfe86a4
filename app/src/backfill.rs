//! The search vectors of the current model: loading them ahead of the first search, and
//! `shelf admin embed-backfill`, which embeds the documents processed before an embedding model was
//! configured, or by another model (whose passages are then stale), from the text their latest
//! succeeded run cleaned, as the `embed` stage would. Resumable by construction: each document
//! is committed on its own, and a run picks only documents still without passages of the
//! current model, so an interrupted backfill continues where it stopped.

use shelf_documents::{
    DocumentsError, PassageCounts, passage_counts, put_passages, stale_documents,
};
use shelf_engine::subject_sql::succeeded_run_ids;
use shelf_stages::embed::EmbedOptions;
use tokio_util::sync::CancellationToken;

use crate::error::AppError;
use crate::shelf::Shelf;

/// Documents asked for per round.
const PAGE: u64 = 50;

/// Where a backfill stands, for its progress bar.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BackfillProgress {
    /// Documents embedded so far.
    pub embedded: u64,
    /// Documents with nothing to embed (an empty cleaned text) or gone meanwhile.
    pub skipped: u64,
    /// Passages written.
    pub passages: u64,
    /// Documents that needed embedding when the backfill started.
    pub total: u64,
}

impl Shelf {
    /// How many documents and passages the current model covers.
    pub async fn passage_counts(&self) -> Result<Option<PassageCounts>, AppError> {
        let Some(embeddings) = &self.embeddings else {
            return Ok(None);
        };
        Ok(Some(passage_counts(&self.db, embeddings.identity()).await?))
    }

    /// Loads the current model's vectors for semantic search now (they are otherwise loaded
    /// by the first search by meaning); the number of passages, or `None` without a model.
    pub async fn warm_vectors(&self) -> Result<Option<usize>, AppError> {
        let Some(embeddings) = &self.embeddings else {
            return Ok(None);
        };
        let matrix =
            shelf_documents::search::vectors::current_matrix(&self.db, embeddings.identity())
                .await?;
        Ok(Some(matrix.len()))
    }

    /// Embeds every document without passages of the current model, reporting progress after
    /// each; stops between documents when `stop` trips.
    pub async fn embed_backfill(
        &self,
        stop: CancellationToken,
        mut progress: impl FnMut(BackfillProgress),
    ) -> Result<BackfillProgress, AppError> {
        let Some(embeddings) = &self.embeddings else {
            return Err(AppError::Documents(DocumentsError::EmbeddingUnavailable));
        };
        let model = embeddings.identity().to_string();
        let mut done = BackfillProgress {
            total: passage_counts(&self.db, &model).await?.pending_documents,
            ..BackfillProgress::default()
        };
        progress(done);
        let options = EmbedOptions::default();
        let mut after: Option<String> = None;
        loop {
            let ids = stale_documents(&self.db, &model, after.as_deref(), PAGE).await?;
            let Some(last) = ids.last() else {
                break;
            };
            after = Some(last.clone());
            for id in ids {
                if stop.is_cancelled() {
                    return Ok(done);
                }
                let text = shelf_documents::latest_succeeded_text(
                    &self.db,
                    &id,
                    "cleaned",
                    &succeeded_run_ids(&id),
                )
                .await?;
                let Some(text) = text else {
                    done.skipped += 1;
                    progress(done);
                    continue;
                };
                let segments = shelf_documents::segments(&self.db, &id).await?;
                let passages = embeddings.passages(&text.body, &segments, &options);
                if passages.is_empty() {
                    done.skipped += 1;
                    progress(done);
                    continue;
                }
                let vectors = embeddings
                    .embed(passages.iter().map(|p| p.text.clone()).collect())
                    .await
                    .map_err(|e| AppError::Internal(format!("embedding {id}: {e}")))?;
                let count = passages.len() as u64;
                let pairs: Vec<_> = passages.into_iter().zip(vectors).collect();
                match put_passages(&self.db, &id, &text.run_id, &model, &pairs).await {
                    Ok(()) => {
                        done.embedded += 1;
                        done.passages += count;
                    }
                    // Deleted meanwhile: nothing to embed any more.
                    Err(DocumentsError::NotFound { .. }) => done.skipped += 1,
                    Err(e) => return Err(e.into()),
                }
                progress(done);
            }
        }
        Ok(done)
    }
}
