//! XML helpers shared by the office extractors (DOCX, PPTX, ODF): a small element tree built
//! under a nesting cap, with entity resolution limited to the predefined entities and
//! character references, attribute lookup by local name, and the Dublin Core metadata both
//! OOXML (`docProps/core.xml`) and ODF (`meta.xml`) carry.
//!
//! A tree rather than a stream because office formats need look-ahead (a slide's title is
//! known from its placeholder, a table's spans from its cells); its depth is capped at parse
//! time, so every walk over it is bounded by `limits.max_nesting_depth` too.

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use crate::zipsafe::SafeZip;
use crate::{Control, ExtractError, Limits, Metadata};

/// One XML element: its local name, its attributes (qualified names kept) and its children.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Element(Element),
    Text(String),
}

/// How many events pass between two checks of the deadline.
const CHECK_EVERY: usize = 512;

/// The part of a qualified name after its prefix.
pub fn local_name(qualified: &str) -> &str {
    qualified
        .rsplit_once(':')
        .map_or(qualified, |(_, local)| local)
}

/// Replacement of a quick-xml entity reference event (`&amp;`, `&#65;`): see
/// [`resolve_entity`].
pub fn resolve_reference(reference: &quick_xml::events::BytesRef<'_>) -> Option<char> {
    resolve_entity(&reference.xml_content(quick_xml::XmlVersion::Implicit1_0))
}

/// Replacement of a general entity reference: the five predefined entities and character
/// references. Anything else (a DTD's own entities) is dropped: external entities are never
/// resolved.
pub fn resolve_entity(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code).filter(|c| *c != '\0')
        }
    }
}

/// Parses `xml` into its root element. `what` names the part in errors (`"word/document.xml"`).
pub fn parse(
    xml: &str,
    what: &str,
    limits: &Limits,
    control: &Control,
) -> Result<Element, ExtractError> {
    let mut reader = Reader::from_str(xml);
    let config = reader.config_mut();
    config.check_end_names = true;
    let mut stack: Vec<Element> = vec![Element::default()];
    let mut events = 0usize;
    loop {
        events += 1;
        if events.is_multiple_of(CHECK_EVERY) {
            control.check()?;
        }
        let event = reader
            .read_event()
            .map_err(|e| ExtractError::malformed(format!("{what} is not well-formed XML: {e}")))?;
        match event {
            Event::Start(start) => {
                if stack.len() > limits.max_nesting_depth {
                    return Err(ExtractError::too_complex(format!(
                        "{what} nests elements deeper than {} levels",
                        limits.max_nesting_depth
                    )));
                }
                stack.push(element_of(&start, what)?);
            }
            Event::Empty(start) => {
                let element = element_of(&start, what)?;
                push_child(&mut stack, Node::Element(element));
            }
            Event::End(_) => {
                if stack.len() < 2 {
                    return Err(ExtractError::malformed(format!(
                        "{what} closes an element it never opened"
                    )));
                }
                if let Some(done) = stack.pop() {
                    push_child(&mut stack, Node::Element(done));
                }
            }
            Event::Text(text) => {
                let text = text.xml10_content();
                push_text(&mut stack, &text);
            }
            Event::CData(data) => {
                let text = data.into_inner().into_owned();
                push_text(&mut stack, &text);
            }
            Event::GeneralRef(reference) => {
                let name = reference.xml10_content();
                if let Some(c) = resolve_entity(&name) {
                    push_text(&mut stack, c.encode_utf8(&mut [0u8; 4]));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if stack.len() != 1 {
        return Err(ExtractError::malformed(format!(
            "{what} ends before its elements are closed"
        )));
    }
    let document = stack.pop().unwrap_or_default();
    document
        .children
        .into_iter()
        .find_map(|node| match node {
            Node::Element(e) => Some(e),
            Node::Text(_) => None,
        })
        .ok_or_else(|| ExtractError::malformed(format!("{what} has no root element")))
}

fn element_of(start: &BytesStart<'_>, what: &str) -> Result<Element, ExtractError> {
    let name = start.name().as_ref().to_string();
    let mut attrs = Vec::new();
    for attr in start.attributes() {
        let attr = attr.map_err(|e| {
            ExtractError::malformed(format!("{what} has a malformed attribute: {e}"))
        })?;
        let key = attr.key.as_ref().to_string();
        let value = attr
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map(|v| v.into_owned())
            .unwrap_or_else(|_| attr.value.clone().into_owned());
        attrs.push((key, value));
    }
    Ok(Element {
        name: local_name(&name).to_string(),
        attrs,
        children: Vec::new(),
    })
}

fn push_child(stack: &mut [Element], node: Node) {
    if let Some(parent) = stack.last_mut() {
        parent.children.push(node);
    }
}

fn push_text(stack: &mut [Element], text: &str) {
    if let Some(parent) = stack.last_mut() {
        if let Some(Node::Text(last)) = parent.children.last_mut() {
            last.push_str(text);
        } else {
            parent.children.push(Node::Text(text.to_string()));
        }
    }
}

impl Element {
    /// The value of the first attribute whose local name is `local`.
    pub fn attr(&self, local: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(key, _)| local_name(key) == local)
            .map(|(_, value)| value.as_str())
    }

    /// The value of the attribute named exactly `qualified` (`r:id`, where an unprefixed `id`
    /// sits on the same element).
    pub fn attr_exact(&self, qualified: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(key, _)| key == qualified)
            .map(|(_, value)| value.as_str())
    }

    /// The child elements, in order.
    pub fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|node| match node {
            Node::Element(e) => Some(e),
            Node::Text(_) => None,
        })
    }

    /// The child elements named `local`.
    pub fn children_named<'a>(&'a self, local: &'a str) -> impl Iterator<Item = &'a Element> {
        self.elements().filter(move |e| e.name == local)
    }

    /// The first child element named `local`.
    pub fn child(&self, local: &str) -> Option<&Element> {
        self.elements().find(|e| e.name == local)
    }

    /// The first element named `local` at any depth (self excluded), document order.
    pub fn find(&self, local: &str) -> Option<&Element> {
        for child in self.elements() {
            if child.name == local {
                return Some(child);
            }
            if let Some(found) = child.find(local) {
                return Some(found);
            }
        }
        None
    }

    /// Every element named `local` at any depth, document order, not looking inside matches.
    pub fn find_all<'a>(&'a self, local: &str, out: &mut Vec<&'a Element>) {
        for child in self.elements() {
            if child.name == local {
                out.push(child);
            } else {
                child.find_all(local, out);
            }
        }
    }

    /// All text below this element, concatenated.
    pub fn text(&self) -> String {
        let mut out = String::new();
        self.collect_text(&mut out);
        out
    }

    fn collect_text(&self, out: &mut String) {
        for node in &self.children {
            match node {
                Node::Text(t) => out.push_str(t),
                Node::Element(e) => e.collect_text(out),
            }
        }
    }
}

/// Reads and parses a ZIP entry, or `None` when the archive has no such entry.
pub fn read_xml(
    zip: &mut SafeZip<'_>,
    name: &str,
    limits: &Limits,
    control: &Control,
) -> Result<Option<Element>, ExtractError> {
    match zip.read_text(name)? {
        Some(text) => parse(&text, name, limits, control).map(Some),
        None => Ok(None),
    }
}

/// Title, author and language from a Dublin Core block (`docProps/core.xml`, ODF `meta.xml`).
/// A part that does not parse gives empty metadata: the text matters more than its labels.
pub fn dublin_core(root: &Element) -> Metadata {
    let first = |names: &[&str]| {
        names.iter().find_map(|name| {
            root.find(name)
                .map(|e| crate::markdown::collapse_whitespace(&e.text()))
                .filter(|t| !t.is_empty())
        })
    };
    Metadata {
        title: first(&["title"]),
        author: first(&["creator", "initial-creator"]),
        language: first(&["language"]),
        ..Metadata::default()
    }
}

/// The targets of a `.rels` part by relationship id, with their types.
pub struct Relationships {
    entries: Vec<(String, String, String)>,
}

impl Relationships {
    pub fn from_element(root: Option<&Element>) -> Self {
        let entries = root
            .map(|root| {
                root.children_named("Relationship")
                    .filter(|r| r.attr("TargetMode") != Some("External"))
                    .map(|r| {
                        (
                            r.attr("Id").unwrap_or_default().to_string(),
                            r.attr("Type").unwrap_or_default().to_string(),
                            r.attr("Target").unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Relationships { entries }
    }

    /// The target of relationship `id`.
    pub fn target(&self, id: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(rid, _, _)| rid == id)
            .map(|(_, _, target)| target.as_str())
    }

    /// The first target whose type ends with `/suffix` (`officeDocument`, `notesSlide`).
    pub fn target_of_type(&self, suffix: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(_, kind, _)| kind.rsplit('/').next() == Some(suffix))
            .map(|(_, _, target)| target.as_str())
    }
}

/// The archive path of a relationship target: `base_dir` is the folder of the part the
/// `.rels` belongs to (`ppt/slides`); `..` segments are resolved, a leading `/` is absolute.
pub fn resolve_target(base_dir: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        base_dir.split('/').filter(|p| !p.is_empty()).collect()
    };
    for segment in target.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// The `.rels` part of `part` (`ppt/slides/slide1.xml` → `ppt/slides/_rels/slide1.xml.rels`)
/// and the folder of `part`.
pub fn rels_path(part: &str) -> (String, String) {
    match part.rsplit_once('/') {
        Some((dir, file)) => (format!("{dir}/_rels/{file}.rels"), dir.to_string()),
        None => (format!("_rels/{part}.rels"), String::new()),
    }
}

/// A DrawingML chart (`c:chartSpace`) as Markdown: its title, its kind ("Bar chart") and its
/// cached data as a table of categories by series.
pub fn chart_markdown(root: &Element) -> String {
    let mut out = String::new();
    let Some(chart) = root.child("chart") else {
        return out;
    };
    if let Some(title) = chart.child("title") {
        let mut texts = Vec::new();
        title.find_all("t", &mut texts);
        let title: String = texts.iter().map(|t| t.text()).collect();
        crate::markdown::push_block(&mut out, &crate::markdown::collapse_whitespace(&title));
    }
    let Some(plot) = chart.child("plotArea") else {
        return out;
    };
    for kind in plot.elements().filter(|e| e.name.ends_with("Chart")) {
        let label = kind.name.trim_end_matches("Chart").replace("3D", " 3D");
        let mut label_text = String::new();
        let mut chars = label.chars();
        if let Some(first) = chars.next() {
            label_text.extend(first.to_uppercase());
            label_text.push_str(chars.as_str());
        }
        crate::markdown::push_block(&mut out, &format!("{label_text} chart"));
        let series: Vec<&Element> = kind.children_named("ser").collect();
        let mut header = vec![String::new()];
        let mut categories: Vec<String> = Vec::new();
        let mut columns: Vec<Vec<String>> = Vec::new();
        for ser in &series {
            header.push(
                ser.child("tx")
                    .map(|t| {
                        let mut values = Vec::new();
                        t.find_all("v", &mut values);
                        let text: String = values.iter().map(|v| v.text()).collect();
                        crate::markdown::collapse_whitespace(&text)
                    })
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| format!("Series {}", header.len())),
            );
            let points = |name: &str| -> Vec<String> {
                let mut pts = Vec::new();
                if let Some(part) = ser
                    .child(name)
                    .or_else(|| ser.child(if name == "cat" { "xVal" } else { "yVal" }))
                {
                    part.find_all("pt", &mut pts);
                }
                pts.iter()
                    .map(|p| p.child("v").map(|v| v.text()).unwrap_or_default())
                    .collect()
            };
            let cats = points("cat");
            if categories.len() < cats.len() {
                categories = cats;
            }
            columns.push(points("val"));
        }
        let rows = categories
            .len()
            .max(columns.iter().map(Vec::len).max().unwrap_or(0));
        let mut table = vec![header];
        for i in 0..rows.min(10_000) {
            let mut row = vec![categories.get(i).cloned().unwrap_or_default()];
            row.extend(
                columns
                    .iter()
                    .map(|c| c.get(i).cloned().unwrap_or_default()),
            );
            table.push(row);
        }
        if rows > 0 {
            crate::markdown::push_block(&mut out, &crate::markdown::table(&table));
        }
    }
    out
}

/// Test support shared by the office extractors' tests: ZIP building, corpus access,
/// mutation of real files.
#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(xml: &str) -> Element {
        parse(xml, "test.xml", &Limits::default(), &Control::default()).unwrap()
    }

    #[test]
    fn builds_a_tree_with_local_names_and_entities() {
        let root = parse_ok(
            r#"<?xml version="1.0"?><w:doc xmlns:w="x"><w:p w:val="a&amp;b">x &lt; y&#65;&#x42;&foo;</w:p><w:br/></w:doc>"#,
        );
        assert_eq!(root.name, "doc");
        let p = root.child("p").unwrap();
        assert_eq!(p.attr("val"), Some("a&b"));
        assert_eq!(p.text(), "x < yAB");
        assert!(root.child("br").is_some());
    }

    #[test]
    fn deep_nesting_is_too_complex() {
        let xml = format!("{}{}", "<a>".repeat(400), "</a>".repeat(400));
        let err = parse(&xml, "t", &Limits::default(), &Control::default()).unwrap_err();
        assert_eq!(err.code, "document_too_complex");
    }

    #[test]
    fn broken_xml_is_malformed() {
        for xml in ["<a><b></a>", "<a><b>", "", "<a></a></b>"] {
            let err = parse(xml, "t", &Limits::default(), &Control::default()).unwrap_err();
            assert_eq!(err.code, "malformed_document", "{xml}");
        }
    }

    #[test]
    fn targets_resolve_against_their_folder() {
        assert_eq!(
            resolve_target("ppt/slides", "../notesSlides/n1.xml"),
            "ppt/notesSlides/n1.xml"
        );
        assert_eq!(
            resolve_target("ppt", "/ppt/slides/s.xml"),
            "ppt/slides/s.xml"
        );
        assert_eq!(
            rels_path("ppt/presentation.xml").0,
            "ppt/_rels/presentation.xml.rels"
        );
    }
}
