//! What a file is by its content alone, for files whose extension is unknown or does not fit
//! what they hold: ZIP containers by their parts (Office Open XML, OpenDocument, EPUB), OLE2
//! compound files by their streams (legacy Office, Outlook, password-protected Office Open
//! XML), PDFs and images by signature, and text by what it looks like (HTML, XML, JSON, RTF,
//! an email message, else plain text).

use std::path::Path;

use crate::detect::{OLE2_MAGIC, image_kind, sniff_archive};
use crate::formats::{ACCEPTED_FORMATS, Container, Format, format_for};

/// What the content says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// A format Shelf reads.
    Format(&'static Format),
    /// A ZIP or OLE2 container whose entries tell what it is: the file itself must be read.
    NeedsContainer,
    /// A password-protected Office Open XML document (an OLE2 file holding an
    /// `EncryptedPackage` stream).
    EncryptedOffice,
    /// A ZIP archive that is no document Shelf reads.
    PlainZip,
    /// Nothing Shelf reads.
    Unknown,
}

/// The format of a file from its first bytes and, for containers, its entries (`path`; with
/// `None` a container is [`Sniffed::NeedsContainer`]).
pub fn by_content(head: &[u8], path: Option<&Path>) -> Sniffed {
    if head.is_empty() {
        return Sniffed::Unknown;
    }
    match sniff_archive(head) {
        Some("zip") => {
            return match path {
                None if first_entry_may_be_document(head) => Sniffed::NeedsContainer,
                None => Sniffed::PlainZip,
                Some(path) => zip_format(path).map_or(Sniffed::PlainZip, Sniffed::Format),
            };
        }
        Some(_) => return Sniffed::Unknown,
        None => {}
    }
    if head.starts_with(&OLE2_MAGIC) {
        return match path {
            None => Sniffed::NeedsContainer,
            Some(path) => ole2_format(path),
        };
    }
    if crate::detect::find(head, b"%PDF-").is_some_and(|at| at <= 1024) {
        return known("pdf");
    }
    if is_executable(head) {
        return Sniffed::Unknown;
    }
    if let Some(kind) = image_kind(head) {
        return known(match kind {
            "PNG" => "png",
            "JPEG" => "jpg",
            "TIFF" => "tif",
            "BMP" => "bmp",
            "GIF" => "gif",
            _ => "webp",
        });
    }
    text_format(head).map_or(Sniffed::Unknown, Sniffed::Format)
}

/// A program (Windows PE, ELF, Mach-O, Java class, WebAssembly): never a document, even when
/// its first bytes would decode as text.
fn is_executable(head: &[u8]) -> bool {
    let pe = head.starts_with(b"MZ")
        && head
            .get(2)
            .is_none_or(|b| !b.is_ascii_graphic() && *b != b' ');
    pe || [
        &b"\x7fELF"[..],
        b"\xfe\xed\xfa\xce",
        b"\xfe\xed\xfa\xcf",
        b"\xce\xfa\xed\xfe",
        b"\xcf\xfa\xed\xfe",
        b"\xca\xfe\xba\xbe",
        b"\0asm",
    ]
    .iter()
    .any(|magic| head.starts_with(magic))
}

fn known(extension: &str) -> Sniffed {
    format_for(extension).map_or(Sniffed::Unknown, Sniffed::Format)
}

/// A ZIP container's type by its parts: `[Content_Types].xml` and the main part for Office
/// Open XML, the `mimetype` entry for OpenDocument and EPUB. `None` for any other archive, or
/// one that cannot be opened.
pub fn zip_format(path: &Path) -> Option<&'static Format> {
    let file = std::fs::File::open(path).ok()?;
    let mut archive = zip::ZipArchive::new(file).ok()?;
    let has = |name: &str| archive.index_for_name(name).is_some();
    if has("[Content_Types].xml") {
        let extension = if has("word/document.xml") {
            "docx"
        } else if has("ppt/presentation.xml") {
            "pptx"
        } else if has("xl/workbook.xml") {
            "xlsx"
        } else if has("xl/workbook.bin") {
            "xlsb"
        } else if has("visio/document.xml") {
            "vsdx"
        } else {
            return None;
        };
        return format_for(extension);
    }
    let mime = crate::detect::read_small(&mut archive, "mimetype")?;
    ACCEPTED_FORMATS
        .iter()
        .find(|format| format.container == Container::Zip && format.media_type == mime)
}

/// Whether the first entry of a ZIP container (its local header, at the start of the file)
/// is one a document begins with: `mimetype` (ODF, EPUB: required first), or a part of Office
/// Open XML. Any other first entry is an archive of files, refused on the upload's first
/// chunk; a document is confirmed by its central directory once the file is whole. True while
/// the entry's name lies past the bytes seen so far (decided later).
fn first_entry_may_be_document(head: &[u8]) -> bool {
    !zip_is_plain_archive(head)
}

/// Whether `prefix` (a file's first bytes, however few) already shows a ZIP archive that is no
/// document: an empty or spanned archive, or a first entry no document begins with.
pub fn zip_is_plain_archive(prefix: &[u8]) -> bool {
    const FIRST_PARTS: &[&str] = &[
        "mimetype",
        "[Content_Types].xml",
        "_rels/",
        "docProps/",
        "word/",
        "xl/",
        "ppt/",
        "visio/",
        "customXml/",
        "META-INF/",
    ];
    if sniff_archive(prefix) != Some("zip") {
        return false;
    }
    if !prefix.starts_with(b"PK\x03\x04") {
        // An empty archive or a spanned one: no entry to judge by, no document either.
        return true;
    }
    let Some(name_len) = prefix
        .get(26..28)
        .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
    else {
        return false;
    };
    let Some(name) = prefix.get(30..30 + name_len) else {
        return false;
    };
    let name = String::from_utf8_lossy(name);
    !FIRST_PARTS.iter().any(|part| name.starts_with(part))
}

/// An OLE2 compound file's type by its streams.
fn ole2_format(path: &Path) -> Sniffed {
    let Ok(file) = std::fs::File::open(path) else {
        return Sniffed::Unknown;
    };
    let Ok(compound) = cfb::CompoundFile::open(file) else {
        return Sniffed::Unknown;
    };
    let has = |name: &str| compound.exists(name);
    if has("/EncryptedPackage") {
        return Sniffed::EncryptedOffice;
    }
    let extension = if has("/WordDocument") {
        "doc"
    } else if has("/Workbook") || has("/Book") {
        "xls"
    } else if has("/PowerPoint Document") {
        "ppt"
    } else if compound
        .read_root_storage()
        .any(|entry| entry.name().starts_with("__substg1.0_"))
    {
        "msg"
    } else if has("/VisioDocument") {
        "vsd"
    } else {
        return Sniffed::Unknown;
    };
    known(extension)
}

/// Whether `bytes` are a password-protected Office Open XML document: an OLE2 compound file
/// holding an `EncryptedPackage` stream (ECMA-376 part 2, MS-OFFCRYPTO).
pub fn is_encrypted_office(bytes: &[u8]) -> bool {
    bytes.starts_with(&OLE2_MAGIC)
        && std::panic::catch_unwind(|| {
            cfb::CompoundFile::open(std::io::Cursor::new(bytes))
                .is_ok_and(|compound| compound.exists("/EncryptedPackage"))
        })
        .unwrap_or(false)
}

/// How many characters of a text's start are looked at.
const TEXT_SAMPLE_CHARS: usize = 4096;

/// The text-based format of a head that is text: RTF, HTML, XML, JSON, an email message,
/// else plain text. `None` for binary content.
fn text_format(head: &[u8]) -> Option<&'static Format> {
    let decoded = crate::text::decode_text(head).ok()?;
    let sample: String = decoded.text.chars().take(TEXT_SAMPLE_CHARS).collect();
    if sample.chars().any(is_binary_control) {
        return None;
    }
    let start = sample.trim_start_matches(['\u{FEFF}', ' ', '\t', '\r', '\n']);
    let extension = if start.starts_with("{\\rtf") {
        "rtf"
    } else if looks_like_html(start) {
        "html"
    } else if start.starts_with("<?xml") || starts_with_element(start) {
        "xml"
    } else if looks_like_json(start) {
        "json"
    } else if looks_like_email(start) {
        "eml"
    } else {
        "txt"
    };
    format_for(extension)
}

/// C0 control characters that text does not hold (tabs, line breaks, form feeds and the
/// escapes of terminal colours do).
fn is_binary_control(c: char) -> bool {
    c < ' ' && !matches!(c, '\t' | '\n' | '\r' | '\u{0C}' | '\u{1B}')
}

fn looks_like_html(start: &str) -> bool {
    let lower: String = start.chars().take(1024).collect::<String>().to_lowercase();
    let after_prolog = lower
        .strip_prefix("<?xml")
        .and_then(|rest| rest.split_once("?>"))
        .map_or(lower.as_str(), |(_, rest)| rest.trim_start());
    let after_comments = skip_comments(after_prolog);
    after_comments.starts_with("<!doctype html")
        || after_comments.starts_with("<html")
        || (after_comments.starts_with('<')
            && ["<head", "<body", "<title", "<meta "]
                .iter()
                .any(|tag| after_comments.contains(tag)))
}

fn skip_comments(mut text: &str) -> &str {
    while let Some(rest) = text.strip_prefix("<!--") {
        text = match rest.split_once("-->") {
            Some((_, after)) => after.trim_start(),
            None => return "",
        };
    }
    text
}

/// `<name` at the start: an element (or a DOCTYPE) opening an XML document.
fn starts_with_element(start: &str) -> bool {
    let Some(rest) = skip_comments(start).strip_prefix('<') else {
        return false;
    };
    rest.starts_with("!DOCTYPE")
        || rest
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// An object or array whose first value is well formed so far: `{"`, `{}`, `[{`, `[1`, ...
fn looks_like_json(start: &str) -> bool {
    let mut chars = start.chars();
    let Some(open) = chars.next() else {
        return false;
    };
    let next = chars.as_str().trim_start().chars().next();
    match open {
        '{' => matches!(next, Some('"' | '}')),
        '[' => next.is_some_and(|c| {
            matches!(c, '{' | '[' | '"' | ']' | '-' | 't' | 'f' | 'n') || c.is_ascii_digit()
        }),
        _ => false,
    }
}

/// RFC 5322 headers at the start: every line up to the first blank one is a header (or its
/// folded continuation), and at least two are headers a message carries.
fn looks_like_email(start: &str) -> bool {
    const MESSAGE_HEADERS: &[&str] = &[
        "from",
        "to",
        "cc",
        "subject",
        "date",
        "message-id",
        "received",
        "return-path",
        "mime-version",
        "delivered-to",
        "reply-to",
        "in-reply-to",
        "x-mailer",
    ];
    let mut known = 0;
    let mut lines = 0;
    for line in start.lines() {
        if line.trim().is_empty() {
            break;
        }
        lines += 1;
        if line.starts_with([' ', '\t']) && lines > 1 {
            continue;
        }
        let Some((name, _)) = line.split_once(':') else {
            return false;
        };
        let is_field_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !is_field_name {
            return false;
        }
        if MESSAGE_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            known += 1;
        }
    }
    known >= 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ole2_of, stored, zip_of};

    fn sniffed(bytes: &[u8]) -> Option<&'static str> {
        let file = stored(bytes);
        match by_content(bytes, Some(file.path())) {
            Sniffed::Format(format) => Some(format.extension),
            _ => None,
        }
    }

    #[test]
    fn text_is_told_by_what_it_looks_like() {
        let cases: &[(&[u8], &str)] = &[
            (b"<!DOCTYPE html><html><body><p>Hi</p></body></html>", "html"),
            (b"\n  <html lang=en><title>x</title>", "html"),
            (b"<!-- generated --><HTML><BODY>x", "html"),
            (b"<p>a fragment</p><body>", "html"),
            (b"<?xml version=\"1.0\"?><note><to>T</to></note>", "xml"),
            (b"<?xml version=\"1.0\"?>\n<html xmlns=\"http://www.w3.org/1999/xhtml\"><head>", "html"),
            (b"<svg xmlns=\"http://www.w3.org/2000/svg\"><text>Hi</text></svg>", "xml"),
            (b"{\"title\": \"x\", \"n\": 1}", "json"),
            (b"[{\"a\": 1}]", "json"),
            (b"[1, 2, 3]", "json"),
            (b"{\\rtf1\\ansi Hello}", "rtf"),
            (
                b"From: Ann <ann@example.org>\r\nTo: bob@example.org\r\nSubject: Minutes\r\n\r\nBody",
                "eml",
            ),
            (
                b"Received: from x\r\n\tby y; Mon, 1 Jan 2024\r\nFrom: a@b.c\r\nDate: today\r\n\r\nHi",
                "eml",
            ),
            (b"Meeting notes: bring the slides\nTo do: nothing\n", "txt"),
            (b"[citation needed] is a phrase", "txt"),
            (b"{curly} words", "txt"),
            (b"Just words.\n", "txt"),
        ];
        for (bytes, expected) in cases {
            assert_eq!(
                sniffed(bytes),
                Some(*expected),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        // UTF-16 without a byte-order mark is text too.
        let wide: Vec<u8> = "<html><body>wide</body></html>"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert_eq!(sniffed(&wide), Some("html"));
    }

    #[test]
    fn binary_content_is_no_text() {
        assert_eq!(sniffed(b"MZ\x90\0\x03\0\0\0\x04\0\0\0\xff\xff"), None);
        assert_eq!(sniffed(b"MZ"), None, "a program's signature, however short");
        assert_eq!(sniffed(b"MZ-1 launch report"), Some("txt"));
        assert_eq!(sniffed(b"\xca\xfe\xba\xbe\0\0\0\x34"), None);
        assert_eq!(sniffed(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0"), None);
        assert_eq!(sniffed(b"text with \x01\x02 control bytes"), None);
        assert_eq!(sniffed(b""), None);
    }

    #[test]
    fn signatures_and_containers_name_their_format() {
        assert_eq!(sniffed(b"%PDF-1.7\n%..."), Some("pdf"));
        assert_eq!(sniffed(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), Some("png"));
        assert_eq!(sniffed(&[0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10]), Some("jpg"));
        let docx = zip_of(&[
            ("[Content_Types].xml", "<Types/>"),
            ("word/document.xml", "<w:document/>"),
        ]);
        assert_eq!(sniffed(&docx), Some("docx"));
        let pptx = zip_of(&[
            ("[Content_Types].xml", "<Types/>"),
            ("ppt/presentation.xml", "<p/>"),
        ]);
        assert_eq!(sniffed(&pptx), Some("pptx"));
        let odt = zip_of(&[
            ("mimetype", "application/vnd.oasis.opendocument.text"),
            ("content.xml", "<x/>"),
        ]);
        assert_eq!(sniffed(&odt), Some("odt"));
        let epub = zip_of(&[("mimetype", "application/epub+zip")]);
        assert_eq!(sniffed(&epub), Some("epub"));
        let plain = zip_of(&[("notes.txt", "hello")]);
        let file = stored(&plain);
        assert_eq!(by_content(&plain, Some(file.path())), Sniffed::PlainZip);
        // Refused on its first bytes: its first entry is no document's.
        assert_eq!(by_content(&plain, None), Sniffed::PlainZip);
        assert_eq!(by_content(&docx, None), Sniffed::NeedsContainer);
        assert_eq!(by_content(&odt, None), Sniffed::NeedsContainer);
        // A document's parts in another order are still read by their central directory.
        let late = zip_of(&[
            ("word/document.xml", "<w:document/>"),
            ("[Content_Types].xml", "<Types/>"),
        ]);
        assert_eq!(by_content(&late, None), Sniffed::NeedsContainer);
        assert_eq!(sniffed(&late), Some("docx"));

        assert_eq!(sniffed(&ole2_of(&["/WordDocument"])), Some("doc"));
        assert_eq!(sniffed(&ole2_of(&["/Workbook"])), Some("xls"));
        assert_eq!(sniffed(&ole2_of(&["/PowerPoint Document"])), Some("ppt"));
        assert_eq!(
            sniffed(&ole2_of(&[
                "/__substg1.0_0037001F",
                "/__properties_version1.0"
            ])),
            Some("msg")
        );
        let encrypted = ole2_of(&["/EncryptionInfo", "/EncryptedPackage"]);
        let file = stored(&encrypted);
        assert_eq!(
            by_content(&encrypted, Some(file.path())),
            Sniffed::EncryptedOffice
        );
        assert!(is_encrypted_office(&encrypted));
        assert!(!is_encrypted_office(&ole2_of(&["/Workbook"])));
        assert!(!is_encrypted_office(&OLE2_MAGIC));
    }

    #[test]
    fn a_password_protected_office_file_fails_with_its_own_code() {
        let encrypted = ole2_of(&["/EncryptionInfo", "/EncryptedPackage"]);
        let file = stored(&encrypted);
        for (kind, extension) in [
            (crate::Kind::Spreadsheet, "xlsx"),
            (crate::Kind::Docx, "docx"),
            (crate::Kind::Pptx, "pptx"),
        ] {
            let input = crate::Input {
                path: file.path(),
                bytes: &encrypted,
                extension,
            };
            let control = crate::Control::new(Default::default());
            let error = crate::extract(kind, input, &crate::Limits::default(), &control)
                .expect_err("encrypted");
            assert_eq!(error.code, "document_encrypted", "{extension}: {error}");
            assert!(error.detail.contains("password"), "{}", error.detail);
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_sniffed_without_panicking(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2048)) {
            let file = stored(&bytes);
            let _ = by_content(&bytes, Some(file.path()));
            let _ = by_content(&bytes, None);
            let _ = is_encrypted_office(&bytes);
        }
    }
}
