//! Word documents (DOCX, WordprocessingML): body paragraphs in order as Markdown, with
//! headings from paragraph styles, lists from the numbering part, tables, text boxes, content
//! controls, equations as LaTeX-like text, and footnotes and endnotes at the end.

use std::collections::HashMap;

use crate::markdown;
use crate::markdown::Blocks;
use crate::ooxml::{self, Element, Node, Relationships};
use crate::zipsafe::SafeZip;
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let mut zip = SafeZip::open(input.bytes, "DOCX", limits)?;
    let root_rels = Relationships::from_element(
        ooxml::read_xml(&mut zip, "_rels/.rels", limits, control)
            .ok()
            .flatten()
            .as_ref(),
    );
    let main = root_rels
        .target_of_type("officeDocument")
        .map(|t| ooxml::resolve_target("", t))
        .filter(|path| zip.contains(path))
        .unwrap_or_else(|| "word/document.xml".to_string());
    let document = ooxml::read_xml(&mut zip, &main, limits, control)?
        .ok_or_else(|| ExtractError::malformed("the DOCX file has no main document part"))?;
    let (rels_path, dir) = ooxml::rels_path(&main);
    let rels = Relationships::from_element(
        ooxml::read_xml(&mut zip, &rels_path, limits, control)
            .ok()
            .flatten()
            .as_ref(),
    );
    let mut warnings = Vec::new();
    let mut part = |kind: &str, fallback: &str| -> Option<Element> {
        let path = rels
            .target_of_type(kind)
            .map(|t| ooxml::resolve_target(&dir, t))
            .unwrap_or_else(|| fallback.to_string());
        match ooxml::read_xml(&mut zip, &path, limits, control) {
            Ok(root) => root,
            Err(e) if e.code == "malformed_document" => {
                warnings.push(format!("the {kind} part could not be read and was skipped"));
                None
            }
            Err(_) => None,
        }
    };
    let styles = Styles::from_part(part("styles", "word/styles.xml").as_ref());
    let numbering = Numbering::from_part(part("numbering", "word/numbering.xml").as_ref());
    let footnotes = part("footnotes", "word/footnotes.xml");
    let endnotes = part("endnotes", "word/endnotes.xml");
    let metadata = ooxml::read_xml(&mut zip, "docProps/core.xml", limits, control)
        .ok()
        .flatten()
        .map(|core| ooxml::dublin_core(&core))
        .unwrap_or_default();

    let body = document
        .child("body")
        .ok_or_else(|| ExtractError::malformed("the DOCX main document has no body"))?;
    let mut writer = Writer {
        styles: &styles,
        numbering: &numbering,
        counters: HashMap::new(),
        notes: Vec::new(),
        limits,
        control,
        ticks: 0,
        cell_depth: 0,
        warnings: Vec::new(),
    };
    let mut out = Blocks::default();
    writer.blocks(body, &mut out)?;
    writer.append_notes(&mut out, footnotes.as_ref(), endnotes.as_ref())?;
    warnings.append(&mut writer.warnings);
    Ok(finish(out.text, metadata, warnings, limits))
}

fn finish(
    mut markdown: String,
    metadata: Metadata,
    mut warnings: Vec<String>,
    limits: &Limits,
) -> Extraction {
    if markdown.len() > limits.max_output_chars {
        let mut cut = limits.max_output_chars;
        while !markdown.is_char_boundary(cut) {
            cut -= 1;
        }
        markdown.truncate(cut);
        warnings.push("the document's text was cut short at the output limit".to_string());
    }
    Extraction {
        markdown,
        metadata,
        warnings,
        ..Extraction::default()
    }
}

/// What a paragraph style says: its name, outline level, list numbering and parent.
#[derive(Default)]
struct Style {
    name: String,
    outline_level: Option<usize>,
    numbering: Option<(String, usize)>,
    based_on: Option<String>,
}

#[derive(Default)]
struct Styles {
    by_id: HashMap<String, Style>,
}

impl Styles {
    fn from_part(root: Option<&Element>) -> Self {
        let mut by_id = HashMap::new();
        for style in root.iter().flat_map(|r| r.children_named("style")) {
            let Some(id) = style.attr("styleId") else {
                continue;
            };
            let ppr = style.child("pPr");
            by_id.insert(
                id.to_string(),
                Style {
                    name: style
                        .child("name")
                        .and_then(|n| n.attr("val"))
                        .unwrap_or_default()
                        .to_ascii_lowercase(),
                    outline_level: ppr
                        .and_then(|p| p.child("outlineLvl"))
                        .and_then(|o| o.attr("val"))
                        .and_then(|v| v.parse().ok()),
                    numbering: ppr.and_then(|p| p.child("numPr")).map(num_pr),
                    based_on: style
                        .child("basedOn")
                        .and_then(|b| b.attr("val"))
                        .map(str::to_string),
                },
            );
        }
        Styles { by_id }
    }

    /// The style chain from `id` up its `basedOn` parents (bounded: chains may loop).
    fn chain(&self, id: &str) -> Vec<&Style> {
        let mut out = Vec::new();
        let mut next = Some(id);
        while let Some(id) = next {
            if out.len() >= 16 {
                break;
            }
            let Some(style) = self.by_id.get(id) else {
                break;
            };
            out.push(style);
            next = style.based_on.as_deref();
        }
        out
    }

    /// The Markdown heading level of paragraphs of style `id`: the title is 1, "heading N"
    /// is N + 1, as is an outline level N - 1.
    fn heading_level(&self, id: &str) -> Option<usize> {
        for style in self.chain(id) {
            if style.name == "title" {
                return Some(1);
            }
            if let Some(n) = style
                .name
                .strip_prefix("heading ")
                .and_then(|n| n.trim().parse::<usize>().ok())
            {
                return Some((n + 1).min(6));
            }
            if let Some(level) = style.outline_level.filter(|l| *l < 9) {
                return Some((level + 2).min(6));
            }
        }
        None
    }

    fn numbering(&self, id: &str) -> Option<(String, usize)> {
        self.chain(id).into_iter().find_map(|s| s.numbering.clone())
    }
}

/// `w:numPr`: the numbering instance and the level.
fn num_pr(e: &Element) -> (String, usize) {
    let num_id = e
        .child("numId")
        .and_then(|n| n.attr("val"))
        .unwrap_or("0")
        .to_string();
    let level = e
        .child("ilvl")
        .and_then(|n| n.attr("val"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0usize)
        .min(8);
    (num_id, level)
}

/// One level of a list definition.
#[derive(Clone)]
struct Level {
    format: String,
    text: String,
    start: u32,
}

#[derive(Default)]
struct Numbering {
    abstract_of: HashMap<String, String>,
    overrides: HashMap<String, HashMap<usize, Level>>,
    levels: HashMap<String, HashMap<usize, Level>>,
}

impl Numbering {
    fn from_part(root: Option<&Element>) -> Self {
        let mut numbering = Numbering::default();
        let Some(root) = root else {
            return numbering;
        };
        for abs in root.children_named("abstractNum") {
            let id = abs.attr("abstractNumId").unwrap_or_default().to_string();
            numbering.levels.insert(id, levels_of(abs));
        }
        for num in root.children_named("num") {
            let id = num.attr("numId").unwrap_or_default().to_string();
            if let Some(abs) = num.child("abstractNumId").and_then(|a| a.attr("val")) {
                numbering.abstract_of.insert(id.clone(), abs.to_string());
            }
            let mut overrides = HashMap::new();
            for o in num.children_named("lvlOverride") {
                if let Some(lvl) = o.child("lvl") {
                    overrides.extend(levels_of_one(lvl));
                }
            }
            numbering.overrides.insert(id, overrides);
        }
        numbering
    }

    fn level(&self, num_id: &str, level: usize) -> Option<&Level> {
        if let Some(l) = self.overrides.get(num_id).and_then(|o| o.get(&level)) {
            return Some(l);
        }
        let abs = self.abstract_of.get(num_id)?;
        self.levels.get(abs)?.get(&level)
    }
}

fn levels_of(abs: &Element) -> HashMap<usize, Level> {
    abs.children_named("lvl").flat_map(levels_of_one).collect()
}

fn levels_of_one(lvl: &Element) -> Option<(usize, Level)> {
    let index = lvl.attr("ilvl")?.parse().ok()?;
    let val = |name: &str| lvl.child(name).and_then(|e| e.attr("val"));
    Some((
        index,
        Level {
            format: val("numFmt").unwrap_or("decimal").to_string(),
            text: val("lvlText").unwrap_or_default().to_string(),
            start: val("start").and_then(|s| s.parse().ok()).unwrap_or(1),
        },
    ))
}

/// A footnote or endnote referenced from the body, in reference order.
struct NoteRef {
    endnote: bool,
    id: String,
}

struct Writer<'a> {
    styles: &'a Styles,
    numbering: &'a Numbering,
    counters: HashMap<String, [u32; 9]>,
    notes: Vec<NoteRef>,
    limits: &'a Limits,
    control: &'a Control,
    ticks: usize,
    /// Inside a table cell, nested tables are flattened into the cell's text.
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

    /// Block-level content: paragraphs, tables, content controls. The tree's depth is capped
    /// when parsed, which bounds this recursion.
    fn blocks(&mut self, container: &Element, out: &mut Blocks) -> Result<(), ExtractError> {
        for child in container.elements() {
            self.tick()?;
            match child.name.as_str() {
                "p" => self.paragraph(child, out)?,
                "tbl" => {
                    let table = self.table(child)?;
                    out.push(&table, false);
                }
                "sdt" => {
                    if let Some(content) = child.child("sdtContent") {
                        self.blocks(content, out)?;
                    }
                }
                "customXml" | "sdtContent" | "ins" | "moveTo" | "txbxContent" => {
                    self.blocks(child, out)?
                }
                "AlternateContent" => {
                    if let Some(choice) = alternate(child) {
                        self.blocks(choice, out)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn paragraph(&mut self, p: &Element, out: &mut Blocks) -> Result<(), ExtractError> {
        let ppr = p.child("pPr");
        let style = ppr
            .and_then(|p| p.child("pStyle"))
            .and_then(|s| s.attr("val"))
            .unwrap_or_default();
        let mut text = String::new();
        let mut deferred = Blocks::default();
        self.inline(p, &mut text, &mut deferred)?;

        let outline = ppr
            .and_then(|p| p.child("outlineLvl"))
            .and_then(|o| o.attr("val"))
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|l| *l < 9)
            .map(|l| (l + 2).min(6));
        let heading = outline.or_else(|| self.styles.heading_level(style));
        let numbering = ppr
            .and_then(|p| p.child("numPr"))
            .map(num_pr)
            .or_else(|| self.styles.numbering(style))
            .filter(|(id, _)| id != "0");
        let has_text = !text.trim().is_empty();
        let label = match (&numbering, has_text) {
            (Some((id, level)), true) => self.next_label(id, *level),
            _ => None,
        };

        if has_text {
            if let Some(level) = heading {
                let prefix = label
                    .as_ref()
                    .filter(|l| !l.bullet)
                    .map(|l| format!("{} ", l.text.trim_end_matches('.')))
                    .unwrap_or_default();
                out.push(
                    &markdown::heading(level, &format!("{prefix}{}", text.trim())),
                    false,
                );
            } else if let Some(label) = label {
                let indent = "    ".repeat(label.level);
                let body = text.trim().replace('\n', "  \n");
                let line = if label.bullet {
                    format!("{indent}- {body}")
                } else if label.simple {
                    format!("{indent}{} {body}", label.text)
                } else {
                    format!("{indent}- {} {body}", label.text)
                };
                out.push(&line, true);
            } else {
                out.push(text.trim(), false);
            }
        }
        if !deferred.text.is_empty() {
            out.push(&deferred.text, false);
        }
        Ok(())
    }

    /// The label of the next item of list `num_id` at `level`, advancing its counters.
    fn next_label(&mut self, num_id: &str, level: usize) -> Option<Label> {
        let def = self.numbering.level(num_id, level)?;
        if def.format == "bullet" || def.format == "none" {
            return Some(Label {
                bullet: true,
                simple: false,
                text: String::new(),
                level,
            });
        }
        let counters = self.counters.entry(num_id.to_string()).or_insert([0; 9]);
        let slot = counters.get_mut(level)?;
        *slot = if *slot == 0 {
            def.start
        } else {
            slot.saturating_add(1)
        };
        for deeper in counters.iter_mut().skip(level + 1) {
            *deeper = 0;
        }
        let counters = *counters;
        let mut text = def.text.clone();
        for (i, value) in counters.iter().enumerate().rev() {
            let placeholder = format!("%{}", i + 1);
            if !text.contains(&placeholder) {
                continue;
            }
            let value = if *value == 0 {
                self.numbering.level(num_id, i).map_or(1, |l| l.start)
            } else {
                *value
            };
            let format = self
                .numbering
                .level(num_id, i)
                .map_or("decimal", |l| l.format.as_str());
            text = text.replace(&placeholder, &format_number(value, format));
        }
        let simple = def.format == "decimal" && def.text == format!("%{}.", level + 1);
        Some(Label {
            bullet: false,
            simple,
            text,
            level,
        })
    }

    /// Inline content of a paragraph: runs, links, fields, insertions; deleted text skipped.
    /// Text boxes anchored in runs are block content: they go to `deferred`.
    fn inline(
        &mut self,
        e: &Element,
        text: &mut String,
        deferred: &mut Blocks,
    ) -> Result<(), ExtractError> {
        for child in e.elements() {
            self.tick()?;
            match child.name.as_str() {
                "r" => self.run(child, text, deferred)?,
                "hyperlink" | "ins" | "moveTo" | "smartTag" | "customXml" | "fldSimple"
                | "sdtContent" | "dir" | "bdo" => self.inline(child, text, deferred)?,
                "sdt" => {
                    if let Some(content) = child.child("sdtContent") {
                        self.inline(content, text, deferred)?;
                    }
                }
                "oMath" | "oMathPara" => {
                    let mut math = String::new();
                    omml(child, &mut math);
                    let math = markdown::collapse_whitespace(&math);
                    if !math.is_empty() {
                        text.push_str(&format!(" ${math}$ "));
                    }
                }
                "AlternateContent" => {
                    if let Some(choice) = alternate(child) {
                        self.inline(choice, text, deferred)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn run(
        &mut self,
        r: &Element,
        text: &mut String,
        deferred: &mut Blocks,
    ) -> Result<(), ExtractError> {
        for child in r.elements() {
            match child.name.as_str() {
                "t" => text.push_str(&child.text()),
                "tab" | "ptab" => text.push(' '),
                "br" | "cr" => text.push('\n'),
                "noBreakHyphen" => text.push('-'),
                "sym" => {
                    if let Some(c) = child
                        .attr("char")
                        .and_then(|c| u32::from_str_radix(c, 16).ok())
                        .and_then(char::from_u32)
                        .filter(|c| !('\u{F000}'..='\u{F0FF}').contains(c))
                    {
                        text.push(c);
                    }
                }
                "footnoteReference" | "endnoteReference" => {
                    if let Some(id) = child.attr("id") {
                        self.notes.push(NoteRef {
                            endnote: child.name == "endnoteReference",
                            id: id.to_string(),
                        });
                        text.push_str(&format!("[^{}]", self.notes.len()));
                    }
                }
                "drawing" | "pict" | "object" | "AlternateContent" => {
                    let mut boxes = Vec::new();
                    textboxes(child, &mut boxes);
                    for content in boxes {
                        self.blocks(content, deferred)?;
                    }
                    let mut alts = Vec::new();
                    picture_alts(child, &mut alts);
                    for alt in alts {
                        deferred.push(&alt, false);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn table(&mut self, tbl: &Element) -> Result<String, ExtractError> {
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut cut = false;
        for tr in table_rows(tbl) {
            self.control.check()?;
            if rows.len() >= self.limits.max_table_rows {
                cut = true;
                break;
            }
            let mut row: Vec<String> = Vec::new();
            if let Some(before) = tr
                .child("trPr")
                .and_then(|p| p.child("gridBefore"))
                .and_then(|g| g.attr("val"))
                .and_then(|v| v.parse::<usize>().ok())
            {
                row.extend(std::iter::repeat_n(
                    String::new(),
                    before.min(self.limits.max_table_columns),
                ));
            }
            for tc in row_cells(tr) {
                let tcpr = tc.child("tcPr");
                let span = tcpr
                    .and_then(|p| p.child("gridSpan"))
                    .and_then(|g| g.attr("val"))
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(1)
                    .clamp(1, self.limits.max_table_columns);
                let continues = tcpr
                    .and_then(|p| p.child("vMerge"))
                    .is_some_and(|v| v.attr("val").is_none_or(|v| v == "continue"));
                let text = if continues {
                    rows.last()
                        .and_then(|above| above.get(row.len()))
                        .cloned()
                        .unwrap_or_default()
                } else {
                    self.cell_text(tc)?
                };
                for _ in 0..span {
                    if row.len() < self.limits.max_table_columns {
                        row.push(text.clone());
                    } else {
                        cut = true;
                    }
                }
            }
            rows.push(row);
        }
        if cut {
            self.warnings
                .push("a table was cut short at the row or column limit".to_string());
        }
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

    fn cell_text(&mut self, tc: &Element) -> Result<String, ExtractError> {
        self.cell_depth += 1;
        let mut blocks = Blocks::default();
        let result = self.blocks(tc, &mut blocks);
        self.cell_depth -= 1;
        result?;
        Ok(markdown::collapse_whitespace(&blocks.text))
    }

    /// Footnotes and endnotes, in the order the body refers to them.
    fn append_notes(
        &mut self,
        out: &mut Blocks,
        footnotes: Option<&Element>,
        endnotes: Option<&Element>,
    ) -> Result<(), ExtractError> {
        let refs = std::mem::take(&mut self.notes);
        for (i, note) in refs.iter().enumerate() {
            let part = if note.endnote { endnotes } else { footnotes };
            let Some(body) = part.and_then(|p| {
                p.elements()
                    .find(|n| n.attr("id") == Some(note.id.as_str()))
            }) else {
                continue;
            };
            let mut blocks = Blocks::default();
            self.blocks(body, &mut blocks)?;
            let text = markdown::collapse_whitespace(&blocks.text);
            out.push(&format!("[^{}]: {text}", i + 1), false);
        }
        Ok(())
    }
}

struct Label {
    bullet: bool,
    /// A plain `%N.` decimal label: written as a Markdown ordered item.
    simple: bool,
    text: String,
    level: usize,
}

fn format_number(value: u32, format: &str) -> String {
    match format {
        "lowerLetter" => letters(value).to_ascii_lowercase(),
        "upperLetter" => letters(value),
        "lowerRoman" => roman(value).to_ascii_lowercase(),
        "upperRoman" => roman(value),
        _ => value.to_string(),
    }
}

fn letters(value: u32) -> String {
    let index = value.saturating_sub(1);
    let letter = char::from(b'A' + (index % 26) as u8);
    letter.to_string().repeat((index / 26 + 1).min(10) as usize)
}

fn roman(mut value: u32) -> String {
    if value == 0 || value >= 4000 {
        return value.to_string();
    }
    let table = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ];
    let mut out = String::new();
    for (n, s) in table {
        while value >= n {
            out.push_str(s);
            value -= n;
        }
    }
    out
}

/// The branch of `mc:AlternateContent` to read: the first choice, else the fallback. Reading
/// both would repeat the text (they hold the same content for different readers).
fn alternate(e: &Element) -> Option<&Element> {
    e.child("Choice").or_else(|| e.child("Fallback"))
}

/// The text box contents below a drawing, one per box (choice or fallback, never both).
fn textboxes<'a>(e: &'a Element, out: &mut Vec<&'a Element>) {
    if e.name == "txbxContent" {
        out.push(e);
        return;
    }
    if e.name == "AlternateContent" {
        let before = out.len();
        if let Some(choice) = e.child("Choice") {
            textboxes(choice, out);
        }
        if out.len() == before
            && let Some(fallback) = e.child("Fallback")
        {
            textboxes(fallback, out);
        }
        return;
    }
    for child in e.elements() {
        textboxes(child, out);
    }
}

/// The alt text of the pictures below a drawing, one `*Image: ...*` line each (see
/// [`crate::pptx::picture_line`]). A drawing's own `wp:docPr` speaks for it; a drawing without
/// one (a group) speaks through its pictures' `pic:cNvPr`. VML pictures carry theirs in
/// `v:shape/@alt` or `v:imagedata/@o:title`. Like text boxes, one branch of an
/// `mc:AlternateContent` only.
fn picture_alts(e: &Element, out: &mut Vec<String>) {
    match e.name.as_str() {
        "inline" | "anchor" => {
            if let Some(line) = e.child("docPr").and_then(crate::pptx::picture_line) {
                out.push(line);
                return;
            }
            let mut pictures = Vec::new();
            e.find_all("pic", &mut pictures);
            out.extend(
                pictures
                    .into_iter()
                    .filter_map(|pic| pic.child("nvPicPr").and_then(|n| n.child("cNvPr")))
                    .filter_map(crate::pptx::picture_line),
            );
        }
        "shape" => {
            let alt = e
                .attr("alt")
                .map(|alt| ("descr".to_string(), alt.to_string()));
            let title = e
                .child("imagedata")
                .and_then(|i| i.attr("title"))
                .map(|t| ("title".to_string(), t.to_string()));
            let props = Element {
                name: "cNvPr".to_string(),
                attrs: alt.into_iter().chain(title).collect(),
                children: Vec::new(),
            };
            out.extend(crate::pptx::picture_line(&props));
        }
        "AlternateContent" => {
            let before = out.len();
            if let Some(choice) = e.child("Choice") {
                picture_alts(choice, out);
            }
            if out.len() == before
                && let Some(fallback) = e.child("Fallback")
            {
                picture_alts(fallback, out);
            }
        }
        "txbxContent" => {}
        _ => {
            for child in e.elements() {
                picture_alts(child, out);
            }
        }
    }
}

/// Table rows, looking through content controls and custom XML wrappers.
fn table_rows(tbl: &Element) -> Vec<&Element> {
    wrapped(tbl, "tr")
}

fn row_cells(tr: &Element) -> Vec<&Element> {
    wrapped(tr, "tc")
}

fn wrapped<'a>(e: &'a Element, name: &str) -> Vec<&'a Element> {
    let mut out = Vec::new();
    for child in e.elements() {
        if child.name == name {
            out.push(child);
        } else if matches!(child.name.as_str(), "sdt" | "sdtContent" | "customXml") {
            out.extend(wrapped(child, name));
        }
    }
    out
}

/// Office Math as LaTeX-like text: fractions, scripts, radicals, n-ary operators and
/// delimiters, the rest as its characters.
fn omml(e: &Element, out: &mut String) {
    let part = |name: &str| {
        let mut s = String::new();
        if let Some(c) = e.child(name) {
            omml(c, &mut s);
        }
        s
    };
    match e.name.as_str() {
        "t" => {
            for c in e.text().chars() {
                match math_symbol(c) {
                    Some(name) => {
                        out.push_str(name);
                        out.push(' ');
                    }
                    None => out.push(c),
                }
            }
        }
        "f" => out.push_str(&format!("\\frac{{{}}}{{{}}}", part("num"), part("den"))),
        "sSup" => out.push_str(&format!("{}^{{{}}}", part("e"), part("sup"))),
        "sSub" => out.push_str(&format!("{}_{{{}}}", part("e"), part("sub"))),
        "sSubSup" => out.push_str(&format!(
            "{}_{{{}}}^{{{}}}",
            part("e"),
            part("sub"),
            part("sup")
        )),
        "rad" => out.push_str(&format!("\\sqrt{{{}}}", part("e"))),
        "nary" => {
            let op = e
                .child("naryPr")
                .and_then(|p| p.child("chr"))
                .and_then(|c| c.attr("val"))
                .and_then(|v| v.chars().next())
                .unwrap_or('∫');
            let op = math_symbol(op).map_or_else(|| op.to_string(), str::to_string);
            out.push_str(&format!(
                "{op}_{{{}}}^{{{}}}{}",
                part("sub"),
                part("sup"),
                part("e")
            ));
        }
        "d" => {
            let pr = e.child("dPr");
            let chr = |name: &str, default: &str| {
                pr.and_then(|p| p.child(name))
                    .and_then(|c| c.attr("val"))
                    .unwrap_or(default)
                    .to_string()
            };
            let inner: Vec<String> = e
                .children_named("e")
                .map(|c| {
                    let mut s = String::new();
                    omml(c, &mut s);
                    s
                })
                .collect();
            out.push_str(&format!(
                "\\left{}{}\\right{}",
                chr("begChr", "("),
                inner.join(","),
                chr("endChr", ")")
            ));
        }
        "func" => out.push_str(&format!("{}{}", part("fName"), part("e"))),
        _ if e.name.ends_with("Pr") => {}
        _ => {
            for child in &e.children {
                if let Node::Element(c) = child {
                    omml(c, out);
                }
            }
        }
    }
}

pub(crate) fn math_symbol(c: char) -> Option<&'static str> {
    Some(match c {
        'π' => " \\pi",
        '∞' => " \\infty",
        '∑' => "\\sum",
        '∫' => "\\int",
        '∏' => "\\prod",
        '×' => " \\times",
        'α' => " \\alpha",
        'β' => " \\beta",
        'γ' => " \\gamma",
        'θ' => " \\theta",
        'λ' => " \\lambda",
        'μ' => " \\mu",
        'σ' => " \\sigma",
        '±' => " \\pm",
        '≤' => " \\leq",
        '≥' => " \\geq",
        '…' => " \\ldots",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{assert_in_order, corpus, mutate, run, zip_of};
    use proptest::prelude::*;

    const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

    fn docx(body: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        let document =
            format!(r#"<?xml version="1.0"?><w:document {W}><w:body>{body}</w:body></w:document>"#);
        let mut entries = vec![("word/document.xml", document.as_str())];
        entries.extend_from_slice(extra);
        zip_of(&entries)
    }

    fn markdown_of(bytes: &[u8]) -> String {
        run(extract, bytes, "docx").unwrap().markdown
    }

    #[test]
    fn corpus_sample_has_headings_lists_and_tables_in_order() {
        let Some(bytes) = corpus("office/docx/sources/word_sample.docx") else {
            return;
        };
        let md = markdown_of(&bytes);
        assert_in_order(
            &md,
            &[
                "Summer activities",
                "# Swimming in the lake",
                "- You can relax and look around",
                "1. Wear sunglasses",
                "3. Use sun cream",
                "| Leaves | Ash, Elm, Maple | 50 |",
                "1. Leaves",
            ],
        );
    }

    #[test]
    fn corpus_tables_repeat_merged_cells() {
        let Some(bytes) = corpus("office/docx/sources/word_tables.docx") else {
            return;
        };
        let md = markdown_of(&bytes);
        assert!(
            md.contains("| Cell 1.0 | Merged Cell 1.1 2.1 | Cell 1.2 |"),
            "{md}"
        );
        assert!(
            md.contains("| Cell 2.0 | Merged Cell 1.1 2.1 | Cell 2.2 |"),
            "{md}"
        );
    }

    #[test]
    fn corpus_lists_nest_and_text_boxes_are_read() {
        if let Some(bytes) = corpus("office/docx/sources/docx_lists.docx") {
            let md = markdown_of(&bytes);
            assert_in_order(
                &md,
                &[
                    "- List item 2",
                    "    - List item 1.1",
                    "        - List item 1.1.1",
                ],
            );
        }
        if let Some(bytes) = corpus("office/docx/sources/textbox.docx") {
            assert!(markdown_of(&bytes).contains("Student falls ill"));
        }
    }

    #[test]
    fn pictures_alt_text_follows_their_paragraph() {
        let ns = r#"xmlns:wp="wp" xmlns:a="a" xmlns:pic="pic" xmlns:wpg="wpg" xmlns:mc="mc" xmlns:v="v" xmlns:o="o""#;
        let inline = |doc_pr: &str, graphic: &str| {
            format!(
                r#"<w:r><w:drawing><wp:inline {ns}><wp:extent cx="1" cy="1"/><wp:docPr id="1" name="Picture 1" {doc_pr}/><a:graphic><a:graphicData>{graphic}</a:graphicData></a:graphic></wp:inline></w:drawing></w:r>"#
            )
        };
        let pic = |descr: &str| {
            format!(
                r#"<pic:pic><pic:nvPicPr><pic:cNvPr id="0" name="Picture" descr="{descr}"/><pic:cNvPicPr/></pic:nvPicPr></pic:pic>"#
            )
        };
        let body = format!(
            r#"<w:p><w:r><w:t>Look:</w:t></w:r>{}</w:p>
            <w:p>{}</w:p>
            <w:p><w:r><mc:AlternateContent {ns}><mc:Choice>{}</mc:Choice><mc:Fallback><w:pict><v:shape alt="Fallback twin"/></w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>
            <w:p><w:r><w:pict><v:shape {ns} alt=""><v:imagedata o:title="Old VML chart"/></v:shape></w:pict></w:r></w:p>
            <w:p><w:r><w:t>End</w:t></w:r></w:p>"#,
            inline(
                r#"descr="A cartoon duck holding a paper&#xA;&#xA;Description automatically generated""#,
                &pic("A cartoon duck holding a paper")
            ),
            inline(
                "",
                &format!(
                    "<wpg:wgp>{}{}</wpg:wgp>",
                    pic("Left duck"),
                    pic("Right duck")
                )
            ),
            inline(r#"title="Chosen""#, ""),
        );
        let md = markdown_of(&docx(&body, &[]));
        assert_eq!(
            md,
            "Look:\n\n*Image: A cartoon duck holding a paper*\n\n*Image: Left duck*\n\n\
             *Image: Right duck*\n\n*Image: Chosen*\n\n*Image: Old VML chart*\n\nEnd"
        );
    }

    #[test]
    fn corpus_picture_alt_text() {
        let Some(bytes) = corpus("office/docx/sources/docx_grouped_images.docx") else {
            return;
        };
        let md = markdown_of(&bytes);
        assert_in_order(
            &md,
            &[
                "## Grouped images",
                "There are 2 pictures grouped together",
                "*Image: Docling*",
                "each wrapped “Top and bottom”",
                "*Image: Docling Java*",
            ],
        );
    }

    #[test]
    fn synthetic_document_covers_each_feature() {
        let styles = format!(
            r#"<w:styles {W}><w:style w:styleId="H1"><w:name w:val="heading 1"/></w:style>
            <w:style w:styleId="Custom"><w:name w:val="My Outline"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style></w:styles>"#
        );
        let numbering = format!(
            r#"<w:numbering {W}><w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>
            <w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/><w:lvlText w:val="o"/></w:lvl></w:abstractNum><w:num w:numId="5"><w:abstractNumId w:val="0"/></w:num></w:numbering>"#
        );
        let footnotes = format!(
            r#"<w:footnotes {W}><w:footnote w:id="1"><w:p><w:r><w:t>The note text.</w:t></w:r></w:p></w:footnote></w:footnotes>"#
        );
        let core = r#"<cp:coreProperties xmlns:cp="c" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>My Title</dc:title><dc:creator>Ann</dc:creator><dc:language>en-GB</dc:language></cp:coreProperties>"#;
        let body = r#"
            <w:p><w:pPr><w:pStyle w:val="H1"/></w:pPr><w:r><w:t>Intro</w:t></w:r></w:p>
            <w:p><w:pPr><w:pStyle w:val="Custom"/></w:pPr><w:r><w:t>Outlined</w:t></w:r></w:p>
            <w:p><w:r><w:t>Tab</w:t><w:tab/><w:t>then</w:t><w:br/><w:t>break</w:t></w:r><w:del><w:r><w:delText>GONE</w:delText></w:r></w:del><w:hyperlink><w:r><w:t xml:space="preserve"> linked</w:t></w:r></w:hyperlink><w:r><w:footnoteReference w:id="1"/></w:r></w:p>
            <w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="5"/></w:numPr></w:pPr><w:r><w:t>first</w:t></w:r></w:p>
            <w:p><w:pPr><w:numPr><w:ilvl w:val="1"/><w:numId w:val="5"/></w:numPr></w:pPr><w:r><w:t>nested</w:t></w:r></w:p>
            <w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="5"/></w:numPr></w:pPr><w:r><w:t>second</w:t></w:r></w:p>
            <w:tbl><w:tr><w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr><w:p><w:r><w:t>wide</w:t></w:r></w:p></w:tc></w:tr>
              <w:tr><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>inner</w:t></w:r></w:p></w:tc></w:tr></w:tbl></w:tc><w:tc><w:p><w:r><w:t>b</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
            <w:sdt><w:sdtContent><w:p><w:r><w:t>In a control</w:t></w:r></w:p></w:sdtContent></w:sdt>
            <w:p><w:r><w:drawing><wps:txbx xmlns:wps="x"><w:txbxContent><w:p><w:r><w:t>Boxed text</w:t></w:r></w:p></w:txbxContent></wps:txbx></w:drawing></w:r></w:p>"#;
        let bytes = docx(
            body,
            &[
                ("word/styles.xml", &styles),
                ("word/numbering.xml", &numbering),
                ("word/footnotes.xml", &footnotes),
                ("docProps/core.xml", core),
            ],
        );
        let extraction = run(extract, &bytes, "docx").unwrap();
        let md = extraction.markdown;
        assert_in_order(
            &md,
            &[
                "## Intro",
                "### Outlined",
                "Tab then\nbreak linked[^1]",
                "1. first\n    - nested\n2. second",
                "| wide | wide |",
                "| a inner | b |",
                "In a control",
                "Boxed text",
                "[^1]: The note text.",
            ],
        );
        assert!(!md.contains("GONE"));
        assert_eq!(extraction.metadata.title.as_deref(), Some("My Title"));
        assert_eq!(extraction.metadata.author.as_deref(), Some("Ann"));
        assert_eq!(extraction.metadata.language.as_deref(), Some("en-GB"));
    }

    #[test]
    fn malformed_and_hostile_files_get_clear_codes() {
        let code = |bytes: &[u8]| run(extract, bytes, "docx").unwrap_err().code;
        assert_eq!(code(b"not a zip"), "malformed_document");
        assert_eq!(
            code(&zip_of(&[("other.xml", "<a/>")])),
            "malformed_document"
        );
        assert_eq!(code(&docx("<w:p><w:r>", &[])), "malformed_document");
        let deep = format!("{}{}", "<w:sdt>".repeat(300), "</w:sdt>".repeat(300));
        assert_eq!(code(&docx(&deep, &[])), "document_too_complex");
        if let Some(bytes) = corpus("hostile/malformed/testWORD_truncated.docx") {
            assert_eq!(code(&bytes), "malformed_document");
        }
        if let Some(bytes) = corpus("hostile/malformed/test_recursive_embedded.docx") {
            assert!(run(extract, &bytes, "docx").is_ok());
        }
        if let Some(bytes) = corpus("hostile/bombs/zbsm.zip") {
            assert_ne!(
                run(extract, &bytes, "docx").err().map(|e| e.code),
                Some("extractor_crashed")
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let result = run(extract, &bytes, "docx");
            prop_assert!(result.err().is_none_or(|e| e.code != "extractor_crashed"));
        }

        #[test]
        fn mutated_corpus_files_never_panic(cut in 0usize..200_000, flips in proptest::collection::vec((0usize..200_000, any::<u8>()), 0..8)) {
            let Some(mut bytes) = corpus("office/docx/sources/word_sample.docx") else {
                return Ok(());
            };
            mutate(&mut bytes, &flips, cut);
            let result = run(extract, &bytes, "docx");
            prop_assert!(result.err().is_none_or(|e| e.code != "extractor_crashed"));
        }
    }
}
