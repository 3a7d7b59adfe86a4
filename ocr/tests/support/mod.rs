//! Helpers shared by the integration tests: the vendored corpus, one recognizer per suite,
//! reading a PDF page, and the scoring of recognized text.
#![allow(dead_code)]

pub mod pdf;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use shelf_extractors::Control;
use shelf_ocr::{OcrError, OcrSettings, PageImage, PageText, Recognizer};

/// A file of the OCR corpus vendored under `tests/corpus/ocr`.
pub fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus/ocr")
        .join(rel)
}

/// One recognizer for the suite (its engines are shared by every test).
pub fn recognizer() -> &'static Recognizer {
    static R: OnceLock<Recognizer> = OnceLock::new();
    R.get_or_init(|| Recognizer::new(OcrSettings::default()))
}

/// Page `number` of the PDF at `path`, recognized without keeping its image.
pub fn pdf_page(r: &Recognizer, path: &Path, number: u32) -> Result<PageText, OcrError> {
    r.recognize(
        PageImage::PdfPage { path, number },
        false,
        &Control::default(),
    )
}

/// The text with whitespace collapsed.
pub fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whitespace collapsed and typographic quotes made plain: layout is not what is scored.
fn normalize(text: &str) -> Vec<char> {
    let plain: String = text
        .chars()
        .map(|c| match c {
            '‘' | '’' => '\'',
            '“' | '”' => '"',
            '—' | '–' => '-',
            _ => c,
        })
        .collect();
    flat(&plain).chars().collect()
}

/// Character error rate: Levenshtein distance over characters / length of the truth.
pub fn cer(truth: &str, candidate: &str) -> f64 {
    let (a, b) = (normalize(truth), normalize(candidate));
    if a.is_empty() {
        return if b.is_empty() { 0.0 } else { 1.0 };
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()] as f64 / a.len() as f64
}
