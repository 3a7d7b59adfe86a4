//! Shelf's OCR: one page image in, its text out, upright and scored. Tesseract runs in
//! process through `leptess` (and its C API for what leptess does not wrap: orientation
//! detection and the recognition monitor that enforces the page deadline and cancellation).
//! It knows nothing of documents, the database or the engine; the `ocr` stage drives it.
//!
//! Modules: `image` (format, header check, Leptonica decoding, the owned `Pix`), `pdf`
//! (pdfinfo and pdftoppm under the subprocess runner), `orientation` (OSD's answer to a
//! rotation), `tesseract` (owned engine and monitor, the one-thread OpenMP limit). This file
//! holds the public types, the engine pools and the recognition of one page.

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
    /// Retry a page whose confidence stays under the threshold at the other rotations
    /// (`SHELF_OCR_ROTATION_RETRY`).
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
    /// Recognition passes made (1; more when rotation retry tried other rotations).
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
    /// pages are read as they are (rotation retry still applies).
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
        let (pix, dpi) = match page {
            PageImage::Raster { bytes, index } => {
                let pix = image::decode(bytes, index, settings.max_pixels)?;
                let own = pix.resolution();
                let dpi = if CREDIBLE_DPI.contains(&own) {
                    own
                } else {
                    warnings.push(format!(
                        "the image states no credible resolution ({own} dpi); {ASSUMED_DPI} dpi \
                         assumed"
                    ));
                    ASSUMED_DPI
                };
                (pix, dpi)
            }
            PageImage::PdfPage { path, number } => {
                let rendered =
                    pdf::render(path, number, settings.pdf_dpi, settings.max_pixels, control)?;
                warnings.extend(rendered.warnings);
                (rendered.pix, rendered.dpi)
            }
        };
        self.check(control)?;

        let mut rotation = 0;
        if self.detect_orientation {
            let mut osd = self
                .shared
                .orientation
                .take(&settings.languages, Role::Orientation)?;
            let decision = orientation::detect(osd.engine()?, &pix, dpi);
            drop(osd);
            warnings.extend(decision.warning);
            rotation = decision.rotate_cw;
            self.check(control)?;
        }
        let upright = if rotation == 0 {
            pix
        } else {
            pix.rotated(rotation)?
        };

        let mut engine = self
            .shared
            .recognizers
            .take(&settings.languages, Role::Recognize)?;
        let mut best = self.read(engine.engine()?, &upright, dpi, control)?;
        let mut best_turn = 0;
        let mut passes = 1;
        if settings.rotation_retry && best.confidence < settings.low_confidence_threshold {
            for turn in [90, 180, 270] {
                let turned = upright.rotated(turn)?;
                let reading = match self.read(engine.engine()?, &turned, dpi, control) {
                    Ok(reading) => reading,
                    Err(e) if e.code == "ocr_timeout" => {
                        warnings.push(
                            "rotation retry stopped at the page deadline; the best reading so \
                             far was kept"
                                .into(),
                        );
                        passes += 1;
                        break;
                    }
                    Err(e) => return Err(e),
                };
                passes += 1;
                if reading.confidence > best.confidence {
                    best = reading;
                    best_turn = turn;
                }
            }
        }
        drop(engine);

        let image_png = if keep_image {
            let kept = if best_turn == 0 {
                upright.to_png()?
            } else {
                upright.rotated(best_turn)?.to_png()?
            };
            Some(kept)
        } else {
            None
        };
        Ok(PageText {
            text: best.text,
            confidence: best.confidence,
            rotation_degrees: (rotation + best_turn) % 360,
            passes,
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
        self.check(control)?;
        let time_left = control
            .remaining()
            .unwrap_or(self.shared.settings.page_timeout);
        engine.set_image(pix, dpi);
        let outcome = engine.recognize(control, time_left);
        let reading = match outcome {
            Ok(()) => {
                let confidences = engine.word_confidences();
                let confidence = if confidences.is_empty() {
                    0.0
                } else {
                    confidences.iter().map(|&c| c as f32).sum::<f32>() / confidences.len() as f32
                };
                Ok(Reading {
                    text: engine.text().trim_end().to_string(),
                    confidence,
                })
            }
            Err(Stopped::Canceled) => Err(OcrError::canceled()),
            Err(Stopped::Deadline) => Err(OcrError::timeout(self.shared.settings.page_timeout)),
            Err(Stopped::Failed) => Err(OcrError::failed("Tesseract could not recognize the page")),
        };
        engine.clear();
        reading
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
