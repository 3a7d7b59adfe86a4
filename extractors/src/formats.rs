//! The one table of accepted formats: each extension, the extractor that reads it, its media
//! type and the container its bytes come in. Upload checks, the `extract` stage, `/config` and
//! docs/formats.md all read this table.

use serde::Serialize;

/// Which extractor reads a format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Plain text and Markdown (UTF-8, UTF-16, legacy encodings by detection).
    Text,
    /// PDF, through poppler's `pdftotext`.
    Pdf,
    /// Word (Office Open XML).
    Docx,
    /// PowerPoint (Office Open XML).
    Pptx,
    /// Excel (xlsx, xlsm, xlsb, xls) and OpenDocument spreadsheets, through calamine.
    Spreadsheet,
    /// OpenDocument text.
    Odt,
    /// OpenDocument presentations.
    Odp,
    /// EPUB e-books.
    Epub,
    /// HTML and XHTML pages.
    Html,
    /// Comma- and tab-separated values.
    Csv,
    /// JSON and JSON Lines.
    Json,
    /// Generic XML.
    Xml,
    /// Rich Text Format.
    Rtf,
    /// Email messages (RFC 5322 with MIME).
    Email,
    /// Outlook messages (`.msg`, a CFB compound file of MAPI properties).
    Outlook,
    /// Jupyter notebooks.
    Notebook,
    /// Lightweight markup sources: reStructuredText, Org, LaTeX, Typst, AsciiDoc, BibTeX.
    Markup,
    /// Subtitles and transcripts: SRT, WebVTT, SBV.
    Transcript,
    /// Raster images: accepted and marked for OCR.
    Image,
    /// Anything else LibreOffice reads (legacy Office, drawings, other word processors).
    Universal,
}

impl Kind {
    /// Formats whose bytes are text: NUL bytes (without a UTF-16 byte-order mark) mean the
    /// file is binary and is refused at ingest.
    pub fn is_textual(self) -> bool {
        matches!(
            self,
            Kind::Text
                | Kind::Html
                | Kind::Csv
                | Kind::Json
                | Kind::Xml
                | Kind::Rtf
                | Kind::Transcript
                | Kind::Email
                | Kind::Notebook
                | Kind::Markup
        )
    }

    /// The name `/config` and the docs use for the extraction engine of this kind.
    pub fn engine(self) -> &'static str {
        match self {
            Kind::Text => "text decoder (encoding_rs, chardetng)",
            Kind::Pdf => "poppler pdftotext",
            Kind::Docx | Kind::Pptx | Kind::Odt | Kind::Odp => "built-in (zip, quick-xml)",
            Kind::Epub => "built-in (zip, quick-xml, scraper)",
            Kind::Spreadsheet => "calamine",
            Kind::Csv => "built-in (csv)",
            Kind::Html => "built-in HTML to Markdown (scraper, html5ever)",
            Kind::Json | Kind::Xml | Kind::Rtf | Kind::Transcript => "built-in",
            Kind::Email => "built-in (mail-parser)",
            Kind::Outlook => "built-in (cfb)",
            Kind::Notebook | Kind::Markup => "built-in",
            Kind::Image => "ocr stage (tesseract)",
            Kind::Universal => "LibreOffice headless",
        }
    }
}

/// Container a format legitimately comes in (its signature is then not an archive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Container {
    /// A bare byte stream.
    None,
    /// A ZIP container (DOCX, EPUB, ...): the zip signature is expected.
    Zip,
}

/// One accepted extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Format {
    /// Lowercase extension without the dot.
    pub extension: &'static str,
    /// The extractor that reads it.
    pub kind: Kind,
    /// Its media type.
    pub media_type: &'static str,
    /// The container its bytes come in.
    pub container: Container,
}

const fn f(extension: &'static str, kind: Kind, media_type: &'static str) -> Format {
    Format {
        extension,
        kind,
        media_type,
        container: Container::None,
    }
}

const fn z(extension: &'static str, kind: Kind, media_type: &'static str) -> Format {
    Format {
        extension,
        kind,
        media_type,
        container: Container::Zip,
    }
}

/// Every accepted extension.
pub const ACCEPTED_FORMATS: &[Format] = &[
    f("txt", Kind::Text, "text/plain"),
    f("text", Kind::Text, "text/plain"),
    f("md", Kind::Text, "text/markdown"),
    f("markdown", Kind::Text, "text/markdown"),
    f("pdf", Kind::Pdf, "application/pdf"),
    z(
        "docx",
        Kind::Docx,
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    z(
        "docm",
        Kind::Docx,
        "application/vnd.ms-word.document.macroEnabled.12",
    ),
    z(
        "dotx",
        Kind::Docx,
        "application/vnd.openxmlformats-officedocument.wordprocessingml.template",
    ),
    z(
        "pptx",
        Kind::Pptx,
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    z(
        "pptm",
        Kind::Pptx,
        "application/vnd.ms-powerpoint.presentation.macroEnabled.12",
    ),
    z(
        "ppsx",
        Kind::Pptx,
        "application/vnd.openxmlformats-officedocument.presentationml.slideshow",
    ),
    z(
        "xlsx",
        Kind::Spreadsheet,
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    z(
        "xlsm",
        Kind::Spreadsheet,
        "application/vnd.ms-excel.sheet.macroEnabled.12",
    ),
    z(
        "xlsb",
        Kind::Spreadsheet,
        "application/vnd.ms-excel.sheet.binary.macroEnabled.12",
    ),
    f("xls", Kind::Spreadsheet, "application/vnd.ms-excel"),
    z(
        "ods",
        Kind::Spreadsheet,
        "application/vnd.oasis.opendocument.spreadsheet",
    ),
    z("odt", Kind::Odt, "application/vnd.oasis.opendocument.text"),
    z(
        "ott",
        Kind::Odt,
        "application/vnd.oasis.opendocument.text-template",
    ),
    z(
        "odp",
        Kind::Odp,
        "application/vnd.oasis.opendocument.presentation",
    ),
    z(
        "otp",
        Kind::Odp,
        "application/vnd.oasis.opendocument.presentation-template",
    ),
    z("epub", Kind::Epub, "application/epub+zip"),
    f("html", Kind::Html, "text/html"),
    f("htm", Kind::Html, "text/html"),
    f("xhtml", Kind::Html, "application/xhtml+xml"),
    f("xht", Kind::Html, "application/xhtml+xml"),
    f("csv", Kind::Csv, "text/csv"),
    f("tsv", Kind::Csv, "text/tab-separated-values"),
    f("json", Kind::Json, "application/json"),
    f("jsonl", Kind::Json, "application/jsonl"),
    f("ndjson", Kind::Json, "application/x-ndjson"),
    f("xml", Kind::Xml, "application/xml"),
    f("rtf", Kind::Rtf, "application/rtf"),
    f("eml", Kind::Email, "message/rfc822"),
    f("msg", Kind::Outlook, "application/vnd.ms-outlook"),
    f("ipynb", Kind::Notebook, "application/x-ipynb+json"),
    f("rst", Kind::Markup, "text/x-rst"),
    f("org", Kind::Markup, "text/x-org"),
    f("tex", Kind::Markup, "application/x-tex"),
    f("latex", Kind::Markup, "application/x-latex"),
    f("typ", Kind::Markup, "text/x-typst"),
    f("adoc", Kind::Markup, "text/asciidoc"),
    f("asciidoc", Kind::Markup, "text/asciidoc"),
    f("bib", Kind::Markup, "application/x-bibtex"),
    f("fb2", Kind::Xml, "application/x-fictionbook+xml"),
    f("dbk", Kind::Xml, "application/docbook+xml"),
    f("nxml", Kind::Xml, "application/jats+xml"),
    f("opml", Kind::Xml, "text/x-opml"),
    f("svg", Kind::Xml, "image/svg+xml"),
    f("yaml", Kind::Json, "application/yaml"),
    f("yml", Kind::Json, "application/yaml"),
    f("toml", Kind::Json, "application/toml"),
    f("srt", Kind::Transcript, "application/x-subrip"),
    f("vtt", Kind::Transcript, "text/vtt"),
    f("sbv", Kind::Transcript, "text/x-sbv"),
    f("png", Kind::Image, "image/png"),
    f("jpg", Kind::Image, "image/jpeg"),
    f("jpeg", Kind::Image, "image/jpeg"),
    f("tif", Kind::Image, "image/tiff"),
    f("tiff", Kind::Image, "image/tiff"),
    f("bmp", Kind::Image, "image/bmp"),
    f("gif", Kind::Image, "image/gif"),
    f("webp", Kind::Image, "image/webp"),
    f("doc", Kind::Universal, "application/msword"),
    f("dot", Kind::Universal, "application/msword"),
    f("ppt", Kind::Universal, "application/vnd.ms-powerpoint"),
    f("pps", Kind::Universal, "application/vnd.ms-powerpoint"),
    f("pot", Kind::Universal, "application/vnd.ms-powerpoint"),
    f("xlt", Kind::Universal, "application/vnd.ms-excel"),
    z(
        "odg",
        Kind::Universal,
        "application/vnd.oasis.opendocument.graphics",
    ),
    z(
        "otg",
        Kind::Universal,
        "application/vnd.oasis.opendocument.graphics-template",
    ),
    f(
        "fodt",
        Kind::Universal,
        "application/vnd.oasis.opendocument.text-flat-xml",
    ),
    f(
        "fodp",
        Kind::Universal,
        "application/vnd.oasis.opendocument.presentation-flat-xml",
    ),
    f(
        "fods",
        Kind::Universal,
        "application/vnd.oasis.opendocument.spreadsheet-flat-xml",
    ),
    z("sxw", Kind::Universal, "application/vnd.sun.xml.writer"),
    z("sxc", Kind::Universal, "application/vnd.sun.xml.calc"),
    z("sxi", Kind::Universal, "application/vnd.sun.xml.impress"),
    f("wpd", Kind::Universal, "application/vnd.wordperfect"),
    f("wps", Kind::Universal, "application/vnd.ms-works"),
    f("pub", Kind::Universal, "application/x-mspublisher"),
    f("vsd", Kind::Universal, "application/vnd.visio"),
    z("vsdx", Kind::Universal, "application/vnd.ms-visio.drawing"),
    f("abw", Kind::Universal, "application/x-abiword"),
    f("lwp", Kind::Universal, "application/vnd.lotus-wordpro"),
    f("hwp", Kind::Universal, "application/x-hwp"),
];

/// The accepted format of an extension (lowercase, no dot).
pub fn format_for(extension: &str) -> Option<&'static Format> {
    ACCEPTED_FORMATS
        .iter()
        .find(|format| format.extension == extension)
}

/// Extensions Shelf accepts, for messages and documentation.
pub fn accepted_extensions() -> Vec<&'static str> {
    ACCEPTED_FORMATS.iter().map(|f| f.extension).collect()
}

/// Archive and container extensions: refused with `archive_not_supported`, never unpacked.
pub const ARCHIVE_EXTENSIONS: &[&str] = &[
    "zip", "zipx", "tar", "gz", "tgz", "gzip", "bz2", "tbz", "tbz2", "bzip2", "xz", "txz", "7z",
    "rar", "cab", "cpio", "ar", "a", "deb", "rpm", "arj", "lha", "lzh", "lz", "tlz", "lzma", "zst",
    "tzst", "zoo", "iso", "jar", "war", "ear", "apk", "z", "taz", "lz4", "lzo", "lrz", "rz", "sit",
    "sitx", "dmg", "xar", "pkg", "wim", "squashfs", "img", "vhd", "vmdk", "ace", "alz", "egg",
    "sz", "br", "crx", "xpi", "whl", "nupkg", "vsix", "ipa", "msi", "cbz", "cbr",
];

/// True for an archive/container extension.
pub fn is_archive_extension(extension: &str) -> bool {
    ARCHIVE_EXTENSIONS.contains(&extension)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_are_unique_lowercase_and_not_archives() {
        let mut seen = std::collections::HashSet::new();
        for format in ACCEPTED_FORMATS {
            assert!(seen.insert(format.extension), "{}", format.extension);
            assert_eq!(format.extension, format.extension.to_ascii_lowercase());
            assert!(!is_archive_extension(format.extension));
        }
    }
}
