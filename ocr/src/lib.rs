//! Shelf's OCR: one page image in, its text out, upright and scored. Tesseract runs in
//! process through `leptess` (and its C API for what leptess does not wrap: orientation
//! detection and the recognition monitor that enforces the page deadline and cancellation).
//! It knows nothing of documents, the database or the engine; the `ocr` stage drives it.
//!
//! Modules: `image` (format, header check, Leptonica decoding, the owned `Pix`), `pdf`
//! (pdfinfo, pdftoppm and pdfimages under the subprocess runner), `bands` (page geometry:
//! scans at their own resolution, tall pages in bands, wide ones scaled), `orientation`
//! (OSD's answer to a rotation, confirmed by readings where OSD is not sure), `tesseract` (owned engine and monitor, the one-thread
//! OpenMP limit). This file holds the public types, the engine pools and the recognition of
//! one page.

mod bands;
mod image;
mod orientation;
mod pdf;
mod tesseract;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::image::Pix;
use crate::tesseract::{Engine, Role, Stopped};

use shelf_extractors::Control;

/// How pages are recognized.
#[derive(Debug, Clone)]
pub struct OcrSettings {
    /// Tesseract language(s), `+`-joined (`eng`, `eng+deu`).
    pub languages: String,
    /// Resolution PDF pages are rendered at (`SHELF_OCR_PDF_DPI`).
    pub pdf_dpi: u32,
    /// Time one page may take, rendering included (`SHELF_OCR_TIMEOUT_SECONDS`).
    pub page_timeout: Duration,
    /// Also check the orientation of pages whose confidence stays under the threshold, whatever
    /// orientation detection said (`SHELF_OCR_ROTATION_RETRY`).
    pub rotation_retry: bool,
    /// Mean word confidence (0 to 100) under which a page is low-confidence.
    pub low_confidence_threshold: f32,
    /// Largest page image, in pixels, decoded or rendered.
    pub max_pixels: u64,
}

impl Default for OcrSettings {
    fn default() -> Self {
        OcrSettings {
            languages: "eng".into(),
            pdf_dpi: 200,
            page_timeout: Duration::from_secs(120),
            rotation_retry: false,
            low_confidence_threshold: 85.0,
            max_pixels: 100_000_000,
        }
    }
}

/// One page to recognize.
#[derive(Debug, Clone, Copy)]
pub enum PageImage<'a> {
    /// A raster file (PNG, JPEG, TIFF, BMP, GIF, WebP); `index` is the 0-based page of a
    /// multi-page TIFF (0 for the others).
    Raster { bytes: &'a [u8], index: u32 },
    /// Page `number` (1-based) of the PDF at `path`, rendered at the settings' DPI.
    PdfPage { path: &'a Path, number: u32 },
}

/// What recognition made of one page.
#[derive(Debug, Clone, PartialEq)]
pub struct PageText {
    pub text: String,
    /// Mean word confidence, 0 to 100.
    pub confidence: f32,
    /// Clockwise rotation applied to make the page upright: 0, 90, 180 or 270.
    pub rotation_degrees: u32,
    /// Recognition passes made: 1, or 2 to 3 when the orientation was checked by reading the
    /// page turned (`orientation::read_upright`).
    pub passes: u32,
    /// The resolution Tesseract was told.
    pub dpi: u32,
    pub warnings: Vec<String>,
    /// The upright page image as PNG, when asked for.
    pub image_png: Option<Vec<u8>>,
}

/// Why a page was not recognized. Codes are stable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{detail}")]
pub struct OcrError {
    /// `ocr_unavailable`, `ocr_timeout`, `canceled`, `image_unreadable`, `image_too_large`,
    /// `pdf_render_failed`, `ocr_failed`.
    pub code: &'static str,
    pub detail: String,
    pub retryable: bool,
}

impl OcrError {
    pub(crate) fn new(code: &'static str, detail: impl Into<String>, retryable: bool) -> Self {
        OcrError {
            code,
            detail: detail.into(),
            retryable,
        }
    }

    /// Tesseract or Leptonica failed on a page they had accepted: a bug or a broken page.
    pub(crate) fn failed(detail: impl Into<String>) -> Self {
        Self::new("ocr_failed", detail, false)
    }

    pub(crate) fn canceled() -> Self {
        Self::new("canceled", "OCR was canceled", false)
    }

    fn timeout(limit: Duration) -> Self {
        Self::new(
            "ocr_timeout",
            format!(
                "the page took longer than {:.1} s (SHELF_OCR_TIMEOUT_SECONDS)",
                limit.as_secs_f64()
            ),
            false,
        )
    }
}

/// Resolutions Tesseract believes (its own `kMinCredibleResolution`/`kMaxCredibleResolution`).
const CREDIBLE_DPI: std::ops::RangeInclusive<u32> = 70..=2400;
/// The resolution assumed for an image that does not state a credible one.
const ASSUMED_DPI: u32 = 300;

/// Idle engines of one kind. An engine is taken for one page and put back after it.
#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<Engine>>,
}

impl Pool {
    /// An idle engine, or a new one (made outside the lock: loading models takes a while).
    fn take(&self, languages: &str, role: Role) -> Result<Lease<'_>, OcrError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        let engine = match idle {
            Some(engine) => engine,
            None => Engine::new(languages, role)?,
        };
        Ok(Lease {
            engine: Some(engine),
            pool: self,
        })
    }
}

/// An engine on loan to one page; back to its pool on drop, cleared. An engine whose page
/// panicked is dropped instead: its state is unknown.
struct Lease<'a> {
    engine: Option<Engine>,
    pool: &'a Pool,
}

impl Lease<'_> {
    fn engine(&mut self) -> Result<&mut Engine, OcrError> {
        self.engine
            .as_mut()
            .ok_or_else(|| OcrError::failed("engine already returned"))
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(mut engine) = self.engine.take() {
            if std::thread::panicking() {
                return;
            }
            engine.clear();
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(engine);
        }
    }
}

struct Shared {
    settings: OcrSettings,
    recognizers: Pool,
    orientation: Pool,
}

/// Recognizes pages with a pool of Tesseract engines (one per page in flight). Cheap to
/// clone; engines are made on first use.
#[derive(Clone)]
pub struct Recognizer {
    shared: Arc<Shared>,
    /// Run OSD and turn pages upright before recognition (on by default).
    detect_orientation: bool,
}

/// One recognition of one image.
struct Reading {
    text: String,
    confidence: f32,
    /// How well the reading holds up against another of the same page turned
    /// (`orientation::score`).
    score: f32,
}

impl Recognizer {
    pub fn new(settings: OcrSettings) -> Self {
        Recognizer {
            shared: Arc::new(Shared {
                settings,
                recognizers: Pool::default(),
                orientation: Pool::default(),
            }),
            detect_orientation: true,
        }
    }

    /// The same recognizer (sharing its engines) with orientation detection on or off. Off,
    /// pages are read as they are (a page that reads poorly is still tried turned).
    pub fn with_orientation_detection(mut self, on: bool) -> Self {
        self.detect_orientation = on;
        self
    }

    pub fn settings(&self) -> &OcrSettings {
        &self.shared.settings
    }

    /// Fails `ocr_unavailable` when Tesseract or its language data cannot be loaded. Loads
    /// one engine of each kind (kept in the pools for the first pages).
    pub fn check_available(&self) -> Result<(), OcrError> {
        let languages = &self.shared.settings.languages;
        self.shared.recognizers.take(languages, Role::Recognize)?;
        if self.detect_orientation {
            self.shared.orientation.take(languages, Role::Orientation)?;
        }
        Ok(())
    }

    /// Recognizes one page: decode or render it, turn it upright, recognize, score. Blocking:
    /// call it on a blocking thread. `control` cancels it; the page deadline is added here.
    pub fn recognize(
        &self,
        page: PageImage<'_>,
        keep_image: bool,
        control: &Control,
    ) -> Result<PageText, OcrError> {
        let control = control.with_timeout(self.shared.settings.page_timeout);
        match catch_unwind(AssertUnwindSafe(|| {
            self.recognize_page(page, keep_image, &control)
        })) {
            Ok(result) => result,
            Err(_) => Err(OcrError::failed("OCR failed on this page (internal error)")),
        }
    }

    /// `Err` when the page is canceled or past its deadline.
    fn check(&self, control: &Control) -> Result<(), OcrError> {
        if control.is_canceled() {
            Err(OcrError::canceled())
        } else if control.remaining().is_some_and(|r| r.is_zero()) {
            Err(OcrError::timeout(self.shared.settings.page_timeout))
        } else {
            Ok(())
        }
    }

    fn recognize_page(
        &self,
        page: PageImage<'_>,
        keep_image: bool,
        control: &Control,
    ) -> Result<PageText, OcrError> {
        let settings = &self.shared.settings;
        self.check(control)?;
        let mut warnings = Vec::new();
        let (pix, dpi) = match self.load(page, &mut warnings, control)? {
            bands::Loaded::Whole(pix, dpi) => (pix, dpi),
            bands::Loaded::Bands(source, dpi) => {
                return self.recognize_bands(source, dpi, keep_image, warnings, control);
            }
        };
        self.check(control)?;

        let decision = if self.detect_orientation {
            let mut osd = self
                .shared
                .orientation
                .take(&settings.languages, Role::Orientation)?;
            let decision = orientation::detect(osd.engine()?, &pix, dpi);
            drop(osd);
            self.check(control)?;
            decision
        } else {
            orientation::undetected()
        };

        let mut engine = self
            .shared
            .recognizers
            .take(&settings.languages, Role::Recognize)?;
        let trial = orientation::Trial {
            retry_under: settings
                .rotation_retry
                .then_some(settings.low_confidence_threshold),
        };
        let upright = orientation::read_upright(&pix, &decision, &trial, &mut |turned| {
            self.read(engine.engine()?, turned, dpi, control)
        })?;
        drop(engine);
        warnings.extend(upright.warnings);

        let image_png = if keep_image {
            Some(if upright.turn == 0 {
                pix.to_png()?
            } else {
                pix.rotated(upright.turn)?.to_png()?
            })
        } else {
            None
        };
        Ok(PageText {
            text: upright.reading.text,
            confidence: upright.reading.confidence,
            rotation_degrees: upright.turn,
            passes: upright.passes,
            dpi,
            warnings,
            image_png,
        })
    }

    /// One recognition pass over `pix`.
    fn read(
        &self,
        engine: &mut Engine,
        pix: &Pix,
        dpi: u32,
        control: &Control,
    ) -> Result<Reading, OcrError> {
        let failed = || "Tesseract could not recognize the page".to_string();
        self.pass(engine, pix, dpi, control, failed, |engine| {
            let confidences = engine.word_confidences();
            let confidence = if confidences.is_empty() {
                0.0
            } else {
                confidences.iter().map(|&c| c as f32).sum::<f32>() / confidences.len() as f32
            };
            let text = engine.text().trim_end().to_string();
            Reading {
                score: orientation::score(&text, &confidences),
                text,
                confidence,
            }
        })
    }

    /// Runs Tesseract over `pix` within the page's deadline and, once it has recognized the
    /// image, takes the result from the engine with `take`; the engine is cleared either way.
    /// `failed` says what could not be recognized when Tesseract fails.
    fn pass<T>(
        &self,
        engine: &mut Engine,
        pix: &Pix,
        dpi: u32,
        control: &Control,
        failed: impl FnOnce() -> String,
        take: impl FnOnce(&mut Engine) -> T,
    ) -> Result<T, OcrError> {
        self.check(control)?;
        let time_left = control
            .remaining()
            .unwrap_or(self.shared.settings.page_timeout);
        engine.set_image(pix, dpi);
        let outcome = engine.recognize(control, time_left);
        let result = match outcome {
            Ok(()) => Ok(take(engine)),
            Err(Stopped::Canceled) => Err(OcrError::canceled()),
            Err(Stopped::Deadline) => Err(OcrError::timeout(self.shared.settings.page_timeout)),
            Err(Stopped::Failed) => Err(OcrError::failed(failed())),
        };
        engine.clear();
        result
    }
}

/// The pages of the PDF at `path` (poppler's `pdfinfo`).
pub fn pdf_page_count(path: &Path) -> Result<u32, OcrError> {
    pdf::page_count(path)
}

/// The pages of a raster image: a TIFF's page count, 1 for the other formats.
pub fn raster_page_count(bytes: &[u8]) -> Result<u32, OcrError> {
    image::page_count(bytes)
}
