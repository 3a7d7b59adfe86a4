//! The OCR section: Tesseract's languages and limits, PDF rendering, page images, and which
//! pages the `correct` stage sends to the model (a `CorrectionMode`, parsed here once).

use shelf_stages::correct::CorrectionMode;

use super::reader::{COUNT, Reader};

#[derive(Debug, Clone)]
pub struct OcrSettings {
    pub timeout_seconds: u64,
    /// Tesseract languages, `+`-joined (`eng`, `eng+deu`); each needs its language pack.
    pub languages: String,
    pub preserve_page_images: bool,
    pub rotation_retry: bool,
    pub pdf_dpi: u32,
    pub pdf_max_pages: u32,
    pub llm_correction: CorrectionMode,
    pub llm_model: String,
    pub low_confidence_threshold: f64,
    pub page_concurrency: usize,
    pub fail_on_page_error: bool,
}

pub(super) fn parse(r: &mut Reader) -> OcrSettings {
    let ocr = OcrSettings {
        timeout_seconds: r.parse("SHELF_OCR_TIMEOUT_SECONDS", 120, COUNT),
        languages: r.string("SHELF_OCR_LANGUAGES", "eng"),
        preserve_page_images: r.bool("SHELF_OCR_PRESERVE_PAGE_IMAGES", false),
        rotation_retry: r.bool("SHELF_OCR_ROTATION_RETRY", false),
        pdf_dpi: r.parse("SHELF_OCR_PDF_DPI", 200, COUNT),
        pdf_max_pages: r.parse("SHELF_OCR_PDF_MAX_PAGES", 1000, COUNT),
        llm_correction: r.choice(
            "SHELF_OCR_LLM_CORRECTION",
            CorrectionMode::Always,
            &[
                ("always", CorrectionMode::Always),
                ("low-confidence", CorrectionMode::LowConfidence),
                ("never", CorrectionMode::Never),
            ],
        ),
        llm_model: r.string("SHELF_OCR_LLM_MODEL", ""),
        low_confidence_threshold: r.parse("SHELF_OCR_LOW_CONFIDENCE_THRESHOLD", 85.0, "a number"),
        page_concurrency: r.parse("SHELF_OCR_PAGE_CONCURRENCY", 2, COUNT),
        fail_on_page_error: r.bool("SHELF_OCR_FAIL_ON_PAGE_ERROR", true),
    };
    r.check(
        ocr.timeout_seconds != 0 && ocr.page_concurrency != 0,
        "SHELF_OCR_TIMEOUT_SECONDS and SHELF_OCR_PAGE_CONCURRENCY must be at least 1",
    );
    r.check(
        (50..=1200).contains(&ocr.pdf_dpi),
        "SHELF_OCR_PDF_DPI must be between 50 and 1200",
    );
    r.check(
        (0.0..=100.0).contains(&ocr.low_confidence_threshold),
        "SHELF_OCR_LOW_CONFIDENCE_THRESHOLD must be between 0 and 100",
    );
    let language =
        |l: &str| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    r.check(
        ocr.languages.split('+').all(language),
        format!(
            "SHELF_OCR_LANGUAGES={}: expected Tesseract language codes joined by + (eng, eng+deu)",
            ocr.languages
        ),
    );
    ocr
}
