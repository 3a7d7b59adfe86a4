//! Helpers the extractors' unit tests share: synthetic ZIP containers, vendored corpus files,
//! running an extractor behind the guard, order assertions and the mutation of documents.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use crate::{Control, ExtractError, Extraction, Input, Limits};

/// A ZIP container of `entries` (name, contents), as Office and EPUB files are.
pub fn zip_of<D: AsRef<[u8]>>(entries: &[(&str, D)]) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    {
        let mut writer = zip::ZipWriter::new(&mut out);
        for (name, data) in entries {
            writer
                .start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            writer.write_all(data.as_ref()).unwrap();
        }
        writer.finish().unwrap();
    }
    out.into_inner()
}

/// An OLE2 compound file with empty streams of these names (`/WordDocument`, ...), as legacy
/// Office, Outlook and password-protected Office files are.
pub fn ole2_of(streams: &[&str]) -> Vec<u8> {
    let mut compound = cfb::CompoundFile::create(Cursor::new(Vec::new())).unwrap();
    for name in streams {
        compound.create_stream(name).unwrap();
    }
    compound.flush().unwrap();
    compound.into_inner().into_inner()
}

/// `bytes` in a temporary file, for checks that read a file by path.
pub fn stored(bytes: &[u8]) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), bytes).unwrap();
    file
}

pub type Extractor = fn(Input<'_>, &Limits, &Control) -> Result<Extraction, ExtractError>;

pub fn run(
    extractor: Extractor,
    bytes: &[u8],
    extension: &str,
) -> Result<Extraction, ExtractError> {
    crate::guard::run_guarded(
        &Control::default(),
        std::time::Duration::from_secs(20),
        |c| {
            extractor(
                Input {
                    path: Path::new("test"),
                    bytes,
                    extension,
                },
                &Limits::default(),
                c,
            )
        },
    )
}

/// A corpus file, or `None` (with a note) when the corpus is not on this machine.
pub fn corpus(relative: &str) -> Option<Vec<u8>> {
    let path =
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus")).join(relative);
    match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(_) => {
            eprintln!("corpus file {} missing: test skipped", path.display());
            None
        }
    }
}

/// `text` has each of `parts` in this order.
pub fn assert_in_order(text: &str, parts: &[&str]) {
    let mut from = 0;
    for part in parts {
        match text.get(from..).and_then(|rest| rest.find(part)) {
            Some(at) => from += at + part.len(),
            None => panic!("{part:?} missing or out of order in:\n{text}"),
        }
    }
}

/// Damages a document the way the property tests do: bytes overwritten at positions
/// (taken modulo its length), then cut to at most `cut` bytes.
pub fn mutate(bytes: &mut Vec<u8>, flips: &[(usize, u8)], cut: usize) {
    let len = bytes.len();
    for (at, value) in flips {
        if let Some(b) = bytes.get_mut(at % len.max(1)) {
            *b = *value;
        }
    }
    bytes.truncate(cut);
}

/// `doc` damaged by [`mutate`], as a new buffer.
pub fn damaged(doc: &[u8], flips: &[(usize, u8)], cut: usize) -> Vec<u8> {
    let mut bytes = doc.to_vec();
    mutate(&mut bytes, flips, cut);
    bytes
}

/// The property of the hostile-input tests: `extractor` on `bytes` gives an extraction or a
/// typed error, never a panic (which the guard turns into `extractor_crashed`). With
/// `allowed` not empty, the error must also have one of these codes.
pub fn never_panics(
    extractor: Extractor,
    bytes: &[u8],
    extension: &str,
    allowed: &[&str],
) -> Result<(), proptest::test_runner::TestCaseError> {
    if let Err(e) = run(extractor, bytes, extension) {
        if allowed.is_empty() {
            proptest::prop_assert_ne!(e.code, "extractor_crashed", "{}", e.detail);
        } else {
            proptest::prop_assert!(allowed.contains(&e.code), "{}: {}", e.code, e.detail);
        }
    }
    Ok(())
}

/// `text` has none of `parts`.
pub fn assert_absent(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(!text.contains(part), "{part:?} in:\n{text}");
    }
}
