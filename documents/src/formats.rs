//! Which files Shelf accepts: the table of accepted extensions and how each is handled, the
//! refused archive/container extensions, and archive detection by signature.

use crate::error::{DocumentsError, Result};

/// How an accepted format is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FormatFamily {
    /// Plain text read as text (UTF-8, UTF-16 with a byte-order mark, or a legacy encoding).
    Text,
}

/// Container a format legitimately comes in (its signature is then not an archive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Container {
    /// A bare byte stream.
    None,
    /// A ZIP container (DOCX, EPUB, ...): the zip signature is expected.
    Zip,
}

/// One accepted extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Format {
    /// Lowercase extension without the dot.
    pub extension: &'static str,
    /// How it is read.
    pub family: FormatFamily,
    /// Its media type.
    pub media_type: &'static str,
    /// The container its bytes come in.
    pub container: Container,
}

/// Accepted extensions. Other issues add rows (PDF, office formats, transcripts, ...).
pub const ACCEPTED_FORMATS: &[Format] = &[
    Format {
        extension: "txt",
        family: FormatFamily::Text,
        media_type: "text/plain",
        container: Container::None,
    },
    Format {
        extension: "md",
        family: FormatFamily::Text,
        media_type: "text/markdown",
        container: Container::None,
    },
    Format {
        extension: "markdown",
        family: FormatFamily::Text,
        media_type: "text/markdown",
        container: Container::None,
    },
];

/// Archive and container extensions: refused with `archive_not_supported`, never unpacked.
pub const ARCHIVE_EXTENSIONS: &[&str] = &[
    "zip", "zipx", "tar", "gz", "tgz", "gzip", "bz2", "tbz", "tbz2", "bzip2", "xz", "txz", "7z",
    "rar", "cab", "cpio", "ar", "a", "deb", "rpm", "arj", "lha", "lzh", "lz", "tlz", "lzma", "zst",
    "tzst", "zoo", "iso", "jar", "war", "ear", "apk", "z", "taz", "lz4", "lzo", "lrz", "rz", "sit",
    "sitx", "dmg", "xar", "pkg", "wim", "squashfs", "img", "vhd", "vmdk", "ace", "alz", "egg",
    "sz", "br", "crx", "xpi", "whl", "nupkg", "vsix", "ipa", "msi", "cbz", "cbr",
];

/// ZIP-based document types: not archives (accepted by extension once their converter exists).
pub const ZIP_DOCUMENT_EXTENSIONS: &[&str] = &[
    "docx", "docm", "dotx", "pptx", "pptm", "xlsx", "xlsm", "epub", "odt", "ods", "odp",
];

/// The accepted format of an extension (lowercase, no dot).
pub fn format_for(extension: &str) -> Option<&'static Format> {
    ACCEPTED_FORMATS
        .iter()
        .find(|format| format.extension == extension)
}

/// True for an archive/container extension.
pub fn is_archive_extension(extension: &str) -> bool {
    ARCHIVE_EXTENSIONS.contains(&extension)
}

/// Extensions Shelf accepts, for messages and documentation.
pub fn accepted_extensions() -> Vec<&'static str> {
    ACCEPTED_FORMATS.iter().map(|f| f.extension).collect()
}

/// Validates an extension (as [`crate::extension_of`] returns it): the accepted format, or
/// `ArchiveNotSupported` for archives, or `UnsupportedFileType` naming the extension.
pub fn check_extension(extension: Option<&str>) -> Result<&'static Format> {
    let Some(ext) = extension else {
        return Err(DocumentsError::UnsupportedFileType {
            detail: format!(
                "file has no extension (accepted: {})",
                accepted_extensions().join(", ")
            ),
        });
    };
    let ext = ext.to_ascii_lowercase();
    if let Some(format) = format_for(&ext) {
        return Ok(format);
    }
    if is_archive_extension(&ext) {
        return Err(DocumentsError::ArchiveNotSupported {
            detail: format!(".{ext} files are archives"),
        });
    }
    let shown: String = ext.chars().take(32).collect();
    Err(DocumentsError::UnsupportedFileType {
        detail: format!(
            ".{shown} files are not supported (accepted: {})",
            accepted_extensions().join(", ")
        ),
    })
}

/// Validates the first bytes (up to 8 KiB) of a file of an accepted format: an archive
/// signature (other than the format's own container) is `ArchiveNotSupported`; a text-family
/// file with NUL bytes and no UTF-16 byte-order mark is `BinaryContent`.
pub fn check_content(format: &Format, head: &[u8]) -> Result<()> {
    if let Some(kind) = sniff_archive(head) {
        let expected = format.container == Container::Zip && kind == "zip";
        if !expected {
            return Err(DocumentsError::ArchiveNotSupported {
                detail: format!("content is a {kind} archive"),
            });
        }
    }
    match format.family {
        FormatFamily::Text => {
            if has_utf16_bom(head) || !head.contains(&0) {
                Ok(())
            } else {
                Err(DocumentsError::BinaryContent)
            }
        }
    }
}

fn has_utf16_bom(head: &[u8]) -> bool {
    head.starts_with(&[0xFF, 0xFE]) || head.starts_with(&[0xFE, 0xFF])
}

fn at(bytes: &[u8], offset: usize, magic: &[u8]) -> bool {
    bytes
        .get(offset..offset.saturating_add(magic.len()))
        .is_some_and(|window| window == magic)
}

/// Recognizes common archive and compressed-stream signatures in a file's first bytes and
/// names the kind (`"zip"`, `"gzip"`, ...). Signatures that plain text could start with are
/// checked with extra bytes of their headers.
pub fn sniff_archive(first_bytes: &[u8]) -> Option<&'static str> {
    let b = first_bytes;
    let kind = if at(b, 0, b"PK\x03\x04") || at(b, 0, b"PK\x05\x06") || at(b, 0, b"PK\x07\x08") {
        "zip"
    } else if at(b, 0, &[0x1F, 0x8B]) {
        "gzip"
    } else if at(b, 0, &[0x1F, 0x9D]) || at(b, 0, &[0x1F, 0xA0]) {
        "compress"
    } else if at(b, 0, b"BZh") && matches!(b.get(3), Some(b'1'..=b'9')) {
        "bzip2"
    } else if at(b, 0, &[0xFD, b'7', b'z', b'X', b'Z', 0x00]) {
        "xz"
    } else if at(b, 0, &[b'7', b'z', 0xBC, 0xAF, 0x27, 0x1C]) {
        "7z"
    } else if at(b, 0, b"Rar!\x1a\x07") {
        "rar"
    } else if at(b, 257, b"ustar") {
        "tar"
    } else if at(b, 0, b"MSCF\0\0\0\0") {
        "cab"
    } else if at(b, 0, b"070701")
        || at(b, 0, b"070702")
        || at(b, 0, b"070707")
        || at(b, 0, &[0xC7, 0x71])
    {
        "cpio"
    } else if at(b, 0, b"!<arch>\n") {
        "ar"
    } else if at(b, 0, b"LZIP") {
        "lzip"
    } else if at(b, 0, &[0x28, 0xB5, 0x2F, 0xFD]) {
        "zstd"
    } else if at(b, 0, &[0x04, 0x22, 0x4D, 0x18]) {
        "lz4"
    } else if at(b, 0, &[0x5D, 0x00, 0x00]) {
        "lzma"
    } else if at(b, 0, &[0x60, 0xEA]) {
        "arj"
    } else if is_lha(b) {
        "lha"
    } else if at(b, 0, b"ZOO ") && at(b, 20, &[0xDC, 0xA7, 0xC4, 0xFD]) {
        "zoo"
    } else if at(b, 0, b"LRZI") {
        "lrzip"
    } else if at(b, 0, &[0x89, b'L', b'Z', b'O']) || at(b, 0, &[0x00, 0xE9, b'L', b'Z', b'O']) {
        "lzo"
    } else if at(b, 0, b"RZIP") {
        "rzip"
    } else if at(b, 0, &[0xED, 0xAB, 0xEE, 0xDB]) {
        "rpm"
    } else if at(b, 0, b"xar!") {
        "xar"
    } else {
        return None;
    };
    Some(kind)
}

/// LHA/LZH: `-lh?-` or `-lz?-` at offset 2.
fn is_lha(b: &[u8]) -> bool {
    let Some(method) = b.get(2..7) else {
        return false;
    };
    matches!(method, [b'-', b'l', b'h' | b'z', m, b'-'] if m.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const CORPUS: &str = "/work/shared/corpus";

    fn head_of(path: &Path) -> Vec<u8> {
        let mut bytes = std::fs::read(path).expect("read corpus file");
        bytes.truncate(8 * 1024);
        bytes
    }

    fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                files_under(&path, out);
            } else {
                out.push(path);
            }
        }
    }

    #[test]
    fn every_renamed_archive_is_detected() {
        let dir = Path::new(CORPUS).join("hostile/archives-renamed");
        let mut files = Vec::new();
        files_under(&dir, &mut files);
        if files.is_empty() {
            eprintln!("corpus not present, skipping");
            return;
        }
        assert_eq!(files.len(), 18);
        for file in files {
            let kind = sniff_archive(&head_of(&file));
            assert!(kind.is_some(), "not detected: {}", file.display());
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let expected = name
                .trim_start_matches("small_archive-")
                .trim_end_matches(".txt");
            assert_eq!(kind, Some(expected), "{name}");
        }
    }

    #[test]
    fn zip_bombs_are_detected() {
        let mut files = Vec::new();
        files_under(&Path::new(CORPUS).join("hostile/bombs"), &mut files);
        for file in files {
            assert_eq!(
                sniff_archive(&head_of(&file)),
                Some("zip"),
                "{}",
                file.display()
            );
        }
    }

    #[test]
    fn plain_text_in_the_corpus_is_not_an_archive() {
        let mut files = Vec::new();
        files_under(&Path::new(CORPUS).join("office"), &mut files);
        files_under(&Path::new(CORPUS).join("transcripts"), &mut files);
        let text_exts = ["md", "html", "vtt", "srt", "sbv", "txt"];
        let mut checked = 0;
        for file in files {
            let ext = file
                .extension()
                .and_then(|e| e.to_str())
                .map(str::to_ascii_lowercase);
            if !ext.as_deref().is_some_and(|e| text_exts.contains(&e)) {
                continue;
            }
            checked += 1;
            assert_eq!(sniff_archive(&head_of(&file)), None, "{}", file.display());
        }
        if checked == 0 {
            eprintln!("corpus not present, skipping");
        }
    }

    #[test]
    fn short_and_empty_inputs_are_safe() {
        assert_eq!(sniff_archive(b""), None);
        assert_eq!(sniff_archive(b"P"), None);
        assert_eq!(sniff_archive(b"BZh"), None);
        assert_eq!(sniff_archive(b"BZhello"), None);
        assert_eq!(sniff_archive(b"ZOO NEWS: the zoo opens"), None);
        assert_eq!(sniff_archive(b"Rar! said the lion"), None);
        assert_eq!(sniff_archive(b"PK\x03\x04"), Some("zip"));
    }

    #[test]
    fn extensions_are_classified() {
        assert_eq!(
            check_extension(Some("txt")).map(|f| f.extension).ok(),
            Some("txt")
        );
        assert_eq!(
            check_extension(Some("MD")).map(|f| f.extension).ok(),
            Some("md")
        );
        for ext in ["zip", "tar", "gz", "7z", "rar", "jar", "iso", "zst"] {
            assert!(
                matches!(
                    check_extension(Some(ext)),
                    Err(DocumentsError::ArchiveNotSupported { .. })
                ),
                "{ext}"
            );
        }
        for ext in ["docx", "pptx", "xlsx", "epub", "odt", "exe"] {
            match check_extension(Some(ext)) {
                Err(DocumentsError::UnsupportedFileType { detail }) => {
                    assert!(detail.contains(ext), "{detail}")
                }
                other => panic!("{ext}: {other:?}"),
            }
        }
        assert!(matches!(
            check_extension(None),
            Err(DocumentsError::UnsupportedFileType { .. })
        ));
    }

    #[test]
    fn content_checks() {
        let txt = format_for("txt").expect("txt");
        assert!(check_content(txt, b"hello world").is_ok());
        assert!(check_content(txt, b"").is_ok());
        assert!(matches!(
            check_content(txt, b"hel\0lo"),
            Err(DocumentsError::BinaryContent)
        ));
        assert!(check_content(txt, b"\xFF\xFEh\0i\0").is_ok());
        assert!(check_content(txt, b"\xFE\xFF\0h\0i").is_ok());
        assert!(matches!(
            check_content(txt, b"PK\x03\x04rest"),
            Err(DocumentsError::ArchiveNotSupported { .. })
        ));
    }
}
