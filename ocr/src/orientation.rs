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

/// Resolution OSD looks at. OSD only needs the shapes of lines and letters; its layout analysis
/// costs in proportion to pixels, so a 300-dpi page is shown to it at half size (a quarter of
/// the work) and turned the same way.
pub(crate) const OSD_DPI: u32 = 150;

/// Runs OSD on `pix` with `engine` (an orientation engine) and decides.
pub(crate) fn detect(engine: &mut Engine, pix: &Pix, dpi: u32) -> Decision {
    let smaller = if dpi > OSD_DPI {
        pix.scaled(OSD_DPI as f32 / dpi as f32).ok()
    } else {
        None
    };
    match &smaller {
        Some(small) => engine.set_image(small, OSD_DPI),
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
