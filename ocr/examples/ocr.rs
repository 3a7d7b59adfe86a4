//! Recognizes page images from the command line and prints each page's text, confidence and
//! rotation: the OCR crate alone, for trying files and for `bench/ocr_bench.py`.
//!
//! `cargo run --release -p shelf-ocr --example ocr -- [--jobs N] [--no-osd] [--retry]
//! [--dpi D] [--quiet] FILE...` (PDF: every page; TIFF: every page; `--jobs`: pages at once)

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use shelf_extractors::Control;
use shelf_ocr::{OcrSettings, PageImage, Recognizer};

struct Args {
    jobs: usize,
    osd: bool,
    quiet: bool,
    /// Write each page's text to `DIR/<file stem>-<page>.txt` (for scoring).
    out: Option<PathBuf>,
    settings: OcrSettings,
    files: Vec<PathBuf>,
}

fn parse() -> anyhow_free::Result<Args> {
    let mut args = Args {
        jobs: 1,
        osd: true,
        quiet: false,
        out: None,
        settings: OcrSettings::default(),
        files: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--jobs" => args.jobs = it.next().and_then(|v| v.parse().ok()).ok_or("--jobs N")?,
            "--dpi" => {
                args.settings.pdf_dpi = it.next().and_then(|v| v.parse().ok()).ok_or("--dpi D")?
            }
            "--lang" => args.settings.languages = it.next().ok_or("--lang LANGS")?,
            "--timeout-ms" => {
                let ms = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--timeout-ms MS")?;
                args.settings.page_timeout = std::time::Duration::from_millis(ms);
            }
            "--no-osd" => args.osd = false,
            "--retry" => args.settings.rotation_retry = true,
            "--quiet" => args.quiet = true,
            "--out" => args.out = Some(it.next().ok_or("--out DIR")?.into()),
            "-h" | "--help" => {
                return Err(
                    "usage: ocr [--jobs N] [--no-osd] [--retry] [--dpi D] [--lang L] [--timeout-ms MS] \
                            [--quiet] [--out DIR] FILE..."
                        .into(),
                );
            }
            _ => args.files.push(PathBuf::from(arg)),
        }
    }
    if args.files.is_empty() {
        return Err("no files given (see --help)".into());
    }
    Ok(args)
}

/// No anyhow in this crate: a string error is enough for an example.
mod anyhow_free {
    pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;
}

/// One page to read: the file, its bytes (rasters) and the page.
struct Job {
    file: PathBuf,
    bytes: Option<Vec<u8>>,
    page: u32,
}

fn jobs_of(path: &Path) -> anyhow_free::Result<Vec<Job>> {
    let is_pdf = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("pdf"));
    if is_pdf {
        let pages = shelf_ocr::pdf_page_count(path)?;
        return Ok((1..=pages)
            .map(|page| Job {
                file: path.to_path_buf(),
                bytes: None,
                page,
            })
            .collect());
    }
    let bytes = std::fs::read(path)?;
    let pages = shelf_ocr::raster_page_count(&bytes).unwrap_or(1);
    Ok((0..pages)
        .map(|page| Job {
            file: path.to_path_buf(),
            bytes: Some(bytes.clone()),
            page,
        })
        .collect())
}

fn main() {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let recognizer = Recognizer::new(args.settings.clone()).with_orientation_detection(args.osd);
    if let Err(e) = recognizer.check_available() {
        eprintln!("{}: {}", e.code, e.detail);
        std::process::exit(1);
    }
    let mut jobs = Vec::new();
    for file in &args.files {
        match jobs_of(file) {
            Ok(more) => jobs.extend(more),
            Err(e) => eprintln!("{}: {e}", file.display()),
        }
    }
    let started = Instant::now();
    let queue = Mutex::new(jobs.into_iter().enumerate().collect::<Vec<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..args.jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().ok().and_then(|mut q| {
                        if q.is_empty() {
                            None
                        } else {
                            Some(q.remove(0))
                        }
                    });
                    let Some((i, job)) = next else { break };
                    let page_started = Instant::now();
                    let page = match &job.bytes {
                        Some(bytes) => PageImage::Raster {
                            bytes,
                            index: job.page,
                        },
                        None => PageImage::PdfPage {
                            path: &job.file,
                            number: job.page,
                        },
                    };
                    let result = recognizer.recognize(page, false, &Control::default());
                    let seconds = page_started.elapsed().as_secs_f64();
                    if let Ok(mut r) = results.lock() {
                        r.push((i, job, result, seconds));
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(i, ..)| *i);
    let mut failed = false;
    for (_, job, result, seconds) in results {
        match result {
            Ok(text) => {
                println!(
                    "== {} page {}: confidence {:.1}, rotated {}°, {} pass(es), {} dpi, {:.2} s",
                    job.file.display(),
                    job.page,
                    text.confidence,
                    text.rotation_degrees,
                    text.passes,
                    text.dpi,
                    seconds
                );
                for warning in &text.warnings {
                    println!("   warning: {warning}");
                }
                if !args.quiet {
                    println!("{}\n", text.text);
                }
                if let Some(dir) = &args.out {
                    let stem = job.file.file_stem().unwrap_or_default().to_string_lossy();
                    let path = dir.join(format!("{stem}-{}.txt", job.page));
                    if let Err(e) = std::fs::write(&path, &text.text) {
                        eprintln!("{}: {e}", path.display());
                        failed = true;
                    }
                }
            }
            Err(e) => {
                failed = true;
                println!(
                    "== {} page {}: {}: {}",
                    job.file.display(),
                    job.page,
                    e.code,
                    e.detail
                );
            }
        }
    }
    eprintln!("total {:.2} s", started.elapsed().as_secs_f64());
    if failed {
        std::process::exit(1);
    }
}
