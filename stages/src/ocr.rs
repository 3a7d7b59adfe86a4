//! `ocr`: recognizes the pages `extract` found without a text layer (every page of an image,
//! the scanned pages of a PDF) with Tesseract (`shelf_ocr`), a few pages at once. Each
//! finished page is a partial checkpoint, so a reclaimed, resumed or retried run re-reads no
//! finished page; each is also written to the page records as it finishes. The document's text
//! is then its pages in order: text-layer pages as extracted, OCR pages as recognized.
//!
//! Every write is fenced by the run's lease: page records through `write_now` as pages finish
//! (and again with the stage's success), and a kept page image is written under a temporary
//! name and renamed into place only once the page's checkpoint has committed (see
//! [`StagedImage`]), so a worker that lost the run leaves no record and no image.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shelf_documents::pages::{
    PageRecord, PageSource, put_pages_statements, run_pages, upsert_pages_statements,
};
use shelf_documents::{DocumentStore, format_for};
use shelf_engine::{Stage, StageContext, StageError};
use shelf_extractors::Control;
use shelf_extractors::Kind;
pub use shelf_ocr::OcrSettings;
use shelf_ocr::{OcrError, PageImage, PageText, Recognizer};

use crate::StageDeps;
use crate::errors::from_documents;
use crate::metrics;
use crate::texts::save_stage_text;

/// Kind of the text `ocr` writes (text-layer and OCR pages joined).
pub const TEXT_KIND_OCR: &str = "ocr";

/// Past the page deadline, how long a page that Tesseract does not let go of is waited for
/// before the stage gives up on it (its thread finishes on its own).
const STUCK_PAGE_GRACE: Duration = Duration::from_secs(30);

/// How the `ocr` stage works (`SHELF_OCR_*`).
#[derive(Debug, Clone)]
pub struct OcrStageSettings {
    pub recognition: OcrSettings,
    /// Pages recognized at once (`SHELF_OCR_PAGE_CONCURRENCY`).
    pub page_concurrency: usize,
    /// Most pages one document may send to OCR (`SHELF_OCR_PDF_MAX_PAGES`).
    pub max_pages: u32,
    /// A page error fails the document (`true`) or is recorded and skipped (`false`).
    pub fail_on_page_error: bool,
    /// Keep each page image under the data directory (`SHELF_OCR_PRESERVE_PAGE_IMAGES`).
    pub preserve_page_images: bool,
}

impl Default for OcrStageSettings {
    fn default() -> Self {
        OcrStageSettings {
            recognition: OcrSettings::default(),
            page_concurrency: 2,
            max_pages: 1000,
            fail_on_page_error: true,
            preserve_page_images: false,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OcrOptions {}

pub struct Ocr {
    documents: DocumentStore,
    recognizer: Recognizer,
    settings: OcrStageSettings,
}

impl Ocr {
    pub fn new(deps: &StageDeps) -> Self {
        Ocr {
            documents: deps.documents.clone(),
            recognizer: Recognizer::new(deps.ocr.recognition.clone()),
            settings: deps.ocr.clone(),
        }
    }
}

/// A page's checkpoint: what OCR made of it, or why it could not.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PageOutcome {
    text: String,
    confidence: Option<f64>,
    rotation_degrees: Option<u32>,
    passes: u32,
    warnings: Vec<String>,
    /// `code: detail` of a page that failed (recorded because fail-on-page-error is off).
    error: Option<String>,
    image_path: Option<String>,
}

/// The file OCR reads pages from.
enum Source {
    Pdf(PathBuf),
    Raster(Arc<Vec<u8>>),
}

#[async_trait]
impl Stage for Ocr {
    const KIND: &'static str = "ocr";
    type Options = OcrOptions;

    async fn run(&self, _options: &OcrOptions, ctx: &StageContext) -> Result<Value, StageError> {
        let db = &self.documents.db;
        let document = self
            .documents
            .get(&ctx.subject)
            .await
            .map_err(from_documents)?;
        let mut pages = this_runs_pages(db, ctx, &document.id).await?;
        let wanted: Vec<u32> = pages
            .iter()
            .filter(|p| p.source != PageSource::TextLayer)
            .map(|p| p.number)
            .collect();
        let max_pages = self.settings.max_pages;
        if wanted.len() > max_pages as usize {
            return Err(StageError::fatal(
                "ocr_too_many_pages",
                format!(
                    "{} pages need OCR; SHELF_OCR_PDF_MAX_PAGES allows {max_pages}",
                    wanted.len()
                ),
            ));
        }
        let path = self
            .documents
            .open_source(&document)
            .await
            .map_err(from_documents)?;
        let is_pdf = format_for(&document.extension).is_some_and(|f| f.kind == Kind::Pdf);
        let source = if is_pdf {
            Source::Pdf(path)
        } else {
            let bytes = tokio::fs::read(&path).await.map_err(|e| {
                StageError::retryable("io_error", format!("cannot read the source: {e}"))
            })?;
            Source::Raster(Arc::new(bytes))
        };
        let source = Arc::new(source);

        // One cancel flag for every page in flight: a canceled run or a failed page stops them
        // all (Tesseract's monitor reads it; pdftoppm is killed).
        let control = Control::new(Arc::new(AtomicBool::new(false)));
        let started = Instant::now();
        let reading = futures::stream::iter(wanted.iter().copied())
            // Once a page failed or the run was canceled no further page starts, so the drain
            // below waits only for the pages already in flight.
            .take_while(|_| std::future::ready(!control.is_canceled()))
            .map(|number| self.read_page(ctx, &source, &document.id, number, &control))
            .buffer_unordered(self.settings.page_concurrency.max(1));
        let mut reading = std::pin::pin!(reading);
        let mut outcomes = Vec::with_capacity(wanted.len());
        let mut reused = 0usize;
        let failure = loop {
            let next = tokio::select! {
                next = reading.next() => next,
                _ = ctx.cancel.cancelled() => {
                    control.cancel();
                    break Some(StageError::canceled());
                }
            };
            match next {
                None => break None,
                Some(Ok((number, outcome, was_reused))) => {
                    reused += usize::from(was_reused);
                    outcomes.push((number, outcome));
                }
                Some(Err(e)) => {
                    control.cancel();
                    break Some(e);
                }
            }
        };
        // Let pages already in flight see the cancel flag and end before the stage returns.
        while reading.next().await.is_some() {}
        metrics::ocr().busy(started.elapsed());
        if let Some(error) = failure {
            return Err(error);
        }

        let threshold = f64::from(self.settings.recognition.low_confidence_threshold);
        for (number, outcome) in outcomes {
            if let Some(page) = pages.iter_mut().find(|p| p.number == number) {
                *page = page_record(number, outcome);
            }
        }
        // The records written as pages finished, once more with the stage's success: a page
        // whose checkpoint committed but whose record did not (the lease lost in between) is
        // reused by the next attempt without another write of its own.
        let read: Vec<PageRecord> = pages
            .iter()
            .filter(|p| wanted.contains(&p.number))
            .cloned()
            .collect();
        for statement in
            upsert_pages_statements(&document.id, &ctx.run_id, &read).map_err(from_documents)?
        {
            ctx.write_on_success(statement);
        }
        let summary = OcrSummary::of(&pages, threshold);
        if reused > 0 {
            ctx.event(
                "pages_reused",
                format!(
                    "{reused} of {} OCR pages reused from checkpoints",
                    wanted.len()
                ),
            )
            .await?;
        }
        if !summary.low_confidence.is_empty() {
            ctx.event(
                "stage_warning",
                format!(
                    "{} page(s) under the confidence threshold of {threshold}: pages {}",
                    summary.low_confidence.len(),
                    page_list(&summary.low_confidence)
                ),
            )
            .await?;
        }
        let body = joined_text(&pages);
        if body.trim().is_empty() {
            return Err(if summary.failed.len() == wanted.len() {
                StageError::fatal("ocr_failed", "OCR could not read any page of the document")
            } else {
                StageError::fatal(
                    "no_text_found",
                    "OCR found no text in the document's page images",
                )
            });
        }
        let saved = save_stage_text(ctx, &document.id, TEXT_KIND_OCR, body);
        Ok(json!({
            "ran": summary.ocr > 0,
            "pages_run_id": ctx.run_id,
            "text_id": saved.id,
            "ocr_text_id": saved.id,
            "chars": saved.chars,
            "ocr_pages": summary.ocr,
            "failed_pages": summary.failed,
            "text_layer_pages": pages.len() - wanted.len(),
            "reused_pages": reused,
            "recognized_pages": wanted.len() - reused,
            "average_confidence": summary.average_confidence,
            "low_confidence_pages": summary.low_confidence,
            "rotated_pages": summary.rotated,
            "seconds": (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
        }))
    }
}

impl Ocr {
    /// One page: its checkpoint if an earlier attempt finished it, else recognition on the
    /// blocking pool. Returns the page number, its outcome and whether it was reused.
    async fn read_page(
        &self,
        ctx: &StageContext,
        source: &Arc<Source>,
        document_id: &str,
        number: u32,
        control: &Control,
    ) -> Result<(u32, PageOutcome, bool), StageError> {
        let recognition = &self.settings.recognition;
        let key = format!(
            "page-{number}-{}-{}",
            recognition.languages, recognition.pdf_dpi
        );
        if let Some(done) = ctx.part::<PageOutcome>(&key).await? {
            return Ok((number, done, true));
        }
        if control.is_canceled() {
            return Err(StageError::canceled());
        }
        let mut image = None;
        let outcome = match self.recognize(source, number, control).await {
            Ok(text) => {
                metrics::ocr().page_processed();
                let image_path = match &text.image_png {
                    Some(png) => {
                        let staged = self.stage_image(document_id, number, png).await?;
                        let path = staged.relative.clone();
                        image = Some(staged);
                        Some(path)
                    }
                    None => None,
                };
                let mut warnings = text.warnings.clone();
                let threshold = recognition.low_confidence_threshold;
                if text.confidence < threshold && !text.text.trim().is_empty() {
                    warnings.push(format!(
                        "low confidence: {:.1} is under the threshold of {threshold}",
                        text.confidence
                    ));
                }
                PageOutcome {
                    text: text.text,
                    confidence: Some(f64::from(text.confidence)),
                    rotation_degrees: Some(text.rotation_degrees),
                    passes: text.passes,
                    warnings,
                    error: None,
                    image_path,
                }
            }
            Err(e) if e.code == "canceled" => return Err(StageError::canceled()),
            Err(e) => {
                metrics::ocr().page_failed();
                if self.settings.fail_on_page_error || e.code == "ocr_unavailable" {
                    let detail = format!("page {number}: {}", e.detail);
                    return Err(if e.retryable {
                        StageError::retryable(e.code, detail)
                    } else {
                        StageError::fatal(e.code, detail)
                    });
                }
                ctx.event(
                    "stage_warning",
                    format!("page {number} could not be read ({}): {}", e.code, e.detail),
                )
                .await?;
                PageOutcome {
                    text: String::new(),
                    confidence: None,
                    rotation_degrees: None,
                    passes: 1,
                    warnings: Vec::new(),
                    error: Some(format!("{}: {}", e.code, e.detail)),
                    image_path: None,
                }
            }
        };
        // A failed page is not finished: a resumed or retried run tries it again.
        if outcome.error.is_none() {
            // A refused checkpoint drops the image unpublished, which removes it.
            ctx.save_part(&key, &outcome).await?;
            if let Some(image) = image.take() {
                image.publish().await?;
            }
        }
        let record = page_record(number, outcome.clone());
        ctx.write_now(
            upsert_pages_statements(document_id, &ctx.run_id, std::slice::from_ref(&record))
                .map_err(from_documents)?,
        )
        .await?;
        if let Some(confidence) = outcome.confidence {
            ctx.event(
                "page_read",
                format!(
                    "page {number}: confidence {confidence:.1}, rotated {}°, {} pass(es)",
                    outcome.rotation_degrees.unwrap_or(0),
                    outcome.passes
                ),
            )
            .await?;
        }
        Ok((number, outcome, false))
    }

    /// Runs Tesseract on one page on the blocking pool. A page Tesseract holds past its
    /// deadline is abandoned after a grace period rather than blocking the run.
    async fn recognize(
        &self,
        source: &Arc<Source>,
        number: u32,
        control: &Control,
    ) -> Result<PageText, OcrError> {
        let recognizer = self.recognizer.clone();
        let source = source.clone();
        let control = control.clone();
        let keep_image = self.settings.preserve_page_images;
        let task = tokio::task::spawn_blocking(move || {
            let page = match source.as_ref() {
                Source::Pdf(path) => PageImage::PdfPage {
                    path: path.as_path(),
                    number,
                },
                Source::Raster(bytes) => PageImage::Raster {
                    bytes: bytes.as_slice(),
                    index: number.saturating_sub(1),
                },
            };
            recognizer.recognize(page, keep_image, &control)
        });
        let limit = self.settings.recognition.page_timeout + STUCK_PAGE_GRACE;
        match tokio::time::timeout(limit, task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => {
                tracing::error!(error = %join, page = number, "OCR task failed");
                Err(OcrError {
                    code: "ocr_failed",
                    detail: "OCR crashed on this page".into(),
                    retryable: false,
                })
            }
            Err(_) => Err(OcrError {
                code: "ocr_timeout",
                detail: format!(
                    "the page took longer than {} s (SHELF_OCR_TIMEOUT_SECONDS)",
                    self.settings.recognition.page_timeout.as_secs()
                ),
                retryable: false,
            }),
        }
    }

    /// Writes a page image under a temporary name next to its place,
    /// `page-images/<document>/page-NNNN.png` under the data directory; the caller publishes
    /// it once the page's checkpoint has committed.
    async fn stage_image(
        &self,
        document_id: &str,
        number: u32,
        png: &[u8],
    ) -> Result<StagedImage, StageError> {
        let dir = self
            .documents
            .create_page_images_dir(document_id)
            .await
            .map_err(from_documents)?;
        let name = shelf_documents::DataDir::page_image_name(number);
        let path = dir.join(&name);
        // Unique per write: a worker that lost the run may still be writing the same page.
        let partial = dir.join(format!(".{name}.{:016x}.part", fastrand::u64(..)));
        if let Err(e) = tokio::fs::write(&partial, png).await {
            let _ = tokio::fs::remove_file(&partial).await;
            return Err(image_error(e));
        }
        Ok(StagedImage {
            relative: relative_to(&self.documents.data_dir, &path),
            partial,
            path,
            published: false,
        })
    }
}

/// A kept page image written under a temporary name, not yet in place. A file cannot be fenced
/// by the database, so the page's checkpoint (a fenced write naming the image) stands in for
/// the image: it is renamed into place only after that checkpoint committed, and removed when
/// it was refused or never made (dropped unpublished). A worker that takes the run over reuses
/// the checkpoint and never writes the image again, so each page image of a run has one
/// writer, the claim whose checkpoint committed, and the page's record is written only after
/// the rename. The path is the document's, not the run's: a later run of the document puts its
/// own image of the same page there.
struct StagedImage {
    /// Relative to the data directory, as page records name it.
    relative: String,
    partial: PathBuf,
    path: PathBuf,
    published: bool,
}

impl StagedImage {
    /// Moves the image into place: the checkpoint naming it committed under this claim's
    /// lease, so the rename completes a committed write even if the lease is lost meanwhile.
    async fn publish(mut self) -> Result<(), StageError> {
        tokio::fs::rename(&self.partial, &self.path)
            .await
            .map_err(image_error)?;
        self.published = true;
        Ok(())
    }
}

impl Drop for StagedImage {
    /// An image not put in place is named by nothing: its checkpoint was refused, or the page
    /// was abandoned (canceled, the stage dropped) before it was saved.
    fn drop(&mut self) {
        if !self.published
            && let Err(e) = std::fs::remove_file(&self.partial)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(error = %e, "cannot remove an unused page image");
        }
    }
}

fn image_error(e: std::io::Error) -> StageError {
    StageError::retryable("io_error", format!("cannot keep the page image: {e}"))
}

fn relative_to(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

fn page_record(number: u32, outcome: PageOutcome) -> PageRecord {
    PageRecord {
        number,
        source: if outcome.error.is_some() {
            PageSource::Failed
        } else {
            PageSource::Ocr
        },
        text: outcome.text,
        confidence: outcome.confidence,
        rotation_degrees: outcome.rotation_degrees,
        attempts: outcome.passes,
        corrected: false,
        warnings: outcome.warnings,
        error: outcome.error,
        image_path: outcome.image_path,
    }
}

/// The page records of this run. A retry reuses the checkpoints of the stages that wrote
/// them, so on its first stage that needs them it copies them from the run that did
/// (`pages_run_id` in the upstream output).
pub(crate) async fn this_runs_pages(
    db: &sea_orm::DatabaseConnection,
    ctx: &StageContext,
    document_id: &str,
) -> Result<Vec<PageRecord>, StageError> {
    let pages = run_pages(db, document_id, &ctx.run_id)
        .await
        .map_err(from_documents)?;
    if !pages.is_empty() {
        return Ok(pages);
    }
    let Some(source_run) = ctx.inputs.find_str("pages_run_id") else {
        return Err(StageError::fatal(
            "missing_input",
            "no page records for this run; the pipeline must run `extract` before this stage",
        ));
    };
    let pages = run_pages(db, document_id, source_run)
        .await
        .map_err(from_documents)?;
    if pages.is_empty() {
        return Err(StageError::fatal(
            "missing_input",
            format!(
                "the page records of run {source_run} are gone (pruned with their run); \
                 reprocess the document"
            ),
        ));
    }
    // Written now, fenced: the records this run's pages update as they are read must exist
    // first. Only this run's rows are written; the source run keeps its own.
    ctx.write_now(put_pages_statements(document_id, &ctx.run_id, &pages).map_err(from_documents)?)
        .await?;
    Ok(pages)
}

/// The document's text from its pages, in page order: text-layer and OCR pages (failed and
/// pending pages have none), separated by blank lines.
pub(crate) fn joined_text(pages: &[PageRecord]) -> String {
    let mut ordered: Vec<&PageRecord> = pages.iter().collect();
    ordered.sort_by_key(|p| p.number);
    let mut out = String::new();
    for page in ordered {
        let text = page.text.trim();
        if text.is_empty() || matches!(page.source, PageSource::Failed | PageSource::Pending) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(text);
    }
    out
}

/// Counts over a document's pages after OCR.
struct OcrSummary {
    ocr: usize,
    failed: Vec<u32>,
    low_confidence: Vec<u32>,
    rotated: Vec<u32>,
    average_confidence: Option<f64>,
}

impl OcrSummary {
    fn of(pages: &[PageRecord], threshold: f64) -> Self {
        let ocr: Vec<&PageRecord> = pages
            .iter()
            .filter(|p| p.source == PageSource::Ocr)
            .collect();
        let confidences: Vec<f64> = ocr.iter().filter_map(|p| p.confidence).collect();
        let average_confidence = (!confidences.is_empty()).then(|| {
            let mean = confidences.iter().sum::<f64>() / confidences.len() as f64;
            (mean * 10.0).round() / 10.0
        });
        OcrSummary {
            ocr: ocr.len(),
            failed: pages
                .iter()
                .filter(|p| p.source == PageSource::Failed)
                .map(|p| p.number)
                .collect(),
            low_confidence: ocr
                .iter()
                .filter(|p| p.confidence.is_some_and(|c| c < threshold))
                .map(|p| p.number)
                .collect(),
            rotated: ocr
                .iter()
                .filter(|p| p.rotation_degrees.is_some_and(|r| r != 0))
                .map(|p| p.number)
                .collect(),
            average_confidence,
        }
    }
}

/// `1, 2, 5` or `1, 2, 3, … (40 pages)` for long lists.
pub(crate) fn page_list(pages: &[u32]) -> String {
    let shown: Vec<String> = pages.iter().take(10).map(u32::to_string).collect();
    if pages.len() > 10 {
        format!("{}, … ({} pages)", shown.join(", "), pages.len())
    } else {
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(number: u32, source: PageSource, text: &str) -> PageRecord {
        PageRecord {
            source,
            text: text.into(),
            ..PageRecord::pending(number)
        }
    }

    #[test]
    fn joined_text_keeps_page_order_and_skips_unread_pages() {
        let pages = [
            page(3, PageSource::Ocr, "third\n"),
            page(1, PageSource::TextLayer, "first"),
            page(2, PageSource::Failed, "never shown"),
            page(4, PageSource::Pending, "not read"),
        ];
        assert_eq!(joined_text(&pages), "first\n\nthird");
    }

    #[test]
    fn long_page_lists_are_cut() {
        assert_eq!(page_list(&[1, 2, 5]), "1, 2, 5");
        let many: Vec<u32> = (1..=40).collect();
        assert!(page_list(&many).ends_with("… (40 pages)"));
    }
}
