//! Generic XML: the readable text of elements as Markdown, read with quick-xml's streaming
//! reader.
//!
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

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let (text, encoding) = decode(input.bytes)?;
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

/// Text of the file: a byte-order mark wins, then the declaration's encoding, then detection.
fn decode(bytes: &[u8]) -> Result<(String, &'static str), ExtractError> {
    if Encoding::for_bom(bytes).is_none()
        && let Some(encoding) = declared_encoding(bytes)
        && encoding != encoding_rs::UTF_8
    {
        let (text, _) = encoding.decode_without_bom_handling(bytes);
        return Ok((text.into_owned(), encoding.name()));
    }
    let decoded = crate::plain::decode(bytes)?;
    let text = decoded.text.trim_start_matches('\u{feff}').to_string();
    Ok((text, decoded.encoding))
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
            let _ = run(&bytes);
        }

        #[test]
        fn mutated_sample_never_panics(cut in 0usize..1200, flips in proptest::collection::vec((0usize..1200, any::<u8>()), 0..6)) {
            let mut bytes = CATALOG.as_bytes().to_vec();
            crate::testing::mutate(&mut bytes, &flips, cut);
            let _ = run(&bytes);
        }
    }
}
