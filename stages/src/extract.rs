//! `extract`: reads the document's file and turns it into raw text (Markdown) with the
//! extractor its format names (`shelf_extractors`), through the extraction cache. It stores
//! the text, any transcript segments and, for paged documents (PDF, images), one page record
//! per page (`text_layer`, or `pending` for OCR), and sets the flags later stages read:
//! `needs_ocr`, which pages need it (`ocr_pages`) and the run holding the page records
//! (`pages_run_id`).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use shelf_db::sql::SqlExt;
use shelf_documents::pages::put_pages_statements;
use shelf_documents::{
    Document, DocumentStore, PageRecord, PageSource, TEXT_KIND_RAW, format_for,
    put_segments_statements,
};
use shelf_engine::{Stage, StageContext, StageError};
pub use shelf_extractors::Limits;
use shelf_extractors::{Control, ExtractError, Extraction, Input, Kind, extractor_version};
use tokio_util::sync::CancellationToken;

use crate::StageDeps;
use crate::errors::from_documents;
use crate::metrics;
use crate::texts::{save_stage_text, stage_text_id};

/// Most warnings recorded as events per extraction; the rest are counted in one more event.
const MAX_WARNING_EVENTS: usize = 20;

/// How the `extract` stage reads files: the size it reads at all, the extractors' caps, and
/// whether results are cached.
#[derive(Debug, Clone)]
pub struct ExtractionSettings {
    /// Largest source file read into memory (`SHELF_EXTRACT_MAX_BYTES`).
    pub max_bytes: u64,
    pub limits: Limits,
    /// `SHELF_EXTRACT_CACHE`: reuse the result of an earlier extraction of the same bytes by
    /// the same extractor version.
    pub cache: bool,
}

impl Default for ExtractionSettings {
    fn default() -> Self {
        ExtractionSettings {
            max_bytes: 104_857_600,
            limits: Limits::default(),
            cache: true,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractOptions {}

pub struct Extract {
    documents: DocumentStore,
    settings: ExtractionSettings,
}

impl Extract {
    pub fn new(deps: &StageDeps) -> Self {
        Extract {
            documents: deps.documents.clone(),
            settings: deps.extraction.clone(),
        }
    }
}

#[async_trait]
impl Stage for Extract {
    const KIND: &'static str = "extract";
    type Options = ExtractOptions;

    /// Every failure but cancellation is counted as a conversion failure, by its code.
    async fn run(
        &self,
        _options: &ExtractOptions,
        ctx: &StageContext,
    ) -> Result<Value, StageError> {
        let result = self.convert(ctx).await;
        if let Err(e) = &result
            && !ctx.cancel.is_cancelled()
            && e.code != "canceled"
        {
            metrics::conversion_failed(&e.code);
        }
        result
    }
}

impl Extract {
    async fn convert(&self, ctx: &StageContext) -> Result<Value, StageError> {
        let document = self
            .documents
            .get(&ctx.subject)
            .await
            .map_err(from_documents)?;
        let DocumentExtraction {
            extraction,
            pages,
            from_cache,
            extractor: version,
            media_type,
        } = extract_document_with(
            &self.documents,
            &self.settings,
            &document,
            &ctx.cancel,
            CacheWrite::Hand(ctx),
        )
        .await?;
        let ocr_pages: Vec<u32> = pages
            .iter()
            .filter(|p| p.source == PageSource::Pending)
            .map(|p| p.number)
            .collect();
        let needs_ocr = !ocr_pages.is_empty();
        if extraction.markdown.trim().is_empty() && !needs_ocr {
            return Err(StageError::fatal(
                "no_text_found",
                "the document holds no text to extract",
            ));
        }
        record_warnings(ctx, &extraction.warnings).await?;

        // Everything extract stores commits with its success, fenced: a worker that lost the
        // run writes none of it, and the run's page records replace only its own.
        let saved = save_stage_text(ctx, &document.id, TEXT_KIND_RAW, extraction.markdown);
        if !extraction.segments.is_empty() {
            for statement in put_segments_statements(&document.id, &extraction.segments) {
                ctx.write_on_success(statement);
            }
        }
        if !pages.is_empty() {
            for statement in
                put_pages_statements(&document.id, &ctx.run_id, &pages).map_err(from_documents)?
            {
                ctx.write_on_success(statement);
            }
        }
        let metadata = &extraction.metadata;
        Ok(json!({
            "document_id": document.id,
            "raw_text_id": saved.id,
            "text_id": saved.id,
            "chars": saved.chars,
            "encoding": metadata.encoding,
            "media_type": media_type,
            "extractor": version,
            "from_cache": from_cache,
            "page_count": metadata.page_count.or_else(|| (!extraction.pages.is_empty()).then_some(extraction.pages.len() as u32)),
            "segments": extraction.segments.len(),
            "title": metadata.title,
            "author": metadata.author,
            "language": metadata.language,
            "warnings": extraction.warnings.len(),
            "needs_ocr": needs_ocr,
            "ocr_pages": ocr_pages,
            "pages_run_id": ctx.run_id,
            "page_records": pages.len(),
        }))
    }
}

/// A document's extraction as the `extract` stage makes it, for callers outside a run too
/// (imports convert documents they do not process).
pub struct DocumentExtraction {
    pub extraction: Extraction,
    /// The page records of a paged document (PDF, image) as extracted; empty for the others.
    pub pages: Vec<PageRecord>,
    pub from_cache: bool,
    /// The extractor and its version (`pdf@3`).
    pub extractor: &'static str,
    pub media_type: &'static str,
}

/// Reads a document's source and extracts it with its format's extractor, through the
/// extraction cache: checks the size cap and that the bytes are still the ones the document
/// id names. Cancellation trips the extractor's control.
pub async fn extract_document(
    documents: &DocumentStore,
    settings: &ExtractionSettings,
    document: &Document,
    cancel: &CancellationToken,
) -> Result<DocumentExtraction, StageError> {
    extract_document_with(documents, settings, document, cancel, CacheWrite::Now).await
}

/// When a fresh extraction enters the cache.
enum CacheWrite<'a> {
    /// At once (outside a run).
    Now,
    /// With the stage attempt's success.
    Hand(&'a StageContext),
}

async fn extract_document_with(
    documents: &DocumentStore,
    settings: &ExtractionSettings,
    document: &Document,
    cancel: &CancellationToken,
    cache_write: CacheWrite<'_>,
) -> Result<DocumentExtraction, StageError> {
    let path = documents
        .open_source(document)
        .await
        .map_err(from_documents)?;
    let format = format_for(&document.extension).ok_or_else(|| {
        StageError::fatal(
            "unsupported_file_type",
            format!("no extractor for .{} files", document.extension),
        )
    })?;
    if document.byte_size > settings.max_bytes {
        return Err(StageError::fatal(
            "file_too_large",
            format!(
                "the file has {} bytes; the extractor reads at most {} (SHELF_EXTRACT_MAX_BYTES)",
                document.byte_size, settings.max_bytes
            ),
        ));
    }
    let version = extractor_version(format.kind);
    let db = &documents.db;
    let cached = if settings.cache {
        shelf_documents::cached_extraction(db, &document.sha256, version)
            .await
            .map_err(from_documents)?
    } else {
        None
    };
    let from_cache = cached.is_some();
    let extraction = match cached {
        Some(extraction) => extraction,
        None => {
            let bytes = tokio::fs::read(&path).await.map_err(|e| {
                StageError::retryable("io_error", format!("cannot read the source: {e}"))
            })?;
            // Content-addressed: the bytes must still be the ones the id names.
            if hex::encode(Sha256::digest(&bytes)) != document.sha256 {
                return Err(StageError::fatal(
                    "source_changed",
                    "the source file changed since it was ingested; ingest it again",
                ));
            }
            let extraction = extract_off_thread(
                format.kind,
                path,
                bytes,
                &document.extension,
                &settings.limits,
                cancel,
            )
            .await?;
            if settings.cache && matches!(cache_write, CacheWrite::Now) {
                let statement = shelf_documents::cache_extraction_statement(
                    &document.sha256,
                    version,
                    &extraction,
                    None,
                )
                .map_err(from_documents)?;
                db.execute_sql(statement)
                    .await
                    .map_err(|e| from_documents(e.into()))?;
            }
            extraction
        }
    };
    // In a run, the Markdown is the raw text the stage saves in the same transaction: the
    // cache names that text instead of keeping a copy, a fresh result and a hit alike (a hit
    // then names the newest run's text, which outlives the older runs' that retention prunes).
    if settings.cache
        && let CacheWrite::Hand(ctx) = cache_write
    {
        ctx.write_on_success(
            shelf_documents::cache_extraction_statement(
                &document.sha256,
                version,
                &extraction,
                Some(&stage_text_id(ctx)),
            )
            .map_err(from_documents)?,
        );
    }
    Ok(DocumentExtraction {
        pages: page_records(format.kind, &extraction),
        extraction,
        from_cache,
        extractor: version,
        media_type: format.media_type,
    })
}

/// Runs the extractor on the blocking pool. Cancellation trips the extractor's control and
/// then waits for it to stop, so a killed converter is gone before the caller returns.
async fn extract_off_thread(
    kind: Kind,
    path: std::path::PathBuf,
    bytes: Vec<u8>,
    extension: &str,
    limits: &Limits,
    cancel: &CancellationToken,
) -> Result<Extraction, StageError> {
    let control = Control::new(Arc::new(AtomicBool::new(false)));
    let limits = limits.clone();
    let extension = extension.to_string();
    let worker_control = control.clone();
    let mut task = tokio::task::spawn_blocking(move || {
        shelf_extractors::extract(
            kind,
            Input {
                path: &path,
                bytes: &bytes,
                extension: &extension,
            },
            &limits,
            &worker_control,
        )
    });
    let joined = tokio::select! {
        joined = &mut task => joined,
        _ = cancel.cancelled() => {
            control.cancel();
            // The extractor checks its control between pieces of work; a stuck parser is
            // not waited for past a grace period (its thread ends when the parser does).
            let _ = tokio::time::timeout(Duration::from_secs(10), &mut task).await;
            return Err(StageError::canceled());
        }
    };
    let result = joined.map_err(|e| {
        tracing::error!(error = %e, "extraction task failed");
        StageError::fatal("extractor_crashed", ExtractError::crashed().detail)
    })?;
    result.map_err(|e| {
        if e.code == "extractor_crashed" {
            tracing::error!(kind = ?kind, "extractor panicked");
        }
        if e.retryable {
            StageError::retryable(e.code, e.detail)
        } else {
            StageError::fatal(e.code, e.detail)
        }
    })
}

/// The page records of a paged document (PDF, image) as extracted: text-layer pages with
/// their text, the others `pending` for OCR. A raster image is all pending: its extractor's
/// pages, else its metadata's page count, else one page. Other formats have none.
fn page_records(kind: Kind, extraction: &Extraction) -> Vec<PageRecord> {
    match kind {
        Kind::Pdf => extraction
            .pages
            .iter()
            .map(|page| {
                if page.has_text_layer {
                    PageRecord::text_layer(page.number, page.text.clone())
                } else {
                    PageRecord::pending(page.number)
                }
            })
            .collect(),
        Kind::Image if !extraction.pages.is_empty() => extraction
            .pages
            .iter()
            .map(|page| PageRecord::pending(page.number))
            .collect(),
        Kind::Image => {
            let count = extraction.metadata.page_count.unwrap_or(1).max(1);
            (1..=count).map(PageRecord::pending).collect()
        }
        _ => Vec::new(),
    }
}

async fn record_warnings(ctx: &StageContext, warnings: &[String]) -> Result<(), StageError> {
    for warning in warnings.iter().take(MAX_WARNING_EVENTS) {
        ctx.event("stage_warning", warning.clone()).await?;
    }
    if warnings.len() > MAX_WARNING_EVENTS {
        ctx.event(
            "stage_warning",
            format!(
                "{} more extraction warnings",
                warnings.len() - MAX_WARNING_EVENTS
            ),
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use shelf_extractors::{Metadata, Page};

    use super::*;

    fn page(number: u32, text: &str, has_text_layer: bool) -> Page {
        Page {
            number,
            text: text.into(),
            has_text_layer,
        }
    }

    #[test]
    fn paged_documents_get_one_record_per_page() {
        let pdf = Extraction {
            pages: vec![page(1, "typed", true), page(2, "", false)],
            ..Extraction::default()
        };
        let records = page_records(Kind::Pdf, &pdf);
        assert_eq!(
            records,
            vec![PageRecord::text_layer(1, "typed"), PageRecord::pending(2)]
        );

        let tiff = Extraction {
            pages: vec![page(1, "", false), page(2, "", false), page(3, "", false)],
            ..Extraction::default()
        };
        let sources: Vec<PageSource> = page_records(Kind::Image, &tiff)
            .iter()
            .map(|p| p.source)
            .collect();
        assert_eq!(sources, vec![PageSource::Pending; 3]);

        let counted = Extraction {
            metadata: Metadata {
                page_count: Some(2),
                ..Metadata::default()
            },
            ..Extraction::default()
        };
        assert_eq!(page_records(Kind::Image, &counted).len(), 2);
        assert_eq!(
            page_records(Kind::Image, &Extraction::default()),
            vec![PageRecord::pending(1)]
        );
        assert!(page_records(Kind::Docx, &pdf).is_empty());
    }
}
