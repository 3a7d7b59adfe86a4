//! Turning a page upright: Tesseract's orientation detection (OSD) says how the text is
//! turned, this module decides the clockwise rotation that undoes it, and when not to trust it.

use crate::image::Pix;
use crate::tesseract::Engine;

/// OSD orientation confidence under which its answer is ignored. Tesseract's own examples
/// treat values around 1 as guesses; clear pages score 5 to 30.
pub(crate) const MIN_CONFIDENCE: f32 = 2.0;

/// The rotation to apply and why not, when it is not applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decision {
    /// Clockwise degrees that make the page upright: 0, 90, 180 or 270.
    pub rotate_cw: u32,
    pub warning: Option<String>,
}

/// Decides from OSD's answer: the page's counter-clockwise orientation in degrees and its
/// confidence, or `None` when OSD could not tell (too little text).
pub(crate) fn decide(osd: Option<(u32, f32)>) -> Decision {
    match osd {
        None => Decision {
            rotate_cw: 0,
            warning: Some(
                "orientation detection found too little text; the page was read as it is".into(),
            ),
        },
        Some((_, confidence)) if confidence.is_nan() || confidence < MIN_CONFIDENCE => Decision {
            rotate_cw: 0,
            warning: Some(format!(
                "orientation detection was unsure (confidence {confidence:.2} < \
                 {MIN_CONFIDENCE}); the page was read as it is"
            )),
        },
        Some((degrees, _)) => Decision {
            rotate_cw: (360 - degrees % 360) % 360,
            warning: None,
        },
    }
}

/// Resolution OSD looks at on large pages. OSD only needs the shapes of lines and letters; its
/// layout analysis costs in proportion to pixels, so a 300-dpi page is shown to it at half
/// size (a quarter of the work) and turned the same way.
pub(crate) const OSD_DPI: u32 = 150;

/// Pages are never shrunk under this many pixels for OSD: shrinking small pages (or pages
/// whose stated resolution is too high) leaves letters too small to judge.
pub(crate) const OSD_MIN_PIXELS: f64 = 2_000_000.0;

/// The factor OSD sees the page at: 1, or under 1 for a large page at high resolution.
pub(crate) fn osd_scale(width: u32, height: u32, dpi: u32) -> f32 {
    let pixels = f64::from(width) * f64::from(height);
    if dpi <= OSD_DPI || pixels <= OSD_MIN_PIXELS {
        return 1.0;
    }
    let by_resolution = f64::from(OSD_DPI) / f64::from(dpi);
    let by_pixels = (OSD_MIN_PIXELS / pixels).sqrt();
    by_resolution.max(by_pixels).min(1.0) as f32
}

/// Runs OSD on `pix` with `engine` (an orientation engine) and decides.
pub(crate) fn detect(engine: &mut Engine, pix: &Pix, dpi: u32) -> Decision {
    let scale = osd_scale(pix.width(), pix.height(), dpi);
    let smaller = if scale < 1.0 {
        pix.scaled(scale).ok()
    } else {
        None
    };
    match &smaller {
        Some(small) => {
            let seen_dpi = ((dpi as f32) * scale).round() as u32;
            engine.set_image(small, seen_dpi.max(1));
        }
        None => engine.set_image(pix, dpi),
    }
    let osd = engine.detect_orientation();
    engine.clear();
    decide(osd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_large_high_resolution_pages_are_shrunk_for_osd() {
        // phototest: 640×480 at 200 dpi stays as it is.
        assert_eq!(osd_scale(640, 480, 200), 1.0);
        // A 300-dpi letter page (2560×3300, 8.4 Mpx) is shown at 150 dpi (2.1 Mpx).
        assert!((osd_scale(2560, 3300, 300) - 0.5).abs() < 1e-6);
        // A 300-dpi page of 2000×2000 (4 Mpx) stops at 2 Mpx, above 150 dpi.
        let square = osd_scale(2000, 2000, 300);
        assert!((square - 0.707).abs() < 0.01, "{square}");
        // A 300-dpi page under 2 Mpx stays as it is.
        assert_eq!(osd_scale(1000, 1500, 300), 1.0);
        // A very large page goes down to 150 dpi.
        assert!((osd_scale(7680, 9900, 300) - 0.5).abs() < 1e-6);
        // Low resolution is never shrunk.
        assert_eq!(osd_scale(7680, 9900, 150), 1.0);
    }

    #[test]
    fn the_page_orientation_is_undone_clockwise() {
        assert_eq!(decide(Some((0, 9.0))).rotate_cw, 0);
        // Text turned 270° counter-clockwise (to the right) is turned back 90° clockwise.
        assert_eq!(decide(Some((270, 9.0))).rotate_cw, 90);
        assert_eq!(decide(Some((90, 9.0))).rotate_cw, 270);
        assert_eq!(decide(Some((180, 9.0))).rotate_cw, 180);
    }

    #[test]
    fn unsure_or_failed_detection_keeps_the_page_with_a_warning() {
        let unsure = decide(Some((180, 1.2)));
        assert_eq!(unsure.rotate_cw, 0);
        assert!(unsure.warning.unwrap().contains("unsure"));
        let nan = decide(Some((90, f32::NAN)));
        assert_eq!(nan.rotate_cw, 0);
        let none = decide(None);
        assert_eq!(none.rotate_cw, 0);
        assert!(none.warning.unwrap().contains("too little text"));
    }
}
