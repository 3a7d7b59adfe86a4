//! Page geometry: getting a page's image at a size Tesseract accepts. Tesseract refuses an
//! image with a side over 32,767 pixels, and its memory grows with the pixels of the page, so a
//! tall page (a screen capture, a long receipt, a web page printed to one PDF page) is read in
//! horizontal bands, cut at blank rows so that no line is split, and a page too wide is scaled
//! down to the side limit. PDF bands are rendered one at a time (pdftoppm draws only the
//! slice), so a tall PDF page never exists whole in memory. A PDF page that is one scanned
//! image is read from that image at its own resolution (`pdf::page_image`).

use std::path::Path;

use crate::image::{self, Pix};
use crate::tesseract::{Engine, Role};
use crate::{ASSUMED_DPI, CREDIBLE_DPI, Control, OcrError, PageImage, PageText, Recognizer, pdf};

/// Tesseract's largest side (`INT16_MAX`: its `Threshold` refuses anything larger).
pub(crate) const MAX_SIDE: u32 = 32_767;
/// Pages with more pixels than this are read in bands even when their sides fit: Tesseract's
/// memory is about proportional to the pixels it is given (docs/PERFORMANCE.md, "OCR of tall
/// pages"), and no ordinary page comes near it (A4 at 600 dpi is 35 Mpx).
pub(crate) const BAND_ABOVE_PIXELS: u64 = 40_000_000;
/// Pixels of one band (its rows are this over the page's width).
pub(crate) const BAND_PIXELS: u64 = 12_000_000;
/// Bounds on a band's rows: enough for layout analysis to see whole paragraphs, and well
/// under the side limit.
const MIN_BAND_ROWS: u32 = 2_000;
const MAX_BAND_ROWS: u32 = 16_384;
/// Blank rows needed to cut between two lines.
const MIN_GAP_ROWS: usize = 2;

/// Whether a `width`×`height` image must be read in bands.
pub(crate) fn needs_bands(width: u32, height: u32) -> bool {
    height > MAX_SIDE || u64::from(width) * u64::from(height) > BAND_ABOVE_PIXELS
}

/// The rows of one band for a page `width` pixels wide.
pub(crate) fn band_rows(width: u32) -> u32 {
    let by_pixels = BAND_PIXELS / u64::from(width.max(1));
    u32::try_from(by_pixels)
        .unwrap_or(MAX_BAND_ROWS)
        .clamp(MIN_BAND_ROWS, MAX_BAND_ROWS)
}

/// Rows two bands share when no blank row could be found to cut at (a photo, a dark page):
/// an inch, at least 200 rows (at most a quarter of a band), so that a line cut by one band's edge is whole in the other.
fn overlap_rows(dpi: u32, band_rows: u32) -> u32 {
    dpi.max(200).min(band_rows / 4)
}

/// Where to cut a band of rows whose dark-pixel counts are `dark` (top to bottom): the middle
/// of the lowest run of blank rows in the band's lower half, as a row index; `None` when the
/// lower half has no such run. A row is blank when under 0.2 % of its pixels are dark (a
/// speck of scanner dust is not text).
pub(crate) fn blank_cut(dark: &[u32], width: u32) -> Option<u32> {
    let tolerance = width / 500;
    let half = dark.len() / 2;
    let mut run_end: Option<usize> = None;
    for row in (half..dark.len()).rev() {
        let blank = dark.get(row).is_some_and(|&d| d <= tolerance);
        match (blank, run_end) {
            (true, None) => run_end = Some(row),
            (false, Some(end)) => {
                if end - row >= MIN_GAP_ROWS {
                    return u32::try_from((row + 1 + end) / 2).ok();
                }
                run_end = None;
            }
            _ => {}
        }
    }
    // A run reaching up to the middle counts too.
    match run_end {
        Some(end) if end + 1 - half >= MIN_GAP_ROWS => u32::try_from((half + end) / 2).ok(),
        _ => None,
    }
}

/// Where the bands of a page come from.
pub(crate) enum Source<'a> {
    /// A decoded image, cropped band by band.
    Image(Pix),
    /// A PDF page, rendered band by band.
    Pdf { path: &'a Path, plan: pdf::Plan },
}

impl Source<'_> {
    fn size(&self) -> (u32, u32) {
        match self {
            Source::Image(pix) => (pix.width(), pix.height()),
            Source::Pdf { plan, .. } => (plan.width, plan.height),
        }
    }

    fn rows(
        &self,
        top: u32,
        height: u32,
        max_pixels: u64,
        control: &Control,
    ) -> Result<Pix, OcrError> {
        match self {
            Source::Image(pix) => pix.rows(top, height),
            Source::Pdf { path, plan } => {
                pdf::render(path, plan, Some((top, height)), max_pixels, control)
            }
        }
    }
}

/// A page ready to read: whole, or in bands.
pub(crate) enum Loaded<'a> {
    Whole(Pix, u32),
    Bands(Source<'a>, u32),
}

/// Scales an image wider than Tesseract's side limit down to it (its resolution with it).
fn fit_width(pix: Pix, dpi: u32, warnings: &mut Vec<String>) -> Result<(Pix, u32), OcrError> {
    if pix.width() <= MAX_SIDE {
        return Ok((pix, dpi));
    }
    let factor = MAX_SIDE as f32 / pix.width() as f32;
    let mut scaled = pix.scaled(factor)?;
    let new_dpi = ((dpi as f32) * factor).round().max(1.0) as u32;
    scaled.set_resolution(new_dpi);
    warnings.push(format!(
        "the page is {} pixels wide, over Tesseract's {MAX_SIDE}-pixel limit; it was scaled to \
         {} ({new_dpi} dpi)",
        pix.width(),
        scaled.width()
    ));
    Ok((scaled, new_dpi))
}

/// A decoded image's resolution: its own when credible, else `ASSUMED_DPI` with a warning.
fn credible_dpi(pix: &Pix, warnings: &mut Vec<String>) -> u32 {
    let own = pix.resolution();
    if CREDIBLE_DPI.contains(&own) {
        own
    } else {
        warnings.push(format!(
            "the image states no credible resolution ({own} dpi); {ASSUMED_DPI} dpi assumed"
        ));
        ASSUMED_DPI
    }
}

fn whole_or_bands(source: Source<'_>, dpi: u32) -> Loaded<'_> {
    let (w, h) = source.size();
    match source {
        Source::Image(pix) if !needs_bands(w, h) => Loaded::Whole(pix, dpi),
        source => Loaded::Bands(source, dpi),
    }
}

/// What one band contributed.
struct BandReading {
    text: String,
    confidence_sum: f64,
    words: usize,
}

impl Recognizer {
    /// Decodes, extracts or plans the page: whole when Tesseract can take it at once, else
    /// as bands to read one at a time.
    pub(crate) fn load<'a>(
        &self,
        page: PageImage<'a>,
        warnings: &mut Vec<String>,
        control: &Control,
    ) -> Result<Loaded<'a>, OcrError> {
        let settings = &self.shared.settings;
        match page {
            PageImage::Raster { bytes, index } => {
                let pix = image::decode(bytes, index, settings.max_pixels)?;
                let dpi = credible_dpi(&pix, warnings);
                let (pix, dpi) = fit_width(pix, dpi, warnings)?;
                Ok(whole_or_bands(Source::Image(pix), dpi))
            }
            PageImage::PdfPage { path, number } => {
                if let Some(found) = pdf::page_image(path, number, settings.max_pixels, control)? {
                    warnings.extend(found.warnings);
                    let (pix, dpi) = fit_width(found.pix, found.dpi, warnings)?;
                    return Ok(whole_or_bands(Source::Image(pix), dpi));
                }
                let plan = pdf::plan(
                    path,
                    number,
                    settings.pdf_dpi,
                    settings.max_pixels,
                    MAX_SIDE,
                    control,
                )?;
                warnings.extend(plan.warnings.iter().cloned());
                let dpi = plan.dpi;
                if needs_bands(plan.width, plan.height) {
                    return Ok(Loaded::Bands(Source::Pdf { path, plan }, dpi));
                }
                let pix = pdf::render(path, &plan, None, settings.max_pixels, control)?;
                Ok(Loaded::Whole(pix, dpi))
            }
        }
    }

    /// Reads a page band by band, top to bottom. Each band is cut at the lowest blank rows of
    /// its lower half, and the next band starts there; where no blank rows exist, bands
    /// overlap and each line is kept from the band that holds it whole (its middle above or
    /// below the middle of the overlap). Orientation detection and rotation retry are not run:
    /// a page over Tesseract's limits is a capture or a long receipt, read as it is.
    pub(crate) fn recognize_bands(
        &self,
        source: Source<'_>,
        dpi: u32,
        keep_image: bool,
        mut warnings: Vec<String>,
        control: &Control,
    ) -> Result<PageText, OcrError> {
        let settings = &self.shared.settings;
        let (width, height) = source.size();
        let rows = band_rows(width);
        let overlap = overlap_rows(dpi, rows);
        let mut lease = self
            .shared
            .recognizers
            .take(&settings.languages, Role::Recognize)?;
        let mut texts: Vec<String> = Vec::new();
        let (mut confidence_sum, mut words) = (0.0f64, 0usize);
        let mut top = 0u32;
        // Lines whose middle is above this row were kept from the band before.
        let mut keep_from = 0u32;
        let mut bands = 0u32;
        while top < height {
            self.check(control)?;
            let wanted = rows.min(height - top);
            let strip = source.rows(top, wanted, settings.max_pixels, control)?;
            let got = strip.height();
            if got == 0 {
                break;
            }
            let last = top + got >= height || got < wanted;
            let (band, next_top, keep_until) = if last {
                (strip, height, u32::MAX)
            } else {
                match blank_cut(&strip.dark_pixels_by_row()?, width) {
                    Some(cut) => (strip.rows(0, cut)?, top + cut, u32::MAX),
                    None => {
                        let next = top + got - overlap;
                        (strip, next, top + got - overlap / 2)
                    }
                }
            };
            bands += 1;
            let reading = self.read_band(
                lease.engine()?,
                &band,
                dpi,
                top,
                (keep_from, keep_until),
                control,
            )?;
            drop(band);
            if !reading.text.is_empty() {
                texts.push(reading.text);
            }
            confidence_sum += reading.confidence_sum;
            words += reading.words;
            keep_from = if keep_until == u32::MAX {
                0
            } else {
                keep_until
            };
            top = next_top;
        }
        drop(lease);
        warnings.push(format!(
            "the page is {width}×{height} pixels, more than Tesseract takes at once; it was read \
             in {bands} bands"
        ));
        let image_png = if keep_image {
            Some(match &source {
                Source::Image(pix) => pix.to_png()?,
                Source::Pdf { path, plan } => {
                    pdf::render(path, plan, None, settings.max_pixels, control)?.to_png()?
                }
            })
        } else {
            None
        };
        Ok(PageText {
            text: texts.join("\n"),
            confidence: if words == 0 {
                0.0
            } else {
                (confidence_sum / words as f64) as f32
            },
            rotation_degrees: 0,
            passes: 1,
            dpi,
            warnings,
            image_png,
        })
    }

    /// Recognizes one band whose first row is page row `top`. With a seam on either side
    /// (`keep` is not everything), only the lines whose middle lies in `keep` are kept.
    fn read_band(
        &self,
        engine: &mut Engine,
        band: &Pix,
        dpi: u32,
        top: u32,
        keep: (u32, u32),
        control: &Control,
    ) -> Result<BandReading, OcrError> {
        let failed =
            || format!("Tesseract could not recognize the band of the page from row {top}");
        self.pass(engine, band, dpi, control, failed, |engine| {
            let confidences = engine.word_confidences();
            let text = if keep == (0, u32::MAX) {
                engine.text().trim_end().to_string()
            } else {
                let mut text = String::new();
                for line in engine.lines() {
                    let middle =
                        i64::from(top) + (i64::from(line.top) + i64::from(line.bottom)) / 2;
                    if middle < i64::from(keep.0) || middle >= i64::from(keep.1) {
                        continue;
                    }
                    if line.starts_paragraph && !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&line.text);
                }
                text.trim_end().to_string()
            };
            BandReading {
                text,
                confidence_sum: confidences.iter().map(|&c| f64::from(c)).sum(),
                words: confidences.len(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pages_over_the_side_limit_or_the_pixel_budget_are_banded() {
        assert!(!needs_bands(2480, 3508)); // A4 at 300 dpi
        assert!(!needs_bands(4960, 7016)); // A4 at 600 dpi
        assert!(needs_bands(1042, 38_753)); // the 375×13,951 pt page at 200 dpi
        assert!(needs_bands(7000, 7000));
        assert_eq!(band_rows(1042), 11_516);
        assert_eq!(band_rows(100), MAX_BAND_ROWS);
        assert_eq!(band_rows(30_000), MIN_BAND_ROWS);
    }

    #[test]
    fn bands_are_cut_in_the_lowest_blank_gap_of_their_lower_half() {
        // Rows: text, gap of 3 at 6..9, text, gap of 2 at 12..14, text, 1 blank row at 18.
        let mut dark = vec![50u32; 20];
        for r in [6, 7, 8, 12, 13, 18] {
            dark[r] = 0;
        }
        assert_eq!(blank_cut(&dark, 1000), Some(12));
        // A single blank row is not a gap; a gap in the upper half is not looked at.
        let mut dark = vec![50u32; 20];
        for r in [2, 3, 4, 15] {
            dark[r] = 0;
        }
        assert_eq!(blank_cut(&dark, 1000), None);
        // Specks under 0.2 % of the width are blank.
        let mut dark = vec![50u32; 20];
        dark[16] = 1;
        dark[17] = 2;
        assert_eq!(blank_cut(&dark, 1000), Some(16));
        // A gap running down to the band's last row.
        let mut dark = vec![50u32; 20];
        dark[18] = 0;
        dark[19] = 0;
        assert_eq!(blank_cut(&dark, 1000), Some(18));
        assert_eq!(blank_cut(&[], 10), None);
    }
}
