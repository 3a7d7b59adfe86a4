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

/// Under this resolution a page shrunk to fit the pixel cap is no longer worth reading.
const MIN_FITTED_DPI: u32 = 50;
/// `pdfinfo` prints a few lines per page; more than this is not pdfinfo.
const INFO_CAP: u64 = 1 << 20;
/// Without a page deadline (page count), tools still get this long.
const INFO_TIMEOUT: Duration = Duration::from_secs(60);

/// A rendered page and the resolution it was rendered at.
pub(crate) struct Rendered {
    pub pix: Pix,
    pub dpi: u32,
    pub warnings: Vec<String>,
}

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

/// Renders page `number` (1-based) at `dpi`, or at the highest resolution under
/// `max_pixels` (with a warning).
pub(crate) fn render(
    path: &Path,
    number: u32,
    dpi: u32,
    max_pixels: u64,
    control: &Control,
) -> Result<Rendered, OcrError> {
    if number == 0 {
        return Err(render_failed("PDF pages are numbered from 1"));
    }
    let info = pdfinfo(path, Some(number), control)?;
    let (w, h) = parse_page_size(&info, number).ok_or_else(|| {
        render_failed(format!("pdfinfo did not report the size of page {number}"))
    })?;
    let mut warnings = Vec::new();
    let used = match fitted_dpi(w, h, dpi, max_pixels) {
        Some(d) if d == dpi => d,
        Some(d) => {
            warnings.push(format!(
                "page {number} ({w:.0}×{h:.0} pt) rendered at {d} dpi instead of {dpi} to stay \
                 under {max_pixels} pixels"
            ));
            d
        }
        None => {
            return Err(OcrError::new(
                "image_too_large",
                format!(
                    "page {number} is {w:.0}×{h:.0} pt: over {max_pixels} pixels even at \
                     {MIN_FITTED_DPI} dpi"
                ),
                false,
            ));
        }
    };
    let r = used.to_string();
    let n = number.to_string();
    let args: Vec<&OsStr> = [
        OsStr::new("-r"),
        OsStr::new(&r),
        OsStr::new("-f"),
        OsStr::new(&n),
        OsStr::new("-l"),
        OsStr::new(&n),
        OsStr::new("-png"),
        OsStr::new("-gray"),
        OsStr::new("-singlefile"),
        path.as_os_str(),
    ]
    .into();
    let timeout = control.remaining().unwrap_or(INFO_TIMEOUT);
    // A grayscale PNG is at most about one byte per pixel plus framing.
    let cap = max_pixels.saturating_add(16 << 20);
    let out = subprocess::run(PDFTOPPM, &args, &[], timeout, cap, control).map_err(from_tool)?;
    if !out.status.success() || out.stdout.is_empty() {
        return Err(render_failed(format!(
            "pdftoppm could not render page {number}: {}",
            out.stderr_line()
        )));
    }
    let pix = image::decode_png(&out.stdout, max_pixels).map_err(|e| match e.code {
        "image_too_large" => e,
        _ => render_failed(format!("pdftoppm's image of page {number} cannot be read")),
    })?;
    Ok(Rendered {
        pix,
        dpi: used,
        warnings,
    })
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
    fn oversized_pages_are_rendered_at_a_resolution_that_fits() {
        // A4 at 300 dpi is about 8.7 Mpx.
        assert_eq!(fitted_dpi(595.0, 842.0, 300, 100_000_000), Some(300));
        let fitted = fitted_dpi(595.0, 842.0, 300, 2_000_000).unwrap();
        assert!(fitted < 300 && fitted > 100, "{fitted}");
        // A poster 200 inches square fits nowhere near 50 dpi in 1 Mpx.
        assert_eq!(fitted_dpi(14_400.0, 14_400.0, 300, 1_000_000), None);
    }
}
