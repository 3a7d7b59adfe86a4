//! EPUB e-books: `META-INF/container.xml` names the package (OPF), whose spine orders the
//! XHTML chapters; each chapter goes through the HTML converter and the chapters are joined.
//! Title, authors and language come from the package's Dublin Core metadata, and a short front
//! block (title, authors, description, publisher) opens the text, less what the book's own
//! opening pages already say.

use std::collections::HashMap;

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use crate::markdown::{collapse_whitespace, heading, push_block};
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
    let package = parse_package(&opf, limits, control)?;
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
    let front = front_block(&package.about, &markdown, limits, control)?;
    let markdown = if front.is_empty() {
        markdown
    } else {
        let mut joined = front;
        push_block(&mut joined, &markdown);
        joined
    };
    let authors = package.about.authors();
    Ok(Extraction {
        markdown,
        metadata: Metadata {
            title: package.about.titles.first().cloned(),
            author: (!authors.is_empty()).then(|| authors.join(", ")),
            language: package.about.language.clone(),
            ..Metadata::default()
        },
        warnings,
        ..Extraction::default()
    })
}

/// How far into the book's text the front block looks for what it would repeat.
const OPENING_CHARS: usize = 4096;

/// The front block: `# Title`, `By A, B`, the description and `Published by P (year)`, each
/// left out when the opening of the book's own text already has it (most books begin with a
/// title page). The description may be HTML (Calibre writes it so): it is converted.
fn front_block(
    about: &About,
    text: &str,
    limits: &Limits,
    control: &Control,
) -> Result<String, ExtractError> {
    let mut cut = text.len().min(OPENING_CHARS);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let opening = collapse_whitespace(text.get(..cut).unwrap_or_default()).to_lowercase();
    let said = |what: &str| opening.contains(&collapse_whitespace(what).to_lowercase());
    let mut out = String::new();
    if let Some(title) = about.titles.first().filter(|t| !said(t)) {
        push_block(&mut out, &heading(1, title));
    }
    let authors = about.authors();
    if !authors.is_empty() && !authors.iter().all(|a| said(a)) {
        push_block(&mut out, &format!("By {}", authors.join(", ")));
    }
    if let Some(description) = &about.description {
        let description = if description.contains('<') {
            crate::html::to_markdown(description, limits, control)?.markdown
        } else {
            description.clone()
        };
        if !said(&description) {
            push_block(&mut out, &description);
        }
    }
    let year = about
        .date
        .as_deref()
        .map(|d| d.split('T').next().unwrap_or(d).trim())
        .filter(|d| !d.is_empty());
    match (&about.publisher, year) {
        (Some(publisher), _) if said(publisher) => {}
        (Some(publisher), Some(year)) => {
            push_block(&mut out, &format!("Published by {publisher} ({year})"))
        }
        (Some(publisher), None) => push_block(&mut out, &format!("Published by {publisher}")),
        (None, Some(year)) if !said(year) => push_block(&mut out, &format!("Published {year}")),
        (None, _) => {}
    }
    Ok(out)
}

/// What the package's metadata says about the book.
#[derive(Default)]
struct About {
    titles: Vec<String>,
    /// Creators in order: id (for EPUB 3 `refines`), name, EPUB 2 `opf:role`.
    creators: Vec<(Option<String>, String, Option<String>)>,
    /// EPUB 3 roles: `<meta refines="#id" property="role">aut</meta>`, by creator id.
    roles: HashMap<String, String>,
    language: Option<String>,
    description: Option<String>,
    publisher: Option<String>,
    date: Option<String>,
}

impl About {
    /// The creators whose role is author (MARC relator `aut`) or unstated, each once; all
    /// creators when none is an author (a book credited to its editor only).
    fn authors(&self) -> Vec<String> {
        let role = |id: &Option<String>, opf_role: &Option<String>| {
            opf_role
                .clone()
                .or_else(|| id.as_ref().and_then(|id| self.roles.get(id).cloned()))
        };
        let mut authors: Vec<String> = Vec::new();
        for (id, name, opf_role) in &self.creators {
            if role(id, opf_role).is_none_or(|r| r.trim().eq_ignore_ascii_case("aut"))
                && !authors.contains(name)
            {
                authors.push(name.clone());
            }
        }
        if authors.is_empty() {
            for (_, name, _) in &self.creators {
                if !authors.contains(name) {
                    authors.push(name.clone());
                }
            }
        }
        authors
    }
}

struct Item {
    href: String,
    media_type: String,
}

#[derive(Default)]
struct Package {
    about: About,
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

/// One metadata element being read: which (`title`, `creator`, `role`, ...), its id or the
/// id it refines, its EPUB 2 role, and its text so far.
struct Field {
    kind: String,
    id: Option<String>,
    role: Option<String>,
    text: String,
}

/// Dublin Core elements read from the package's `<metadata>`, by local name (the `dc:` prefix
/// is a convention, not a rule).
const FIELDS: &[&str] = &[
    "title",
    "creator",
    "language",
    "description",
    "publisher",
    "date",
];

/// Manifest, spine and Dublin Core metadata of the OPF package document.
fn parse_package(opf: &str, limits: &Limits, control: &Control) -> Result<Package, ExtractError> {
    let mut reader = Reader::from_str(opf);
    let mut package = Package::default();
    let mut field: Option<Field> = None;
    let mut depth = 0usize;
    // The depth of the `<metadata>` element while inside it.
    let mut metadata_depth: Option<usize> = None;
    let mut events = 0usize;
    loop {
        events += 1;
        if events.is_multiple_of(1024) {
            control.check()?;
        }
        let event = reader.read_event().map_err(|e| xml_error("package", e))?;
        match event {
            Event::Start(e) => {
                depth += 1;
                if depth > limits.max_nesting_depth {
                    return Err(ExtractError::too_complex(
                        "the EPUB package document is nested too deeply",
                    ));
                }
                let local = e.local_name().as_ref().to_string();
                if local == "metadata" && metadata_depth.is_none() {
                    metadata_depth = Some(depth);
                } else if metadata_depth.is_some() {
                    field = metadata_field(&local, &e);
                }
                package_element(&mut package, &e);
            }
            Event::Empty(e) => package_element(&mut package, &e),
            Event::Text(t) => {
                if let Some(field) = field.as_mut() {
                    field.text.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some(field) = field.as_mut() {
                    field.text.push_str(&t);
                }
            }
            Event::GeneralRef(r) => {
                if let (Some(field), Some(c)) =
                    (field.as_mut(), crate::ooxml::resolve_reference(&r))
                {
                    field.text.push(c);
                }
            }
            Event::End(_) => {
                if metadata_depth == Some(depth) {
                    metadata_depth = None;
                }
                depth = depth.saturating_sub(1);
                if let Some(field) = field.take() {
                    set_metadata(&mut package.about, field);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(package)
}

/// The metadata field an element inside `<metadata>` opens, if it is one that is read.
fn metadata_field(local: &str, e: &BytesStart<'_>) -> Option<Field> {
    if local == "meta" {
        // EPUB 3 refinements: only a creator's role is read.
        if attribute(e, "property").as_deref() != Some("role") {
            return None;
        }
        let refines = attribute(e, "refines")?;
        return Some(Field {
            kind: "role".to_string(),
            id: Some(refines.trim().trim_start_matches('#').to_string()),
            role: None,
            text: String::new(),
        });
    }
    FIELDS.contains(&local).then(|| Field {
        kind: local.to_string(),
        id: attribute(e, "id"),
        role: attribute(e, "role"),
        text: String::new(),
    })
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

/// Titles and creators are all kept in order; for the other fields the first wins.
fn set_metadata(about: &mut About, field: Field) {
    // A description keeps its line breaks (it may be HTML); the rest is one line.
    let text = if field.kind == "description" {
        field.text.trim().to_string()
    } else {
        collapse_whitespace(&field.text)
    };
    if text.is_empty() {
        return;
    }
    let slot = match field.kind.as_str() {
        "title" => {
            about.titles.push(text);
            return;
        }
        "creator" => {
            about.creators.push((field.id, text, field.role));
            return;
        }
        "role" => {
            if let Some(id) = field.id {
                about.roles.entry(id).or_insert(text);
            }
            return;
        }
        "language" => &mut about.language,
        "description" => &mut about.description,
        "publisher" => &mut about.publisher,
        "date" => &mut about.date,
        _ => return,
    };
    if slot.is_none() {
        *slot = Some(text);
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
            "# Tom & Jerry\n\nBy A. Author\n\n# Two\n\nSecond chapter.\n\n# One\n\nFirst chapter."
        );
        assert_eq!(extraction.metadata.title.as_deref(), Some("Tom & Jerry"));
        assert_eq!(extraction.metadata.author.as_deref(), Some("A. Author"));
        assert_eq!(extraction.metadata.language.as_deref(), Some("en"));
        assert_eq!(extraction.warnings.len(), 2, "{:?}", extraction.warnings);
    }

    fn book_with_metadata(metadata: &str, chapter: &str) -> Vec<u8> {
        let opf = format!(
            r#"<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" xmlns:opf="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">{metadata}</metadata><manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/></spine></package>"#
        );
        zip_of(&[
            ("mimetype", "application/epub+zip"),
            ("META-INF/container.xml", CONTAINER),
            ("OEBPS/content.opf", opf.as_str()),
            ("OEBPS/c1.xhtml", chapter),
        ])
    }

    #[test]
    fn authors_description_and_publisher_open_the_book() {
        let metadata = r##"<dc:title id="t">The  Long
            Walk</dc:title><dc:title>A subtitle</dc:title>
            <dc:creator id="a1">Ann Smith</dc:creator><meta refines="#a1" property="role" scheme="marc:relators">aut</meta>
            <dc:creator opf:role="aut">Bo Lee</dc:creator>
            <dc:creator id="ed">Carl Editor</dc:creator><meta refines="#ed" property="role">edt</meta>
            <dc:creator>Ann Smith</dc:creator>
            <dc:description>&lt;p&gt;A walk &lt;b&gt;across&lt;/b&gt; the hills.&lt;/p&gt;</dc:description>
            <dc:publisher>Hill Press</dc:publisher><dc:date>2019-04-01T00:00:00Z</dc:date>
            <dc:language>fr</dc:language>"##;
        let bytes = book_with_metadata(metadata, "<html><body><p>Chapter text.</p></body></html>");
        let extraction = run(&bytes).unwrap();
        assert_eq!(
            extraction.markdown,
            "# The Long Walk\n\nBy Ann Smith, Bo Lee\n\nA walk **across** the hills.\n\n\
             Published by Hill Press (2019-04-01)\n\nChapter text."
        );
        assert_eq!(extraction.metadata.title.as_deref(), Some("The Long Walk"));
        assert_eq!(
            extraction.metadata.author.as_deref(),
            Some("Ann Smith, Bo Lee")
        );
        assert_eq!(extraction.metadata.language.as_deref(), Some("fr"));
    }

    #[test]
    fn front_block_leaves_out_what_the_title_page_says() {
        let metadata = r#"<dc:title>Poems</dc:title><dc:creator>Ed Only</dc:creator><dc:creator opf:role="ill">Ivy Drawer</dc:creator><dc:description>Short poems.</dc:description><dc:publisher>Small Press</dc:publisher>"#;
        let chapter = "<html><body><h1>Poems</h1><p>By <b>Ed Only</b>.</p><p>Small Press, 1901.</p></body></html>";
        let extraction = run(&book_with_metadata(metadata, chapter)).unwrap();
        assert_eq!(
            extraction.markdown,
            "Short poems.\n\n# Poems\n\nBy **Ed Only**.\n\nSmall Press, 1901."
        );
        assert_eq!(extraction.metadata.author.as_deref(), Some("Ed Only"));
        // A book credited to its editor alone still names someone.
        let metadata = r#"<dc:creator opf:role="edt">Carl Editor</dc:creator>"#;
        let extraction = run(&book_with_metadata(metadata, "<p>x</p>")).unwrap();
        assert_eq!(extraction.metadata.author.as_deref(), Some("Carl Editor"));
        assert_eq!(extraction.markdown, "By Carl Editor\n\nx");
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
        // The title page has title and author; the description is only in the package.
        assert!(
            out.starts_with("A collection of poems by Sarah Louisa Forten Purvis.\n\n# Poetry"),
            "{}",
            out.get(..200).unwrap_or(out)
        );
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
