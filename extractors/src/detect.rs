//! What a file's bytes say it is: archive signatures (refused), document signatures (PDF,
//! images, OLE2, ZIP), and for ZIP-based documents the entries that prove the type
//! (`[Content_Types].xml` and the main part for Office Open XML, `mimetype` for ODF and EPUB).
//! A file whose content contradicts its extension is refused at ingest, saying what was found.
//! A damaged file of the right type is accepted here and fails its run with a clear code.

use std::io::Read;
use std::path::Path;

use crate::formats::{Container, Format, Kind};
use crate::sniff::Sniffed;

/// Why a file's content does not fit its extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// An archive or compressed stream (never unpacked).
    Archive(String),
    /// Content of another type than the extension says; the detail names what was found.
    Mismatch(String),
    /// NUL bytes in a text format.
    Binary,
    /// An extension Shelf does not read, and content it does not recognize either.
    Unsupported(String),
}

/// The format a file is read as, and whether its content (not its extension) said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identified {
    pub format: &'static Format,
    pub by_content: bool,
}

/// Identifies a file from its extension (lowercase or not, without the dot) and content: the
/// extension decides when the content fits it; when it does not, or the extension is unknown,
/// the content decides ([`crate::sniff`]). `head` is the file's first bytes (up to 8 KiB);
/// `path` is read for ZIP and OLE2 containers. With `path` `None` (an upload still
/// streaming), `Ok(None)` means the container's entries must be read before deciding.
///
/// Refused: archives other than a document's ZIP container (`Archive`), content that is no
/// format Shelf reads (`Mismatch` naming what the extension wanted and what was found, or
/// `Unsupported` for an unknown extension), binary bytes under a text extension (`Binary`).
pub fn identify(
    extension: Option<&str>,
    head: &[u8],
    path: Option<&Path>,
) -> Result<Option<Identified>, Refusal> {
    let extension = extension.map(str::to_ascii_lowercase);
    let declared = extension.as_deref().and_then(crate::formats::format_for);
    if let Some(kind) = sniff_archive(head).filter(|kind| *kind != "zip") {
        return Err(Refusal::Archive(format!("content is a {kind} archive")));
    }
    let sniffed = || guarded_sniff(head, path);
    let Some(declared) = declared else {
        let shown: String = extension
            .as_deref()
            .map(|ext| format!(".{} files", ext.chars().take(32).collect::<String>()))
            .unwrap_or_else(|| "files without an extension".into());
        return match sniffed() {
            Sniffed::Format(format) => Ok(Some(Identified {
                format,
                by_content: true,
            })),
            Sniffed::NeedsContainer => Ok(None),
            Sniffed::PlainZip => Err(Refusal::Archive("content is a zip archive".into())),
            Sniffed::EncryptedOffice => Err(Refusal::Unsupported(format!(
                "{shown} are not supported, and this content is a password-protected Office \
                 document: give it its real extension (.docx, .xlsx, .pptx)"
            ))),
            Sniffed::Unknown => Err(Refusal::Unsupported(format!(
                "{shown} are not supported, and this content is {} (see docs/formats.md for \
                 the accepted ones)",
                describe(head)
            ))),
        };
    };
    let by_extension = check_head(declared, head).and_then(|()| match path {
        Some(path) => check_container(declared, path),
        None => Ok(()),
    });
    let refusal = match by_extension {
        // A ZIP or OLE2 file under its own extension is confirmed once its entries are read.
        Ok(()) if path.is_none() && sniffed() == Sniffed::NeedsContainer => return Ok(None),
        Ok(()) => {
            return Ok(Some(Identified {
                format: declared,
                by_content: false,
            }));
        }
        Err(refusal) => refusal,
    };
    match sniffed() {
        Sniffed::Format(format) => Ok(Some(Identified {
            format,
            by_content: true,
        })),
        Sniffed::NeedsContainer => Ok(None),
        // A password-protected workbook, document or presentation is an OLE2 file holding
        // the encrypted package: it is what its extension says, and its run fails with
        // `document_encrypted` (as an encrypted PDF's does with `pdf_encrypted`).
        Sniffed::EncryptedOffice if is_office_open_xml(declared) => Ok(Some(Identified {
            format: declared,
            by_content: false,
        })),
        _ => Err(refusal),
    }
}

fn is_office_open_xml(format: &Format) -> bool {
    matches!(format.kind, Kind::Docx | Kind::Pptx)
        || matches!(format.extension, "xlsx" | "xlsm" | "xlsb")
}

/// [`crate::sniff::by_content`] behind `catch_unwind`: container readers see hostile bytes.
fn guarded_sniff(head: &[u8], path: Option<&Path>) -> Sniffed {
    std::panic::catch_unwind(|| crate::sniff::by_content(head, path)).unwrap_or(Sniffed::Unknown)
}

/// Checks the first bytes (up to 8 KiB) of a file of `format`.
pub fn check_head(format: &Format, head: &[u8]) -> Result<(), Refusal> {
    if let Some(kind) = sniff_archive(head) {
        let expected = format.container == Container::Zip && kind == "zip";
        if !expected {
            return Err(Refusal::Archive(format!("content is a {kind} archive")));
        }
    }
    if format.container == Container::Zip && !head.is_empty() && sniff_archive(head).is_none() {
        return Err(Refusal::Mismatch(format!(
            "a .{} file is a ZIP container, but this content is {}",
            format.extension,
            describe(head)
        )));
    }
    let mismatch = |wanted: &str| {
        Refusal::Mismatch(format!(
            "a .{} file should be {wanted}, but this content is {}",
            format.extension,
            describe(head)
        ))
    };
    match format.kind {
        kind if kind.is_textual() => {
            if is_text(head) {
                Ok(())
            } else {
                Err(Refusal::Binary)
            }
        }
        Kind::Pdf if !head.is_empty() && find(head, b"%PDF-").is_none_or(|at| at > 1024) => {
            Err(mismatch("a PDF document"))
        }
        Kind::Image if !head.is_empty() && image_kind(head).is_none() => Err(mismatch("an image")),
        Kind::Outlook if !head.is_empty() && !head.starts_with(&OLE2_MAGIC) => {
            Err(mismatch("an Outlook message (an OLE2 compound file)"))
        }
        Kind::Universal if !head.is_empty() => check_legacy_head(format, head, mismatch),
        _ => Ok(()),
    }
}

/// Legacy formats LibreOffice reads: their signatures, where they have one. LibreOffice
/// imports anything it cannot place as plain text, so without this check random bytes named
/// `.ppt` would "convert" into gibberish instead of being refused.
fn check_legacy_head(
    format: &Format,
    head: &[u8],
    mismatch: impl Fn(&str) -> Refusal,
) -> Result<(), Refusal> {
    let ole2 = head.starts_with(&OLE2_MAGIC);
    let fits = match format.extension {
        // Word files are also saved as RTF, HTML or XML under `.doc`.
        "doc" | "dot" => ole2 || head.starts_with(b"{\\rtf") || !head.contains(&0),
        "ppt" | "pps" | "pot" | "xlt" | "vsd" | "pub" | "wps" => ole2,
        "wpd" => head.starts_with(b"\xFFWPC"),
        "fodt" | "fodp" | "fods" | "abw" => !head.contains(&0),
        _ => true,
    };
    if fits {
        Ok(())
    } else {
        Err(mismatch(match format.extension {
            "wpd" => "a WordPerfect document",
            "fodt" | "fodp" | "fods" | "abw" => "an XML document",
            _ => "an OLE2 compound file (legacy Office)",
        }))
    }
}

pub(crate) const OLE2_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

/// For ZIP-based formats, checks the archive's entries against the extension. An archive
/// that cannot be opened (truncated, damaged) passes: extraction reports it.
pub fn check_container(format: &Format, path: &Path) -> Result<(), Refusal> {
    if format.container != Container::Zip {
        return Ok(());
    }
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(());
    };
    let Ok(mut archive) = zip::ZipArchive::new(file) else {
        return Ok(());
    };
    let has = |name: &str| archive.index_for_name(name).is_some();
    let found = if has("[Content_Types].xml") {
        if has("word/document.xml") {
            Some(("a Word document", &["docx", "docm", "dotx"][..]))
        } else if has("ppt/presentation.xml") {
            Some(("a PowerPoint presentation", &["pptx", "pptm", "ppsx"][..]))
        } else if has("xl/workbook.xml") || has("xl/workbook.bin") {
            Some(("an Excel workbook", &["xlsx", "xlsm", "xlsb"][..]))
        } else if has("visio/document.xml") {
            Some(("a Visio drawing", &["vsdx"][..]))
        } else {
            Some(("an Office Open XML package of another kind", &[][..]))
        }
    } else {
        None
    };
    let mimetype = read_small(&mut archive, "mimetype");
    let ext = format.extension;
    let (what, fits) = match (found, mimetype.as_deref()) {
        (Some((what, exts)), _) => (what.to_string(), exts.contains(&ext)),
        (None, Some(mime)) => {
            let fits = match ext {
                "epub" => mime == "application/epub+zip",
                "odt" | "ott" | "odp" | "otp" | "ods" | "odg" | "otg" => {
                    crate::formats::format_for(ext).is_some_and(|f| mime == f.media_type)
                }
                "sxw" | "sxc" | "sxi" => mime.starts_with("application/vnd.sun.xml."),
                // Apple iWork and others: LibreOffice decides.
                _ => true,
            };
            (format!("a file of media type {mime}"), fits)
        }
        (None, None) => {
            if matches!(ext, "key" | "pages" | "numbers") {
                return Ok(());
            }
            return Err(Refusal::Archive(format!(
                "content is a plain ZIP archive, not a .{ext} document"
            )));
        }
    };
    if fits {
        Ok(())
    } else {
        Err(Refusal::Mismatch(format!(
            "the .{ext} file holds {what}; rename it to its real extension"
        )))
    }
}

pub(crate) fn read_small<R: std::io::Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    name: &str,
) -> Option<String> {
    let mut entry = archive.by_name(name).ok()?;
    let mut out = String::new();
    (&mut entry).take(200).read_to_string(&mut out).ok()?;
    Some(out.trim().to_string())
}

/// A short human description of what some bytes look like, for refusal details.
pub fn describe(head: &[u8]) -> String {
    if head.is_empty() {
        return "empty".into();
    }
    if let Some(kind) = sniff_archive(head) {
        return format!("a {kind} archive");
    }
    if find(head, b"%PDF-").is_some_and(|at| at <= 1024) {
        return "a PDF document".into();
    }
    if let Some(kind) = image_kind(head) {
        return format!("a {kind} image");
    }
    if head.starts_with(&OLE2_MAGIC) {
        return "an OLE2 compound file (legacy Office)".into();
    }
    if head.starts_with(b"{\\rtf") {
        return "an RTF document".into();
    }
    if head.starts_with(b"MZ") || head.starts_with(b"\x7fELF") {
        return "a program".into();
    }
    if is_text(head) {
        return "text".into();
    }
    "binary data".into()
}

/// Names the raster image format of a file's first bytes.
pub fn image_kind(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("PNG")
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("JPEG")
    } else if head.starts_with(b"II*\0") || head.starts_with(b"MM\0*") {
        Some("TIFF")
    } else if head.starts_with(b"BM") && head.len() >= 14 {
        Some("BMP")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("GIF")
    } else if head.starts_with(b"RIFF") && at(head, 8, b"WEBP") {
        Some("WebP")
    } else {
        None
    }
}

pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// No NUL bytes, or the NUL bytes of UTF-16 or UTF-32 text (with a byte-order mark or
/// without): the same test the text decoder applies, so the door never refuses what the
/// decoder reads.
fn is_text(head: &[u8]) -> bool {
    !head.contains(&0) || crate::text::wide_text(head).is_some()
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
    use crate::formats::format_for;
    use std::path::{Path, PathBuf};

    const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus");

    fn head_of(path: &Path) -> Vec<u8> {
        let mut bytes = std::fs::read(path).expect("read corpus file");
        bytes.truncate(8 * 1024);
        bytes
    }

    fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
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
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let expected = name
                .trim_start_matches("small_archive-")
                .trim_end_matches(".txt");
            assert_eq!(kind, Some(expected), "{name}");
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
    fn heads_are_checked_against_the_extension() {
        let txt = format_for("txt").unwrap();
        assert!(check_head(txt, b"hello world").is_ok());
        assert_eq!(check_head(txt, b"hel\0lo"), Err(Refusal::Binary));
        assert!(check_head(txt, b"\xFF\xFEh\0i\0").is_ok());
        assert!(matches!(
            check_head(txt, b"PK\x03\x04rest"),
            Err(Refusal::Archive(_))
        ));
        let docx = format_for("docx").unwrap();
        assert!(check_head(docx, b"PK\x03\x04rest").is_ok());
        match check_head(format_for("odt").unwrap(), b"This is not a zip file!\n") {
            Err(Refusal::Mismatch(detail)) => assert!(detail.contains("text"), "{detail}"),
            other => panic!("{other:?}"),
        }
        let pdf = format_for("pdf").unwrap();
        assert!(check_head(pdf, b"%PDF-1.7\n").is_ok());
        assert!(matches!(
            check_head(pdf, b"\x89PNG\r\n\x1a\n"),
            Err(Refusal::Mismatch(_))
        ));
        let png = format_for("png").unwrap();
        assert!(
            check_head(png, b"\xFF\xD8\xFF\xE0").is_ok(),
            "a JPEG named .png is an image"
        );
        assert!(matches!(
            check_head(png, b"hello"),
            Err(Refusal::Mismatch(_))
        ));
    }

    fn zip_file(entries: &[(&str, &str)]) -> tempfile::NamedTempFile {
        crate::testing::stored(&crate::testing::zip_of(entries))
    }

    #[test]
    fn containers_must_hold_what_their_extension_says() {
        let docx = zip_file(&[
            ("[Content_Types].xml", "<Types/>"),
            ("word/document.xml", "<w/>"),
        ]);
        assert!(check_container(format_for("docx").unwrap(), docx.path()).is_ok());
        match check_container(format_for("pptx").unwrap(), docx.path()) {
            Err(Refusal::Mismatch(detail)) => assert!(detail.contains("Word"), "{detail}"),
            other => panic!("{other:?}"),
        }
        let epub = zip_file(&[("mimetype", "application/epub+zip")]);
        assert!(check_container(format_for("epub").unwrap(), epub.path()).is_ok());
        assert!(matches!(
            check_container(format_for("odt").unwrap(), epub.path()),
            Err(Refusal::Mismatch(_))
        ));
        let plain = zip_file(&[("notes.txt", "hello")]);
        assert!(matches!(
            check_container(format_for("docx").unwrap(), plain.path()),
            Err(Refusal::Archive(_))
        ));
        let truncated = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(truncated.path(), b"PK\x03\x04 damaged").unwrap();
        assert!(check_container(format_for("docx").unwrap(), truncated.path()).is_ok());
    }

    #[test]
    fn corpus_documents_pass_their_own_checks() {
        let mut files = Vec::new();
        files_under(&Path::new(CORPUS).join("office"), &mut files);
        files_under(&Path::new(CORPUS).join("pdf"), &mut files);
        let mut checked = 0;
        for file in files {
            let Some(ext) = file.extension().and_then(|e| e.to_str()) else {
                continue;
            };
            let Some(format) = format_for(&ext.to_ascii_lowercase()) else {
                continue;
            };
            checked += 1;
            let found = identify(Some(ext), &head_of(&file), Some(&file))
                .unwrap_or_else(|refusal| panic!("{}: {refusal:?}", file.display()))
                .expect("decided");
            assert_eq!(found.format, format, "{}", file.display());
            assert!(!found.by_content, "{}", file.display());
        }
        if checked == 0 {
            eprintln!("corpus not present, skipping");
        }
    }

    fn identified(extension: Option<&str>, bytes: &[u8]) -> Result<Identified, Refusal> {
        let file = crate::testing::stored(bytes);
        identify(extension, bytes, Some(file.path())).map(|found| found.expect("decided"))
    }

    #[test]
    fn content_decides_when_the_extension_is_wrong_or_unknown() {
        use crate::testing::{ole2_of, zip_of};
        let docx = zip_of(&[
            ("[Content_Types].xml", "<Types/>"),
            ("word/document.xml", "<w:document/>"),
        ]);
        let pptx = zip_of(&[
            ("[Content_Types].xml", "<Types/>"),
            ("ppt/presentation.xml", "<p/>"),
        ]);
        let cases: &[(Option<&str>, &[u8], &str, bool)] = &[
            (Some("doc"), &docx, "docx", true),
            (Some("ppt"), &pptx, "pptx", true),
            (Some("txt"), &docx, "docx", true),
            (Some("DOCX"), &docx, "docx", false),
            (Some("xlsx"), &ole2_of(&["/Workbook"]), "xls", true),
            (Some("doc"), &ole2_of(&["/WordDocument"]), "doc", false),
            (
                Some("msg"),
                &ole2_of(&["/__substg1.0_0037001F"]),
                "msg",
                false,
            ),
            (
                Some("xlsx"),
                &ole2_of(&["/EncryptionInfo", "/EncryptedPackage"]),
                "xlsx",
                false,
            ),
            (
                Some("pdf"),
                b"<html><body>not a pdf</body></html>",
                "html",
                true,
            ),
            (
                Some("dat"),
                b"<!DOCTYPE html><title>t</title>",
                "html",
                true,
            ),
            (Some("data"), b"{\"a\": [1, 2]}", "json", true),
            (None, b"<?xml version=\"1.0\"?><r>x</r>", "xml", true),
            (Some("log"), b"plain words\n", "txt", true),
            (Some("txt"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "png", true),
            (Some("html"), b"just text", "html", false),
        ];
        for (extension, bytes, expected, by_content) in cases {
            let found = identified(*extension, bytes)
                .unwrap_or_else(|refusal| panic!("{extension:?}: {refusal:?}"));
            assert_eq!(
                (found.format.extension, found.by_content),
                (*expected, *by_content),
                "{extension:?}"
            );
        }
    }

    #[test]
    fn what_no_extension_or_content_explains_is_refused() {
        let plain_zip = crate::testing::zip_of(&[("a.txt", "x")]);
        assert!(matches!(
            identified(Some("txt"), &plain_zip),
            Err(Refusal::Archive(_))
        ));
        assert!(matches!(
            identified(Some("docx"), &plain_zip),
            Err(Refusal::Archive(_))
        ));
        // Refused on the upload's first bytes, before the file is whole.
        assert!(matches!(
            identify(Some("doc"), &plain_zip, None),
            Err(Refusal::Archive(_))
        ));
        assert!(matches!(
            identify(Some("doc"), b"Rar!\x1a\x07\0", None),
            Err(Refusal::Archive(_))
        ));
        match identified(Some("exe"), b"MZ\x90\0\x03\0\0\0\x04\0") {
            Err(Refusal::Unsupported(detail)) => {
                assert!(detail.contains(".exe files"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            identified(Some("txt"), b"bin\0ary\x01\x02\0\0\x07"),
            Err(Refusal::Binary)
        ));
        assert!(matches!(
            identified(Some("pdf"), b"\0\x01\x02\x03\0\0\x05"),
            Err(Refusal::Mismatch(_))
        ));
        assert!(matches!(
            identified(Some("xlsx"), &crate::testing::ole2_of(&["/Other"])),
            Err(Refusal::Mismatch(_))
        ));
    }
}
