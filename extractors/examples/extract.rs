//! Extracts files with Shelf's extractors, outside the service: for fidelity checks and
//! benchmarks (bench/extract_fidelity.sh).
//!
//!     cargo run --release -p shelf-extractors --example extract -- [--out DIR] FILE...
//!
//! Without `--out` the Markdown of each file goes to standard output. With it, each file's
//! Markdown is written to `DIR/<file name>.md`. One line per file goes to standard error:
//! name, status (`ok` or the error code), milliseconds, pages.

use std::path::{Path, PathBuf};
use std::time::Instant;

use shelf_extractors::{Control, Input, Limits, extract, format_for};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut out: Option<PathBuf> = None;
    let mut files = Vec::new();
    while let Some(arg) = args.next() {
        if arg == "--out" {
            out = args.next().map(PathBuf::from);
        } else {
            files.push(PathBuf::from(arg));
        }
    }
    let limits = Limits::default();
    let mut failures = 0;
    for file in files {
        let started = Instant::now();
        let result = run(&file, &limits);
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match result {
            Ok(extraction) => {
                eprintln!("{name}\tok\t{ms:.1}\t{}", extraction.pages.len());
                for warning in &extraction.warnings {
                    eprintln!("{name}\twarning\t{warning}");
                }
                match &out {
                    Some(dir) => {
                        let _ = std::fs::create_dir_all(dir);
                        if let Err(e) =
                            std::fs::write(dir.join(format!("{name}.md")), &extraction.markdown)
                        {
                            eprintln!("{name}\twrite failed: {e}");
                        }
                    }
                    None => println!("{}", extraction.markdown),
                }
            }
            Err(e) => {
                failures += 1;
                eprintln!("{name}\t{}\t{ms:.1}\t{}", e.code, e.detail);
            }
        }
    }
    std::process::exit(if failures > 0 { 1 } else { 0 });
}

fn run(
    file: &Path,
    limits: &Limits,
) -> Result<shelf_extractors::Extraction, shelf_extractors::ExtractError> {
    let extension = file
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let format = format_for(&extension).ok_or_else(|| {
        shelf_extractors::ExtractError::unsupported(format!(".{extension} is not accepted"))
    })?;
    let bytes =
        std::fs::read(file).map_err(|e| shelf_extractors::ExtractError::io(e.to_string()))?;
    extract(
        format.kind,
        Input {
            path: file,
            bytes: &bytes,
            extension: &extension,
        },
        limits,
        &Control::default(),
    )
}
