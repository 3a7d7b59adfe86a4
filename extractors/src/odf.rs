//! OpenDocument text and presentations (ODT, ODP): `content.xml` as Markdown, with headings
//! from outline levels and heading styles, nested lists, tables with spans, charts' data,
//! notes appended at the end, and for presentations each page's title as a heading followed
//! by its frames and speaker notes. Embedded formula objects (MathML, `Object N/content.xml`)
//! are written as TeX math: `$...$` in a paragraph, `$$...$$` on their own. Metadata from
//! `meta.xml`.

use std::collections::HashMap;

use crate::markdown;
use crate::markdown::Blocks;
use crate::ooxml::{self, Element, Node};
use crate::zipsafe::SafeZip;
use crate::{Control, ExtractError, Extraction, Input, Limits};

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let mut zip = SafeZip::open(input.bytes, "OpenDocument", limits)?;
    let mimetype = zip.read_text("mimetype")?.unwrap_or_default();
    let presentation = if mimetype.trim().is_empty() {
        input.extension == "odp"
    } else {
        mimetype.contains("presentation")
    };
    let content = ooxml::read_xml(&mut zip, "content.xml", limits, control)?
        .ok_or_else(|| ExtractError::malformed("the OpenDocument file has no content.xml"))?;
    let named_styles = ooxml::read_xml(&mut zip, "styles.xml", limits, control)
        .ok()
        .flatten();
    let metadata = ooxml::read_xml(&mut zip, "meta.xml", limits, control)
        .ok()
        .flatten()
        .map(|meta| ooxml::dublin_core(&meta))
        .unwrap_or_default();
    let styles = Styles::new(&content, named_styles.as_ref());
    let body = content
        .child("body")
        .ok_or_else(|| ExtractError::malformed("the OpenDocument content has no body"))?;
    let mut writer = Writer {
        zip,
        styles,
        limits,
        control,
        notes: Vec::new(),
        formulas: Vec::new(),
        ticks: 0,
        cell_depth: 0,
        warnings: Vec::new(),
    };
    let mut out = Blocks::default();
    if presentation {
        let slides = body.child("presentation").unwrap_or(body);
        for page in slides.children_named("page") {
            control.check()?;
            writer.page(page, &mut out)?;
        }
    } else {
        let text = body.child("text").unwrap_or(body);
        writer.blocks(text, 0, &mut out)?;
    }
    let notes = std::mem::take(&mut writer.notes);
    for (i, note) in notes.iter().enumerate() {
        out.push(&format!("[^{}]: {note}", i + 1), false);
    }
    let mut markdown = out.text;
    if markdown.len() > limits.max_output_chars {
        let mut cut = limits.max_output_chars;
        while !markdown.is_char_boundary(cut) {
            cut -= 1;
        }
        markdown.truncate(cut);
        writer
            .warnings
            .push("the document's text was cut short at the output limit".to_string());
    }
    Ok(Extraction {
        markdown,
        metadata,
        warnings: writer.warnings,
        ..Extraction::default()
    })
}

/// What the document's styles say about headings and lists.
struct Styles {
    /// Paragraph style → parent style.
    parent: HashMap<String, String>,
    /// Paragraph style → outline level (heading styles carry one).
    outline: HashMap<String, usize>,
    /// List style → levels (1-based) that are numbered rather than bulleted.
    numbered_levels: HashMap<String, Vec<usize>>,
}

impl Styles {
    fn new(content: &Element, named: Option<&Element>) -> Self {
        let mut styles = Styles {
            parent: HashMap::new(),
            outline: HashMap::new(),
            numbered_levels: HashMap::new(),
        };
        let containers = [
            content.child("automatic-styles"),
            named.and_then(|n| n.child("styles")),
            named.and_then(|n| n.child("automatic-styles")),
        ];
        for container in containers.into_iter().flatten() {
            for style in container.children_named("style") {
                let Some(name) = style.attr("name") else {
                    continue;
                };
                if let Some(parent) = style.attr("parent-style-name") {
                    styles.parent.insert(name.to_string(), parent.to_string());
                }
                let level = style
                    .attr("default-outline-level")
                    .and_then(|l| l.parse::<usize>().ok())
                    .or(match name {
                        "Title" => Some(1),
                        "Subtitle" => Some(2),
                        _ => None,
                    });
                if let Some(level) = level {
                    styles.outline.insert(name.to_string(), level);
                }
            }
            for list in container.children_named("list-style") {
                let Some(name) = list.attr("name") else {
                    continue;
                };
                let numbered = list
                    .children_named("list-level-style-number")
                    .filter(|l| l.attr("num-format").is_some_and(|f| !f.is_empty()))
                    .filter_map(|l| l.attr("level").and_then(|v| v.parse().ok()))
                    .collect();
                styles.numbered_levels.insert(name.to_string(), numbered);
            }
        }
        styles
    }

    /// The heading level of paragraphs of `style`, through its parents (bounded: chains may
    /// loop).
    fn heading_level(&self, style: &str) -> Option<usize> {
        let mut name = style;
        for _ in 0..16 {
            if let Some(level) = self.outline.get(name) {
                return Some(*level);
            }
            if name == "Title" {
                return Some(1);
            }
            name = self.parent.get(name)?;
        }
        None
    }

    fn is_numbered(&self, list_style: &str, level: usize) -> bool {
        self.numbered_levels
            .get(list_style)
            .is_some_and(|levels| levels.contains(&level))
    }
}

struct Writer<'a> {
    zip: SafeZip<'a>,
    styles: Styles,
    limits: &'a Limits,
    control: &'a Control,
    notes: Vec<String>,
    /// The formulas written inline so far (see `inline_text`).
    formulas: Vec<String>,
    ticks: usize,
    cell_depth: usize,
    warnings: Vec<String>,
}

impl Writer<'_> {
    fn tick(&mut self) -> Result<(), ExtractError> {
        self.ticks += 1;
        if self.ticks.is_multiple_of(256) {
            self.control.check()?;
        }
        Ok(())
    }

    /// Block content. `list_depth` counts the lists around it. The tree's depth is capped
    /// when parsed, which bounds this recursion.
    fn blocks(
        &mut self,
        container: &Element,
        list_depth: usize,
        out: &mut Blocks,
    ) -> Result<(), ExtractError> {
        for child in container.elements() {
            self.tick()?;
            match child.name.as_str() {
                "h" => {
                    let (text, deferred) = self.inline_text(child)?;
                    let level = child
                        .attr("outline-level")
                        .and_then(|l| l.parse::<usize>().ok())
                        .unwrap_or(1);
                    self.push_paragraph(out, &markdown::heading(level + 1, &text), &text);
                    out.push(&deferred.text, false);
                }
                "p" => {
                    let (text, deferred) = self.inline_text(child)?;
                    let heading = child
                        .attr("style-name")
                        .and_then(|s| self.styles.heading_level(s));
                    let block = match heading {
                        Some(level) => markdown::heading(level, &text),
                        None => text.trim().to_string(),
                    };
                    self.push_paragraph(out, &block, &text);
                    out.push(&deferred.text, false);
                }
                "list" => self.list(child, None, list_depth, out)?,
                "table" => {
                    let table = self.table(child)?;
                    out.push(&table, false);
                }
                "section" | "index-body" | "table-of-content" | "illustration-index"
                | "alphabetical-index" | "user-index" | "bibliography" | "text-box" | "change"
                | "inserted" => self.blocks(child, list_depth, out)?,
                "frame" | "custom-shape" | "g" | "rect" | "ellipse" => self.drawing(child, out)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn push_paragraph(&self, out: &mut Blocks, block: &str, text: &str) {
        if !text.trim().is_empty() {
            out.push(block, false);
        }
    }

    /// A list: each item's first paragraph carries the marker, nested lists are indented.
    fn list(
        &mut self,
        list: &Element,
        inherited_style: Option<&str>,
        depth: usize,
        out: &mut Blocks,
    ) -> Result<(), ExtractError> {
        let style = list
            .attr("style-name")
            .or(inherited_style)
            .map(str::to_string);
        let numbered = style
            .as_deref()
            .is_some_and(|s| self.styles.is_numbered(s, depth + 1));
        let mut number = list
            .attr("start-value")
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(1);
        for item in list
            .elements()
            .filter(|e| e.name == "list-item" || e.name == "list-header")
        {
            self.tick()?;
            let mut marked = false;
            for child in item.elements() {
                match child.name.as_str() {
                    "list" => self.list(child, style.as_deref(), depth + 1, out)?,
                    "p" | "h" => {
                        let (text, deferred) = self.inline_text(child)?;
                        if !text.trim().is_empty() {
                            let indent = "    ".repeat(depth);
                            let body = text.trim().replace('\n', "  \n");
                            let line = if marked {
                                format!("{indent}  {body}")
                            } else if numbered {
                                format!("{indent}{number}. {body}")
                            } else {
                                format!("{indent}- {body}")
                            };
                            out.push(&line, true);
                            marked = true;
                        }
                        out.push(&deferred.text, false);
                    }
                    _ => {
                        let mut inner = Blocks::default();
                        self.blocks_of(child, depth, &mut inner)?;
                        out.push(&inner.text, false);
                    }
                }
            }
            if marked {
                number = number.saturating_add(1);
            }
        }
        Ok(())
    }

    /// Block content of one element (a table or frame inside a list item).
    fn blocks_of(
        &mut self,
        element: &Element,
        depth: usize,
        out: &mut Blocks,
    ) -> Result<(), ExtractError> {
        let wrapper = Element {
            name: String::new(),
            attrs: Vec::new(),
            children: vec![Node::Element(element.clone())],
        };
        self.blocks(&wrapper, depth, out)
    }

    /// A paragraph's text, and the blocks anchored in it (text boxes, charts). A paragraph
    /// that is one formula and nothing else is display math: `$$...$$`.
    fn inline_text(&mut self, p: &Element) -> Result<(String, Blocks), ExtractError> {
        let mut text = String::new();
        let mut deferred = Blocks::default();
        let formulas_before = self.formulas.len();
        self.inline(p, &mut text, &mut deferred)?;
        let text = markdown_line(&text);
        if self.formulas.len() == formulas_before + 1
            && let Some(tex) = self.formulas.last()
            && text == format!("${tex}$")
        {
            return Ok((format!("$${tex}$$"), deferred));
        }
        Ok((text, deferred))
    }

    fn inline(
        &mut self,
        e: &Element,
        text: &mut String,
        deferred: &mut Blocks,
    ) -> Result<(), ExtractError> {
        for node in &e.children {
            let child = match node {
                Node::Text(t) => {
                    text.push_str(t);
                    continue;
                }
                Node::Element(child) => child,
            };
            self.tick()?;
            match child.name.as_str() {
                "s" => {
                    let count = child
                        .attr("c")
                        .and_then(|c| c.parse::<usize>().ok())
                        .unwrap_or(1)
                        .min(100);
                    text.push_str(&" ".repeat(count));
                }
                "tab" => text.push(' '),
                "line-break" => text.push('\n'),
                "note" => {
                    let body = match child.child("note-body") {
                        Some(body) => {
                            let mut blocks = Blocks::default();
                            self.blocks(body, 0, &mut blocks)?;
                            markdown::collapse_whitespace(&blocks.text)
                        }
                        None => String::new(),
                    };
                    self.notes.push(body);
                    text.push_str(&format!("[^{}]", self.notes.len()));
                }
                "frame" => self.frame(child, Some(text), deferred)?,
                "custom-shape" | "g" | "rect" | "ellipse" => self.drawing(child, deferred)?,
                "annotation" | "annotation-end" | "bookmark" | "bookmark-start"
                | "bookmark-end" | "soft-page-break" | "tracked-changes" | "deletion" => {}
                _ => self.inline(child, text, deferred)?,
            }
        }
        Ok(())
    }

    /// A drawing: text boxes, tables and charts in frames; groups recursed.
    fn drawing(&mut self, shape: &Element, out: &mut Blocks) -> Result<(), ExtractError> {
        match shape.name.as_str() {
            "g" => {
                for child in shape.elements() {
                    self.tick()?;
                    self.drawing(child, out)?;
                }
            }
            "frame" => self.frame(shape, None, out)?,
            _ => self.blocks(shape, 0, out)?,
        }
        Ok(())
    }

    /// A frame: text boxes, tables and embedded objects. With `inline` (a frame anchored in a
    /// paragraph), a formula joins the paragraph's text as `$...$`; the rest goes to `out`.
    fn frame(
        &mut self,
        frame: &Element,
        mut inline: Option<&mut String>,
        out: &mut Blocks,
    ) -> Result<(), ExtractError> {
        for child in frame.elements() {
            match child.name.as_str() {
                "text-box" => self.blocks(child, 0, out)?,
                "table" => {
                    let table = self.table(child)?;
                    out.push(&table, false);
                }
                "object" => self.object(child, inline.as_deref_mut(), out)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// An embedded object: a formula as TeX math, or a chart's own data table labelled with
    /// the chart's kind.
    fn object(
        &mut self,
        object: &Element,
        inline: Option<&mut String>,
        out: &mut Blocks,
    ) -> Result<(), ExtractError> {
        let Some(href) = object.attr("href") else {
            return Ok(());
        };
        let base = href.trim_start_matches("./").trim_end_matches('/');
        if base.is_empty() || base.contains("..") {
            return Ok(());
        }
        let path = format!("{base}/content.xml");
        let Ok(Some(root)) = ooxml::read_xml(&mut self.zip, &path, self.limits, self.control)
        else {
            return Ok(());
        };
        if let Some(math) = (root.name == "math")
            .then_some(&root)
            .or_else(|| root.find("math"))
        {
            let tex = formula_tex(math);
            if !tex.is_empty() {
                match inline {
                    Some(text) => {
                        text.push_str(&format!(" ${tex}$ "));
                        self.formulas.push(tex);
                    }
                    None => out.push(&format!("$${tex}$$"), false),
                }
            }
            return Ok(());
        }
        // `office:chart` wraps `chart:chart`: both have the local name `chart`.
        let Some(chart) = root.find("chart").map(|c| c.child("chart").unwrap_or(c)) else {
            return Ok(());
        };
        let class = chart
            .attr("class")
            .map(|c| ooxml::local_name(c).to_string())
            .unwrap_or_default();
        if !class.is_empty() {
            let mut chars = class.chars();
            let mut label = String::new();
            if let Some(first) = chars.next() {
                label.extend(first.to_uppercase());
                label.push_str(chars.as_str());
            }
            out.push(&format!("{label} chart"), false);
        }
        if let Some(table) = chart.find("table") {
            let table = self.table(table)?;
            out.push(&table, false);
        }
        Ok(())
    }

    /// A presentation page: its title frame as a heading, other frames in order, then notes.
    fn page(&mut self, page: &Element, out: &mut Blocks) -> Result<(), ExtractError> {
        for shape in page.elements() {
            self.tick()?;
            let class = shape.attr("class").unwrap_or_default();
            if class == "title" && shape.name == "frame" {
                let mut title = Blocks::default();
                self.drawing(shape, &mut title)?;
                let title = markdown::collapse_whitespace(&title.text);
                if !title.is_empty() {
                    out.push(&markdown::heading(1, &title), false);
                }
            } else if shape.name != "notes" {
                self.drawing(shape, out)?;
            }
        }
        if let Some(notes) = page.child("notes") {
            let mut text = Blocks::default();
            for frame in notes
                .elements()
                .filter(|f| f.attr("class") == Some("notes"))
            {
                self.drawing(frame, &mut text)?;
            }
            if !text.text.trim().is_empty() {
                out.push("### Notes:", false);
                out.push(&text.text, false);
            }
        }
        Ok(())
    }

    /// A table; spanned and covered cells repeat the text of the cell that spans them.
    fn table(&mut self, table: &Element) -> Result<String, ExtractError> {
        let mut rows_el = Vec::new();
        table_rows(table, &mut rows_el);
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut spans: HashMap<(usize, usize), String> = HashMap::new();
        let max_cols = self.limits.max_table_columns;
        let mut cut = false;
        for (tr, repeat) in rows_el {
            self.control.check()?;
            let mut row: Vec<String> = Vec::new();
            let r = rows.len();
            for cell in tr.elements() {
                let repeated = cell
                    .attr("number-columns-repeated")
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(1)
                    .clamp(1, max_cols);
                let text = match cell.name.as_str() {
                    "table-cell" => self.cell_text(cell)?,
                    "covered-table-cell" => String::new(),
                    _ => continue,
                };
                for _ in 0..repeated {
                    if row.len() >= max_cols {
                        cut = true;
                        break;
                    }
                    let c = row.len();
                    let value = if cell.name == "covered-table-cell" {
                        spans.get(&(r, c)).cloned().unwrap_or_default()
                    } else {
                        let across = span_attr(cell, "number-columns-spanned", max_cols);
                        let down = span_attr(cell, "number-rows-spanned", 64);
                        for dr in 0..down {
                            for dc in 0..across {
                                if dr + dc > 0 {
                                    spans.insert((r + dr, c + dc), text.clone());
                                }
                            }
                        }
                        text.clone()
                    };
                    row.push(value);
                }
            }
            for _ in 0..repeat.min(16) {
                if rows.len() >= self.limits.max_table_rows {
                    cut = true;
                    break;
                }
                rows.push(row.clone());
            }
        }
        if cut {
            self.warnings
                .push("a table was cut short at the row or column limit".to_string());
        }
        trim_empty(&mut rows);
        if self.cell_depth > 0 {
            return Ok(rows
                .iter()
                .flatten()
                .filter(|c| !c.is_empty())
                .cloned()
                .collect::<Vec<_>>()
                .join(" "));
        }
        Ok(markdown::table(&rows))
    }

    fn cell_text(&mut self, cell: &Element) -> Result<String, ExtractError> {
        self.cell_depth += 1;
        let mut blocks = Blocks::default();
        let result = self.blocks(cell, 0, &mut blocks);
        self.cell_depth -= 1;
        result?;
        Ok(markdown::collapse_whitespace(&blocks.text))
    }
}

fn span_attr(cell: &Element, name: &str, cap: usize) -> usize {
    cell.attr(name)
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, cap)
}

/// Rows in order with their repeat counts, through header rows and row groups.
fn table_rows<'a>(e: &'a Element, out: &mut Vec<(&'a Element, usize)>) {
    for child in e.elements() {
        match child.name.as_str() {
            "table-row" => {
                let repeat = child
                    .attr("number-rows-repeated")
                    .and_then(|n| n.parse::<usize>().ok())
                    .unwrap_or(1)
                    .max(1);
                out.push((child, repeat));
            }
            "table-header-rows" | "table-rows" | "table-row-group" => table_rows(child, out),
            _ => {}
        }
    }
}

/// Drops trailing empty rows and columns (repeated empty cells pad ODF tables).
fn trim_empty(rows: &mut Vec<Vec<String>>) {
    while rows.last().is_some_and(|r| r.iter().all(|c| c.is_empty())) {
        rows.pop();
    }
    let width = rows
        .iter()
        .map(|r| r.iter().rposition(|c| !c.is_empty()).map_or(0, |i| i + 1))
        .max()
        .unwrap_or(0);
    for row in rows.iter_mut() {
        row.truncate(width);
    }
}

/// A formula object's TeX: its MathML converted, else the StarMath source LibreOffice keeps
/// in an `annotation` (what the author typed, close enough to TeX to search).
fn formula_tex(math: &Element) -> String {
    let mut tex = String::new();
    mathml(math, &mut tex);
    let tex = markdown::collapse_whitespace(&tex);
    if !tex.is_empty() {
        return tex;
    }
    let mut annotations = Vec::new();
    math.find_all("annotation", &mut annotations);
    annotations
        .first()
        .map(|a| markdown::collapse_whitespace(&a.text()))
        .unwrap_or_default()
}

/// Presentation MathML as TeX: tokens, scripts, fractions, radicals, over/under scripts
/// (large operators take limits), fences and tables; annotations skipped. The tree's depth is
/// capped when parsed, which bounds this recursion.
fn mathml(e: &Element, out: &mut String) {
    if e.name == "mtable" {
        // Before `parts`: a table's cells are read through its rows here, each once.
        let rows: Vec<String> = e
            .elements()
            .filter(|r| r.name == "mtr" || r.name == "mlabeledtr")
            .map(|row| {
                row.children_named("mtd")
                    .map(|cell| {
                        let mut s = String::new();
                        mathml(cell, &mut s);
                        markdown::collapse_whitespace(&s)
                    })
                    .collect::<Vec<_>>()
                    .join(" & ")
            })
            .collect();
        out.push_str(&format!(
            " \\begin{{matrix}} {} \\end{{matrix}} ",
            rows.join(" \\\\ ")
        ));
        return;
    }
    let parts: Vec<String> = e
        .elements()
        .map(|c| {
            let mut s = String::new();
            mathml(c, &mut s);
            markdown::collapse_whitespace(&s)
        })
        .collect();
    let part = |i: usize| parts.get(i).cloned().unwrap_or_default();
    match e.name.as_str() {
        "mi" | "mn" | "mo" => {
            out.push(' ');
            push_math_text(&e.text(), out);
            out.push(' ');
        }
        "mtext" | "ms" => {
            let text = markdown::collapse_whitespace(&e.text());
            if !text.is_empty() {
                out.push_str(&format!(" \\text{{{text}}} "));
            }
        }
        "msup" => out.push_str(&format!(" {}^{{{}}} ", base(&part(0)), part(1))),
        "msub" => out.push_str(&format!(" {}_{{{}}} ", base(&part(0)), part(1))),
        "msubsup" => out.push_str(&format!(
            " {}_{{{}}}^{{{}}} ",
            base(&part(0)),
            part(1),
            part(2)
        )),
        "mfrac" => out.push_str(&format!(" \\frac{{{}}}{{{}}} ", part(0), part(1))),
        "msqrt" => out.push_str(&format!(" \\sqrt{{{}}} ", parts.join(" "))),
        "mroot" => out.push_str(&format!(" \\sqrt[{}]{{{}}} ", part(1), part(0))),
        "munder" | "mover" | "munderover" => {
            let (under, over) = match e.name.as_str() {
                "munder" => (Some(part(1)), None),
                "mover" => (None, Some(part(1))),
                _ => (Some(part(1)), Some(part(2))),
            };
            let body = part(0);
            if is_large_operator(&body) {
                out.push_str(&format!(" {body}"));
                if let Some(under) = under {
                    out.push_str(&format!("_{{{under}}}"));
                }
                if let Some(over) = over {
                    out.push_str(&format!("^{{{over}}}"));
                }
                out.push(' ');
            } else {
                let mut body = body;
                if let Some(under) = under {
                    body = format!("\\underset{{{under}}}{{{body}}}");
                }
                if let Some(over) = over {
                    body = match over.as_str() {
                        "¯" | "‾" | "―" => format!("\\overline{{{body}}}"),
                        "^" | "ˆ" => format!("\\hat{{{body}}}"),
                        "~" | "˜" => format!("\\tilde{{{body}}}"),
                        "→" | "\\rightarrow" => format!("\\vec{{{body}}}"),
                        "˙" | "." => format!("\\dot{{{body}}}"),
                        _ => format!("\\overset{{{over}}}{{{body}}}"),
                    };
                }
                out.push_str(&format!(" {body} "));
            }
        }
        "mfenced" => {
            let open = e.attr("open").unwrap_or("(");
            let close = e.attr("close").unwrap_or(")");
            let separator = e
                .attr("separators")
                .and_then(|s| s.trim().chars().next())
                .unwrap_or(',');
            let inner = parts.join(&format!(" {separator} "));
            out.push_str(&format!(" \\left{open} {inner} \\right{close} "));
        }
        "annotation" | "annotation-xml" | "mspace" | "none" | "mprescripts" | "malignmark"
        | "maligngroup" => {}
        _ => {
            out.push(' ');
            out.push_str(&parts.join(" "));
            out.push(' ');
        }
    }
}

/// A script's base, braced when it is more than one token.
fn base(text: &str) -> String {
    if text.contains(' ') {
        format!("{{{text}}}")
    } else {
        text.to_string()
    }
}

fn is_large_operator(text: &str) -> bool {
    matches!(
        text,
        "\\sum" | "\\prod" | "\\int" | "\\lim" | "lim" | "∑" | "∏" | "∫" | "⋃" | "⋂"
    )
}

/// A token's characters, Greek letters and operators as TeX commands.
fn push_math_text(text: &str, out: &mut String) {
    let text = text.trim();
    if text == "lim" {
        out.push_str("\\lim");
        return;
    }
    for c in text.chars() {
        match crate::docx::math_symbol(c) {
            Some(name) => {
                out.push(' ');
                out.push_str(name.trim_start());
                out.push(' ');
            }
            None => out.push(c),
        }
    }
}

/// ODF collapses runs of whitespace in text (spaces are written as `text:s`), so a
/// paragraph's text is collapsed per line, keeping its line breaks.
fn markdown_line(text: &str) -> String {
    text.split('\n')
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assert_in_order, corpus, mutate, run, zip_of};
    use proptest::prelude::*;

    const NS: &str = r#"xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="d" xmlns:presentation="p" xmlns:style="s""#;

    fn odf(mimetype: &str, body: &str, styles: &str) -> Vec<u8> {
        let content = format!(
            r#"<office:document-content {NS}><office:automatic-styles>{styles}</office:automatic-styles><office:body>{body}</office:body></office:document-content>"#
        );
        let meta = r#"<office:document-meta xmlns:office="o" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:meta="m"><office:meta><dc:title>Doc Title</dc:title><meta:initial-creator>Bo</meta:initial-creator><dc:language>fr</dc:language></office:meta></office:document-meta>"#;
        zip_of(&[
            ("mimetype", mimetype),
            ("content.xml", &content),
            ("meta.xml", meta),
        ])
    }

    #[test]
    fn corpus_text_document_has_headings_and_nested_lists() {
        let Some(bytes) = corpus("office/odf/sources/text_document_01.odt") else {
            return;
        };
        let md = run(extract, &bytes, "odt").unwrap().markdown;
        assert_in_order(
            &md,
            &[
                "# Title",
                "## heading level 1.0",
                "### Heading level 2: A",
                "1. numbered list 1",
                "    - bullet list 2.1",
                "        - bullet list 2.2.1",
                "### Heading level 2: B",
            ],
        );
    }

    #[test]
    fn corpus_presentation_has_titles_tables_and_charts() {
        if let Some(bytes) = corpus("office/odf/sources/odf_presentation_01.odp") {
            let md = run(extract, &bytes, "odp").unwrap().markdown;
            assert_in_order(
                &md,
                &[
                    "# Test Table Slide",
                    "| - R1 |",
                    "# Second slide title",
                    "- With foo",
                ],
            );
        }
        if let Some(bytes) = corpus("office/odf/sources/odf_presentation_02.odp") {
            let md = run(extract, &bytes, "odp").unwrap().markdown;
            assert_in_order(
                &md,
                &[
                    "Text",
                    "Lorem ipsum",
                    "Chart",
                    "Bar chart",
                    "| Row 1 | 9.1 |",
                    "Table",
                ],
            );
        }
    }

    #[test]
    fn synthetic_text_document_covers_each_feature() {
        let styles = r#"<text:list-style style:name="L1"><text:list-level-style-number text:level="1" style:num-format="1"/><text:list-level-style-bullet text:level="2"/></text:list-style>"#;
        let body = r#"<office:text><text:h text:outline-level="1">Top</text:h>
            <text:p>One<text:s text:c="2"/>two<text:tab/>three<text:line-break/>four <text:span>span</text:span> <text:a>link</text:a><text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>A footnote.</text:p></text:note-body></text:note></text:p>
            <text:list text:style-name="L1"><text:list-item><text:p>first</text:p><text:list><text:list-item><text:p>inner</text:p></text:list-item></text:list></text:list-item><text:list-item><text:p>second</text:p></text:list-item></text:list>
            <table:table><table:table-row><table:table-cell table:number-columns-spanned="2"><text:p>wide</text:p></table:table-cell><table:covered-table-cell/></table:table-row>
            <table:table-row><table:table-cell><text:p>a</text:p></table:table-cell><table:table-cell><text:p>b</text:p></table:table-cell><table:table-cell table:number-columns-repeated="500"/></table:table-row></table:table></office:text>"#;
        let bytes = odf("application/vnd.oasis.opendocument.text", body, styles);
        let extraction = run(extract, &bytes, "odt").unwrap();
        assert_in_order(
            &extraction.markdown,
            &[
                "## Top",
                "One two three\nfour span link[^1]",
                "1. first\n    - inner\n2. second",
                "| wide | wide |",
                "| a | b |",
                "[^1]: A footnote.",
            ],
        );
        assert_eq!(extraction.metadata.title.as_deref(), Some("Doc Title"));
        assert_eq!(extraction.metadata.author.as_deref(), Some("Bo"));
        assert_eq!(extraction.metadata.language.as_deref(), Some("fr"));
    }

    #[test]
    fn synthetic_presentation_has_titles_frames_and_notes() {
        let body = r#"<office:presentation><draw:page draw:name="p1">
            <draw:frame presentation:class="title"><draw:text-box><text:p>Page title</text:p></draw:text-box></draw:frame>
            <draw:g><draw:frame><draw:text-box><text:p>Grouped words</text:p></draw:text-box></draw:frame></draw:g>
            <presentation:notes><draw:frame presentation:class="notes"><draw:text-box><text:p>Remember this</text:p></draw:text-box></draw:frame></presentation:notes>
            </draw:page><draw:page><draw:frame presentation:class="title"><draw:text-box><text:p>Second</text:p></draw:text-box></draw:frame></draw:page></office:presentation>"#;
        let bytes = odf("application/vnd.oasis.opendocument.presentation", body, "");
        let md = run(extract, &bytes, "odp").unwrap().markdown;
        assert_in_order(
            &md,
            &[
                "# Page title",
                "Grouped words",
                "### Notes:",
                "Remember this",
                "# Second",
            ],
        );
    }

    /// An ODT whose paragraphs embed formula objects, as LibreOffice Writer saves them: a
    /// `draw:frame` holding a `draw:object` (and its picture replacement), each object's
    /// MathML in `Object N/content.xml` with the StarMath source as an annotation.
    fn formula_document(objects: &[(&str, &str)], body: &str) -> Vec<u8> {
        let content = format!(
            r#"<office:document-content {NS} xmlns:xlink="http://www.w3.org/1999/xlink"><office:body><office:text>{body}</office:text></office:body></office:document-content>"#
        );
        let mut entries: Vec<(String, String)> = vec![
            (
                "mimetype".to_string(),
                "application/vnd.oasis.opendocument.text".to_string(),
            ),
            ("content.xml".to_string(), content),
        ];
        for (name, math) in objects {
            entries.push((
                format!("{name}/content.xml"),
                format!(
                    r#"<?xml version="1.0" encoding="UTF-8"?><math:math xmlns:math="http://www.w3.org/1998/Math/MathML" display="block">{math}</math:math>"#
                ),
            ));
        }
        let entries: Vec<(&str, &str)> = entries
            .iter()
            .map(|(n, c)| (n.as_str(), c.as_str()))
            .collect();
        zip_of(&entries)
    }

    fn formula_frame(object: &str) -> String {
        format!(
            r#"<draw:frame draw:name="{object}" text:anchor-type="as-char"><draw:object xlink:href="./{object}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/><draw:image xlink:href="./ObjectReplacements/{object}"/></draw:frame>"#
        )
    }

    #[test]
    fn formula_objects_become_tex_math() {
        let pythagoras = r#"<math:semantics><math:mrow><math:msup><math:mi>a</math:mi><math:mn>2</math:mn></math:msup><math:mo>+</math:mo><math:msup><math:mi>b</math:mi><math:mn>2</math:mn></math:msup><math:mo>=</math:mo><math:msup><math:mi>c</math:mi><math:mn>2</math:mn></math:msup></math:mrow><math:annotation encoding="StarMath 5.0">a^2 + b^2 = c^2</math:annotation></math:semantics>"#;
        let sum = r#"<math:semantics><math:mrow><math:munderover><math:mo stretchy="false">∑</math:mo><math:mrow><math:mi>i</math:mi><math:mo>=</math:mo><math:mn>1</math:mn></math:mrow><math:mi>n</math:mi></math:munderover><math:mfrac><math:mn>1</math:mn><math:msqrt><math:mi>i</math:mi></math:msqrt></math:mfrac><math:mo>×</math:mo><math:mi>π</math:mi></math:mrow><math:annotation encoding="StarMath 5.0">sum from{i=1} to n {1 over sqrt i} times %pi</math:annotation></math:semantics>"#;
        // No presentation MathML: the StarMath source is what is left.
        let starmath_only = r#"<math:semantics><math:annotation encoding="StarMath 5.0">x over y</math:annotation></math:semantics>"#;
        let body = format!(
            r#"<text:p>{}</text:p><text:p>The sum {} grows.</text:p><text:p>{}</text:p><text:p>{}</text:p>"#,
            formula_frame("Object 1"),
            formula_frame("Object 2"),
            formula_frame("Object 3"),
            formula_frame("Object 9"),
        );
        let bytes = formula_document(
            &[
                ("Object 1", pythagoras),
                ("Object 2", sum),
                ("Object 3", starmath_only),
            ],
            &body,
        );
        let extraction = run(extract, &bytes, "odt").unwrap();
        assert_eq!(
            extraction.markdown,
            "$$a^{2} + b^{2} = c^{2}$$\n\n\
             The sum $\\sum_{i = 1}^{n} \\frac{1}{\\sqrt{i}} \\times \\pi$ grows.\n\n\
             $$x over y$$"
        );
    }

    #[test]
    fn mathml_fences_matrices_and_accents() {
        let math = r#"<math xmlns="http://www.w3.org/1998/Math/MathML"><mrow><mover accent="true"><mi>v</mi><mo>→</mo></mover><mo>=</mo><mfenced open="[" close="]"><mtable><mtr><mtd><mi>α</mi></mtd><mtd><mn>0</mn></mtd></mtr><mtr><mtd><mroot><mi>x</mi><mn>3</mn></mroot></mtd><mtd><msubsup><mi>y</mi><mi>i</mi><mn>2</mn></msubsup></mtd></mtr></mtable></mfenced><mtext>for all</mtext><munder><mi>lim</mi><mrow><mi>n</mi><mo>→</mo><mi>∞</mi></mrow></munder></mrow></math>"#;
        let root = ooxml::parse(math, "formula", &Limits::default(), &Control::default()).unwrap();
        assert_eq!(
            formula_tex(&root),
            "\\vec{v} = \\left[ \\begin{matrix} \\alpha & 0 \\\\ \\sqrt[3]{x} & y_{i}^{2} \\end{matrix} \\right] \\text{for all} \\lim_{n → \\infty}"
        );
    }

    #[test]
    fn malformed_files_get_clear_codes() {
        let code = |bytes: &[u8]| run(extract, bytes, "odt").unwrap_err().code;
        if let Some(bytes) = corpus("hostile/malformed/testODTnotaZipFile.odt") {
            assert_eq!(code(&bytes), "malformed_document");
        }
        assert_eq!(code(&zip_of(&[("mimetype", "x")])), "malformed_document");
        let deep = format!(
            "<office:text>{}{}</office:text>",
            "<text:section>".repeat(300),
            "</text:section>".repeat(300)
        );
        assert_eq!(
            code(&odf("application/vnd.oasis.opendocument.text", &deep, "")),
            "document_too_complex"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let result = run(extract, &bytes, "odt");
            prop_assert!(result.err().is_none_or(|e| e.code != "extractor_crashed"));
        }

        #[test]
        fn mutated_formula_documents_never_panic(cut in 0usize..4_000, flips in proptest::collection::vec((0usize..4_000, any::<u8>()), 0..8)) {
            let math = r#"<math:semantics><math:mrow><math:mfrac><math:mi>a</math:mi><math:msqrt><math:mi>b</math:mi></math:msqrt></math:mfrac><math:mtable><math:mtr><math:mtd><math:mn>1</math:mn></math:mtd></math:mtr></math:mtable></math:mrow><math:annotation encoding="StarMath 5.0">a over sqrt b</math:annotation></math:semantics>"#;
            let mut bytes = formula_document(
                &[("Object 1", math)],
                &format!("<text:p>x {}</text:p>", formula_frame("Object 1")),
            );
            mutate(&mut bytes, &flips, cut);
            let result = run(extract, &bytes, "odt");
            prop_assert!(result.err().is_none_or(|e| e.code != "extractor_crashed"));
        }

        #[test]
        fn mutated_corpus_files_never_panic(cut in 0usize..200_000, flips in proptest::collection::vec((0usize..200_000, any::<u8>()), 0..8)) {
            let Some(mut bytes) = corpus("office/odf/sources/text_document_03.odt") else {
                return Ok(());
            };
            mutate(&mut bytes, &flips, cut);
            let result = run(extract, &bytes, "odt");
            prop_assert!(result.err().is_none_or(|e| e.code != "extractor_crashed"));
        }
    }
}
