//! Turning pages upright with the real Tesseract (issue 25): upright pages stay upright and
//! say so (rotation 0), a flip that orientation detection (OSD) is not sure of is confirmed by
//! reading the page both ways, a page OSD cannot judge that reads poorly is tried turned, and
//! `rotation_retry` never reports a turn for an upright page. The made pages are
//! `tests/corpus/ocr/made/` (see its README): `digits-upright.png`, an upright page of numbers
//! that OSD calls upside down (180°, confidence about 4); `receipt-upside-down.png`, two receipt
//! lines upside down, too little text for OSD; `receipt.png`, an upright receipt that reads
//! under the confidence threshold, and better still when turned 90° (Tesseract finds text
//! lying on its side).

mod support;

use shelf_extractors::Control;
use shelf_ocr::{OcrSettings, PageImage, PageText, Recognizer};
use support::{corpus, flat, pdf_page, recognizer};

fn raster(r: &Recognizer, rel: &str) -> PageText {
    let bytes = std::fs::read(corpus(rel)).unwrap();
    r.recognize(
        PageImage::Raster {
            bytes: &bytes,
            index: 0,
        },
        false,
        &Control::default(),
    )
    .unwrap()
}

#[test]
fn upright_pages_stay_upright_in_one_pass() {
    for file in [
        "tesseract/phototest.tif",
        "tesseract/eurotext.tif",
        "tesseract/8071_093.3B.tif",
        "tesseract/8087_054.3B.tif",
    ] {
        let page = raster(recognizer(), file);
        assert_eq!(page.rotation_degrees, 0, "{file}");
        assert_eq!(page.passes, 1, "{file}: {:?}", page.warnings);
    }
    let pdf = corpus("rotated-pdf/ocr_test.pdf");
    let page = pdf_page(recognizer(), &pdf, 1).unwrap();
    assert_eq!((page.rotation_degrees, page.passes), (0, 1));
}

/// Before issue 25 any OSD answer of confidence 2 or more was applied, and this page came out
/// upside down.
#[test]
fn an_upright_page_osd_calls_upside_down_is_kept_upright() {
    let page = raster(recognizer(), "made/digits-upright.png");
    assert!(
        page.warnings
            .iter()
            .any(|w| w.contains("proposed turning the page 180°")),
        "OSD still proposes the flip: {:?}",
        page.warnings
    );
    assert_eq!(page.rotation_degrees, 0);
    assert_eq!(page.passes, 2);
    // The text is the page read as it is, as the `tesseract` CLI reads it.
    let as_is = raster(
        &recognizer().clone().with_orientation_detection(false),
        "made/digits-upright.png",
    );
    assert_eq!(page.text, as_is.text);
    assert!(flat(&page.text).contains("16.91 909 0.69 69 0.69 6.09"));
}

/// Before issue 25 a page OSD could not judge was read as it was: upside down, as noise.
#[test]
fn a_receipt_too_short_for_osd_is_tried_and_turned_upright() {
    let page = raster(recognizer(), "made/receipt-upside-down.png");
    assert_eq!(page.rotation_degrees, 180, "{:?}", page.warnings);
    assert_eq!(flat(&page.text), "Bread 2.99 Total 6.48");
    assert_eq!(page.passes, 3);
    assert!(
        page.warnings
            .iter()
            .any(|w| w.contains("too little text; the page read best turned 180°")),
        "{:?}",
        page.warnings
    );
}

/// Before issue 25 the retry kept whichever turn had the highest mean confidence: this
/// upright receipt reads better turned 90° (Tesseract turns sideways lines itself), so it was
/// reported turned 90°.
#[test]
fn rotation_retry_reports_an_upright_receipt_as_upright() {
    let retrying = Recognizer::new(OcrSettings {
        rotation_retry: true,
        ..OcrSettings::default()
    });
    let page = raster(&retrying, "made/receipt.png");
    assert!(
        page.confidence < 85.0,
        "under the threshold: {}",
        page.confidence
    );
    assert_eq!(page.rotation_degrees, 0, "{:?}", page.warnings);
    assert_eq!(page.passes, 2, "checked once, upside down");
    assert!(flat(&page.text).starts_with("CORNER MARKET 12 Main Street"));
    // Without the retry the page is read once.
    let once = raster(recognizer(), "made/receipt.png");
    assert_eq!((once.rotation_degrees, once.passes), (0, 1));
    assert_eq!(once.text, page.text);
}

#[test]
fn without_orientation_detection_pages_that_read_poorly_are_tried_turned() {
    let plain = recognizer().clone().with_orientation_detection(false);
    let upright = raster(&plain, "tesseract/phototest.tif");
    assert_eq!((upright.rotation_degrees, upright.passes), (0, 1));
    for (file, rotation) in [
        ("tesseract/phototest-rotated-L.png", 90),
        ("tesseract/phototest-rotated-180.png", 180),
    ] {
        let page = raster(&plain, file);
        assert_eq!(page.rotation_degrees, rotation, "{file}");
        assert_eq!(page.passes, 3, "{file}");
        assert_eq!(flat(&page.text), flat(&upright.text), "{file}");
    }
}
