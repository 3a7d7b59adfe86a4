//! Writes test PDFs for OCR measurements (docs/PERFORMANCE.md, docs/ocr.md):
//!
//! `makepdf tall OUT.pdf WIDTH_PT HEIGHT_PT` — a page of numbered Helvetica lines from top to
//! bottom (a screen capture or a long receipt), and its text as `OUT.txt`; `makepdf image IMAGE OUT.pdf` — a page that
//! is the image (any format Leptonica reads), embedded losslessly at its own resolution.

#[path = "../tests/support/pdf.rs"]
mod pdf;

use leptess::capi as lept;

fn to_png(path: &str) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.starts_with(b"\x89PNG") {
        return Ok(bytes);
    }
    // SAFETY: Leptonica reads at most `bytes.len()` bytes and returns a new Pix or null; the
    // PNG buffer it allocates is copied and freed once, the Pix destroyed once.
    unsafe {
        let mut pix = lept::pixReadMem(bytes.as_ptr(), bytes.len());
        if pix.is_null() {
            return Err(format!("{path}: Leptonica cannot read it"));
        }
        let mut data: *mut u8 = std::ptr::null_mut();
        let mut size = 0usize;
        let failed = lept::pixWriteMem(&mut data, &mut size, pix, lept::IFF_PNG as i32);
        lept::pixDestroy(&mut pix);
        if failed != 0 || data.is_null() {
            return Err(format!("{path}: cannot encode as PNG"));
        }
        let png = std::slice::from_raw_parts(data, size).to_vec();
        lept::lept_free(data.cast());
        Ok(png)
    }
}

/// Line `i` of a tall page: words of varied lengths, so that no column of blanks lines up
/// from one line to the next (Tesseract would read such a page as two columns).
pub fn tall_line(i: usize) -> String {
    const WORDS: [&str; 16] = [
        "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "pack", "my", "box",
        "with", "five", "dozen", "liquor", "jugs",
    ];
    let count = 3 + (i * 5) % 6;
    let mut line = format!("{}.", i + 1);
    for k in 0..count {
        line.push(' ');
        line.push_str(WORDS[(i * 7 + k * 3) % WORDS.len()]);
    }
    line
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: makepdf tall OUT.pdf WIDTH_PT HEIGHT_PT | makepdf image IMAGE OUT.pdf";
    match args.first().map(String::as_str) {
        Some("tall") if args.len() == 4 => {
            let width: f64 = args[2].parse().map_err(|_| usage)?;
            let height: f64 = args[3].parse().map_err(|_| usage)?;
            let texts: Vec<String> = (0..)
                .map(|i| 24.0 + f64::from(i) * 24.0)
                .take_while(|top| top + 24.0 < height)
                .enumerate()
                .map(|(i, _)| tall_line(i))
                .collect();
            let lines: Vec<pdf::Line<'_>> = texts
                .iter()
                .enumerate()
                .map(|(i, text)| pdf::Line {
                    top: 24.0 + i as f64 * 24.0,
                    size: 11.0,
                    text,
                })
                .collect();
            std::fs::write(&args[1], pdf::text_page(width, height, &lines, &[]))
                .map_err(|e| e.to_string())?;
            // The ground truth next to it, for bench/fidelity.py --cer.
            let truth = std::path::Path::new(&args[1]).with_extension("txt");
            std::fs::write(truth, texts.join("\n") + "\n").map_err(|e| e.to_string())
        }
        Some("image") if args.len() == 3 => {
            let png = to_png(&args[1])?;
            std::fs::write(&args[2], pdf::image_page(&png, None)?).map_err(|e| e.to_string())
        }
        _ => Err(usage.into()),
    }
}
