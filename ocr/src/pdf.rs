//! PDF pages to images with poppler: `pdfinfo` for the page count and the page size (checked
//! against the pixel cap before rendering), `pdftoppm` for the page itself as a grayscale PNG
//! on standard output. Both run through the extractors' subprocess runner, so the page
//! deadline and the cancel flag kill them.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use shelf_extractors::ExtractError;
use shelf_extractors::subprocess::{self, Tool};

use crate::image::{self, Pix};
use crate::{Control, OcrError};

const PDFINFO: Tool = Tool {
    program: "pdfinfo",
    package: "poppler-utils",
};
const PDFTOPPM: Tool = Tool {
    program: "pdftoppm",
    package: "poppler-utils",
};
const PDFIMAGES: Tool = Tool {
    program: "pdfimages",
    package: "poppler-utils",
};

/// A scan stored at more than this is rendered at the configured resolution rather than
/// extracted: decoding a 600-dpi page (35 Mpx on A4), checking it and scaling it down took
/// 3.6 times a render's time and 2.5 times its memory for the same text (docs/ocr.md,
/// "Scanned PDF pages").
pub(crate) const MAX_SCAN_DPI: u32 = 400;
/// The longest side, in pixels, of the thumbnails that check an extracted image against
/// the page as poppler draws it.
const THUMB_SIDE: f64 = 200.0;
/// The image is the page when the two thumbnails correlate at least this well and no
/// thumbnail pixel differs by more than `MAX_PIXEL_DIFFERENCE` (out of 255). Measured: the
/// same scan correlates at 0.92 to 0.997 and differs by 105 at most (a page turned by
/// `/Rotate` is drawn a fraction of a pixel off); another turn or a mirror correlates under
/// 0.2; a 9-pt word drawn over the scan differs by 250.
const SAME_PAGE: f64 = 0.85;
const MAX_PIXEL_DIFFERENCE: u8 = 160;

/// Under this resolution a page shrunk to fit the pixel cap is no longer worth reading.
const MIN_FITTED_DPI: u32 = 50;
/// `pdfinfo` prints a few lines per page; more than this is not pdfinfo.
const INFO_CAP: u64 = 1 << 20;
/// Without a page deadline (page count), tools still get this long.
const INFO_TIMEOUT: Duration = Duration::from_secs(60);

fn from_tool(e: ExtractError) -> OcrError {
    match e.code {
        "converter_unavailable" => OcrError::new("ocr_unavailable", e.detail, false),
        "extraction_timeout" => OcrError::new(
            "ocr_timeout",
            "the page took longer than its time limit while rendering",
            false,
        ),
        "canceled" => OcrError::canceled(),
        "file_too_large" => OcrError::new("image_too_large", e.detail, false),
        _ => OcrError::new("pdf_render_failed", e.detail, e.retryable),
    }
}

fn render_failed(detail: impl Into<String>) -> OcrError {
    OcrError::new("pdf_render_failed", detail, false)
}

fn pdfinfo(path: &Path, page: Option<u32>, control: &Control) -> Result<String, OcrError> {
    let number = page.map(|n| n.to_string());
    let mut args: Vec<&OsStr> = Vec::new();
    if let Some(n) = &number {
        args.extend([
            OsStr::new("-f"),
            OsStr::new(n),
            OsStr::new("-l"),
            OsStr::new(n),
        ]);
    }
    args.push(path.as_os_str());
    let timeout = control.remaining().unwrap_or(INFO_TIMEOUT);
    let out =
        subprocess::run(PDFINFO, &args, &[], timeout, INFO_CAP, control).map_err(from_tool)?;
    if !out.status.success() {
        let line = out.stderr_line();
        return Err(if line.contains("Wrong page range") {
            render_failed(format!(
                "the PDF has no page {}",
                page.map(|n| n.to_string()).unwrap_or_default()
            ))
        } else {
            render_failed(format!("pdfinfo cannot read the PDF: {line}"))
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The number of pages of the PDF at `path`.
pub(crate) fn page_count(path: &Path) -> Result<u32, OcrError> {
    let info = pdfinfo(path, None, &Control::default())?;
    parse_pages(&info).ok_or_else(|| render_failed("pdfinfo did not report a page count"))
}

fn parse_pages(info: &str) -> Option<u32> {
    info.lines()
        .find_map(|l| l.strip_prefix("Pages:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Width and height in points of page `number` from pdfinfo's `Page    N size: W x H pts`.
fn parse_page_size(info: &str, number: u32) -> Option<(f64, f64)> {
    info.lines().find_map(|line| {
        let rest = line.strip_prefix("Page")?.trim_start();
        let (n, rest) = rest.split_once(char::is_whitespace)?;
        if n.parse::<u32>().ok()? != number {
            return None;
        }
        let dims = rest.trim_start().strip_prefix("size:")?.trim();
        let mut parts = dims.split_whitespace();
        let w: f64 = parts.next()?.parse().ok()?;
        let _x = parts.next().filter(|x| *x == "x")?;
        let h: f64 = parts.next()?.parse().ok()?;
        (w.is_finite() && h.is_finite() && w > 0.0 && h > 0.0).then_some((w, h))
    })
}

/// The `/Rotate` of page `number` from pdfinfo's `Page    N rot: R` (0 when absent).
fn parse_page_rotation(info: &str, number: u32) -> u32 {
    info.lines()
        .find_map(|line| {
            let rest = line.strip_prefix("Page")?.trim_start();
            let (n, rest) = rest.split_once(char::is_whitespace)?;
            if n.parse::<u32>().ok()? != number {
                return None;
            }
            rest.trim_start()
                .strip_prefix("rot:")?
                .trim()
                .parse::<i64>()
                .ok()
        })
        .map(|r| u32::try_from(r.rem_euclid(360)).unwrap_or(0))
        .unwrap_or(0)
}

/// The resolution at which a `w`×`h` pt page stays under `max_pixels`: `dpi` itself when it
/// fits, a lower one when not, `None` when even `MIN_FITTED_DPI` would not fit.
pub(crate) fn fitted_dpi(w_pt: f64, h_pt: f64, dpi: u32, max_pixels: u64) -> Option<u32> {
    // pdftoppm rounds each side up: count one more pixel per side.
    let pixels = |dpi: u32| {
        let side = |pt: f64| (pt / 72.0 * f64::from(dpi)).ceil() + 1.0;
        side(w_pt) * side(h_pt)
    };
    if pixels(dpi) <= max_pixels as f64 {
        return Some(dpi);
    }
    let scale = (max_pixels as f64 / pixels(dpi)).sqrt();
    let mut fitted = (f64::from(dpi) * scale).floor() as u32;
    while fitted >= MIN_FITTED_DPI && pixels(fitted) > max_pixels as f64 {
        fitted -= 1;
    }
    (fitted >= MIN_FITTED_DPI).then_some(fitted)
}

/// How page `number` will be rendered: the resolution and the size of the image (as
/// displayed, `/Rotate` applied), with a warning when the resolution had to come down.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    pub number: u32,
    pub dpi: u32,
    pub width: u32,
    pub height: u32,
    pub warnings: Vec<String>,
}

/// Plans page `number` (1-based) at `dpi`, or at the highest resolution under `max_pixels`
/// whose width stays under `max_width` (Tesseract's side limit: a wide page is scaled, a
/// tall one is read in bands).
pub(crate) fn plan(
    path: &Path,
    number: u32,
    dpi: u32,
    max_pixels: u64,
    max_width: u32,
    control: &Control,
) -> Result<Plan, OcrError> {
    if number == 0 {
        return Err(render_failed("PDF pages are numbered from 1"));
    }
    let info = pdfinfo(path, Some(number), control)?;
    let (mut w, mut h) = parse_page_size(&info, number).ok_or_else(|| {
        render_failed(format!("pdfinfo did not report the size of page {number}"))
    })?;
    if parse_page_rotation(&info, number) % 180 == 90 {
        std::mem::swap(&mut w, &mut h);
    }
    let mut warnings = Vec::new();
    let under_cap = fitted_dpi(w, h, dpi, max_pixels).ok_or_else(|| {
        OcrError::new(
            "image_too_large",
            format!(
                "page {number} is {w:.0}×{h:.0} pt: over {max_pixels} pixels even at \
                 {MIN_FITTED_DPI} dpi"
            ),
            false,
        )
    })?;
    if under_cap != dpi {
        warnings.push(format!(
            "page {number} ({w:.0}×{h:.0} pt) rendered at {under_cap} dpi instead of {dpi} to \
             stay under {max_pixels} pixels"
        ));
    }
    let side = |pt: f64, dpi: u32| (pt / 72.0 * f64::from(dpi)).ceil();
    let mut used = under_cap;
    if side(w, used) > f64::from(max_width) {
        // The widest resolution that fits, counting pdftoppm's rounding.
        let mut fitted = (f64::from(max_width) * 72.0 / w).floor() as u32;
        while fitted > 0 && side(w, fitted) > f64::from(max_width) {
            fitted -= 1;
        }
        if fitted < MIN_FITTED_DPI {
            return Err(OcrError::new(
                "image_too_large",
                format!(
                    "page {number} is {w:.0} pt wide: over Tesseract's {max_width}-pixel side \
                     even at {MIN_FITTED_DPI} dpi"
                ),
                false,
            ));
        }
        warnings.push(format!(
            "page {number} ({w:.0}×{h:.0} pt) rendered at {fitted} dpi instead of {dpi}: at \
             {used} dpi it is wider than Tesseract's {max_width}-pixel limit"
        ));
        used = fitted;
    }
    Ok(Plan {
        number,
        dpi: used,
        width: side(w, used) as u32,
        height: side(h, used) as u32,
        warnings,
    })
}

/// Renders the planned page whole, or its pixel rows `top..top + height` only (pdftoppm
/// draws just that slice: a tall page never exists whole in memory).
pub(crate) fn render(
    path: &Path,
    plan: &Plan,
    rows: Option<(u32, u32)>,
    max_pixels: u64,
    control: &Control,
) -> Result<Pix, OcrError> {
    let number = plan.number;
    let r = plan.dpi.to_string();
    let n = number.to_string();
    let mut args: Vec<String> = vec![
        "-r".into(),
        r,
        "-f".into(),
        n.clone(),
        "-l".into(),
        n,
        "-png".into(),
        "-gray".into(),
        "-singlefile".into(),
    ];
    if let Some((top, height)) = rows {
        args.extend([
            "-x".into(),
            "0".into(),
            "-y".into(),
            top.to_string(),
            // One more column than planned: pdftoppm clips the slice to the page.
            "-W".into(),
            (plan.width + 1).to_string(),
            "-H".into(),
            height.to_string(),
        ]);
    }
    let mut os_args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    os_args.push(path.as_os_str());
    let timeout = control.remaining().unwrap_or(INFO_TIMEOUT);
    // A grayscale PNG is at most about one byte per pixel plus framing.
    let cap = max_pixels.saturating_add(16 << 20);
    let out = subprocess::run(PDFTOPPM, &os_args, &[], timeout, cap, control).map_err(from_tool)?;
    if !out.status.success() || out.stdout.is_empty() {
        return Err(render_failed(format!(
            "pdftoppm could not render page {number}: {}",
            out.stderr_line()
        )));
    }
    image::decode_png(&out.stdout, max_pixels).map_err(|e| match e.code {
        "image_too_large" => e,
        _ => render_failed(format!("pdftoppm's image of page {number} cannot be read")),
    })
}

/// One row of `pdfimages -list`: what kind of image, its pixel size and resolution.
#[derive(Debug, Clone, PartialEq)]
struct ListedImage {
    kind: String,
    width: u32,
    height: u32,
    x_ppi: f64,
    y_ppi: f64,
}

/// The images `pdfimages -list` lists for page `number`.
fn parse_image_list(list: &str, number: u32) -> Vec<ListedImage> {
    list.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // page num type width height color comp bpc enc interp object ID x-ppi y-ppi
            // size ratio
            if f.len() < 14 || f.first()?.parse::<u32>().ok()? != number {
                return None;
            }
            Some(ListedImage {
                kind: f.get(2)?.to_string(),
                width: f.get(3)?.parse().ok()?,
                height: f.get(4)?.parse().ok()?,
                x_ppi: f.get(12)?.parse().ok()?,
                y_ppi: f.get(13)?.parse().ok()?,
            })
        })
        .collect()
}

/// The one scan of a page, extracted, at the resolution to read it at.
pub(crate) struct PageScan {
    pub pix: Pix,
    pub dpi: u32,
    pub warnings: Vec<String>,
}

/// Tool failures that end the page (cancel, deadline); the others only mean "render it".
fn fatal(e: OcrError) -> Result<Option<PageScan>, OcrError> {
    if matches!(e.code, "canceled" | "ocr_timeout") {
        Err(e)
    } else {
        Ok(None)
    }
}

/// Page `number`'s image when the page is one scanned image: `pdfimages` lists exactly one
/// image (no mask, no second image) at a credible, square resolution, it extracts it as
/// stored, and a thumbnail of it matches poppler's own thumbnail of the page (so nothing
/// else is drawn on the page, and the image is placed upright or turned by a quarter, which
/// the match finds and undoes). `None`: render the page (also for a scan stored over
/// `MAX_SCAN_DPI`). The image is read at its own resolution.
pub(crate) fn page_image(
    path: &Path,
    number: u32,
    max_pixels: u64,
    control: &Control,
) -> Result<Option<PageScan>, OcrError> {
    if number == 0 {
        return Err(render_failed("PDF pages are numbered from 1"));
    }
    let n = number.to_string();
    let timeout = control.remaining().unwrap_or(INFO_TIMEOUT);
    let args = [
        OsStr::new("-list"),
        OsStr::new("-f"),
        OsStr::new(&n),
        OsStr::new("-l"),
        OsStr::new(&n),
        path.as_os_str(),
    ];
    let out = match subprocess::run(PDFIMAGES, &args, &[], timeout, INFO_CAP, control) {
        Ok(out) if out.status.success() => out,
        Ok(_) => return Ok(None),
        Err(e) => return fatal(from_tool(e)),
    };
    let images = parse_image_list(&String::from_utf8_lossy(&out.stdout), number);
    let [image] = images.as_slice() else {
        return Ok(None);
    };
    let ppi = (image.x_ppi + image.y_ppi) / 2.0;
    let square = (image.x_ppi - image.y_ppi).abs() <= ppi * 0.02;
    if image.kind != "image"
        || !square
        || ppi > f64::from(MAX_SCAN_DPI)
        || !(f64::from(*crate::CREDIBLE_DPI.start())..=f64::from(*crate::CREDIBLE_DPI.end()))
            .contains(&ppi)
        || u64::from(image.width) * u64::from(image.height) > max_pixels
    {
        return Ok(None);
    }

    let dir = match tempfile::Builder::new().prefix("shelf-ocr-").tempdir() {
        Ok(dir) => dir,
        Err(_) => return Ok(None),
    };
    let prefix = dir.path().join("page");
    let timeout = control.remaining().unwrap_or(INFO_TIMEOUT);
    // `-j`: a JPEG is written as it is stored (no re-encoding); anything else as PNM, the
    // fastest to write and read back.
    let args = [
        OsStr::new("-j"),
        OsStr::new("-f"),
        OsStr::new(&n),
        OsStr::new("-l"),
        OsStr::new(&n),
        path.as_os_str(),
        prefix.as_os_str(),
    ];
    match subprocess::run(PDFIMAGES, &args, &[], timeout, INFO_CAP, control) {
        Ok(out) if out.status.success() => {}
        Ok(_) => return Ok(None),
        Err(e) => return fatal(from_tool(e)),
    }
    let file = std::fs::read_dir(dir.path())
        .ok()
        .and_then(|mut entries| entries.next())
        .and_then(|entry| entry.ok())
        .map(|entry| entry.path());
    let Some(bytes) = file.and_then(|file| std::fs::read(file).ok()) else {
        return Ok(None);
    };
    drop(dir);
    let Ok(pix) = image::decode_extracted(&bytes, max_pixels) else {
        return Ok(None);
    };
    drop(bytes);

    // poppler's thumbnail of the page against the image's, at each quarter turn.
    let plan = match plan(path, number, 72, u64::MAX, u32::MAX, control) {
        Ok(plan) => plan,
        Err(e) => return fatal(e),
    };
    // poppler samples 1-bit scans when it shrinks them: its thumbnail is drawn at four times
    // the compared size and averaged down, like the image's.
    let long = f64::from(plan.width.max(plan.height)).max(1.0);
    let thumb_dpi = ((THUMB_SIDE * 4.0 * 72.0 / long).floor() as u32).clamp(1, 288);
    let thumb_plan = match self::plan(path, number, thumb_dpi, u64::MAX, u32::MAX, control) {
        Ok(plan) => plan,
        Err(e) => return fatal(e),
    };
    let page = match render(path, &thumb_plan, None, max_pixels, control) {
        Ok(page) => page,
        Err(e) => return fatal(e),
    };
    let (tw, th) = ((page.width() / 4).max(1), (page.height() / 4).max(1));
    let Ok(page_gray) = page.gray_thumbnail(tw, th) else {
        return Ok(None);
    };
    let mut best: Option<(u32, f64)> = None;
    for turn in [0u32, 90, 180, 270] {
        // The image's size once turned must have the page's shape.
        let (w, h) = if turn % 180 == 0 {
            (pix.width(), pix.height())
        } else {
            (pix.height(), pix.width())
        };
        let shape = (f64::from(w) / f64::from(h)) / (f64::from(tw) / f64::from(th));
        if !(0.97..=1.03).contains(&shape) {
            continue;
        }
        let (sw, sh) = if turn % 180 == 0 { (tw, th) } else { (th, tw) };
        let Ok(small) = pix.gray_thumbnail(sw, sh) else {
            continue;
        };
        let turned = turn_gray(&small, sw, sh, turn);
        // Rounding places poppler's page up to a pixel off the image's: the best of the
        // nine one-pixel shifts counts.
        let (r, largest) = shifted_match(&turned, &page_gray, tw, th);
        if r >= SAME_PAGE && largest <= MAX_PIXEL_DIFFERENCE && best.is_none_or(|(_, b)| r > b) {
            best = Some((turn, r));
        }
    }
    let Some((turn, _)) = best else {
        return Ok(None);
    };
    let mut pix = if turn == 0 { pix } else { pix.rotated(turn)? };
    let dpi = ppi.round() as u32;
    pix.set_resolution(dpi);
    Ok(Some(PageScan {
        pix,
        dpi,
        warnings: Vec::new(),
    }))
}

/// A `w`×`h` gray image (row by row) turned `turn` degrees clockwise.
fn turn_gray(pixels: &[u8], w: u32, h: u32, turn: u32) -> Vec<u8> {
    let (w, h) = (w as usize, h as usize);
    let at = |x: usize, y: usize| pixels.get(y * w + x).copied().unwrap_or(255);
    match turn {
        90 => (0..w)
            .flat_map(|y| (0..h).map(move |x| (x, y)))
            .map(|(x, y)| at(y, h - 1 - x))
            .collect(),
        180 => (0..h)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .map(|(x, y)| at(w - 1 - x, h - 1 - y))
            .collect(),
        270 => (0..w)
            .flat_map(|y| (0..h).map(move |x| (x, y)))
            .map(|(x, y)| at(w - 1 - y, x))
            .collect(),
        _ => pixels.to_vec(),
    }
}

/// How well two `w`×`h` gray images match when `a` may be shifted by a pixel either way:
/// the best correlation over the nine shifts (border excluded) and the largest pixel
/// difference at that shift.
fn shifted_match(a: &[u8], b: &[u8], w: u32, h: u32) -> (f64, u8) {
    let (w, h) = (w as usize, h as usize);
    if w < 3 || h < 3 || a.len() != w * h || b.len() != w * h {
        return (0.0, u8::MAX);
    }
    let mut best = (f64::MIN, u8::MAX);
    for dy in [-1isize, 0, 1] {
        for dx in [-1isize, 0, 1] {
            let mut xs = Vec::with_capacity((w - 2) * (h - 2));
            let mut ys = Vec::with_capacity((w - 2) * (h - 2));
            for y in 1..h - 1 {
                for x in 1..w - 1 {
                    let sx = x.saturating_add_signed(dx);
                    let sy = y.saturating_add_signed(dy);
                    xs.push(a.get(sy * w + sx).copied().unwrap_or(255));
                    ys.push(b.get(y * w + x).copied().unwrap_or(255));
                }
            }
            if let Some(r) = correlation(&xs, &ys)
                && r > best.0
            {
                let largest = xs
                    .iter()
                    .zip(&ys)
                    .map(|(p, q)| p.abs_diff(*q))
                    .max()
                    .unwrap_or(u8::MAX);
                best = (r, largest);
            }
        }
    }
    best
}

/// Pearson's correlation of two equally long pixel lists; `None` when either is flat.
fn correlation(a: &[u8], b: &[u8]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let n = a.len() as f64;
    let mean = |v: &[u8]| v.iter().map(|&p| f64::from(p)).sum::<f64>() / n;
    let (ma, mb) = (mean(a), mean(b));
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (f64::from(x) - ma, f64::from(y) - mb);
        ab += dx * dy;
        aa += dx * dx;
        bb += dy * dy;
    }
    (aa > 0.0 && bb > 0.0).then(|| ab / (aa * bb).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "Producer:        x\nPages:           3\nEncrypted:       no\n\
                        Page    2 size:  595.201 x 841.922 pts (A4)\nPage    2 rot:   270\n";

    #[test]
    fn pdfinfo_output_is_parsed() {
        assert_eq!(parse_pages(INFO), Some(3));
        assert_eq!(parse_page_size(INFO, 2), Some((595.201, 841.922)));
        assert_eq!(parse_page_size(INFO, 1), None);
    }

    #[test]
    fn page_rotation_and_image_lists_are_parsed() {
        assert_eq!(parse_page_rotation(INFO, 2), 270);
        assert_eq!(parse_page_rotation(INFO, 1), 0);
        let list = "page   num  type   width height color comp bpc  enc interp  object ID x-ppi \
                    y-ppi size ratio\n----\n   1     0 image    4960  7016  gray    1   8  image  \
                    yes        9  0   600   600 89.7K 0.3%\n   2     1 smask  10 10 gray 1 8 image \
                    no 12 0 72 72 1B 1%\n";
        assert_eq!(
            parse_image_list(list, 1),
            vec![ListedImage {
                kind: "image".into(),
                width: 4960,
                height: 7016,
                x_ppi: 600.0,
                y_ppi: 600.0
            }]
        );
        assert_eq!(parse_image_list(list, 2)[0].kind, "smask");
    }

    #[test]
    fn thumbnails_turn_clockwise_and_correlate() {
        // 3×2: a b c / d e f
        let img = [1u8, 2, 3, 4, 5, 6];
        assert_eq!(turn_gray(&img, 3, 2, 90), vec![4, 1, 5, 2, 6, 3]);
        assert_eq!(turn_gray(&img, 3, 2, 180), vec![6, 5, 4, 3, 2, 1]);
        assert_eq!(turn_gray(&img, 3, 2, 270), vec![3, 6, 2, 5, 1, 4]);
        assert!((correlation(&img, &img).unwrap() - 1.0).abs() < 1e-9);
        assert!(correlation(&img, &[6, 5, 4, 3, 2, 1]).unwrap() < -0.99);
        assert_eq!(correlation(&[7, 7], &[1, 2]), None);
    }

    #[test]
    fn oversized_pages_are_rendered_at_a_resolution_that_fits() {
        // A4 at 300 dpi is about 8.7 Mpx.
        assert_eq!(fitted_dpi(595.0, 842.0, 300, 100_000_000), Some(300));
        let fitted = fitted_dpi(595.0, 842.0, 300, 2_000_000).unwrap();
        assert!(fitted < 300 && fitted > 100, "{fitted}");
        // A poster 200 inches square fits nowhere near 50 dpi in 1 Mpx.
        assert_eq!(fitted_dpi(14_400.0, 14_400.0, 300, 1_000_000), None);
    }
}
