//! The small element tree the XML dialects (FictionBook, DocBook, JATS, OPML, SVG) are read
//! into, and the block renderer they share: each dialect says what role its elements play
//! (section, title, paragraph, list, code, table, quote...) and the renderer writes Markdown.
//!
//! The tree is built with the same quick-xml reader setup as the generic XML extractor: the
//! DOCTYPE is never read, only the predefined entities and character references are decoded,
//! so no external entity is resolved and no entity expands. Its depth is capped (the renderer
//! recurses once per level), and the deadline is checked while it is built and rendered.

use std::borrow::Cow;

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

use crate::markdown;
use crate::{Control, ExtractError, Extraction, Limits, Metadata};

/// The deepest tree built, whatever `limits.max_nesting_depth` says: the renderer recurses
/// once per level, so this bounds its stack.
const MAX_TREE_DEPTH: usize = 512;
/// Events read, or elements rendered, between two checks of the deadline.
const CHECK_EVERY: usize = 256;

/// One element: its local name (namespace prefix dropped), attributes by local name, and
/// children in document order.
#[derive(Debug, Default)]
pub(super) struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Child>,
}

#[derive(Debug)]
pub(super) enum Child {
    Element(Element),
    Text(String),
}

impl Element {
    fn from_start(start: &BytesStart<'_>) -> Self {
        let attrs = start
            .attributes()
            .filter_map(Result::ok)
            .map(|attribute| {
                let key = attribute.key.local_name().as_ref().to_string();
                let value = attribute
                    .normalized_value(XmlVersion::Implicit1_0)
                    .unwrap_or_else(|_| Cow::Owned(attribute.value.to_string()))
                    .into_owned();
                (key, value)
            })
            .collect();
        Element {
            name: start.local_name().as_ref().to_string(),
            attrs,
            children: Vec::new(),
        }
    }

    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The child elements, in order.
    pub fn elements(&self) -> impl Iterator<Item = &Element> {
        self.children.iter().filter_map(|c| match c {
            Child::Element(e) => Some(e),
            Child::Text(_) => None,
        })
    }

    pub fn child(&self, name: &str) -> Option<&Element> {
        self.elements().find(|e| e.name == name)
    }

    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> {
        self.elements().filter(move |e| e.name == name)
    }

    /// The text of the first child named `name`, unless it has none.
    pub fn child_text(&self, name: &str) -> Option<String> {
        self.child(name)
            .map(Element::text)
            .filter(|t| !t.is_empty())
    }

    /// The texts of the children named `parts` (in that order, those that have text) joined
    /// by spaces, as a person's name is built from its parts; `None` when none has text.
    pub fn joined_parts(&self, parts: &[&str]) -> Option<String> {
        let texts: Vec<String> = parts
            .iter()
            .filter_map(|part| self.child_text(part))
            .collect();
        (!texts.is_empty()).then(|| texts.join(" "))
    }

    /// The element's text on one line: whitespace collapsed, a space between two elements
    /// that touch (`<p>A</p><p>B</p>`, `<surname>Doe</surname><given-names>J`), no space
    /// around inline markup inside words.
    pub fn text(&self) -> String {
        let mut out = String::new();
        self.text_into(&mut out, &|_, _| false);
        markdown::collapse_whitespace(&out)
    }

    /// [`Element::text`] without the elements `skip` (given an element and its parent) says
    /// to leave out.
    pub fn text_skipping(&self, skip: &dyn Fn(&Element, &Element) -> bool) -> String {
        let mut out = String::new();
        self.text_into(&mut out, skip);
        markdown::collapse_whitespace(&out)
    }

    fn text_into(&self, out: &mut String, skip: &dyn Fn(&Element, &Element) -> bool) {
        let mut last_was_element = false;
        for child in &self.children {
            match child {
                Child::Text(t) => {
                    out.push_str(t);
                    last_was_element = false;
                }
                Child::Element(e) if skip(e, self) => {}
                Child::Element(e) => {
                    let mut inner = String::new();
                    e.text_into(&mut inner, skip);
                    // Empty elements (`<xref/>`) neither separate nor count as touching.
                    if inner.is_empty() {
                        continue;
                    }
                    if last_was_element {
                        out.push(' ');
                    }
                    out.push_str(&inner);
                    last_was_element = true;
                }
            }
        }
    }

    /// All the text inside, as written (for code listings).
    pub fn raw_text(&self) -> String {
        let mut out = String::new();
        self.raw_into(&mut out);
        out
    }

    fn raw_into(&self, out: &mut String) {
        for child in &self.children {
            match child {
                Child::Text(t) => out.push_str(t),
                Child::Element(e) => e.raw_into(out),
            }
        }
    }
}

/// The root element of `text`. Errors are the generic extractor's: the position and kind,
/// never the document's text.
pub(super) fn parse(
    text: &str,
    limits: &Limits,
    control: &Control,
) -> Result<Element, ExtractError> {
    let max_depth = limits.max_nesting_depth.min(MAX_TREE_DEPTH);
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut events = 0usize;
    loop {
        events += 1;
        if events.is_multiple_of(CHECK_EVERY) {
            control.check()?;
        }
        let event = reader
            .read_event()
            .map_err(|e| super::position_error(text, reader.error_position(), &e))?;
        match event {
            Event::Start(start) => {
                if stack.len() >= max_depth {
                    return Err(ExtractError::too_complex(format!(
                        "XML elements nest deeper than {max_depth} levels"
                    )));
                }
                stack.push(Element::from_start(&start));
            }
            Event::Empty(start) => {
                let element = Element::from_start(&start);
                attach(&mut stack, &mut root, element);
            }
            Event::End(_) => {
                if let Some(element) = stack.pop() {
                    attach(&mut stack, &mut root, element);
                }
            }
            Event::Text(t) => push_text(&mut stack, &t.xml_content(XmlVersion::Implicit1_0)),
            Event::CData(t) => push_text(&mut stack, &t.xml_content(XmlVersion::Implicit1_0)),
            Event::GeneralRef(r) => {
                if let Some(c) = crate::ooxml::resolve_reference(&r) {
                    push_text(&mut stack, c.encode_utf8(&mut [0; 4]));
                }
            }
            Event::Eof => break,
            Event::Comment(_) | Event::PI(_) | Event::Decl(_) | Event::DocType(_) => {}
        }
    }
    if !stack.is_empty() {
        return Err(ExtractError::malformed(
            "invalid XML: the document ends before all its elements are closed",
        ));
    }
    root.ok_or_else(|| ExtractError::malformed("invalid XML: the file has no element"))
}

/// Adds a finished element to its parent, or makes it the root (the first one wins).
fn attach(stack: &mut [Element], root: &mut Option<Element>, element: Element) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(Child::Element(element)),
        None => {
            root.get_or_insert(element);
        }
    }
}

fn push_text(stack: &mut [Element], text: &str) {
    let Some(parent) = stack.last_mut() else {
        return;
    };
    if let Some(Child::Text(previous)) = parent.children.last_mut() {
        previous.push_str(text);
    } else {
        parent.children.push(Child::Text(text.to_string()));
    }
}

/// What an element is to the renderer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Not read (binary data, metadata read elsewhere, index terms).
    Skip,
    /// Its text is part of the surrounding paragraph.
    Inline,
    /// A paragraph, or a container of blocks: its text and inline children are paragraphs,
    /// its block children are rendered in turn.
    Block,
    /// A container whose `Title` child is a heading one level below the enclosing one.
    Section,
    /// A heading at the level of the enclosing section.
    Title,
    List {
        ordered: bool,
    },
    /// An item of a list: its blocks, the first after the marker.
    Item,
    /// Preformatted text, fenced.
    Code,
    /// A table of rows (`row`, `tr`) and cells (`entry`, `td`, `th`).
    Table,
    /// Blocks quoted with `> `.
    Quote,
    /// Each child on a line of its own, in one block (verse).
    Lines,
    /// Rendered by the dialect's [`Rules::custom`].
    Custom,
}

/// What a dialect tells the renderer.
pub(super) trait Rules {
    /// The role of `element`, whose parent is `parent`.
    fn role(&self, element: &Element, parent: &Element) -> Role;

    /// Renders an element of role [`Role::Custom`].
    fn custom(
        &self,
        _renderer: &mut Renderer<'_>,
        _element: &Element,
        _level: usize,
        _out: &mut Vec<String>,
    ) -> Result<(), ExtractError> {
        Ok(())
    }
}

/// The metadata's author: the names, comma-separated, or `None` when there are none.
pub(super) fn byline(names: &[String]) -> Option<String> {
    (!names.is_empty()).then(|| names.join(", "))
}

/// Renders a dialect's document: `write` writes its blocks with a renderer following `rules`
/// and answers its metadata; the blocks are then joined and cut at the output limit.
pub(super) fn render(
    rules: &dyn Rules,
    limits: &Limits,
    control: &Control,
    write: impl FnOnce(&mut Renderer<'_>, &mut Vec<String>) -> Result<Metadata, ExtractError>,
) -> Result<Extraction, ExtractError> {
    let mut renderer = Renderer::new(rules, limits, control);
    let mut out = Vec::new();
    let metadata = write(&mut renderer, &mut out)?;
    let markdown = renderer.finish(out);
    Ok(Extraction {
        markdown,
        warnings: renderer.warnings,
        metadata,
        ..Extraction::default()
    })
}

/// Writes blocks of Markdown from a tree, within the output and table limits.
pub(super) struct Renderer<'a> {
    pub rules: &'a dyn Rules,
    limits: &'a Limits,
    control: &'a Control,
    visited: usize,
    size: usize,
    pub warnings: Vec<String>,
}

impl<'a> Renderer<'a> {
    pub fn new(rules: &'a dyn Rules, limits: &'a Limits, control: &'a Control) -> Self {
        Renderer {
            rules,
            limits,
            control,
            visited: 0,
            size: 0,
            warnings: Vec::new(),
        }
    }

    /// True once the blocks written reach the output limit: rendering stops.
    pub fn full(&self) -> bool {
        self.size > self.limits.max_output_chars
    }

    pub fn tick(&mut self) -> Result<(), ExtractError> {
        self.visited += 1;
        if self.visited.is_multiple_of(CHECK_EVERY) {
            self.control.check()?;
        }
        Ok(())
    }

    /// Adds a block (counted against the output limit).
    pub fn push(&mut self, out: &mut Vec<String>, block: String) {
        if block.trim().is_empty() || self.full() {
            return;
        }
        self.size += block.len() + 2;
        out.push(block);
    }

    /// The blocks joined into the document's Markdown, cut at the output limit.
    pub fn finish(&mut self, blocks: Vec<String>) -> String {
        let mut text = blocks.join("\n\n");
        let max = self.limits.max_output_chars;
        if text.len() > max {
            let mut cut = max;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            self.warnings
                .push("the document was cut short at the output limit".to_string());
        }
        text
    }

    /// The text of `element` on one line, without the elements its dialect skips.
    pub fn text(&self, element: &Element) -> String {
        element.text_skipping(&|e, parent| self.rules.role(e, parent) == Role::Skip)
    }

    /// Renders the children of `element` as blocks at heading level `level`.
    pub fn blocks(
        &mut self,
        element: &Element,
        level: usize,
        out: &mut Vec<String>,
    ) -> Result<(), ExtractError> {
        let mut pending = String::new();
        let mut last_was_element = false;
        for child in &element.children {
            if self.full() {
                return Ok(());
            }
            match child {
                Child::Text(t) => {
                    pending.push_str(t);
                    last_was_element = false;
                }
                Child::Element(e) => {
                    self.tick()?;
                    match self.rules.role(e, element) {
                        Role::Skip => {}
                        Role::Inline => {
                            let text = self.text(e);
                            if text.is_empty() {
                                continue;
                            }
                            if last_was_element {
                                pending.push(' ');
                            }
                            pending.push_str(&text);
                            last_was_element = true;
                        }
                        role => {
                            self.flush(&mut pending, out);
                            last_was_element = false;
                            self.block(e, role, level, out)?;
                        }
                    }
                }
            }
        }
        self.flush(&mut pending, out);
        Ok(())
    }

    fn flush(&mut self, pending: &mut String, out: &mut Vec<String>) {
        let text = markdown::collapse_whitespace(&std::mem::take(pending));
        self.push(out, text);
    }

    /// Renders one element of a block role.
    pub fn block(
        &mut self,
        element: &Element,
        role: Role,
        level: usize,
        out: &mut Vec<String>,
    ) -> Result<(), ExtractError> {
        match role {
            Role::Skip => {}
            Role::Inline => {
                let text = self.text(element);
                self.push(out, text);
            }
            Role::Block | Role::Item => self.blocks(element, level, out)?,
            Role::Section => self.blocks(element, level + 1, out)?,
            Role::Title => {
                let text = self.text(element);
                if !text.is_empty() {
                    self.push(out, markdown::heading(level, &text));
                }
            }
            Role::List { ordered } => self.list(element, ordered, level, out)?,
            Role::Code => {
                let code = element.raw_text();
                let code = code.trim_matches('\n').trim_end();
                if !code.trim().is_empty() {
                    let fence = if code.contains("```") { "~~~~" } else { "```" };
                    let language = element
                        .attr("language")
                        .filter(|l| l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
                        .unwrap_or("");
                    self.push(out, format!("{fence}{language}\n{code}\n{fence}"));
                }
            }
            Role::Table => self.table(element, level, out)?,
            Role::Quote => {
                let mut inner = Vec::new();
                let before = self.size;
                self.blocks(element, level, &mut inner)?;
                // Counted once, as the quote they are joined into.
                self.size = before;
                if !inner.is_empty() {
                    self.push(out, markdown::quote(&inner.join("\n\n")));
                }
            }
            Role::Lines => {
                let mut lines = Vec::new();
                for child in element.elements() {
                    self.tick()?;
                    match self.rules.role(child, element) {
                        Role::Skip => {}
                        Role::Title => self.block(child, Role::Title, level, out)?,
                        _ => {
                            let text = self.text(child);
                            if !text.is_empty() {
                                lines.push(text);
                            }
                        }
                    }
                }
                self.push(out, lines.join("\n"));
            }
            Role::Custom => {
                let rules = self.rules;
                rules.custom(self, element, level, out)?;
            }
        }
        Ok(())
    }

    /// A list: each item's blocks, the first after `- ` (or `1. `), the rest indented under
    /// it, items on consecutive lines. Children that are not items are blocks before it.
    fn list(
        &mut self,
        element: &Element,
        ordered: bool,
        level: usize,
        out: &mut Vec<String>,
    ) -> Result<(), ExtractError> {
        let mut items = Vec::new();
        for child in element.elements() {
            self.tick()?;
            let role = self.rules.role(child, element);
            if role != Role::Item {
                if !items.is_empty() {
                    self.push(out, std::mem::take(&mut items).join("\n"));
                }
                self.block(child, role, level, out)?;
                continue;
            }
            let mut inner = Vec::new();
            let before = self.size;
            self.blocks(child, level, &mut inner)?;
            // Counted once, as the list they are joined into.
            self.size = before;
            if inner.is_empty() {
                continue;
            }
            let marker = if ordered {
                format!("{}. ", items.len() + 1)
            } else {
                "- ".to_string()
            };
            items.push(list_item(&marker, &inner));
        }
        self.push(out, items.join("\n"));
        Ok(())
    }

    /// A Markdown table when the rows hold only text; otherwise the cells as blocks.
    fn table(
        &mut self,
        element: &Element,
        level: usize,
        out: &mut Vec<String>,
    ) -> Result<(), ExtractError> {
        let mut rows_found = Vec::new();
        collect_rows(element, &mut rows_found);
        let simple = !rows_found.is_empty()
            && rows_found.iter().flat_map(|row| cells(row)).all(|cell| {
                !has_descendant(
                    cell,
                    &[
                        "table",
                        "informaltable",
                        "itemizedlist",
                        "orderedlist",
                        "list",
                        "ul",
                        "ol",
                    ],
                )
            });
        if !simple {
            return self.blocks(element, level, out);
        }
        // Titles and captions of the table come first, as paragraphs.
        for child in element.elements() {
            if matches!(child.name.as_str(), "title" | "caption") {
                let text = self.text(child);
                self.push(out, text);
            }
        }
        let mut rows = Vec::new();
        for row in rows_found {
            self.tick()?;
            rows.push(cells(row).map(|cell| self.text(cell)).collect::<Vec<_>>());
        }
        rows.retain(|row| !row.is_empty());
        if rows.len() > self.limits.max_table_rows + 1 {
            rows.truncate(self.limits.max_table_rows + 1);
            self.warnings.push(format!(
                "a table was cut at {} rows",
                self.limits.max_table_rows
            ));
        }
        if rows.iter().any(|r| r.len() > self.limits.max_table_columns) {
            for row in &mut rows {
                row.truncate(self.limits.max_table_columns);
            }
            self.warnings.push(format!(
                "a table was cut at {} columns",
                self.limits.max_table_columns
            ));
        }
        let table = markdown::table(&rows);
        self.push(out, table.trim_end().to_string());
        Ok(())
    }
}

/// An item's blocks after a marker, continuation lines indented to the marker's width.
pub(super) fn list_item(marker: &str, blocks: &[String]) -> String {
    let indent = " ".repeat(marker.len());
    let mut text = String::new();
    for (i, line) in blocks.join("\n").lines().enumerate() {
        if i == 0 {
            text.push_str(marker);
            text.push_str(line);
        } else {
            text.push('\n');
            if !line.is_empty() {
                text.push_str(&indent);
                text.push_str(line);
            }
        }
    }
    text
}

/// The rows of a table in order, not those of tables nested in its cells.
fn collect_rows<'a>(element: &'a Element, rows: &mut Vec<&'a Element>) {
    for child in element.elements() {
        match child.name.as_str() {
            "row" | "tr" => rows.push(child),
            "table" | "informaltable" | "entrytbl" => {}
            _ => collect_rows(child, rows),
        }
    }
}

fn cells(row: &Element) -> impl Iterator<Item = &Element> {
    row.elements()
        .filter(|c| matches!(c.name.as_str(), "entry" | "td" | "th" | "entrytbl"))
}

fn has_descendant(element: &Element, names: &[&str]) -> bool {
    element
        .elements()
        .any(|c| names.contains(&c.name.as_str()) || has_descendant(c, names))
}
