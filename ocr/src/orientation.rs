//! Turning a page upright: Tesseract's orientation detection (OSD) says how the text is
//! turned, this module decides the clockwise rotation that undoes it, and when not to trust it:
//! a turn OSD is not sure of is confirmed by reading the page both ways, and a page OSD cannot
//! judge that reads poorly is tried turned (`read_upright`).

use crate::image::Pix;
use crate::tesseract::Engine;
use crate::{OcrError, Reading};

/// OSD orientation confidence under which its answer is ignored. Tesseract's own examples
/// treat values around 1 as guesses; clear pages score 5 to 30.
pub(crate) const MIN_CONFIDENCE: f32 = 2.0;

/// OSD orientation confidence from which its answer is taken without a second look. Under it a
/// proposed turn is confirmed by reading the page both ways: upright pages that OSD called
/// upside down scored 3.1 to 7.1 (issue 25, 5 of 130 pages), while the turned phototests score
/// 9.3 to 11 and full text pages 20 to 30.
pub(crate) const SURE_CONFIDENCE: f32 = 15.0;

/// Mean word confidence under which a page read as it is, with no sure answer from OSD, is
/// tried turned: sideways or upside-down text reads at 35 to 40, upright text at 80 to 96.
pub(crate) const POOR_READING: f32 = 60.0;

/// A reading "clearly better" than another scores at least this many times its score;
/// readings of a turned page against the upright one differ four- to sixfold.
const CLEARLY_BETTER: f32 = 2.0;

/// What OSD's answer leads recognition to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Plan {
    /// OSD is sure: read the page turned this many degrees clockwise, once.
    Apply(u32),
    /// OSD proposes this clockwise turn without being sure: read the page turned and as it
    /// is, and keep what reads better.
    Confirm(u32),
    /// No sure answer: read the page as it is and try it turned when that reads poorly.
    AsIs,
}

/// The plan and what OSD said, for the page's warnings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decision {
    pub plan: Plan,
    /// OSD's answer (counter-clockwise degrees, confidence); `None` when it found too little
    /// text or did not run.
    pub osd: Option<(u32, f32)>,
    /// Whether OSD ran.
    pub detected: bool,
}

/// Decides from OSD's answer: the page's counter-clockwise orientation in degrees and its
/// confidence, or `None` when OSD could not tell (too little text).
pub(crate) fn decide(osd: Option<(u32, f32)>) -> Decision {
    let plan = match osd {
        Some((degrees, confidence)) if confidence >= MIN_CONFIDENCE => {
            let turn = (360 - degrees % 360) % 360;
            match (turn, confidence >= SURE_CONFIDENCE) {
                (_, true) => Plan::Apply(turn),
                (0, false) => Plan::AsIs,
                (_, false) => Plan::Confirm(turn),
            }
        }
        // Unsure, failed or NaN.
        _ => Plan::AsIs,
    };
    Decision {
        plan,
        osd,
        detected: true,
    }
}

/// No orientation detection: every page is read as it is (and tried turned when it reads
/// poorly).
pub(crate) fn undetected() -> Decision {
    Decision {
        plan: Plan::AsIs,
        osd: None,
        detected: false,
    }
}

/// How a reading scores against another of the same page: the sum, over its words, of the
/// word's letters and digits weighted by the square of its confidence. Text read the right way
/// up scores four to six times what the same page turned over scores; the mean confidence
/// alone would let a handful of sure words on a turned page beat a whole page of text.
pub(crate) fn score(text: &str, confidences: &[i32]) -> f32 {
    let weight = |c: i32| {
        let c = c.clamp(0, 100) as f32 / 100.0;
        c * c
    };
    let chars = |w: &str| w.chars().filter(|c| c.is_alphanumeric()).count() as f32;
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() == confidences.len() {
        words
            .iter()
            .zip(confidences)
            .map(|(w, &c)| chars(w) * weight(c))
            .sum()
    } else {
        // Tesseract's words and the text's usually match one to one; if not, the mean.
        let mean = confidences.iter().map(|&c| c.clamp(0, 100)).sum::<i32>() as f32
            / confidences.len().max(1) as f32;
        let mean = mean / 100.0;
        words.iter().map(|w| chars(w)).sum::<f32>() * mean * mean
    }
}

/// How the readings of one page compare, by their scores: the page's true turn `k` is the one
/// at which it reads well, and Tesseract's layout analysis also reads text lying on its side
/// one way round (the page turned `k + 90`: it finds the vertical lines and turns them), but
/// never turned `k + 180` or `k + 270`. Every decision below follows from that.
pub(crate) fn clearly_better(a: f32, b: f32) -> bool {
    a > b * CLEARLY_BETTER && a > 0.0
}

/// Whether two readings are alike (neither clearly better).
pub(crate) fn alike(a: f32, b: f32) -> bool {
    !clearly_better(a, b) && !clearly_better(b, a)
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

/// The reading kept for a page and how it was found.
pub(crate) struct Upright {
    pub reading: Reading,
    /// Clockwise degrees from the page as given to the kept reading: 0, 90, 180 or 270.
    pub turn: u32,
    pub passes: u32,
    pub warnings: Vec<String>,
}

/// What `read_upright` needs besides the page.
pub(crate) struct Trial {
    /// Also try turning pages whose kept reading is under this mean confidence, whatever OSD
    /// said (`SHELF_OCR_ROTATION_RETRY`); `None`: only pages read poorly without a sure answer.
    pub retry_under: Option<f32>,
}

/// A reading and the turn of the image it was made from. Each turned image is dropped once
/// read, so a page holds at most two images at once (the caller's and one turned copy).
struct Candidate {
    reading: Reading,
    turn: u32,
}

/// Reads `pix` the way `decision` says and keeps the reading that is the right way up, in
/// one to three recognitions (`read` is one recognition of an image). A flip OSD is not sure
/// of is confirmed by reading the page both ways; a page OSD could not judge that reads
/// poorly as it is is tried upside down, and when that reads clearly better, on its side to
/// tell 90° from 180°. `turn` is the rotation the page needed (0 when it was kept as given).
/// A pass after the first that hits the page deadline ends the search with the best reading
/// so far and a warning.
pub(crate) fn read_upright(
    pix: &Pix,
    decision: &Decision,
    trial: &Trial,
    read: &mut dyn FnMut(&Pix) -> Result<Reading, OcrError>,
) -> Result<Upright, OcrError> {
    let mut search = Search {
        read,
        passes: 0,
        stopped: false,
    };
    let mut warnings = Vec::new();
    let osd_note = || match decision.osd {
        _ if !decision.detected => None,
        None => Some("orientation detection found too little text".to_string()),
        Some((_, c)) if c.is_nan() || c < MIN_CONFIDENCE => Some(format!(
            "orientation detection was unsure (confidence {c:.2} < {MIN_CONFIDENCE})"
        )),
        Some(_) => None,
    };
    let mut kept = match decision.plan {
        Plan::Apply(turn) => search.first(pix, turn)?,
        Plan::Confirm(turn) => {
            let turned = search.first(pix, turn)?;
            match search.another(pix, 0)? {
                None => turned,
                Some(as_is) => {
                    let confidence = decision.osd.map_or(0.0, |(_, c)| c);
                    let (t, a) = (turned.reading.score, as_is.reading.score);
                    // Turned 90°, an upright page still reads (sideways text is found), so two
                    // alike readings mean the page was upright; turned 270°, they mean the
                    // page lay on its side and OSD was right.
                    let take_turned = match turn {
                        90 => clearly_better(t, a),
                        270 => !clearly_better(a, t),
                        _ => t > a,
                    };
                    if take_turned {
                        turned
                    } else {
                        warnings.push(format!(
                            "orientation detection proposed turning the page {turn}° \
                             (confidence {confidence:.2}), but the page reads better as it is; \
                             it was kept as it is"
                        ));
                        as_is
                    }
                }
            }
        }
        Plan::AsIs => search.first(pix, 0)?,
    };
    let unsure = !matches!(decision.plan, Plan::Apply(_));
    let poor = unsure && kept.reading.confidence < POOR_READING;
    let retry = trial
        .retry_under
        .is_some_and(|under| kept.reading.confidence < under);
    let mut tried = false;
    if (poor || retry) && matches!(decision.plan, Plan::AsIs | Plan::Apply(_)) {
        tried = true;
        // Read well at turn k, a page also reads at k + 90 and never at k + 180: a page that
        // reads poorly at `base` may need 90° or 180°, and both read at 180°.
        let base = kept.turn;
        if let Some(over) = search.another(pix, base + 180)?
            && clearly_better(over.reading.score, kept.reading.score)
        {
            kept = match search.another(pix, base + 90)? {
                Some(side) if alike(side.reading.score, over.reading.score) => side,
                _ => over,
            };
        }
    }
    if let Some(note) = osd_note() {
        warnings.push(if kept.turn == 0 {
            format!("{note}; the page was read as it is")
        } else {
            format!("{note}; the page read best turned {}°", kept.turn)
        });
    } else if tried && kept.turn != 0 && matches!(decision.plan, Plan::AsIs) {
        warnings.push(format!(
            "the page read poorly as it is and best turned {}°",
            kept.turn
        ));
    }
    if search.stopped {
        warnings.push(
            "the orientation check stopped at the page deadline; the best reading so far was \
             kept"
                .into(),
        );
    }
    Ok(Upright {
        reading: kept.reading,
        turn: kept.turn,
        passes: search.passes,
        warnings,
    })
}

/// The recognitions of one page.
struct Search<'a> {
    read: &'a mut dyn FnMut(&Pix) -> Result<Reading, OcrError>,
    passes: u32,
    /// A later pass hit the deadline; no further pass is made.
    stopped: bool,
}

impl Search<'_> {
    /// The first reading: every error is the page's.
    fn first(&mut self, pix: &Pix, turn: u32) -> Result<Candidate, OcrError> {
        let turn = turn % 360;
        self.passes += 1;
        let reading = if turn == 0 {
            (self.read)(pix)?
        } else {
            (self.read)(&pix.rotated(turn)?)?
        };
        Ok(Candidate { reading, turn })
    }

    /// A further reading; `None` once the page deadline stopped one (the best so far is kept).
    fn another(&mut self, pix: &Pix, turn: u32) -> Result<Option<Candidate>, OcrError> {
        if self.stopped {
            return Ok(None);
        }
        match self.first(pix, turn) {
            Ok(candidate) => Ok(Some(candidate)),
            Err(e) if e.code == "ocr_timeout" => {
                self.stopped = true;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
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
    fn the_page_orientation_is_undone_clockwise_when_osd_is_sure() {
        assert_eq!(decide(Some((0, 20.0))).plan, Plan::Apply(0));
        // Text turned 270° counter-clockwise (to the right) is turned back 90° clockwise.
        assert_eq!(decide(Some((270, 20.0))).plan, Plan::Apply(90));
        assert_eq!(decide(Some((90, 20.0))).plan, Plan::Apply(270));
        assert_eq!(decide(Some((180, 30.0))).plan, Plan::Apply(180));
    }

    #[test]
    fn a_turn_osd_is_not_sure_of_is_confirmed() {
        // The upright pages OSD called upside down scored 3.1 to 7.1.
        for confidence in [3.1, 7.1, 10.9] {
            assert_eq!(decide(Some((180, confidence))).plan, Plan::Confirm(180));
        }
        assert_eq!(decide(Some((270, 9.6))).plan, Plan::Confirm(90));
        // "Upright" without certainty: read as it is, tried turned if it reads poorly.
        assert_eq!(decide(Some((0, 6.3))).plan, Plan::AsIs);
    }

    #[test]
    fn unsure_or_failed_detection_reads_the_page_as_it_is() {
        assert_eq!(decide(Some((180, 1.2))).plan, Plan::AsIs);
        assert_eq!(decide(Some((90, f32::NAN))).plan, Plan::AsIs);
        assert_eq!(decide(None).plan, Plan::AsIs);
        assert!(decide(None).detected);
        assert!(!undetected().detected);
    }

    #[test]
    fn a_reading_scores_its_confident_characters() {
        // Sure words count fully, unsure ones by the square of their confidence.
        assert_eq!(score("abc de", &[100, 100]), 5.0);
        assert!((score("abc de", &[50, 100]) - 2.75).abs() < 1e-6);
        // Punctuation is no character; a word count that does not match uses the mean.
        assert_eq!(score("a-b, !", &[100, 100]), 2.0);
        assert!((score("ab cd", &[50]) - 1.0).abs() < 1e-6);
        assert_eq!(score("", &[]), 0.0);
        // A handful of sure words does not beat a page of fairly sure ones.
        let page = score(&"word ".repeat(40), &[80; 40]);
        assert!(clearly_better(page, score("SURE SURE", &[99, 99])));
        assert!(alike(100.0, 120.0) && !alike(100.0, 250.0));
        assert!(!clearly_better(0.0, 0.0));
    }
}
