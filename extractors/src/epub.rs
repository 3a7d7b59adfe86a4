//! EPUB e-books: `META-INF/container.xml` names the package (OPF), whose spine orders the
//! XHTML chapters; each chapter goes through the HTML converter and the chapters are joined.
//! Title, author and language come from the package's Dublin Core metadata.

use std::collections::HashMap;

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use crate::markdown::push_block;
use crate::zipsafe::SafeZip;
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let mut zip = SafeZip::open(input.bytes, "EPUB", limits)?;
    let container = zip.require_text("META-INF/container.xml", "EPUB")?;
    let opf_path = rootfile_path(&container)?;
    let opf = zip
        .read_text(&opf_path)?
        .ok_or_else(|| ExtractError::malformed(format!("the EPUB file has no {opf_path}")))?;
    let package = parse_package(&opf, limits)?;
    let base = opf_path.rsplit_once('/').map_or("", |(dir, _)| dir);

    let mut markdown = String::new();
    let mut warnings = Vec::new();
    for idref in &package.spine {
        control.check()?;
        let Some(item) = package.manifest.get(idref) else {
            warnings.push(format!("the spine names {idref}, which the manifest lacks"));
            continue;
        };
        if !is_html(item) {
            continue;
        }
        let path = resolve_path(base, &item.href);
        let Some(bytes) = zip.read(&path)? else {
            warnings.push(format!("the chapter {path} is missing from the EPUB file"));
            continue;
        };
        let (text, _) = crate::html::decode_html(&bytes)?;
        let chapter = crate::html::to_markdown(&text, limits, control)?;
        push_block(&mut markdown, &chapter.markdown);
        warnings.extend(chapter.warnings);
        if markdown.len() > limits.max_output_chars {
            warnings.push(format!(
                "the book was cut short at {} characters of Markdown",
                limits.max_output_chars
            ));
            break;
        }
    }
    Ok(Extraction {
        markdown,
        metadata: package.metadata,
        warnings,
        ..Extraction::default()
    })
}

struct Item {
    href: String,
    media_type: String,
}

#[derive(Default)]
struct Package {
    metadata: Metadata,
    manifest: HashMap<String, Item>,
    spine: Vec<String>,
}

fn is_html(item: &Item) -> bool {
    let media = item.media_type.to_ascii_lowercase();
    let href = item.href.to_ascii_lowercase();
    media.contains("html")
        || href.ends_with(".xhtml")
        || href.ends_with(".html")
        || href.ends_with(".htm")
}

fn xml_error(what: &str, e: impl std::fmt::Display) -> ExtractError {
    ExtractError::malformed(format!("the EPUB {what} is not well-formed XML: {e}"))
}

/// The `full-path` of the first `rootfile` in `container.xml`.
fn rootfile_path(container: &str) -> Result<String, ExtractError> {
    let mut reader = Reader::from_str(container);
    loop {
        match reader.read_event().map_err(|e| xml_error("container", e))? {
            Event::Start(e) | Event::Empty(e) if e.local_name().as_ref() == "rootfile" => {
                if let Some(path) = attribute(&e, "full-path") {
                    return Ok(percent_decode(&path));
                }
            }
            Event::Eof => {
                return Err(ExtractError::malformed(
                    "the EPUB container names no package document",
                ));
            }
            _ => {}
        }
    }
}

/// The value of the attribute whose local name is `name`, entities resolved.
fn attribute(element: &BytesStart<'_>, name: &str) -> Option<String> {
    element
        .attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == name)
        .and_then(|a| {
            a.normalized_value(XmlVersion::Implicit1_0)
                .ok()
                .map(|v| v.into_owned())
        })
}

/// Manifest, spine and Dublin Core metadata of the OPF package document.
fn parse_package(opf: &str, limits: &Limits) -> Result<Package, ExtractError> {
    let mut reader = Reader::from_str(opf);
    let mut package = Package::default();
    // The Dublin Core element being read (`title`, `creator`, `language`) and its text.
    let mut field: Option<(String, String)> = None;
    let mut depth = 0usize;
    loop {
        let event = reader.read_event().map_err(|e| xml_error("package", e))?;
        match event {
            Event::Start(e) => {
                depth += 1;
                if depth > limits.max_nesting_depth {
                    return Err(ExtractError::too_complex(
                        "the EPUB package document is nested too deeply",
                    ));
                }
                let name = e.name().as_ref().to_string();
                if matches!(name.as_str(), "dc:title" | "dc:creator" | "dc:language") {
                    field = Some((name, String::new()));
                }
                package_element(&mut package, &e);
            }
            Event::Empty(e) => package_element(&mut package, &e),
            Event::Text(t) => {
                if let Some((_, text)) = field.as_mut() {
                    text.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some((_, text)) = field.as_mut() {
                    text.push_str(&t);
                }
            }
            Event::GeneralRef(r) => {
                if let (Some((_, text)), Some(c)) =
                    (field.as_mut(), crate::ooxml::resolve_reference(&r))
                {
                    text.push(c);
                }
            }
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                if let Some((name, text)) = field.take() {
                    set_metadata(&mut package.metadata, &name, text.trim());
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(package)
}

fn package_element(package: &mut Package, e: &BytesStart<'_>) {
    match e.local_name().as_ref() {
        "item" => {
            if let (Some(id), Some(href)) = (attribute(e, "id"), attribute(e, "href")) {
                let media_type = attribute(e, "media-type").unwrap_or_default();
                package.manifest.insert(id, Item { href, media_type });
            }
        }
        "itemref" => {
            if let Some(idref) = attribute(e, "idref") {
                package.spine.push(idref);
            }
        }
        _ => {}
    }
}

/// The first title, first creator and first language win.
fn set_metadata(metadata: &mut Metadata, name: &str, text: &str) {
    if text.is_empty() {
        return;
    }
    let slot = match name {
        "dc:title" => &mut metadata.title,
        "dc:creator" => &mut metadata.author,
        "dc:language" => &mut metadata.language,
        _ => return,
    };
    if slot.is_none() {
        *slot = Some(text.to_string());
    }
}

/// A manifest `href` (relative to the OPF's folder, percent-encoded) as a ZIP entry name.
fn resolve_path(base: &str, href: &str) -> String {
    let href = href.split('#').next().unwrap_or_default();
    let href = percent_decode(href);
    let mut parts: Vec<&str> = if href.starts_with('/') {
        Vec::new()
    } else {
        base.split('/').filter(|p| !p.is_empty()).collect()
    };
    for part in href.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(value) = hex {
                out.push(value);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::zip_of;
    use proptest::prelude::*;

    fn run(bytes: &[u8]) -> Result<Extraction, ExtractError> {
        extract(
            Input {
                path: std::path::Path::new("book.epub"),
                bytes,
                extension: "epub",
            },
            &Limits::default(),
            &Control::default(),
        )
    }

    const CONTAINER: &str = r#"<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#;

    fn opf(spine: &str) -> String {
        format!(
            r#"<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Tom &amp; Jerry</dc:title><dc:creator>A. Author</dc:creator><dc:language>en</dc:language></metadata><manifest><item id="c1" href="text/chapter%201.xhtml" media-type="application/xhtml+xml"/><item id="c2" href="../OEBPS/text/c2.xhtml" media-type="application/xhtml+xml"/><item id="gone" href="text/gone.xhtml" media-type="application/xhtml+xml"/></manifest><spine>{spine}</spine></package>"#
        )
    }

    fn book(spine: &str) -> Vec<u8> {
        zip_of(&[
            ("mimetype", "application/epub+zip"),
            ("META-INF/container.xml", CONTAINER),
            ("OEBPS/content.opf", &opf(spine)),
            (
                "OEBPS/text/chapter 1.xhtml",
                "<?xml version=\"1.0\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"><head><title/></head><body><h1>One</h1><p>First chapter.</p></body></html>",
            ),
            (
                "OEBPS/text/c2.xhtml",
                "<html><body><h1>Two</h1><p>Second chapter.</p></body></html>",
            ),
        ])
    }

    #[test]
    fn chapters_in_spine_order_with_metadata() {
        let extraction =
            run(&book(r#"<itemref idref="c2"/><itemref idref="c1"/><itemref idref="nope"/><itemref idref="gone"/>"#)).unwrap();
        assert_eq!(
            extraction.markdown,
            "# Two\n\nSecond chapter.\n\n# One\n\nFirst chapter."
        );
        assert_eq!(extraction.metadata.title.as_deref(), Some("Tom & Jerry"));
        assert_eq!(extraction.metadata.author.as_deref(), Some("A. Author"));
        assert_eq!(extraction.metadata.language.as_deref(), Some("en"));
        assert_eq!(extraction.warnings.len(), 2, "{:?}", extraction.warnings);
    }

    #[test]
    fn malformed_books_are_refused() {
        assert_eq!(run(b"not a zip").unwrap_err().code, "malformed_document");
        let no_container = zip_of(&[("mimetype", "application/epub+zip")]);
        assert_eq!(run(&no_container).unwrap_err().code, "malformed_document");
        let no_opf = zip_of(&[("META-INF/container.xml", CONTAINER)]);
        assert_eq!(run(&no_opf).unwrap_err().code, "malformed_document");
        let bad_container = zip_of(&[("META-INF/container.xml", "<container><rootfiles></x>")]);
        assert_eq!(run(&bad_container).unwrap_err().code, "malformed_document");
    }

    #[test]
    fn paths_resolve_against_the_package_folder() {
        assert_eq!(
            resolve_path("OEBPS", "text/a%20b.xhtml#x"),
            "OEBPS/text/a b.xhtml"
        );
        assert_eq!(resolve_path("OEBPS/sub", "../c.xhtml"), "OEBPS/c.xhtml");
        assert_eq!(resolve_path("", "c.xhtml"), "c.xhtml");
        assert_eq!(resolve_path("a", "../../../c.xhtml"), "c.xhtml");
    }

    fn corpus() -> Option<Vec<u8>> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/corpus/office/epub/sources/epub_purvis_poetry.epub"
        );
        std::fs::read(path)
            .map_err(|_| eprintln!("corpus file {path} missing; skipped"))
            .ok()
    }

    #[test]
    fn corpus_book() {
        let Some(bytes) = corpus() else { return };
        let extraction = run(&bytes).unwrap();
        assert_eq!(extraction.metadata.title.as_deref(), Some("Poetry"));
        assert_eq!(
            extraction.metadata.author.as_deref(),
            Some("Sarah Louisa Forten Purvis")
        );
        assert_eq!(extraction.metadata.language.as_deref(), Some("en-US"));
        let out = &extraction.markdown;
        let imprint = out.find("## Imprint").unwrap();
        let grave = out.find("The Grave of t").unwrap();
        assert!(imprint < grave);
        assert!(out.contains("Standard Ebooks"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn mutated_books_never_panic(cut in 0usize..200_000, flips in proptest::collection::vec((0usize..200_000, any::<u8>()), 0..16)) {
            let mut bytes = corpus().unwrap_or_else(|| book(r#"<itemref idref="c1"/>"#));
            crate::testing::mutate(&mut bytes, &flips, cut);
            let _ = run(&bytes);
        }
    }
}
