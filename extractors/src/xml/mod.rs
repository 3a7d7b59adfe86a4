//! XML: the readable text of elements as Markdown. Five dialects get output of their own
//! ([`Dialect`]: FictionBook, DocBook, JATS, OPML, SVG), recognized by their root element and
//! namespace whatever the extension (a DocBook article named `.xml` is read as DocBook);
//! everything else is generic XML, read with quick-xml's streaming reader.
//!
//! Generic XML reads like this:
//! The output reads like this:
//! - a leaf element (no child elements) with short one-line text is a list item
//!   `- **element**: text`, so records such as `<book><title>..</title><year>..</year>` read
//!   as a small list of fields;
//! - longer text, and the text of elements that hold other elements, are paragraphs;
//! - once an element has text of its own, its children are inline (`<p>Some <b>bold</b>
//!   words</p>` is one paragraph);
//! - the `title`, `name`, `alt`, `label`, `caption` and `summary` attributes are fields
//!   `- **attribute**: value` before the element's content;
//! - comments, processing instructions, the XML declaration and the DOCTYPE are dropped.
//!
//! Entities: the five predefined ones and numeric character references are decoded; every
//! other entity reference is dropped, and DOCTYPE declarations are never read, so external
//! entities are never resolved and entity expansion bombs do not expand. The bytes are decoded
//! to UTF-8 first (byte-order mark, else the declaration's `encoding`, else detection).

use std::borrow::Cow;

use encoding_rs::Encoding;
use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use crate::markdown;
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

/// Attributes whose values are text a reader wants.
const TEXT_ATTRIBUTES: &[&str] = &["title", "name", "alt", "label", "caption", "summary"];
/// The longest text a leaf element may have to be shown as a `- **element**: text` field.
const MAX_FIELD_CHARS: usize = 120;
/// Events read between two checks of the deadline.
const CHECK_EVERY: usize = 256;

mod docbook;
mod fb2;
mod jats;
mod opml;
mod svg;
mod tree;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let (text, encoding) = decode(input.bytes)?;
    if let Some(dialect) = detect(&text, input.extension) {
        let root = tree::parse(&text, limits, control)?;
        let mut extraction = match dialect {
            Dialect::FictionBook => fb2::render(&root, limits, control)?,
            Dialect::DocBook => docbook::render(&root, limits, control)?,
            Dialect::Jats => jats::render(&root, limits, control)?,
            Dialect::Opml => opml::render(&root, limits, control)?,
            Dialect::Svg => svg::render(&root, limits, control)?,
        };
        extraction.metadata.encoding = Some(encoding.to_string());
        return Ok(extraction);
    }
    let mut writer = Writer::new(limits);
    read(&text, limits, control, &mut writer)?;
    Ok(Extraction {
        markdown: writer.finish(),
        warnings: writer.warnings,
        metadata: Metadata {
            encoding: Some(encoding.to_string()),
            ..Metadata::default()
        },
        ..Extraction::default()
    })
}

/// An XML vocabulary read with output of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// FictionBook 2 (`.fb2`): e-books.
    FictionBook,
    /// DocBook 4 and 5 (`.dbk`): technical books and articles.
    DocBook,
    /// JATS / NLM (`.nxml`): journal articles, as PubMed Central publishes them.
    Jats,
    /// OPML (`.opml`): outlines and feed lists.
    Opml,
    /// SVG (`.svg`): drawings, of which the titles, descriptions and text are read.
    Svg,
}

const DOCBOOK_NAMESPACE: &str = "http://docbook.org/ns/docbook";
/// Root elements a DocBook document may have.
const DOCBOOK_ROOTS: &[&str] = &[
    "book",
    "article",
    "chapter",
    "part",
    "set",
    "section",
    "sect1",
    "reference",
    "refentry",
    "appendix",
    "preface",
];
/// Prolog events read before giving up on finding the root element.
const MAX_PROLOG_EVENTS: usize = 1000;

/// The dialect of an XML text, from its root element, the root's namespace and attributes,
/// the DOCTYPE's public identifier (read as text, never resolved), and the extension as a
/// tie-breaker. `None`: generic XML (or not XML at all, which the generic reader reports).
pub fn detect(text: &str, extension: &str) -> Option<Dialect> {
    let mut reader = Reader::from_str(text);
    let mut doctype = String::new();
    for _ in 0..MAX_PROLOG_EVENTS {
        match reader.read_event().ok()? {
            Event::DocType(d) => {
                doctype = d.xml_content(XmlVersion::Implicit1_0).to_ascii_lowercase()
            }
            Event::Start(root) | Event::Empty(root) => {
                return dialect_of(&root, &doctype, extension);
            }
            Event::Eof => return None,
            _ => {}
        }
    }
    None
}

fn dialect_of(root: &BytesStart<'_>, doctype: &str, extension: &str) -> Option<Dialect> {
    let name = element_name(root);
    let mut namespace = String::new();
    let mut jats_attributes = false;
    for attribute in root.attributes().filter_map(Result::ok) {
        let key = attribute.key.as_ref();
        if key == "xmlns" {
            namespace = attribute.value.to_string();
        }
        if key == "dtd-version" || key == "article-type" {
            jats_attributes = true;
        }
    }
    let jats_doctype = [
        "jats",
        "nlm//dtd",
        "journal publishing",
        "journal archiving",
    ]
    .iter()
    .any(|marker| doctype.contains(marker));
    match name.as_str() {
        "FictionBook" => Some(Dialect::FictionBook),
        "opml" => Some(Dialect::Opml),
        "svg" => Some(Dialect::Svg),
        _ if namespace == "http://www.w3.org/2000/svg" => Some(Dialect::Svg),
        "article" if namespace != DOCBOOK_NAMESPACE && (jats_doctype || jats_attributes) => {
            Some(Dialect::Jats)
        }
        "article" if extension == "nxml" => Some(Dialect::Jats),
        root if DOCBOOK_ROOTS.contains(&root)
            && (namespace == DOCBOOK_NAMESPACE
                || doctype.contains("docbook")
                || extension == "dbk") =>
        {
            Some(Dialect::DocBook)
        }
        _ => None,
    }
}

/// Text of the file: a byte-order mark wins, then the declaration's encoding, then detection.
fn decode(bytes: &[u8]) -> Result<(String, &'static str), ExtractError> {
    if Encoding::for_bom(bytes).is_none()
        && let Some(encoding) = declared_encoding(bytes)
        && encoding != encoding_rs::UTF_8
    {
        let (text, _) = encoding.decode_without_bom_handling(bytes);
        return Ok((text.into_owned(), encoding.name()));
    }
    let decoded = crate::plain::decode_without_bom(bytes)?;
    Ok((decoded.text, decoded.encoding))
}

/// The `encoding` of an ASCII-compatible XML declaration.
fn declared_encoding(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = bytes.get(..bytes.len().min(256))?;
    if !head.starts_with(b"<?xml") {
        return None;
    }
    let end = head.windows(2).position(|w| w == b"?>")?;
    let declaration = std::str::from_utf8(head.get(..end)?).ok()?;
    let after = declaration.split_once("encoding")?.1;
    let after = after.trim_start().strip_prefix('=')?.trim_start();
    let quote = after.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let label = after.get(1..)?.split(quote).next()?;
    let encoding = Encoding::for_label(label.trim().as_bytes())?;
    // UTF-16 declared in an ASCII-compatible file is a wrong declaration.
    (encoding.is_ascii_compatible()).then_some(encoding)
}

fn read(
    text: &str,
    limits: &Limits,
    control: &Control,
    writer: &mut Writer,
) -> Result<(), ExtractError> {
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut events = 0usize;
    loop {
        events += 1;
        if events.is_multiple_of(CHECK_EVERY) {
            control.check()?;
            if writer.full {
                return Ok(());
            }
        }
        let event = reader
            .read_event()
            .map_err(|e| position_error(text, reader.error_position(), &e))?;
        match event {
            Event::Start(start) => {
                if writer.stack.len() >= limits.max_nesting_depth {
                    return Err(ExtractError::too_complex(format!(
                        "XML elements nest deeper than {} levels",
                        limits.max_nesting_depth
                    )));
                }
                writer.start(&start);
            }
            Event::Empty(start) => {
                writer.start(&start);
                writer.end();
            }
            Event::End(_) => writer.end(),
            Event::Text(t) => writer.text(&t.xml_content(XmlVersion::Implicit1_0)),
            Event::CData(t) => writer.text(&t.xml_content(XmlVersion::Implicit1_0)),
            Event::GeneralRef(r) => {
                if let Some(c) = crate::ooxml::resolve_reference(&r) {
                    writer.text(c.encode_utf8(&mut [0; 4]));
                }
            }
            Event::Eof => break,
            Event::Comment(_) | Event::PI(_) | Event::Decl(_) | Event::DocType(_) => {}
        }
    }
    if !writer.stack.is_empty() {
        return Err(ExtractError::malformed(
            "invalid XML: the document ends before all its elements are closed",
        ));
    }
    if !writer.saw_element {
        return Err(ExtractError::malformed(
            "invalid XML: the file has no element",
        ));
    }
    Ok(())
}

fn position_error(text: &str, offset: u64, error: &quick_xml::Error) -> ExtractError {
    let offset = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    ExtractError::malformed(format!(
        "invalid XML at line {line}, column {column}: {}",
        error_kind(error)
    ))
}

/// What kind of error, without quoting the document.
fn error_kind(error: &quick_xml::Error) -> String {
    match error {
        quick_xml::Error::Syntax(e) => e.to_string(),
        quick_xml::Error::IllFormed(e) => match e {
            quick_xml::errors::IllFormedError::MismatchedEndTag { .. } => {
                "an end tag does not match its start tag".to_string()
            }
            quick_xml::errors::IllFormedError::UnmatchedEndTag(_) => {
                "an end tag has no start tag".to_string()
            }
            _ => "the document is not well-formed".to_string(),
        },
        quick_xml::Error::InvalidAttr(_) => "an attribute is malformed".to_string(),
        quick_xml::Error::Escape(_) => "an escape sequence is malformed".to_string(),
        quick_xml::Error::Encoding(_) => "the text is not valid in its encoding".to_string(),
        _ => "the document cannot be read".to_string(),
    }
}

fn element_name(start: &BytesStart<'_>) -> String {
    start.local_name().as_ref().to_string()
}

/// Attribute values worth reading, with references to other entities left as written.
fn text_attributes(start: &BytesStart<'_>) -> Vec<(String, String)> {
    start
        .attributes()
        .filter_map(Result::ok)
        .filter_map(|attribute| {
            let key = attribute.key.local_name().as_ref().to_string();
            if !TEXT_ATTRIBUTES.contains(&key.to_ascii_lowercase().as_str()) {
                return None;
            }
            let value = attribute
                .normalized_value(XmlVersion::Implicit1_0)
                .unwrap_or_else(|_| Cow::Owned(attribute.value.to_string()));
            let value = markdown::collapse_whitespace(&value);
            (!value.is_empty()).then_some((key, value))
        })
        .collect()
}

struct Frame {
    name: String,
    /// Has text of its own: children are inline.
    mixed: bool,
    has_children: bool,
    /// Inside an inline run: its text goes to the enclosing paragraph.
    inline: bool,
}

struct Writer {
    stack: Vec<Frame>,
    /// The text of the paragraph being read.
    current: String,
    out: String,
    /// Consecutive `- **element**: text` fields, written as one list.
    fields: Vec<String>,
    warnings: Vec<String>,
    saw_element: bool,
    full: bool,
    max_output: usize,
}

impl Writer {
    fn new(limits: &Limits) -> Self {
        Writer {
            stack: Vec::new(),
            current: String::new(),
            out: String::new(),
            fields: Vec::new(),
            warnings: Vec::new(),
            saw_element: false,
            full: false,
            max_output: limits.max_output_chars,
        }
    }

    fn start(&mut self, start: &BytesStart<'_>) {
        self.saw_element = true;
        let inline = self.stack.last().is_some_and(|f| f.mixed || f.inline);
        if let Some(parent) = self.stack.last_mut() {
            parent.has_children = true;
        }
        if !inline {
            self.flush_paragraph();
            for (key, value) in text_attributes(start) {
                self.fields.push(format!("- **{key}**: {value}"));
            }
        }
        self.stack.push(Frame {
            name: element_name(start),
            mixed: false,
            has_children: false,
            inline,
        });
    }

    fn text(&mut self, text: &str) {
        if text.trim().is_empty() {
            if !self.current.is_empty() {
                self.current.push(' ');
            }
            return;
        }
        if let Some(frame) = self.stack.last_mut()
            && !frame.inline
        {
            frame.mixed = true;
        }
        self.current.push_str(text);
    }

    fn end(&mut self) {
        let Some(frame) = self.stack.pop() else {
            return;
        };
        if frame.inline {
            return;
        }
        let text = markdown::collapse_whitespace(&self.current);
        if text.is_empty() {
            self.current.clear();
            return;
        }
        if !frame.has_children
            && text.chars().count() <= MAX_FIELD_CHARS
            && !self.current.trim().contains('\n')
        {
            self.current.clear();
            self.fields.push(format!("- **{}**: {text}", frame.name));
        } else {
            self.flush_paragraph();
        }
    }

    fn flush_paragraph(&mut self) {
        let text = markdown::collapse_whitespace(&std::mem::take(&mut self.current));
        if text.is_empty() {
            return;
        }
        self.flush_fields();
        self.push_block(&text);
    }

    fn flush_fields(&mut self) {
        if self.fields.is_empty() {
            return;
        }
        let fields = std::mem::take(&mut self.fields).join("\n");
        self.push_block(&fields);
    }

    fn push_block(&mut self, block: &str) {
        if self.full {
            return;
        }
        if self.out.len() + block.len() > self.max_output {
            self.full = true;
            self.warnings
                .push("the document was cut short at the output limit".to_string());
            return;
        }
        markdown::push_block(&mut self.out, block);
    }

    fn finish(&mut self) -> String {
        self.flush_paragraph();
        self.flush_fields();
        std::mem::take(&mut self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::Path;

    fn run_with(bytes: &[u8], limits: &Limits) -> Result<Extraction, ExtractError> {
        let input = Input {
            path: Path::new("test.xml"),
            bytes,
            extension: "xml",
        };
        crate::extract(crate::Kind::Xml, input, limits, &Control::default())
    }

    fn run(bytes: &[u8]) -> Result<Extraction, ExtractError> {
        run_with(bytes, &Limits::default())
    }

    const CATALOG: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<?xml-stylesheet href="style.xsl"?>
<!-- a comment that must not appear -->
<catalog xmlns:dc="http://purl.org/dc">
  <book id="1" title="The Book">
    <dc:title>Rust &amp; XML</dc:title>
    <year>2024</year>
    <summary>A long summary that goes on and on, well past the length of a field, so that it
      is written as a paragraph of its own rather than as a short field of the record.</summary>
  </book>
  <img alt="A cat" src="cat.png"/>
  <p>Some <b>bold</b> words &#233;&#x20AC; and <![CDATA[<raw> & text]]> here.</p>
</catalog>"#;

    #[test]
    fn fields_paragraphs_and_inline_text() {
        let md = run(CATALOG.as_bytes()).unwrap().markdown;
        let expected = "- **title**: The Book\n- **title**: Rust & XML\n- **year**: 2024\n\nA long summary that goes on and on, well past the length of a field, so that it is written as a paragraph of its own rather than as a short field of the record.\n\n- **alt**: A cat\n\nSome bold words é€ and <raw> & text here.";
        assert_eq!(md, expected);
        assert!(!md.contains("comment"));
        assert!(!md.contains("style.xsl"));
    }

    #[test]
    fn billion_laughs_does_not_expand() {
        let bomb = r#"<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<lolz><a>before &lol9; after</a></lolz>"#;
        let md = run(bomb.as_bytes()).unwrap().markdown;
        assert_eq!(md, "- **a**: before after");
    }

    #[test]
    fn external_entities_are_never_resolved() {
        let xxe = r#"<?xml version="1.0"?>
<!DOCTYPE foo [ <!ENTITY xxe SYSTEM "file:///etc/passwd"> <!ENTITY % p SYSTEM "file:///etc/passwd"> ]>
<foo><bar>&xxe;</bar><baz attr="&xxe;" name="n &xxe;">ok</baz></foo>"#;
        let md = run(xxe.as_bytes()).unwrap().markdown;
        assert!(!md.contains("root:"), "{md}");
        assert!(md.contains("- **baz**: ok"), "{md}");
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        if let Some(first) = passwd.lines().next() {
            assert!(!md.contains(first));
        }
    }

    #[test]
    fn encodings() {
        let mut latin1 = b"<?xml version='1.0' encoding='ISO-8859-1'?><r><t>caf".to_vec();
        latin1.extend(b"\xe9</t></r>");
        let e = run(&latin1).unwrap();
        assert_eq!(e.markdown, "- **t**: caf\u{e9}");
        assert_eq!(e.metadata.encoding.as_deref(), Some("windows-1252"));
        let mut utf16 = vec![0xFF, 0xFE];
        utf16.extend(
            "<?xml version=\"1.0\" encoding=\"UTF-16\"?><r><t>\u{4e2d}\u{6587}</t></r>"
                .encode_utf16()
                .flat_map(|u| u.to_le_bytes()),
        );
        assert_eq!(run(&utf16).unwrap().markdown, "- **t**: \u{4e2d}\u{6587}");
    }

    #[test]
    fn malformed_and_deep() {
        let err = run(b"<a>\n  <b>text</c>\n</a>").unwrap_err();
        assert_eq!(err.code, "malformed_document");
        assert!(err.detail.contains("line 2"), "{}", err.detail);
        assert!(!err.detail.contains("text"));
        assert_eq!(
            run(b"<a><b>unclosed").unwrap_err().code,
            "malformed_document"
        );
        assert_eq!(run(b"just text").unwrap_err().code, "malformed_document");
        assert_eq!(
            run(b"<a><!-- unclosed comment").unwrap_err().code,
            "malformed_document"
        );
        let deep = format!("{}x{}", "<a>".repeat(100_000), "</a>".repeat(100_000));
        assert_eq!(
            run(deep.as_bytes()).unwrap_err().code,
            "document_too_complex"
        );
        let limits = Limits {
            max_nesting_depth: 3,
            ..Limits::default()
        };
        assert_eq!(
            run_with(b"<a><b><c><d>x</d></c></b></a>", &limits)
                .unwrap_err()
                .code,
            "document_too_complex"
        );
        assert_eq!(
            run_with(b"<a><b><c>x</c></b></a>", &limits)
                .unwrap()
                .markdown,
            "- **c**: x"
        );
    }

    fn run_as(bytes: &[u8], extension: &str) -> Result<Extraction, ExtractError> {
        let input = Input {
            path: Path::new("test"),
            bytes,
            extension,
        };
        crate::extract(
            crate::Kind::Xml,
            input,
            &Limits::default(),
            &Control::default(),
        )
    }

    const FB2: &str = r##"<?xml version="1.0" encoding="UTF-8"?>
<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0" xmlns:l="http://www.w3.org/1999/xlink">
 <description>
  <title-info>
   <genre>sf</genre>
   <author><first-name>Ada</first-name><middle-name>K.</middle-name><last-name>Lovelace</last-name></author>
   <author><nickname>Babbage</nickname></author>
   <book-title>The  Engine</book-title>
   <annotation><p>A story of <emphasis>numbers</emphasis>.</p></annotation>
   <lang>en</lang>
  </title-info>
  <document-info><author><nickname>scanner</nickname></author><id>x1</id></document-info>
 </description>
 <body>
  <title><p>Ada Lovelace</p><p>The Engine</p></title>
  <epigraph><p>Numbers are the poetry.</p><text-author>Someone</text-author></epigraph>
  <section>
   <title><p>Chapter 1</p></title>
   <p>First <strong>para</strong>graph<a l:href="#n1" type="note">1</a>.</p>
   <empty-line/>
   <image l:href="#pic"/>
   <poem><title><p>Song</p></title><stanza><v>Line one,</v><v>line two.</v></stanza></poem>
   <section><title><p>Part A</p></title><p>Nested text.</p>
    <cite><p>Quoted words.</p><text-author>Ada</text-author></cite>
    <table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
   </section>
  </section>
 </body>
 <body name="notes"><section id="n1"><title><p>1</p></title><p>A note.</p></section></body>
 <binary id="pic" content-type="image/png">iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==</binary>
</FictionBook>"##;

    #[test]
    fn fictionbook() {
        let e = run_as(FB2.as_bytes(), "fb2").unwrap();
        let expected = "# The Engine\n\nAda K. Lovelace, Babbage\n\nA story of numbers.\n\n> Numbers are the poetry.\n>\n> Someone\n\n## Chapter 1\n\nFirst paragraph1.\n\n### Song\n\nLine one,\nline two.\n\n### Part A\n\nNested text.\n\n> Quoted words.\n>\n> Ada\n\n| k | v |\n|---|---|\n| a | 1 |\n\n# Notes\n\n## 1\n\nA note.";
        assert_eq!(e.markdown, expected);
        assert!(!e.markdown.contains("iVBOR"));
        assert_eq!(e.metadata.title.as_deref(), Some("The Engine"));
        assert_eq!(
            e.metadata.author.as_deref(),
            Some("Ada K. Lovelace, Babbage")
        );
        assert_eq!(e.metadata.language.as_deref(), Some("en"));
        // The same file named .xml is recognized by its root.
        assert_eq!(run_as(FB2.as_bytes(), "xml").unwrap().markdown, expected);
    }

    #[test]
    fn fictionbook_with_doctype_entities_does_not_expand_them() {
        let hostile = FB2.replacen(
            "<FictionBook ",
            "<!DOCTYPE FictionBook [\n <!ENTITY xxe SYSTEM \"file:///etc/passwd\">\n <!ENTITY lol \"lol\">\n <!ENTITY lol1 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n <!ENTITY lol2 \"&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;\">\n]>\n<FictionBook ",
            1,
        )
        .replace("Nested text.", "Nested &xxe; text &lol2;&amp; more.");
        let e = run_as(hostile.as_bytes(), "fb2").unwrap();
        assert!(e.markdown.contains("Nested text & more."), "{}", e.markdown);
        assert!(!e.markdown.contains("lol"));
        assert!(!e.markdown.contains("root:"));
        assert!(e.markdown.starts_with("# The Engine"));
    }

    const DOCBOOK: &str = r##"<?xml version="1.0" encoding="utf-8"?>
<book xmlns="http://docbook.org/ns/docbook" xmlns:xl="http://www.w3.org/1999/xlink" version="5.0" xml:lang="en">
  <info>
    <title>Shelf Guide</title>
    <author><personname><firstname>Ana</firstname><surname>Silva</surname></personname></author>
    <abstract><para>How to use it.</para></abstract>
    <copyright><year>2024</year><holder>Nobody</holder></copyright>
  </info>
  <chapter xml:id="c1">
    <title>Getting <emphasis>started</emphasis></title>
    <para>Install the <command>shelf</command> binary.<indexterm><primary>install</primary></indexterm></para>
    <itemizedlist>
      <listitem><para>Download it.</para></listitem>
      <listitem><para>Run it:</para>
        <orderedlist><listitem><para>once</para></listitem><listitem><para>twice</para></listitem></orderedlist>
      </listitem>
    </itemizedlist>
    <programlisting language="sh">shelf serve
  --port 8080</programlisting>
    <section>
      <title>Settings</title>
      <note><para>Defaults are fine.</para></note>
      <table><title>Options</title><tgroup cols="2">
        <thead><row><entry>Name</entry><entry>Meaning</entry></row></thead>
        <tbody><row><entry>port</entry><entry>where it listens</entry></row></tbody>
      </tgroup></table>
      <variablelist><varlistentry><term>SHELF_DATA</term><listitem><para>data folder</para></listitem></varlistentry></variablelist>
    </section>
  </chapter>
  <appendix><title>More</title><sect1><title>Deep</title><simpara>Last words.</simpara></sect1></appendix>
</book>"##;

    #[test]
    fn docbook() {
        let e = run_as(DOCBOOK.as_bytes(), "dbk").unwrap();
        let expected = "# Shelf Guide\n\nHow to use it.\n\n## Getting started\n\nInstall the shelf binary.\n\n- Download it.\n- Run it:\n  1. once\n  2. twice\n\n```sh\nshelf serve\n  --port 8080\n```\n\n### Settings\n\n> Defaults are fine.\n\nOptions\n\n| Name | Meaning |\n|---|---|\n| port | where it listens |\n\n- SHELF_DATA\n  data folder\n\n## More\n\n### Deep\n\nLast words.";
        assert_eq!(e.markdown, expected);
        assert_eq!(e.metadata.title.as_deref(), Some("Shelf Guide"));
        assert_eq!(e.metadata.author.as_deref(), Some("Ana Silva"));
        assert_eq!(e.metadata.language.as_deref(), Some("en"));
        assert_eq!(
            run_as(DOCBOOK.as_bytes(), "xml").unwrap().markdown,
            expected
        );
        // DocBook 4: no namespace, a DOCTYPE naming it, bookinfo and sect1.
        let v4 = r#"<?xml version="1.0"?>
<!DOCTYPE article PUBLIC "-//OASIS//DTD DocBook XML V4.5//EN" "http://www.oasis-open.org/docbook/xml/4.5/docbookx.dtd">
<article><articleinfo><title>Old Style</title><author><firstname>Bo</firstname><surname>Li</surname></author></articleinfo>
<sect1><title>One</title><para>Text.</para></sect1></article>"#;
        let e = run_as(v4.as_bytes(), "xml").unwrap();
        assert_eq!(e.markdown, "# Old Style\n\n## One\n\nText.");
        assert_eq!(e.metadata.author.as_deref(), Some("Bo Li"));
    }

    const JATS: &str = r##"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and Interchange DTD v1.2 20190208//EN" "JATS-archivearticle1.dtd">
<article xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:mml="http://www.w3.org/1998/Math/MathML" article-type="research-article" dtd-version="1.2" xml:lang="en">
<front>
 <journal-meta><journal-id>J</journal-id><journal-title-group><journal-title>Journal of Tests</journal-title></journal-title-group></journal-meta>
 <article-meta>
  <article-id pub-id-type="doi">10.1/x</article-id>
  <title-group><article-title>Reading <italic>Articles</italic> Well</article-title></title-group>
  <contrib-group>
   <contrib contrib-type="author"><name><surname>Doe</surname><given-names>Jane</given-names></name><xref ref-type="aff" rid="a1">1</xref></contrib>
   <contrib contrib-type="author"><collab>The Group</collab></contrib>
   <contrib contrib-type="editor"><name><surname>Ed</surname><given-names>Itor</given-names></name></contrib>
  </contrib-group>
  <aff id="a1">Somewhere University</aff>
  <abstract><sec><title>Background</title><p>We read.</p></sec></abstract>
  <kwd-group><kwd>reading</kwd><kwd>tests</kwd></kwd-group>
 </article-meta>
</front>
<body>
 <sec id="s1"><title>Introduction</title>
  <p>Text with a citation <xref ref-type="bibr" rid="r1">1</xref> and <inline-formula><alternatives><mml:math><mml:mi>x</mml:mi></mml:math><tex-math>$x^2$</tex-math></alternatives></inline-formula>.</p>
  <list list-type="order"><list-item><p>first</p></list-item><list-item><p>second</p></list-item></list>
  <sec><title>Detail</title><p>Deeper.</p></sec>
 </sec>
 <sec><title>Results</title>
  <table-wrap id="t1"><label>Table 1</label><caption><p>Counts.</p></caption>
   <table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>
  </table-wrap>
  <fig id="f1"><label>Figure 1</label><caption><title>A plot.</title></caption><graphic xlink:href="f1.jpg"/></fig>
 </sec>
</body>
<back>
 <ack><title>Acknowledgements</title><p>Thanks.</p></ack>
 <ref-list><title>References</title>
  <ref id="r1"><label>1</label><element-citation publication-type="journal"><person-group person-group-type="author"><name><surname>Roe</surname><given-names>R</given-names></name><name><surname>Poe</surname><given-names>P</given-names></name><etal/></person-group><article-title>On tests</article-title><source>Test J</source><year>2020</year></element-citation></ref>
  <ref id="r2"><mixed-citation publication-type="book"><person-group><name><surname>Moe</surname><given-names>M</given-names></name></person-group>. <source>A Book</source>. <publisher-name>Pub</publisher-name>; <year>2019</year>.</mixed-citation></ref>
 </ref-list>
</back>
</article>"##;

    #[test]
    fn jats() {
        let e = run_as(JATS.as_bytes(), "nxml").unwrap();
        let expected = "# Reading Articles Well\n\nJane Doe, The Group\n\n## Abstract\n\n### Background\n\nWe read.\n\nKeywords: reading, tests\n\n## Introduction\n\nText with a citation 1 and $x^2$.\n\n1. first\n2. second\n\n### Detail\n\nDeeper.\n\n## Results\n\nTable 1\n\nCounts.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nFigure 1\n\nA plot.\n\n## Acknowledgements\n\nThanks.\n\n## References\n\n- 1. Roe R, Poe P, et al. On tests. Test J. 2020.\n- Moe M. A Book. Pub; 2019.";
        assert_eq!(e.markdown, expected);
        assert_eq!(e.metadata.title.as_deref(), Some("Reading Articles Well"));
        assert_eq!(e.metadata.author.as_deref(), Some("Jane Doe, The Group"));
        assert!(!e.markdown.contains("Journal of Tests"));
        assert!(!e.markdown.contains("Somewhere"));
        assert_eq!(run_as(JATS.as_bytes(), "xml").unwrap().markdown, expected);
    }

    const OPML: &str = r##"<?xml version="1.0" encoding="utf-8"?>
<opml version="2.0">
 <head><title>My Feeds</title><ownerName>Ana</ownerName></head>
 <body>
  <outline text="News">
   <outline text="Example Feed" type="rss" xmlUrl="https://example.org/feed.xml" htmlUrl="https://example.org/"/>
   <outline title="Only a title"><outline text="Deep item"/></outline>
  </outline>
  <outline text="Ideas &amp; notes"/>
 </body>
</opml>"##;

    #[test]
    fn opml() {
        let e = run_as(OPML.as_bytes(), "opml").unwrap();
        assert_eq!(
            e.markdown,
            "# My Feeds\n\n- News\n  - Example Feed (<https://example.org/feed.xml>)\n  - Only a title\n    - Deep item\n- Ideas & notes"
        );
        assert_eq!(e.metadata.title.as_deref(), Some("My Feeds"));
        assert_eq!(e.metadata.author.as_deref(), Some("Ana"));
        assert_eq!(run_as(OPML.as_bytes(), "xml").unwrap().markdown, e.markdown);
    }

    const SVG: &str = r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100" viewBox="0 0 200 100">
 <title>Sales chart</title>
 <desc>Bars by quarter.</desc>
 <style>.a { fill: red; }</style>
 <script>alert("no")</script>
 <metadata><rdf>ignored</rdf></metadata>
 <g><rect x="0" y="0" width="10" height="10"/>
  <text x="10" y="20">Q1 <tspan font-weight="bold">up</tspan></text>
  <text x="10" y="40"><tspan x="10">two</tspan><tspan x="10" dy="12">lines</tspan></text>
 </g>
</svg>"##;

    #[test]
    fn svg() {
        let e = run_as(SVG.as_bytes(), "svg").unwrap();
        assert_eq!(
            e.markdown,
            "Sales chart\n\nBars by quarter.\n\nQ1 up\n\ntwo lines"
        );
        assert_eq!(e.metadata.title.as_deref(), Some("Sales chart"));
        assert_eq!(run_as(SVG.as_bytes(), "xml").unwrap().markdown, e.markdown);
        let drawing = br#"<svg xmlns="http://www.w3.org/2000/svg"><rect width="5" height="5"/><path d="M0 0L5 5"/></svg>"#;
        assert_eq!(run_as(drawing, "svg").unwrap().markdown, "");
    }

    fn fixture(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/xml")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Real public files (see tests/fixtures/xml/README.md): key phrases come out, in order,
    /// and what is metadata stays out.
    #[test]
    fn real_samples() {
        let jats = fixture("pnas-prdm9-excerpt.nxml");
        let e = run_as(&jats, "nxml").unwrap();
        crate::testing::assert_in_order(
            &e.markdown,
            &[
                "# On the origin of PRDM9-guided recombination hotspots",
                "Francisco \u{da}beda, Reinhard B\u{fc}rger, Frederic Fyon",
                "## Significance",
                "Across vertebrates, meiotic recombination is guided",
                "## Abstract",
                "Intermediate regimes allow stable coexistence of both hotspot types.",
                "Keywords: gene conversion, mutation, recombination, population genetics, mathematical biology",
                "Meiotic recombination\u{2014}the process by which genes are reshuffled",
                "genetic conflict (3\u{2013}6).",
                "Fig. 1.",
                "Types of hotspots. (A) summarizes",
                "Two-panel figure.",
                "non-PRDM9 recombination hotspots are self-preserving.",
            ],
        );
        for absent in [
            "Proc Natl Acad Sci",
            "Royal Holloway",
            "NE/T009322",
            "orcid",
            "Copyright",
        ] {
            assert!(!e.markdown.contains(absent), "{absent}");
        }
        assert_eq!(
            e.metadata.title.as_deref(),
            Some("On the origin of PRDM9-guided recombination hotspots")
        );
        assert_eq!(e.metadata.language.as_deref(), Some("en"));
        // The same file as plain .xml: recognized by its DOCTYPE and attributes.
        assert_eq!(run_as(&jats, "xml").unwrap().markdown, e.markdown);

        let svg = fixture("sea-orm-basic-schema.svg");
        let e = run_as(&svg, "svg").unwrap();
        crate::testing::assert_in_order(
            &e.markdown,
            &[
                "int",
                "id",
                "varchar(255)",
                "name",
                "cake",
                "cake_filling",
                "fruit",
                "filling",
                "filling_id:id",
            ],
        );
        assert!(!e.markdown.contains("clipPath"));
        assert!(!e.markdown.contains("Generated by"));
    }

    #[test]
    fn dialect_detection() {
        assert_eq!(detect(FB2, "xml"), Some(Dialect::FictionBook));
        assert_eq!(detect(DOCBOOK, "xml"), Some(Dialect::DocBook));
        assert_eq!(detect(JATS, "xml"), Some(Dialect::Jats));
        assert_eq!(detect(OPML, "xml"), Some(Dialect::Opml));
        assert_eq!(detect(SVG, "xml"), Some(Dialect::Svg));
        // A plain `article` is DocBook only under its own extension, JATS under .nxml.
        assert_eq!(detect("<article><title>x</title></article>", "xml"), None);
        assert_eq!(detect("<article/>", "dbk"), Some(Dialect::DocBook));
        assert_eq!(detect("<article/>", "nxml"), Some(Dialect::Jats));
        assert_eq!(detect(CATALOG, "xml"), None);
        // Not the dialect its extension says: generic XML.
        assert_eq!(detect("<catalog/>", "fb2"), None);
        assert_eq!(
            run_as(b"<catalog><t>x</t></catalog>", "fb2")
                .unwrap()
                .markdown,
            "- **t**: x"
        );
        assert_eq!(detect("not xml", "svg"), None);
    }

    #[test]
    fn dialect_errors_and_limits() {
        let err = run_as(
            b"<FictionBook><body><p>unclosed</body></FictionBook>",
            "fb2",
        )
        .unwrap_err();
        assert_eq!(err.code, "malformed_document");
        let deep = format!(
            "<svg>{}x{}</svg>",
            "<g>".repeat(10_000),
            "</g>".repeat(10_000)
        );
        assert_eq!(
            run_as(deep.as_bytes(), "svg").unwrap_err().code,
            "document_too_complex"
        );
        let limits = Limits {
            max_output_chars: 40,
            ..Limits::default()
        };
        let input = Input {
            path: Path::new("test"),
            bytes: DOCBOOK.as_bytes(),
            extension: "dbk",
        };
        let e = crate::extract(crate::Kind::Xml, input, &limits, &Control::default()).unwrap();
        assert!(e.markdown.len() <= 40, "{}", e.markdown);
        assert!(e.markdown.starts_with("# Shelf Guide"));
        assert_eq!(e.warnings.len(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
            let _ = run(&bytes);
        }

        #[test]
        fn mutated_dialects_never_panic(which in 0usize..5, cut in 0usize..4000, flips in proptest::collection::vec((0usize..4000, any::<u8>()), 0..8)) {
            let (sample, extension) = [(FB2, "fb2"), (DOCBOOK, "dbk"), (JATS, "nxml"), (OPML, "opml"), (SVG, "svg")][which];
            let mut bytes = sample.as_bytes().to_vec();
            crate::testing::mutate(&mut bytes, &flips, cut);
            let _ = run_as(&bytes, extension);
            let _ = run_as(&bytes, "xml");
        }

        #[test]
        fn mutated_real_samples_never_panic(which in 0usize..2, cut in 0.0f64..1.0, flips in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..16)) {
            let (name, extension) = [("pnas-prdm9-excerpt.nxml", "nxml"), ("sea-orm-basic-schema.svg", "svg")][which];
            let mut bytes = fixture(name);
            let len = bytes.len();
            let flips: Vec<(usize, u8)> = flips.iter().map(|(at, b)| ((*at * len as f64) as usize, *b)).collect();
            crate::testing::mutate(&mut bytes, &flips, (cut * len as f64) as usize);
            let _ = run_as(&bytes, extension);
        }

        #[test]
        fn arbitrary_bytes_as_dialects_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1024), which in 0usize..5) {
            let extension = ["fb2", "dbk", "nxml", "opml", "svg"][which];
            let _ = run_as(&bytes, extension);
        }

        #[test]
        fn mutated_sample_never_panics(cut in 0usize..1200, flips in proptest::collection::vec((0usize..1200, any::<u8>()), 0..6)) {
            let mut bytes = CATALOG.as_bytes().to_vec();
            crate::testing::mutate(&mut bytes, &flips, cut);
            let _ = run(&bytes);
        }
    }
}
