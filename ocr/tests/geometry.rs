//! Page geometry with the real Tesseract and poppler (issue 25): pages taller than Tesseract's
//! 32,767-pixel side are read in bands with every line once and in order, and a PDF page that
//! is one scanned image is read from that image at its own resolution, turned as the page
//! shows it. Every PDF here is written by the test, so what each page holds is known.

mod support;

use shelf_extractors::Control;
use shelf_ocr::{OcrSettings, PageImage, PageText, Recognizer};
use support::pdf::{self, Line, Placement, Rect};
use support::{cer, corpus, flat, pdf_page, recognizer};

fn read_pdf(r: &Recognizer, bytes: &[u8]) -> Result<PageText, shelf_ocr::OcrError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("page.pdf");
    std::fs::write(&path, bytes).unwrap();
    pdf_page(r, &path, 1)
}

/// A page 150 pt wide and 12,000 pt tall: 417×33,334 px at 200 dpi, over Tesseract's side
/// limit. Its lines sit at the top, across the first band's nominal edge (16,384 rows, at
/// 5,898 pt), in the middle, across the second's, and at the bottom.
const TALL: (f64, f64) = (150.0, 12_000.0);
const TALL_LINES: [(f64, &str); 5] = [
    (20.0, "First line on top"),
    (5_892.0, "Second line here"),
    (8_000.0, "Third line middle"),
    (11_790.0, "Fourth line there"),
    (11_950.0, "Last line bottom"),
];

fn tall_page(rects: &[Rect]) -> Vec<u8> {
    let lines: Vec<Line<'_>> = TALL_LINES
        .iter()
        .map(|&(top, text)| Line {
            top,
            size: 14.0,
            text,
        })
        .collect();
    pdf::text_page(TALL.0, TALL.1, &lines, rects)
}

/// Every line read exactly once, top to bottom.
fn assert_all_lines_once_in_order(page: &PageText) {
    let text = flat(&page.text);
    let mut from = 0;
    for (_, line) in TALL_LINES {
        assert_eq!(text.matches(line).count(), 1, "`{line}` in:\n{}", page.text);
        let at = text.find(line).unwrap();
        assert!(at >= from, "`{line}` out of order in:\n{}", page.text);
        from = at;
    }
}

#[test]
fn a_pdf_page_over_tesseracts_side_limit_is_read_in_bands() {
    let page = read_pdf(recognizer(), &tall_page(&[])).unwrap();
    assert_all_lines_once_in_order(&page);
    assert_eq!(page.dpi, 200);
    assert!(
        page.warnings.iter().any(|w| w.contains("bands")),
        "{:?}",
        page.warnings
    );
}

#[test]
fn bands_without_blank_rows_overlap_and_keep_each_line_once() {
    // A black bar down the whole left margin: no row is blank, so bands cannot be cut
    // between lines and must overlap.
    let bar = Rect {
        x: 2.0,
        top: 0.0,
        width: 6.0,
        height: TALL.1,
    };
    let page = read_pdf(recognizer(), &tall_page(&[bar])).unwrap();
    assert_all_lines_once_in_order(&page);
}

#[test]
fn a_tall_image_is_read_in_bands() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tall.pdf");
    std::fs::write(&path, tall_page(&[])).unwrap();
    let out = std::process::Command::new("pdftoppm")
        .args(["-r", "200", "-gray", "-png", "-singlefile"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let page = recognizer()
        .recognize(
            PageImage::Raster {
                bytes: &out.stdout,
                index: 0,
            },
            false,
            &Control::default(),
        )
        .unwrap();
    assert_all_lines_once_in_order(&page);
}

fn phototest_truth() -> String {
    std::fs::read_to_string(corpus("tesseract/phototest.txt")).unwrap()
}

/// phototest turned a quarter right (480×640, 200 ppi) as a PDF page of its own size.
fn phototest_png() -> Vec<u8> {
    std::fs::read(corpus("tesseract/phototest-rotated-R.png")).unwrap()
}

#[test]
fn a_scanned_pdf_page_is_read_from_its_image_at_its_own_resolution() {
    // Rendering would be at 150 dpi; the scan is 200 ppi.
    let r = Recognizer::new(OcrSettings {
        pdf_dpi: 150,
        ..OcrSettings::default()
    });
    let pdf = pdf::image_page(&phototest_png(), None).unwrap();
    let page = read_pdf(&r, &pdf).unwrap();
    assert_eq!(page.dpi, 200);
    assert_eq!(page.rotation_degrees, 270);
    let rate = cer(&phototest_truth(), &page.text);
    assert!(rate <= 0.02, "CER {rate:.4}:\n{}", page.text);
}

#[test]
fn a_scan_placed_upside_down_is_turned_as_the_page_shows_it() {
    // Orientation detection off: only the placement check can turn it.
    let r = Recognizer::new(OcrSettings {
        pdf_dpi: 150,
        ..OcrSettings::default()
    })
    .with_orientation_detection(false);
    let upright = std::fs::read(corpus("tesseract/phototest-rotated-180.png")).unwrap();
    let pdf = pdf::image_page_with(&upright, None, Placement::UpsideDown, &[]).unwrap();
    let page = read_pdf(&r, &pdf).unwrap();
    assert_eq!(page.dpi, 200);
    let rate = cer(&phototest_truth(), &page.text);
    assert!(rate <= 0.02, "CER {rate:.4}:\n{}", page.text);
}

#[test]
fn pages_with_more_than_their_scan_are_rendered() {
    let r = Recognizer::new(OcrSettings {
        pdf_dpi: 150,
        ..OcrSettings::default()
    });
    let png = phototest_png();
    // Text drawn over the scan: only rendering shows both.
    let stamp = [Line {
        top: 5.0,
        size: 9.0,
        text: "STAMPED",
    }];
    let stamped = pdf::image_page_with(&png, None, Placement::Upright, &stamp).unwrap();
    assert_eq!(read_pdf(&r, &stamped).unwrap().dpi, 150);
    // A mirrored scan: no turn makes it the page, poppler draws it as placed.
    let mirrored = pdf::image_page_with(&png, None, Placement::Mirrored, &[]).unwrap();
    assert_eq!(read_pdf(&r, &mirrored).unwrap().dpi, 150);
}

#[test]
fn a_600_dpi_scan_is_rendered_at_the_configured_resolution() {
    let expected = std::fs::read_to_string(corpus("rotated-pdf/expected.txt")).unwrap();
    let r = Recognizer::new(OcrSettings::default()).with_orientation_detection(false);
    // The scan itself is turned in these files; without OSD only the upright one reads.
    let path = corpus("rotated-pdf/ocr_test.pdf");
    let page = pdf_page(&r, &path, 1).unwrap();
    // Over 400 dpi: rendered (cheaper than decoding 35 Mpx), not extracted.
    assert_eq!(page.dpi, OcrSettings::default().pdf_dpi);
    let rate = cer(&expected, &page.text);
    assert!(rate <= 0.02, "CER {rate:.4}:\n{}", page.text);
}
