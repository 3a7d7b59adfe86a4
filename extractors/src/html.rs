//! HTML and XHTML pages to Markdown: charset sniffing, a spec-compliant parse (html5ever
//! through `scraper`), then a depth-bounded walk that writes headings, paragraphs, lists,
//! tables, code blocks and block quotes. EPUB chapters go through [`to_markdown`] too.
//!
//! Nesting deeper than `limits.max_nesting_depth` is not an error: the subtree past that depth
//! is flattened to its text, so deep real pages keep their words and the walk stays bounded.

use ego_tree::NodeRef;
use encoding_rs::Encoding;
use scraper::{Html, Node};

use crate::markdown::{collapse_whitespace, heading, push_block, table};
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

/// Whether links are written as `[text](href)` (true) or as their text alone.
const KEEP_LINK_TARGETS: bool = true;
/// Lists, quotes and table cells nested deeper than this are written without indentation:
/// each level copies its text once more, and the cost must stay linear in practice.
const MAX_INDENT_LEVELS: usize = 12;
/// How many elements are visited between two `control.check()` calls.
const CHECK_EVERY: usize = 256;
/// The HTML spec caps `colspan` at 1000 and `rowspan` at 65534.
const MAX_SPAN: usize = 1000;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let (text, encoding) = decode_html(input.bytes)?;
    let mut extraction = convert(&text, true, limits, control)?;
    extraction.metadata.encoding = Some(encoding.to_string());
    Ok(extraction)
}

/// Converts an HTML document (already decoded) to Markdown, with its title and language.
/// Navigation is dropped: a page (an e-book chapter, a mail body) made only of it gives no
/// text.
pub fn to_markdown(
    html: &str,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    convert(html, false, limits, control)
}

/// [`to_markdown`]; with `navigation_fallback`, a page whose text is all navigation (an
/// EPUB's `nav.xhtml`, a site map handed in alone) keeps that navigation rather than coming
/// out empty: only the whole document's result decides, so a page with any other text still
/// drops its menus.
fn convert(
    html: &str,
    navigation_fallback: bool,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    control.check()?;
    check_tag_nesting(html, limits)?;
    let html = expand_self_closed_raw_text(html);
    let document = Html::parse_document(&html);
    control.check()?;
    let root = document.tree.root();
    let ctx = Context {
        limits,
        control,
        visited: std::cell::Cell::new(0),
        truncated: std::cell::Cell::new(false),
    };
    let mut writer = Writer::default();
    let body = find_element(root, "body").unwrap_or(root);
    walk_children(&mut writer, &ctx, body, 0, 0)?;
    let mut markdown = writer.finish();
    let mut warnings = Vec::new();
    if navigation_fallback && markdown.trim().is_empty() {
        markdown = navigation_text(&ctx, body)?;
        if !markdown.trim().is_empty() {
            warnings.push(
                "the page has no text but its navigation, which was kept as its text".to_string(),
            );
        }
    }
    if ctx.truncated.get() {
        warnings.push(format!(
            "the page was cut short at {} characters of Markdown",
            limits.max_output_chars
        ));
    }
    Ok(Extraction {
        markdown,
        metadata: Metadata {
            title: find_element(root, "title").map(|t| collapse_whitespace(&text_of(t))),
            language: find_element(root, "html")
                .and_then(|h| attr(h, "lang").or_else(|| attr(h, "xml:lang")))
                .map(str::to_string),
            ..Metadata::default()
        },
        warnings,
        ..Extraction::default()
    })
}

/// Decodes the page: a byte-order mark, then a `<meta>` charset near the top, then UTF-8 if
/// valid, then detection.
pub fn decode_html(bytes: &[u8]) -> Result<(String, &'static str), ExtractError> {
    if let Some((encoding, bom_len)) = Encoding::for_bom(bytes) {
        let rest = bytes.get(bom_len..).unwrap_or_default();
        let (text, _) = encoding.decode_without_bom_handling(rest);
        return Ok((text.into_owned(), encoding.name()));
    }
    if let Some(encoding) = meta_charset(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(bytes);
        return Ok((text.into_owned(), encoding.name()));
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Ok((text.to_string(), encoding_rs::UTF_8.name()));
    }
    let decoded = crate::plain::decode(bytes)?;
    Ok((decoded.text, decoded.encoding))
}

/// The charset a `<meta charset>` or `http-equiv` tag declares in the first 4096 bytes.
/// UTF-16 declarations are ignored (a UTF-16 page would not be readable as ASCII here).
fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = bytes.get(..bytes.len().min(4096)).unwrap_or_default();
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = head.get(from..).and_then(|rest| rest.find("<meta")) {
        let start = from + found;
        let end = head
            .get(start..)
            .and_then(|rest| rest.find('>'))
            .map_or(head.len(), |e| start + e);
        let tag = head.get(start..end).unwrap_or_default();
        if let Some(pos) = tag.find("charset") {
            let value = tag
                .get(pos + "charset".len()..)
                .unwrap_or_default()
                .trim_start()
                .strip_prefix('=')
                .unwrap_or_default()
                .trim_start()
                .trim_start_matches(['"', '\'']);
            let label: String = value
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
                .collect();
            if let Some(encoding) = Encoding::for_label(label.as_bytes()) {
                if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
                    return Some(encoding_rs::UTF_8);
                }
                return Some(encoding);
            }
        }
        from = end.max(start + 1);
    }
    None
}

/// Tags left open past this multiple of `max_nesting_depth` make a page hostile: the HTML
/// parser's scope checks walk the stack of open elements, so its time grows with depth times
/// tags (100,000 nested `<div>` take most of a minute).
const OPEN_TAGS_PER_DEPTH: usize = 16;

/// Estimates how deep the page nests before parsing it: start tags minus end tags, leaving
/// out void elements, elements whose end tag is optional and formatting elements (the parser
/// closes or caps those itself).
fn check_tag_nesting(html: &str, limits: &Limits) -> Result<(), ExtractError> {
    let cap = limits
        .max_nesting_depth
        .saturating_mul(OPEN_TAGS_PER_DEPTH)
        .max(64);
    let bytes = html.as_bytes();
    let mut open = 0usize;
    let mut at = 0;
    while let Some(found) = bytes
        .get(at..)
        .and_then(|rest| rest.iter().position(|&b| b == b'<'))
    {
        let start = at + found + 1;
        let closing = bytes.get(start) == Some(&b'/');
        let name_start = if closing { start + 1 } else { start };
        let name_len = bytes.get(name_start..).map_or(0, |rest| {
            rest.iter()
                .take(16)
                .take_while(|b| b.is_ascii_alphanumeric())
                .count()
        });
        at = name_start + name_len;
        let Some(name) = html.get(name_start..name_start + name_len) else {
            continue;
        };
        if name.is_empty() || !name.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) {
            continue;
        }
        if is_self_balancing(&name.to_ascii_lowercase()) {
            continue;
        }
        if closing {
            open = open.saturating_sub(1);
        } else {
            open += 1;
            if open > cap {
                return Err(ExtractError::too_complex(format!(
                    "the page leaves more than {cap} elements open (nested too deeply)"
                )));
            }
        }
    }
    Ok(())
}

fn is_self_balancing(name: &str) -> bool {
    matches!(
        name,
        "area"
            | "base"
            | "br"
            | "col"
            | "embed"
            | "hr"
            | "img"
            | "input"
            | "link"
            | "meta"
            | "source"
            | "track"
            | "wbr"
            | "param"
            | "keygen"
            | "p"
            | "li"
            | "dt"
            | "dd"
            | "tr"
            | "td"
            | "th"
            | "thead"
            | "tbody"
            | "tfoot"
            | "option"
            | "optgroup"
            | "rb"
            | "rt"
            | "rp"
            | "rtc"
            | "colgroup"
            | "caption"
            | "html"
            | "head"
            | "body"
            | "a"
            | "b"
            | "big"
            | "code"
            | "em"
            | "font"
            | "i"
            | "nobr"
            | "s"
            | "small"
            | "strike"
            | "strong"
            | "tt"
            | "u"
    )
}

/// XHTML (EPUB chapters, `.xhtml` pages) may write `<title/>` or `<script src=".."/>`; an
/// HTML parser reads those as opening tags whose raw text runs to the end of the page, so
/// they are written out as an opening and a closing tag first.
fn expand_self_closed_raw_text(html: &str) -> std::borrow::Cow<'_, str> {
    const RAW_TEXT: [&str; 7] = [
        "title", "script", "style", "textarea", "iframe", "noscript", "xmp",
    ];
    let lower = html.to_ascii_lowercase();
    let mut out = String::new();
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = lower.get(from..).and_then(|rest| rest.find('<')) {
        let start = from + found;
        from = start + 1;
        let Some(name) = RAW_TEXT.iter().find(|name| {
            lower.get(start + 1..).is_some_and(|rest| {
                rest.starts_with(*name)
                    && rest
                        .get(name.len()..)
                        .is_some_and(|after| after.starts_with([' ', '\t', '\n', '\r', '/', '>']))
            })
        }) else {
            continue;
        };
        let Some(end) = lower.get(start..).and_then(|rest| rest.find('>')) else {
            break;
        };
        let close = start + end;
        if lower.get(close.saturating_sub(1)..close) == Some("/") && close > start + name.len() {
            out.push_str(html.get(copied..close - 1).unwrap_or_default());
            out.push_str("></");
            out.push_str(name);
            out.push('>');
            copied = close + 1;
        }
        from = close + 1;
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(html);
    }
    out.push_str(html.get(copied..).unwrap_or_default());
    std::borrow::Cow::Owned(out)
}

struct Context<'a> {
    limits: &'a Limits,
    control: &'a Control,
    visited: std::cell::Cell<usize>,
    truncated: std::cell::Cell<bool>,
}

impl Context<'_> {
    fn tick(&self) -> Result<(), ExtractError> {
        let visited = self.visited.get() + 1;
        self.visited.set(visited);
        if visited.is_multiple_of(CHECK_EVERY) {
            self.control.check()?;
        }
        Ok(())
    }
}

/// Markdown being written: finished blocks, plus the paragraph in progress.
#[derive(Default)]
struct Writer {
    out: String,
    inline: String,
    /// Bumped at each flush, so that an inline wrapper (`**`, `` ` ``) knows whether its
    /// content stayed on one paragraph.
    flushes: usize,
    /// Table cells: tables inside are flattened, headings written as text.
    in_cell: bool,
    /// Inside a link: an image's alt text is the link's text.
    in_link: bool,
}

impl Writer {
    fn nested(&self) -> Writer {
        Writer {
            in_cell: self.in_cell,
            in_link: self.in_link,
            ..Writer::default()
        }
    }

    fn push_text(&mut self, text: &str) {
        for (i, word) in text.split_whitespace().enumerate() {
            let space_before = i > 0 || text.starts_with(char::is_whitespace);
            if space_before {
                self.space();
            }
            self.inline.push_str(word);
        }
        if text.ends_with(char::is_whitespace) {
            self.space();
        }
    }

    fn space(&mut self) {
        if !self.inline.is_empty() && !self.inline.ends_with([' ', '\n']) {
            self.inline.push(' ');
        }
    }

    fn line_break(&mut self) {
        let trimmed = self.inline.trim_end_matches(' ').len();
        self.inline.truncate(trimmed);
        if !self.inline.is_empty() {
            self.inline.push('\n');
        }
    }

    fn flush(&mut self) {
        self.flushes += 1;
        if self.inline.trim().is_empty() {
            self.inline.clear();
            return;
        }
        let paragraph: Vec<&str> = self
            .inline
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        push_block(&mut self.out, &paragraph.join("\n"));
        self.inline.clear();
    }

    fn block(&mut self, block: &str) {
        self.flush();
        push_block(&mut self.out, block);
    }

    fn finish(mut self) -> String {
        self.flush();
        self.out
    }

    fn len(&self) -> usize {
        self.out.len() + self.inline.len()
    }
}

type Dom<'a> = NodeRef<'a, Node>;

fn walk_children(
    w: &mut Writer,
    ctx: &Context<'_>,
    node: Dom<'_>,
    depth: usize,
    indent: usize,
) -> Result<(), ExtractError> {
    for child in node.children() {
        walk(w, ctx, child, depth + 1, indent)?;
    }
    Ok(())
}

fn walk(
    w: &mut Writer,
    ctx: &Context<'_>,
    node: Dom<'_>,
    depth: usize,
    indent: usize,
) -> Result<(), ExtractError> {
    ctx.tick()?;
    if ctx.truncated.get() {
        return Ok(());
    }
    if w.len() > ctx.limits.max_output_chars {
        ctx.truncated.set(true);
        return Ok(());
    }
    let element = match node.value() {
        Node::Text(text) => {
            w.push_text(text);
            return Ok(());
        }
        Node::Element(element) => element,
        Node::Document | Node::Fragment => return walk_children(w, ctx, node, depth, indent),
        _ => return Ok(()),
    };
    if is_dropped(element) {
        return Ok(());
    }
    if depth > ctx.limits.max_nesting_depth {
        w.push_text(" ");
        w.push_text(&text_of(node));
        w.push_text(" ");
        return Ok(());
    }
    let name = element.name();
    match name {
        "br" => w.line_break(),
        "hr" => w.flush(),
        "img" if w.in_link => {
            if let Some(alt) = element.attr("alt").filter(|a| !a.trim().is_empty()) {
                w.push_text(" ");
                w.push_text(alt);
                w.push_text(" ");
            }
        }
        "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
            write_heading(w, ctx, node, name, depth, indent)?
        }
        "ul" | "ol" | "menu" | "dl" => write_list(w, ctx, node, depth, indent)?,
        "table" => write_table(w, ctx, node, depth, indent)?,
        "pre" | "listing" | "xmp" | "plaintext" => write_pre(w, node),
        "blockquote" => write_quote(w, ctx, node, depth, indent)?,
        "b" | "strong" => write_wrapped(w, ctx, node, "**", depth, indent)?,
        "i" | "em" => write_wrapped(w, ctx, node, "*", depth, indent)?,
        "s" | "del" | "strike" => write_wrapped(w, ctx, node, "~~", depth, indent)?,
        "code" | "kbd" | "samp" | "tt" => write_code(w, ctx, node, depth, indent)?,
        "a" => write_link(w, ctx, node, depth, indent)?,
        "li" | "dt" | "dd" => {
            // A list item outside a list (or past the indentation cap): a paragraph.
            w.flush();
            walk_children(w, ctx, node, depth, indent)?;
            w.flush();
        }
        "td" | "th" => {
            w.push_text(" ");
            walk_children(w, ctx, node, depth, indent)?;
            w.push_text(" ");
        }
        _ if is_block(name) => {
            w.flush();
            walk_children(w, ctx, node, depth, indent)?;
            w.flush();
        }
        _ => walk_children(w, ctx, node, depth, indent)?,
    }
    Ok(())
}

/// The navigation elements (`<nav>`, `role="navigation"`) of `body` that are not hidden nor
/// inside a dropped element, written in order (one inside another is written with it). One
/// pass over the tree, whatever the number of elements and their depth.
fn navigation_text(ctx: &Context<'_>, body: Dom<'_>) -> Result<String, ExtractError> {
    let mut writer = Writer::default();
    let mut skip_until: Option<ego_tree::NodeId> = None;
    let mut depth = 0usize;
    for edge in body.traverse() {
        match edge {
            ego_tree::iter::Edge::Open(node) => {
                depth += 1;
                if skip_until.is_some() || node.id() == body.id() {
                    continue;
                }
                ctx.tick()?;
                let Some(element) = node.value().as_element() else {
                    continue;
                };
                if is_navigation(element) && !is_hidden(element) {
                    walk_children(&mut writer, ctx, node, depth, 0)?;
                    writer.flush();
                    skip_until = Some(node.id());
                } else if is_dropped(element) {
                    skip_until = Some(node.id());
                }
            }
            ego_tree::iter::Edge::Close(node) => {
                depth = depth.saturating_sub(1);
                if skip_until == Some(node.id()) {
                    skip_until = None;
                }
            }
        }
    }
    Ok(writer.finish())
}

fn is_navigation(element: &scraper::node::Element) -> bool {
    element.name() == "nav"
        || element
            .attr("role")
            .is_some_and(|r| r.trim().eq_ignore_ascii_case("navigation"))
}

fn is_dropped(element: &scraper::node::Element) -> bool {
    if matches!(
        element.name(),
        "script"
            | "style"
            | "noscript"
            | "template"
            | "iframe"
            | "svg"
            | "head"
            | "title"
            | "nav"
            | "object"
            | "embed"
            | "canvas"
            | "select"
            | "input"
            | "textarea"
    ) {
        return true;
    }
    // Navigation is page chrome, not the document's text (dropping it costs wiki_duck.html
    // about 0.015 of similarity against a ground truth that keeps its menus).
    is_navigation(element) || is_hidden(element)
}

/// Hidden by an attribute or an inline style.
fn is_hidden(element: &scraper::node::Element) -> bool {
    if element.attr("hidden").is_some() {
        return true;
    }
    if element
        .attr("aria-hidden")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return true;
    }
    element.attr("style").is_some_and(|style| {
        let style: String = style
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        style.contains("display:none") || style.contains("visibility:hidden")
    })
}

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "section"
            | "article"
            | "main"
            | "header"
            | "footer"
            | "aside"
            | "address"
            | "figure"
            | "figcaption"
            | "form"
            | "fieldset"
            | "legend"
            | "details"
            | "summary"
            | "center"
            | "caption"
            | "hgroup"
            | "search"
            | "dialog"
            | "body"
            | "html"
            | "tr"
            | "thead"
            | "tbody"
            | "tfoot"
            | "option"
            | "frameset"
            | "noframes"
    )
}

fn write_heading(
    w: &mut Writer,
    ctx: &Context<'_>,
    node: Dom<'_>,
    name: &str,
    depth: usize,
    indent: usize,
) -> Result<(), ExtractError> {
    w.flush();
    let mut inner = w.nested();
    inner.in_cell = true;
    walk_children(&mut inner, ctx, node, depth, indent)?;
    let text = collapse_whitespace(&inner.finish());
    if text.is_empty() {
        return Ok(());
    }
    if w.in_cell {
        w.push_text(&text);
        w.flush();
    } else {
        let level = name
            .strip_prefix('h')
            .and_then(|l| l.parse().ok())
            .unwrap_or(1);
        w.block(&heading(level, &text));
    }
    Ok(())
}

/// Inline formatting around content that stayed within one paragraph; left bare otherwise.
fn write_wrapped(
    w: &mut Writer,
    ctx: &Context<'_>,
    node: Dom<'_>,
    marker: &str,
    depth: usize,
    indent: usize,
) -> Result<(), ExtractError> {
    let start = w.inline.len();
    let flushes = w.flushes;
    walk_children(w, ctx, node, depth, indent)?;
    if w.flushes != flushes {
        return Ok(());
    }
    let Some(content) = w.inline.get(start..) else {
        return Ok(());
    };
    let trimmed = content.trim();
    if trimmed.is_empty() || trimmed.contains('\n') || trimmed.contains(marker) {
        return Ok(());
    }
    let leading = if content.starts_with(' ') { " " } else { "" };
    let trailing = if content.ends_with(' ') { " " } else { "" };
    let wrapped = format!("{leading}{marker}{trimmed}{marker}{trailing}");
    w.inline.truncate(start);
    w.inline.push_str(&wrapped);
    Ok(())
}

fn write_code(
    w: &mut Writer,
    ctx: &Context<'_>,
    node: Dom<'_>,
    depth: usize,
    indent: usize,
) -> Result<(), ExtractError> {
    write_wrapped(w, ctx, node, "`", depth, indent)
}

fn write_link(
    w: &mut Writer,
    ctx: &Context<'_>,
    node: Dom<'_>,
    depth: usize,
    indent: usize,
) -> Result<(), ExtractError> {
    let start = w.inline.len();
    let flushes = w.flushes;
    let was_in_link = std::mem::replace(&mut w.in_link, true);
    let walked = walk_children(w, ctx, node, depth, indent);
    w.in_link = was_in_link;
    walked?;
    if !KEEP_LINK_TARGETS || w.flushes != flushes {
        return Ok(());
    }
    let Some(href) = attr(node, "href").map(str::trim) else {
        return Ok(());
    };
    if href.is_empty()
        || href.starts_with("javascript:")
        || href.contains(char::is_whitespace)
        || href.contains(['(', ')'])
    {
        return Ok(());
    }
    let Some(content) = w.inline.get(start..) else {
        return Ok(());
    };
    let trimmed = content.trim();
    if trimmed.is_empty() || trimmed.contains(['\n', '[', ']']) {
        return Ok(());
    }
    let leading = if content.starts_with(' ') { " " } else { "" };
    let trailing = if content.ends_with(' ') { " " } else { "" };
    let wrapped = format!("{leading}[{trimmed}]({href}){trailing}");
    w.inline.truncate(start);
    w.inline.push_str(&wrapped);
    Ok(())
}

fn write_pre(w: &mut Writer, node: Dom<'_>) {
    let text = pre_text(node);
    let text = text.trim_end();
    if text.trim().is_empty() {
        return;
    }
    if w.in_cell {
        w.push_text(text);
        return;
    }
    let fence = if text.contains("```") { "~~~~" } else { "```" };
    w.block(&format!("{fence}\n{text}\n{fence}"));
}

/// The text of a `pre` as it is laid out: whitespace kept, `<br>` as newlines.
fn pre_text(node: Dom<'_>) -> String {
    let mut out = String::new();
    for descendant in node.descendants() {
        match descendant.value() {
            Node::Text(text) => out.push_str(text),
            Node::Element(e) if e.name() == "br" => out.push('\n'),
            _ => {}
        }
    }
    out
}

fn write_quote(
    w: &mut Writer,
    ctx: &Context<'_>,
    node: Dom<'_>,
    depth: usize,
    indent: usize,
) -> Result<(), ExtractError> {
    if w.in_cell || indent >= MAX_INDENT_LEVELS {
        w.flush();
        walk_children(w, ctx, node, depth, indent)?;
        w.flush();
        return Ok(());
    }
    let mut inner = w.nested();
    walk_children(&mut inner, ctx, node, depth, indent + 1)?;
    let text = inner.finish();
    w.block(&crate::markdown::quote(&text));
    Ok(())
}

fn write_list(
    w: &mut Writer,
    ctx: &Context<'_>,
    node: Dom<'_>,
    depth: usize,
    indent: usize,
) -> Result<(), ExtractError> {
    if w.in_cell || indent >= MAX_INDENT_LEVELS {
        w.flush();
        walk_children(w, ctx, node, depth, indent)?;
        w.flush();
        return Ok(());
    }
    let ordered = node.value().as_element().is_some_and(|e| e.name() == "ol");
    let mut number: i64 = attr(node, "start")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    let mut items: Vec<String> = Vec::new();
    let mut loose = Writer::default();
    for child in node.children() {
        ctx.tick()?;
        let child_name = child.value().as_element().map(|e| e.name());
        match child_name {
            Some("li" | "dt" | "dd") => {
                let mut inner = w.nested();
                walk_children(&mut inner, ctx, child, depth + 1, indent + 1)?;
                let mut text = inner.finish();
                if child_name == Some("dt") && !text.contains('\n') && !text.contains("**") {
                    text = format!("**{text}**");
                }
                let marker = if ordered {
                    let m = format!("{number}.");
                    number = number.saturating_add(1);
                    m
                } else {
                    "-".to_string()
                };
                let item = list_item(&marker, &text);
                let item = if child_name == Some("dd") {
                    indent_lines(&item)
                } else {
                    item
                };
                items.push(item);
            }
            Some(name) if is_dropped_element(child) || name == "script" => {}
            _ => {
                // Stray content between items (text, nested lists without `li`).
                walk(&mut loose, ctx, child, depth + 1, indent + 1)?;
                let text = std::mem::take(&mut loose).finish();
                if !text.trim().is_empty() {
                    items.push(text);
                }
            }
        }
    }
    w.block(&items.join("\n"));
    Ok(())
}

fn is_dropped_element(node: Dom<'_>) -> bool {
    node.value().as_element().is_some_and(is_dropped)
}

/// `- text`, continuation lines indented under the marker; blank lines dropped so that the
/// list stays tight.
fn list_item(marker: &str, text: &str) -> String {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("");
    let mut out = format!("{marker} {first}");
    for line in lines {
        out.push('\n');
        out.push_str("    ");
        out.push_str(line);
    }
    out
}

fn indent_lines(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn write_table(
    w: &mut Writer,
    ctx: &Context<'_>,
    node: Dom<'_>,
    depth: usize,
    indent: usize,
) -> Result<(), ExtractError> {
    if w.in_cell || indent >= MAX_INDENT_LEVELS {
        // Nested tables are flattened into the text of their cells.
        w.push_text(" ");
        walk_children(w, ctx, node, depth, indent)?;
        w.push_text(" ");
        return Ok(());
    }
    w.flush();
    let mut rows: Vec<Vec<String>> = Vec::new();
    // Cells still covered by a rowspan from above: (column, rows left, text).
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    let max_columns = ctx.limits.max_table_columns.max(1);
    for row in table_rows(node) {
        ctx.tick()?;
        if rows.len() >= ctx.limits.max_table_rows {
            break;
        }
        let mut cells: Vec<String> = Vec::new();
        let fill_spans = |cells: &mut Vec<String>, spans: &mut Vec<(usize, usize, String)>| {
            while let Some(pos) = spans.iter().position(|(col, _, _)| *col == cells.len()) {
                let Some(span) = spans.get_mut(pos) else {
                    break;
                };
                cells.push(span.2.clone());
                span.1 -= 1;
                if span.1 == 0 {
                    spans.remove(pos);
                }
            }
        };
        for cell in row.children() {
            let Some(element) = cell.value().as_element() else {
                continue;
            };
            if !matches!(element.name(), "td" | "th") || is_dropped(element) {
                continue;
            }
            fill_spans(&mut cells, &mut spans);
            let mut inner = Writer {
                in_cell: true,
                ..Writer::default()
            };
            walk_children(&mut inner, ctx, cell, depth + 2, indent + 1)?;
            let text = collapse_whitespace(&inner.finish());
            let colspan = span_of(element.attr("colspan")).min(MAX_SPAN);
            let rowspan = span_of(element.attr("rowspan")).min(ctx.limits.max_table_rows);
            for _ in 0..colspan {
                if cells.len() >= max_columns {
                    break;
                }
                if rowspan > 1 {
                    spans.push((cells.len(), rowspan - 1, text.clone()));
                }
                cells.push(text.clone());
            }
        }
        fill_spans(&mut cells, &mut spans);
        cells.truncate(max_columns);
        if !cells.is_empty() {
            rows.push(cells);
        }
    }
    if let Some(caption) = node.children().find(|c| {
        c.value()
            .as_element()
            .is_some_and(|e| e.name() == "caption")
    }) {
        walk(w, ctx, caption, depth + 1, indent)?;
        w.flush();
    }
    if rows.iter().all(|r| r.iter().all(|c| c.is_empty())) {
        return Ok(());
    }
    w.block(&table(&rows));
    Ok(())
}

/// The `tr` of a table in order, through `thead`/`tbody`/`tfoot` but not into nested tables.
fn table_rows<'a>(table: Dom<'a>) -> Vec<Dom<'a>> {
    let mut rows = Vec::new();
    for child in table.children() {
        match child.value().as_element().map(|e| e.name()) {
            Some("tr") => rows.push(child),
            Some("thead" | "tbody" | "tfoot") => rows.extend(
                child
                    .children()
                    .filter(|c| c.value().as_element().is_some_and(|e| e.name() == "tr")),
            ),
            _ => {}
        }
    }
    rows
}

fn span_of(value: Option<&str>) -> usize {
    value
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .max(1)
}

fn find_element<'a>(root: Dom<'a>, name: &str) -> Option<Dom<'a>> {
    root.descendants()
        .find(|n| n.value().as_element().is_some_and(|e| e.name() == name))
}

fn attr<'a>(node: Dom<'a>, name: &str) -> Option<&'a str> {
    node.value().as_element().and_then(|e| e.attr(name))
}

/// All the text under `node`, skipping scripts and styles; iterative, so any depth is fine.
fn text_of(node: Dom<'_>) -> String {
    let mut out = String::new();
    let mut skip_until: Option<ego_tree::NodeId> = None;
    for edge in node.traverse() {
        match edge {
            ego_tree::iter::Edge::Open(n) => {
                if skip_until.is_some() {
                    continue;
                }
                match n.value() {
                    Node::Text(text) => {
                        out.push_str(text);
                    }
                    Node::Element(e) if is_dropped(e) && n.id() != node.id() => {
                        skip_until = Some(n.id());
                    }
                    Node::Element(e) if e.name() == "br" || is_block(e.name()) => out.push(' '),
                    _ => {}
                }
            }
            ego_tree::iter::Edge::Close(n) => {
                if skip_until == Some(n.id()) {
                    skip_until = None;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn md(html: &str) -> String {
        crate::markdown::tidy(
            &to_markdown(html, &Limits::default(), &Control::default())
                .unwrap()
                .markdown,
        )
    }

    fn corpus(name: &str) -> Option<Vec<u8>> {
        crate::testing::corpus(&format!("office/html/sources/{name}"))
    }

    fn run(bytes: &[u8]) -> Result<Extraction, ExtractError> {
        extract(
            Input {
                path: std::path::Path::new("page.html"),
                bytes,
                extension: "html",
            },
            &Limits::default(),
            &Control::default(),
        )
    }

    #[test]
    fn headings_paragraphs_and_lists() {
        let out = md(
            "<h1>Title</h1><p>One   two\nthree</p><ul><li>a<ul><li>b</li></ul></li><li>c</li></ul><ol start=3><li>x</li><li>y</li></ol>",
        );
        assert_eq!(
            out,
            "# Title\n\nOne two three\n\n- a\n    - b\n- c\n\n3. x\n4. y"
        );
    }

    #[test]
    fn tables_with_spans_and_nested_tables() {
        let out = md(
            "<table><thead><tr><th colspan=2>Action</th></tr></thead><tbody><tr><td rowspan=2>A</td><td>B</td></tr><tr><td>C</td></tr><tr><td><table><tr><td>x</td><td>y</td></tr></table></td><td>z</td></tr></tbody></table>",
        );
        assert_eq!(
            out,
            "| Action | Action |\n|---|---|\n| A | B |\n| A | C |\n| x y | z |"
        );
    }

    #[test]
    fn dropped_and_hidden_content() {
        let out = md(
            "<script>var x=1;</script><style>p{}</style><p hidden>h1</p><div aria-hidden=\"true\">h2</div><span style=\"display: none\">h3</span><p>kept</p><template>t</template><noscript>n</noscript><nav>menu</nav><div role=\"navigation\">links</div>",
        );
        assert_eq!(out, "kept");
    }

    #[test]
    fn a_page_of_navigation_alone_keeps_it() {
        let nav = r#"<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><head><title>Contents</title></head>
<body><nav epub:type="toc" id="toc"><h2>Table of Contents</h2><ol>
<li><a href="c1.xhtml">The Grave of the Slave</a></li>
<li><a href="c2.xhtml">Hours</a><ol><li><a href="c2.xhtml#s1">Morning</a></li></ol></li></ol></nav>
<nav epub:type="landmarks" hidden=""><ol><li><a href="c1.xhtml">Start reading</a></li></ol></nav>
<div role="navigation"><a href="index.html">Home</a></div></body></html>"#;
        let extraction = run(nav.as_bytes()).unwrap();
        let out = crate::markdown::tidy(&extraction.markdown);
        assert_eq!(
            out,
            "## Table of Contents\n\n1. [The Grave of the Slave](c1.xhtml)\n2. [Hours](c2.xhtml)\n    \
             1. [Morning](c2.xhtml#s1)\n\n[Home](index.html)"
        );
        assert_eq!(extraction.warnings.len(), 1, "{:?}", extraction.warnings);
        // As an e-book chapter or a mail body the same page stays empty, and a page with any
        // other text still drops its navigation.
        assert_eq!(md(nav), "");
        let page = "<nav><a href=\"/\">Home</a></nav><main><p>Body text.</p></main>";
        let extraction = run(page.as_bytes()).unwrap();
        assert_eq!(extraction.markdown, "Body text.");
        assert!(extraction.warnings.is_empty());
        // Hidden navigation stays hidden.
        assert_eq!(
            run(b"<nav hidden><a href=\"x\">Secret</a></nav>")
                .unwrap()
                .markdown,
            ""
        );
    }

    #[test]
    fn code_links_quotes_and_breaks() {
        let out = md(
            "<p>Use <code>pip</code> and <a href=\"https://x.org/\">the site</a>.<br>Next line</p><pre>fn main() {\n    x();\n}</pre><blockquote><p>quoted</p></blockquote>",
        );
        assert_eq!(
            out,
            "Use `pip` and [the site](https://x.org/).\nNext line\n\n```\nfn main() {\n    x();\n}\n```\n\n> quoted"
        );
    }

    #[test]
    fn title_language_and_charset() {
        let page = b"<html lang=\"fr\"><head><meta charset=\"iso-8859-1\"><title>Caf\xe9</title></head><body><p>cr\xe8me</p></body></html>";
        let extraction = run(page).unwrap();
        assert_eq!(extraction.metadata.title.as_deref(), Some("Café"));
        assert_eq!(extraction.metadata.language.as_deref(), Some("fr"));
        assert_eq!(extraction.markdown, "crème");
        assert_eq!(
            extraction.metadata.encoding.as_deref(),
            Some("windows-1252")
        );
        let page = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=Shift_JIS\"><p>\x93\xfa\x96\x7b</p>";
        assert_eq!(run(page).unwrap().markdown, "日本");
        let page = b"\xEF\xBB\xBF<p>bom</p>";
        assert_eq!(run(page).unwrap().markdown, "bom");
    }

    #[test]
    fn deep_nesting_is_flattened_not_failed() {
        let page = format!(
            "{}deep words{}",
            "<div>".repeat(3000),
            "</div>".repeat(3000)
        );
        assert!(md(&page).contains("deep words"));
        let hostile = "<div>".repeat(100_000);
        let err = to_markdown(&hostile, &Limits::default(), &Control::default()).unwrap_err();
        assert_eq!(err.code, "document_too_complex");
        let sloppy = "<p><b><font>word ".repeat(50_000);
        assert!(md(&sloppy).contains("word"));
        let page = format!(
            "{}inner{}",
            "<ul><li>".repeat(400),
            "</li></ul>".repeat(400)
        );
        assert!(md(&page).contains("inner"));
    }

    #[test]
    fn xhtml_self_closed_title_does_not_swallow_the_page() {
        let out = md(
            "<html><head><title/><script src=\"a.js\"/></head><body><p>Body text</p></body></html>",
        );
        assert_eq!(out, "Body text");
    }

    #[test]
    fn binary_is_refused() {
        assert_eq!(
            run(b"\x00\x01\x02\x03\xff\xfe\x00garbage\x00\x00")
                .unwrap_err()
                .code,
            "unsupported_file_type"
        );
    }

    #[test]
    fn a_five_megabyte_page_extracts() {
        let mut page = String::from("<html><body>");
        let mut i = 0;
        while page.len() < 5 * 1024 * 1024 {
            page.push_str(&format!("<h2>Section {i}</h2><p>Paragraph {i} with <b>bold</b> and <a href=\"/x{i}\">a link</a>.</p>"));
            page.push_str(
                "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>",
            );
            page.push_str(&"<div><span>".repeat(40));
            page.push_str(&format!("nested {i}"));
            page.push_str(&"</span></div>".repeat(40));
            page.push_str("<ul><li>one<ul><li>two</li></ul></li></ul>");
            i += 1;
        }
        page.push_str("</body></html>");
        let extraction = run(page.as_bytes()).unwrap();
        assert!(extraction.markdown.contains("## Section 0"));
        assert!(extraction.markdown.contains(&format!("nested {}", i - 1)));
    }

    #[test]
    fn corpus_pages() {
        let Some(bytes) = corpus("example_03.html") else {
            return;
        };
        let out = run(&bytes).unwrap().markdown;
        assert!(
            out.starts_with("# Example Document\n\n## Introduction"),
            "{out}"
        );
        assert!(out.contains("- First item in unordered list\n    - Nested item 1"));
        assert!(out.contains("1. First item in ordered list\n    1. Nested ordered item 1"));
        assert!(out.contains("| Header 1 | Header 2 | Header 3 |"));
        assert!(!out.contains("border-collapse"));
        let Some(bytes) = corpus("wiki_duck.html") else {
            return;
        };
        let extraction = run(&bytes).unwrap();
        assert_eq!(
            extraction.metadata.title.as_deref(),
            Some("Duck - Wikipedia")
        );
        let out = extraction.markdown;
        let etymology = out.find("## Etymology").unwrap();
        let taxonomy = out.find("## Taxonomy").unwrap();
        assert!(etymology < taxonomy);
        assert!(out.contains("Anatidae"));
        assert!(!out.contains("RLQ=window.RLQ"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let _ = run(&bytes);
        }

        #[test]
        fn mutated_pages_never_panic(cut in 0usize..6000, flips in proptest::collection::vec((0usize..6000, any::<u8>()), 0..16)) {
            let mut bytes = corpus("html_rich_table_cells.html").unwrap_or_else(|| b"<table><tr><td>x</td></tr></table>".to_vec());
            crate::testing::mutate(&mut bytes, &flips, cut);
            let _ = run(&bytes);
        }
    }
}
