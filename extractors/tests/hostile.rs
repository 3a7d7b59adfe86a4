//! Every extractor against hostile input: the malformed files and zip bombs of the corpus,
//! arbitrary bytes, and corpus documents truncated or with bytes flipped. Whatever the input,
//! an extractor returns (a result or an error with a stable code) and never panics: a caught
//! panic (`extractor_crashed`) fails these tests.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use shelf_extractors::{Control, ExtractError, Extraction, Input, Limits, extract, format_for};

/// Longer than any input here may take, by orders of magnitude: what runs past it hangs.
const HANG: Duration = Duration::from_secs(300);

/// Codes an extractor may answer hostile input with.
const STABLE_CODES: &[&str] = &[
    "malformed_document",
    "document_too_complex",
    "pdf_encrypted",
    "document_encrypted",
    "unsupported_file_type",
    "file_too_large",
    "extraction_timeout",
    "converter_failed",
    "converter_unavailable",
];

/// Formats read in process (the subprocess ones are exercised on hostile files only, since each
/// case starts a process).
const IN_PROCESS: &[&str] = &[
    "txt", "docx", "pptx", "xlsx", "xls", "ods", "odt", "odp", "epub", "html", "csv", "json",
    "jsonl", "xml", "rtf", "srt", "vtt", "sbv", "png", "tif", "eml", "msg", "ipynb", "rst", "org",
    "tex", "typ", "adoc", "bib", "fb2", "dbk", "nxml", "opml", "svg", "yaml", "yml", "toml",
];

fn corpus(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus")
        .join(relative)
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(20),
        ..Limits::default()
    }
}

fn run(extension: &str, path: &Path, bytes: &[u8]) -> Result<Extraction, ExtractError> {
    let format = format_for(extension).expect("accepted extension");
    extract(
        format.kind,
        Input {
            path,
            bytes,
            extension,
        },
        &limits(),
        &Control::default(),
    )
}

fn assert_handled(what: &str, result: &Result<Extraction, ExtractError>) {
    if let Err(e) = result {
        assert!(
            STABLE_CODES.contains(&e.code),
            "{what}: unexpected code {} ({})",
            e.code,
            e.detail
        );
    }
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.is_file());
    files.sort();
    files
}

#[test]
fn malformed_corpus_files_get_stable_codes_quickly() {
    let dir = corpus("hostile/malformed");
    let files = files_in(&dir);
    assert!(
        !files.is_empty(),
        "vendored corpus missing: {}",
        dir.display()
    );
    for file in files {
        let bytes = std::fs::read(&file).expect("read");
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let own = file
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .filter(|e| format_for(e).is_some());
        // Under its own extension, and posing as each ZIP-based and text format.
        let mut extensions: Vec<String> = own.into_iter().collect();
        extensions.extend(["docx", "xlsx", "epub", "html", "rtf"].map(String::from));
        for extension in extensions {
            let started = Instant::now();
            let result = run(&extension, &file, &bytes);
            assert_handled(&format!("{name} as .{extension}"), &result);
            // A hang guard, not a speed check (speed is benchmarked): each takes milliseconds.
            assert!(
                started.elapsed() < HANG,
                "{name} as .{extension} took {:?}",
                started.elapsed()
            );
        }
    }
}

#[test]
fn truncated_and_damaged_documents_fail_clearly() {
    let truncated = corpus("hostile/malformed/testWORD_truncated.docx");
    let bytes = std::fs::read(&truncated).expect("read");
    let err = run("docx", &truncated, &bytes).expect_err("a truncated DOCX cannot be read");
    assert_eq!(err.code, "malformed_document", "{}", err.detail);
    let not_zip = corpus("hostile/malformed/testODTnotaZipFile.odt");
    let bytes = std::fs::read(&not_zip).expect("read");
    let err = run("odt", &not_zip, &bytes).expect_err("not a ZIP container");
    assert_eq!(err.code, "malformed_document", "{}", err.detail);
}

#[test]
fn zip_bombs_posing_as_documents_are_refused() {
    let files = files_in(&corpus("hostile/bombs"));
    assert!(!files.is_empty(), "vendored bombs missing");
    for file in files {
        let bytes = std::fs::read(&file).expect("read");
        for extension in ["docx", "pptx", "xlsx", "ods", "odt", "odp", "epub"] {
            let started = Instant::now();
            let result = run(extension, &file, &bytes);
            let name = file.display();
            let err = result.expect_err("a bomb is not a document");
            assert!(
                STABLE_CODES.contains(&err.code),
                "{name} .{extension}: {}",
                err.code
            );
            assert!(started.elapsed() < HANG, "{name} .{extension}");
        }
    }
}

/// A sample of real documents per in-process format, for mutation.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let picks = [
        ("docx", "office/docx/sources/lorem_ipsum.docx"),
        ("docx", "office/docx/sources/word_tables.docx"),
        ("pptx", "office/pptx/sources/powerpoint_sample.pptx"),
        ("xlsx", "office/xlsx/sources/xlsx_01.xlsx"),
        ("ods", "office/odf/sources/odf_table_with_title_01.ods"),
        ("odt", "office/odf/sources/text_document_01.odt"),
        ("odp", "office/odf/sources/odf_presentation_01.odp"),
        ("epub", "office/epub/sources/epub_purvis_poetry.epub"),
        ("html", "office/html/sources/example_01.html"),
        ("vtt", "office/webvtt/sources/webvtt_example_01.vtt"),
        ("srt", "transcripts/srt/gb2312.srt"),
    ];
    picks
        .iter()
        .filter_map(|(ext, rel)| {
            std::fs::read(corpus(rel))
                .ok()
                .map(|b| (ext.to_string(), b))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_crash_an_extractor(
        bytes in proptest::collection::vec(any::<u8>(), 0..4096),
        which in 0..IN_PROCESS.len(),
    ) {
        let extension = IN_PROCESS[which];
        let result = run(extension, Path::new("arbitrary"), &bytes);
        assert_handled(extension, &result);
    }

    #[test]
    fn mutated_corpus_documents_never_crash_an_extractor(
        which in 0usize..64,
        cut in 0.0f64..1.0,
        flips in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..16),
    ) {
        let seeds = seeds();
        prop_assume!(!seeds.is_empty());
        let (extension, original) = &seeds[which % seeds.len()];
        let mut bytes = original.clone();
        for (at, value) in flips {
            let index = ((bytes.len() as f64) * at) as usize;
            if let Some(b) = bytes.get_mut(index) {
                *b = value;
            }
        }
        let keep = ((bytes.len() as f64) * (0.5 + cut / 2.0)) as usize;
        bytes.truncate(keep.max(1));
        let result = run(extension, Path::new("mutated"), &bytes);
        assert_handled(extension, &result);
    }
}
