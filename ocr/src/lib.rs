//! Shelf's OCR: one page image in, its text out, upright and scored. Tesseract runs in
//! process through `leptess` (and its C API for what leptess does not wrap: orientation
//! detection and the recognition monitor that enforces the page deadline and cancellation).
//! It knows nothing of documents, the database or the engine; the `ocr` stage drives it.
//!
//! SKELETON: the interface the stages are written against. The implementation fills it in.

use std::path::Path;
use std::time::Duration;

pub use shelf_extractors::Control;

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

/// Recognizes pages with a pool of Tesseract engines (one per page in flight). Cheap to
/// clone; engines are made on first use.
#[derive(Clone)]
pub struct Recognizer {
    settings: OcrSettings,
}

impl Recognizer {
    pub fn new(settings: OcrSettings) -> Self {
        Recognizer { settings }
    }

    pub fn settings(&self) -> &OcrSettings {
        &self.settings
    }

    /// Fails `ocr_unavailable` when Tesseract or its language data cannot be loaded.
    pub fn check_available(&self) -> Result<(), OcrError> {
        todo!()
    }

    /// Recognizes one page: decode or render it, turn it upright, recognize, score. Blocking:
    /// call it on a blocking thread. `control` cancels it; the page deadline is added here.
    pub fn recognize(
        &self,
        _page: PageImage<'_>,
        _keep_image: bool,
        _control: &Control,
    ) -> Result<PageText, OcrError> {
        todo!()
    }
}
