//! reStructuredText (`.rst`) to Markdown: section titles (underlined or over- and
//! underlined, levels in order of first appearance), paragraphs, bullet and enumerated lists,
//! literal blocks (`::`) and `code-block` directives as fenced code, `math` as `$$`, grid and
//! simple tables as Markdown tables, admonitions and other directives by their text, links
//! as Markdown links, roles unwrapped (`:math:` kept as `$...$`). Comments, targets,
//! substitution definitions and layout directives (`toctree`, `include`, `raw`, `meta`, ...)
//! are dropped. `:Author:` in the docinfo goes to the metadata.

use super::{Doc, dedent, indent_of, tick, window};
use crate::markdown;
use crate::{Control, ExtractError};

/// Deepest nesting of directive bodies converted as reStructuredText; deeper ones are text.
const MAX_DEPTH: usize = 16;
/// How far an inline construct looks for its closer.
const INLINE_WINDOW: usize = 4096;

/// Directives dropped with their body: they are settings or pull in other files.
const DROPPED: &[&str] = &[
    "toctree",
    "include",
    "literalinclude",
    "raw",
    "meta",
    "contents",
    "index",
    "highlight",
    "default-role",
    "role",
    "sectnum",
    "section-numbering",
    "target-notes",
    "header",
    "footer",
    "tabularcolumns",
    "title",
    "class",
    "currentmodule",
    "module",
    "automodule",
];

pub fn convert(text: &str, doc: &mut Doc, control: &Control) -> Result<(), ExtractError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut rst = Rst {
        doc,
        control,
        styles: Vec::new(),
        steps: 0,
    };
    rst.blocks(&lines, 0)
}

struct Rst<'d, 'c> {
    doc: &'d mut Doc,
    control: &'c Control,
    /// Section adornments (character, overlined) in order of first appearance: the level.
    styles: Vec<(char, bool)>,
    steps: usize,
}

impl Rst<'_, '_> {
    fn blocks(&mut self, lines: &[&str], depth: usize) -> Result<(), ExtractError> {
        let mut para: Vec<&str> = Vec::new();
        let mut list_indents: Vec<usize> = Vec::new();
        let mut i = 0;
        while let Some(&line) = lines.get(i) {
            self.steps += 1;
            tick(self.control, self.steps)?;
            if self.doc.full {
                return Ok(());
            }
            let t = line.trim();
            let indent = indent_of(line);
            if t.is_empty() {
                i += 1;
                if self.flush(&mut para) {
                    i = self.literal(
                        lines,
                        i,
                        indent_of(lines.get(i.saturating_sub(2)).unwrap_or(&"")),
                    );
                }
                continue;
            }
            if para.is_empty() {
                // Over- and underlined title.
                if let (Some(c), Some(title), Some(under)) =
                    (adornment(t), lines.get(i + 1), lines.get(i + 2))
                    && !title.trim().is_empty()
                    && adornment(under.trim()) == Some(c)
                {
                    self.heading((c, true), title.trim());
                    list_indents.clear();
                    i += 3;
                    continue;
                }
                // Underlined title.
                if indent == 0
                    && let Some(under) = lines.get(i + 1)
                    && let Some(c) = adornment(under.trim())
                    && indent_of(under) == 0
                    && under.trim().chars().count() >= t.chars().count().min(3)
                    && adornment(t).is_none()
                {
                    self.heading((c, false), t);
                    list_indents.clear();
                    i += 2;
                    continue;
                }
                // A transition, or stray punctuation.
                if adornment(t).is_some() && t.chars().count() >= 4 {
                    i += 1;
                    continue;
                }
                if t.starts_with("..") && (t.len() == 2 || t.starts_with(".. ")) {
                    i = self.explicit(lines, i, depth)?;
                    continue;
                }
                if is_grid_border(t) {
                    i = self.grid_table(lines, i);
                    continue;
                }
                if is_simple_border(t) {
                    i = self.simple_table(lines, i);
                    continue;
                }
                if let Some((marker, rest)) = list_marker(t) {
                    while list_indents.last().is_some_and(|&l| l > indent) {
                        list_indents.pop();
                    }
                    if list_indents.last() != Some(&indent) {
                        list_indents.push(indent);
                    }
                    let level = list_indents.len().saturating_sub(1);
                    // Continuation lines are indented past the marker.
                    let column = indent + marker.len() + 1;
                    let mut text = vec![rest];
                    i += 1;
                    while let Some(next) = lines.get(i) {
                        let nt = next.trim();
                        if nt.is_empty() || indent_of(next) < column || list_marker(nt).is_some() {
                            break;
                        }
                        text.push(nt);
                        i += 1;
                    }
                    let numbered = marker.ends_with('.') || marker.ends_with(')');
                    let digits = marker.trim_matches(['(', ')', '.']);
                    let marker = if !numbered {
                        "-".to_string()
                    } else if digits.chars().all(|c| c.is_ascii_digit()) {
                        format!("{digits}.")
                    } else {
                        "1.".to_string()
                    };
                    let text = inline(&text.join(" "));
                    self.doc
                        .item(&format!("{}{marker} {}", "  ".repeat(level), text));
                    continue;
                }
                if let Some(field) = t.strip_prefix(':')
                    && let Some(end) = field
                        .find(": ")
                        .or_else(|| field.strip_suffix(':').map(|f| f.len()))
                {
                    let name = field.get(..end).unwrap_or("");
                    let value = field.get(end + 1..).unwrap_or("").trim();
                    if !name.is_empty() && !name.contains('`') {
                        if matches!(name.to_ascii_lowercase().as_str(), "author" | "authors") {
                            self.doc.set_author(&inline(value));
                        }
                        self.doc.item(&format!("- {}: {}", name, inline(value)));
                        i += 1;
                        continue;
                    }
                }
                if indent == 0 {
                    list_indents.clear();
                }
            }
            // Line blocks keep their text.
            let t = t.strip_prefix("| ").unwrap_or(t);
            para.push(t);
            i += 1;
        }
        // A `::` at the very end introduces nothing.
        self.flush(&mut para);
        Ok(())
    }

    /// Writes the paragraph; true when it ended with `::` (a literal block follows).
    fn flush(&mut self, para: &mut Vec<&str>) -> bool {
        if para.is_empty() {
            return false;
        }
        let mut text = para.join(" ");
        para.clear();
        let literal = text.ends_with("::");
        if literal {
            text.truncate(text.len() - 2);
            // "Text::" reads "Text:"; "Text ::" and a lone "::" lose it.
            if !text.is_empty() && !text.ends_with(char::is_whitespace) {
                text.push(':');
            }
        }
        let text = inline(&text);
        if !text.trim().is_empty() {
            self.doc.paragraph(&text);
        }
        literal
    }

    /// The literal block after a `::` paragraph: the lines from `start` indented past `base`.
    fn literal(&mut self, lines: &[&str], start: usize, base: usize) -> usize {
        let end = body_end(lines, start, base);
        if end > start {
            let code = dedent(lines.get(start..end).unwrap_or(&[]));
            self.doc.code("", &code);
        }
        end
    }

    fn heading(&mut self, style: (char, bool), text: &str) {
        let level = match self.styles.iter().position(|s| *s == style) {
            Some(at) => at + 1,
            None => {
                self.styles.push(style);
                self.styles.len()
            }
        };
        self.doc.heading(level, &inline(text));
    }

    /// An explicit markup block (`.. ` at line `i`): a directive, footnote, target,
    /// substitution definition or comment. Returns the line after it.
    fn explicit(&mut self, lines: &[&str], i: usize, depth: usize) -> Result<usize, ExtractError> {
        let line = lines.get(i).copied().unwrap_or("");
        let indent = indent_of(line);
        let t = line.trim().trim_start_matches('.').trim_start();
        // The body: the following lines indented past the marker (blank lines inside).
        let end = body_end(lines, i + 1, indent);
        let body = lines.get(i + 1..end).unwrap_or(&[]);
        if let Some(rest) = t.strip_prefix('[')
            && let Some(close) = rest.find(']')
        {
            let label = rest.get(..close).unwrap_or("");
            let mut text = rest.get(close + 1..).unwrap_or("").trim().to_string();
            for l in body {
                text.push(' ');
                text.push_str(l.trim());
            }
            self.doc.paragraph(&format!("[{label}] {}", inline(&text)));
            return Ok(end);
        }
        if t.starts_with('_') || t.starts_with('|') || t.starts_with("__") {
            return Ok(end);
        }
        let Some(sep) = t.find("::") else {
            // A comment.
            return Ok(end);
        };
        let name = t.get(..sep).unwrap_or("").trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Ok(end);
        }
        let name = name.to_ascii_lowercase();
        let name = name.rsplit(':').next().unwrap_or("").to_string();
        let argument = t.get(sep + 2..).unwrap_or("").trim();
        // Options (`:name: value`) come first in the body, then the content.
        let mut options: Vec<(&str, &str)> = Vec::new();
        let mut content_start = 0;
        for l in body {
            let lt = l.trim();
            if lt.starts_with(':')
                && let Some(close) = lt.get(1..).and_then(|r| r.find(':'))
            {
                options.push((
                    lt.get(1..close + 1).unwrap_or(""),
                    lt.get(close + 2..).unwrap_or("").trim(),
                ));
                content_start += 1;
            } else {
                break;
            }
        }
        let content = body.get(content_start..).unwrap_or(&[]);
        if DROPPED.contains(&name.as_str()) || name.starts_with("auto") && name != "autosummary" {
            return Ok(end);
        }
        match name.as_str() {
            "code-block" | "code" | "sourcecode" | "ipython" | "doctest" | "jupyter-execute" => {
                self.doc.code(argument, &dedent(content));
            }
            "math" => {
                let mut math = argument.to_string();
                if !content.is_empty() {
                    math.push('\n');
                    math.push_str(&dedent(content));
                }
                let math = math.trim();
                if !math.is_empty() {
                    self.doc.block(&format!("$$\n{math}\n$$"));
                }
            }
            "image" | "figure" => {
                if let Some((_, alt)) = options.iter().find(|(k, _)| *k == "alt") {
                    self.doc.paragraph(&inline(alt));
                }
                self.nested(content, depth)?;
            }
            "list-table" => self.list_table(content),
            _ => {
                if !argument.is_empty() {
                    let argument = inline(argument);
                    if is_admonition(&name) {
                        self.doc.paragraph(&format!("**{argument}**"));
                    } else {
                        self.doc.paragraph(&argument);
                    }
                } else if is_admonition(&name) {
                    let mut label = name.clone();
                    if let Some(first) = label.get_mut(..1) {
                        first.make_ascii_uppercase();
                    }
                    self.doc.paragraph(&format!("**{label}:**"));
                }
                self.nested(content, depth)?;
            }
        }
        Ok(end)
    }

    /// A directive's content, converted as reStructuredText one level down.
    fn nested(&mut self, content: &[&str], depth: usize) -> Result<(), ExtractError> {
        if content.iter().all(|l| l.trim().is_empty()) {
            return Ok(());
        }
        let text = dedent(content);
        if depth >= MAX_DEPTH {
            self.doc.paragraph(&text);
            return Ok(());
        }
        let lines: Vec<&str> = text.lines().collect();
        self.blocks(&lines, depth + 1)
    }

    /// A grid table (`+---+---+`) as a Markdown table; the lines of a cell are joined.
    fn grid_table(&mut self, lines: &[&str], start: usize) -> usize {
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut current: Vec<String> = Vec::new();
        let mut i = start;
        while let Some(line) = lines.get(i) {
            let t = line.trim();
            if is_grid_border(t) {
                if current.iter().any(|c| !c.is_empty()) {
                    rows.push(std::mem::take(&mut current));
                }
                current.clear();
            } else if t.starts_with('|') {
                let cells: Vec<&str> = t.trim_matches('|').split('|').collect();
                if current.len() < cells.len() {
                    current.resize(cells.len(), String::new());
                }
                for (cell, text) in current.iter_mut().zip(cells) {
                    if !text.trim().is_empty() {
                        if !cell.is_empty() {
                            cell.push(' ');
                        }
                        cell.push_str(text.trim());
                    }
                }
            } else {
                break;
            }
            i += 1;
        }
        if current.iter().any(|c| !c.is_empty()) {
            rows.push(current);
        }
        self.table(rows);
        i
    }

    /// A simple table (`=====  =====`): columns from the border's runs of `=`.
    fn simple_table(&mut self, lines: &[&str], start: usize) -> usize {
        let border = lines.get(start).copied().unwrap_or("");
        let mut columns: Vec<(usize, usize)> = Vec::new();
        let chars: Vec<char> = border.chars().collect();
        let mut col = 0;
        while col < chars.len() {
            if chars.get(col) == Some(&'=') {
                let from = col;
                while chars.get(col) == Some(&'=') {
                    col += 1;
                }
                columns.push((from, col));
            } else {
                col += 1;
            }
        }
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut borders = 1;
        let mut i = start + 1;
        while let Some(line) = lines.get(i) {
            let t = line.trim();
            if is_simple_border(t) {
                borders += 1;
                i += 1;
                if borders >= 3 || lines.get(i).is_none_or(|l| l.trim().is_empty()) {
                    break;
                }
                continue;
            }
            i += 1;
            if t.is_empty() || t.chars().all(|c| c == '-' || c == ' ') {
                continue;
            }
            let line_chars: Vec<char> = line.chars().collect();
            let cells: Vec<String> = columns
                .iter()
                .enumerate()
                .map(|(n, &(from, to))| {
                    let to = if n + 1 == columns.len() {
                        line_chars.len()
                    } else {
                        to
                    };
                    line_chars
                        .get(from.min(line_chars.len())..to.min(line_chars.len()))
                        .map(|s| s.iter().collect::<String>().trim().to_string())
                        .unwrap_or_default()
                })
                .collect();
            // A row whose first cell is blank continues the row above.
            match rows.last_mut() {
                Some(last) if cells.first().is_some_and(String::is_empty) => {
                    for (cell, text) in last.iter_mut().zip(cells) {
                        if !text.is_empty() {
                            cell.push(' ');
                            cell.push_str(&text);
                        }
                    }
                }
                _ => rows.push(cells),
            }
        }
        self.table(rows);
        i
    }

    /// A `list-table`: `* -` starts a row, `-` a cell.
    fn list_table(&mut self, content: &[&str]) {
        let mut rows: Vec<Vec<String>> = Vec::new();
        for line in content {
            let t = line.trim();
            if let Some(cell) = t
                .strip_prefix("* - ")
                .or_else(|| (t == "* -").then_some(""))
            {
                rows.push(vec![cell.to_string()]);
            } else if let Some(cell) = t.strip_prefix("- ").or_else(|| (t == "-").then_some("")) {
                if let Some(row) = rows.last_mut() {
                    row.push(cell.to_string());
                }
            } else if let Some(cell) = rows.last_mut().and_then(|r| r.last_mut())
                && !t.is_empty()
            {
                cell.push(' ');
                cell.push_str(t);
            }
        }
        self.table(rows);
    }

    fn table(&mut self, rows: Vec<Vec<String>>) {
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|r| r.iter().map(|c| inline(c)).collect())
            .collect();
        self.doc.block(markdown::table(&rows).trim_end());
    }
}

/// The index after the block of lines from `start` indented past `base` (blank lines inside
/// it included, trailing ones not).
fn body_end(lines: &[&str], start: usize, base: usize) -> usize {
    let mut end = start;
    let mut i = start;
    while let Some(line) = lines.get(i) {
        if line.trim().is_empty() {
            i += 1;
            continue;
        }
        if indent_of(line) <= base {
            break;
        }
        i += 1;
        end = i;
    }
    end
}

/// The adornment character when `t` is a line of one repeated punctuation character.
fn adornment(t: &str) -> Option<char> {
    let mut chars = t.chars();
    let first = chars.next()?;
    if !first.is_ascii_punctuation() || t.len() < 2 || chars.any(|c| c != first) {
        return None;
    }
    Some(first)
}

fn is_grid_border(t: &str) -> bool {
    t.len() >= 3
        && t.starts_with('+')
        && t.ends_with('+')
        && t.chars().all(|c| matches!(c, '+' | '-' | '=' | ':'))
}

fn is_simple_border(t: &str) -> bool {
    t.contains("= ") && t.chars().all(|c| c == '=' || c == ' ') && t.starts_with("==")
}

/// A bullet (`-`, `*`, `+`, `•`) or enumerator (`1.`, `#.`, `(a)`, `2)`) and the item text.
fn list_marker(t: &str) -> Option<(&str, &str)> {
    let (marker, rest) = t.split_once(' ').unwrap_or((t, ""));
    if rest.trim().is_empty() {
        return None;
    }
    let is_bullet = matches!(marker, "-" | "*" | "+" | "•");
    let inner = marker
        .strip_prefix('(')
        .and_then(|m| m.strip_suffix(')'))
        .or_else(|| marker.strip_suffix('.'))
        .or_else(|| marker.strip_suffix(')'));
    let is_enum = inner.is_some_and(|m| {
        m == "#"
            || (!m.is_empty() && m.len() <= 4 && m.chars().all(|c| c.is_ascii_digit()))
            || (m.len() == 1 && m.chars().all(|c| c.is_ascii_lowercase()))
    });
    (is_bullet || is_enum).then_some((marker, rest.trim()))
}

fn is_admonition(name: &str) -> bool {
    matches!(
        name,
        "note"
            | "warning"
            | "tip"
            | "hint"
            | "important"
            | "caution"
            | "danger"
            | "attention"
            | "error"
            | "admonition"
            | "seealso"
            | "todo"
            | "versionadded"
            | "versionchanged"
            | "deprecated"
            | "topic"
            | "sidebar"
            | "rubric"
    )
}

/// Inline markup: ``literals`` to `code`, `links <url>`_ to Markdown links, roles
/// unwrapped (`:math:` to `$...$`), reference and footnote marks (`name_`, `[1]_`) dropped.
pub(crate) fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(c) = text.get(pos..).and_then(|r| r.chars().next()) {
        let rest = text.get(pos..).unwrap_or("");
        if let Some(inner) = rest.strip_prefix("``")
            && let Some(end) = window(inner, INLINE_WINDOW).find("``")
        {
            let code = inner.get(..end).unwrap_or("");
            if code.contains('`') {
                out.push_str(&format!("`` {code} ``"));
            } else {
                out.push_str(&format!("`{code}`"));
            }
            pos += 2 + end + 2;
            continue;
        }
        if c == ':'
            && let Some((role, after)) = role_at(rest)
            && let Some(body) = rest.get(after + 2..)
            && let Some(end) = window(body, INLINE_WINDOW).find('`')
        {
            let content = body.get(..end).unwrap_or("");
            if role == "math" {
                out.push_str(&format!("${content}$"));
            } else {
                out.push_str(&reference_text(content));
            }
            pos += after + 2 + end + 1;
            continue;
        }
        if c == '`'
            && let Some(body) = rest.get(1..)
            && let Some(end) = window(body, INLINE_WINDOW).find('`')
        {
            let content = body.get(..end).unwrap_or("");
            let mut next = pos + 1 + end + 1;
            let tail = text.get(next..).unwrap_or("");
            if tail.starts_with('_') {
                next += if tail.starts_with("__") { 2 } else { 1 };
                match split_target(content) {
                    Some((label, url)) if url.contains("://") || url.starts_with("mailto:") => {
                        if label.is_empty() {
                            out.push_str(url);
                        } else {
                            out.push_str(&format!("[{label}]({url})"));
                        }
                    }
                    Some((label, url)) => out.push_str(if label.is_empty() { url } else { label }),
                    None => out.push_str(content),
                }
            } else {
                out.push_str(content);
            }
            pos = next;
            continue;
        }
        if c == '['
            && let Some(end) = window(rest, 64).find("]_")
            && !rest
                .get(1..end)
                .unwrap_or(" ")
                .contains(char::is_whitespace)
        {
            out.push_str(rest.get(..end + 1).unwrap_or(""));
            pos += end + 2;
            continue;
        }
        if c == '_' && out.ends_with(|p: char| p.is_alphanumeric()) {
            // `name_` and `name__` are references; `snake_case` and `__init__` are not.
            let marks = if rest.starts_with("__") { 2 } else { 1 };
            let word = out.rsplit(char::is_whitespace).next().unwrap_or("");
            let next = text.get(pos + marks..).and_then(|r| r.chars().next());
            if !word.contains('_') && next.is_none_or(|n| !(n.is_alphanumeric() || n == '_')) {
                pos += marks;
                continue;
            }
        }
        out.push(c);
        pos += c.len_utf8();
    }
    out
}

/// `:role:` at the start of `text` followed by a backquote: the role and the index in
/// `text` of the closing colon.
fn role_at(text: &str) -> Option<(&str, usize)> {
    let body = text.strip_prefix(':')?;
    let end = body.find(':')?;
    // Domain roles have an inner colon (`:py:func:`).
    let mut end = end;
    while body.get(end + 1..).is_some_and(|r| !r.starts_with('`')) {
        let more = body.get(end + 1..)?.find(':')?;
        end += 1 + more;
        if end > 40 {
            return None;
        }
    }
    let role = body.get(..end)?;
    if role.is_empty()
        || !role
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '+'))
    {
        return None;
    }
    let role = role.rsplit(':').next().unwrap_or(role);
    Some((role, end + 1))
}

/// `Title <target>` → `Title`; `~a.b.c` → `c`; plain text as it is.
fn reference_text(content: &str) -> String {
    if let Some((label, target)) = split_target(content) {
        return if label.is_empty() { target } else { label }.to_string();
    }
    let content = content.trim_start_matches('!');
    match content.strip_prefix('~') {
        Some(path) => path.rsplit('.').next().unwrap_or(path).to_string(),
        None => content.to_string(),
    }
}

fn split_target(content: &str) -> Option<(&str, &str)> {
    let inner = content.strip_suffix('>')?;
    let open = inner.rfind('<')?;
    Some((
        inner.get(..open).unwrap_or("").trim(),
        inner.get(open + 1..).unwrap_or("").trim(),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_converts, md};
    use proptest::prelude::*;

    const DOC: &str = r#"
.. This comment is SECRET and must go.
   Even its second line.

==============
 Shelf Manual
==============

:Author: Ana Lima
:Version: 2

Intro paragraph with *emphasis*, **strong**, ``literal``, a `link <https://shelf.dev>`_,
a ref_ and :ref:`the guide <guide>` plus :math:`e^{i\pi}`.

Install
-------

- first item
  continued here
- second item

  - nested item

1. one
2. two

Example::

    $ shelf serve
    ok

.. code-block:: python
   :linenos:

   print("hi")

.. math::

   a^2 + b^2 = c^2

.. note:: Keep backups.

   Really.

.. toctree::
   :maxdepth: 2

   hidden-page

.. _guide: https://example.org/HIDDEN

+------+-------+
| Name | Count |
+======+=======+
| Ana  | 3     |
+------+-------+

=====  =====
Col A  Col B
=====  =====
x      y
=====  =====

Usage
~~~~~

Last words [1]_.

.. [1] A footnote.
"#;

    #[test]
    fn document_converts() {
        assert_converts(
            DOC,
            "rst",
            "Shelf Manual",
            "Ana Lima",
            &[
                "# Shelf Manual",
                "- Author: Ana Lima\n- Version: 2",
                "Intro paragraph with *emphasis*, **strong**, `literal`, a [link](https://shelf.dev), a ref and the guide plus $e^{i\\pi}$.",
                "## Install",
                "- first item continued here\n- second item",
                "  - nested item",
                "1. one\n2. two",
                "Example:",
                "```\n$ shelf serve\nok\n```",
                "```python\nprint(\"hi\")\n```",
                "$$\na^2 + b^2 = c^2\n$$",
                "**Keep backups.**",
                "Really.",
                "| Name | Count |\n|---|---|\n| Ana | 3 |",
                "| Col A | Col B |\n|---|---|\n| x | y |",
                "### Usage",
                "Last words [1].",
                "[1] A footnote.",
            ],
            &[
                "SECRET",
                "second line",
                "hidden-page",
                "HIDDEN",
                "maxdepth",
                "linenos",
            ],
        );
    }

    #[test]
    fn headings_levels_follow_first_appearance() {
        let md = md("A\n===\n\ntext\n\nB\n---\n\nC\n===\n", "rst");
        assert_eq!(md, "# A\n\ntext\n\n## B\n\n# C");
    }

    #[test]
    fn deep_directives_are_bounded() {
        let mut text = String::new();
        for level in 0..200 {
            text.push_str(&" ".repeat(level));
            text.push_str(".. note::\n\n");
        }
        text.push_str(&" ".repeat(200));
        text.push_str("deep text\n");
        assert!(md(&text, "rst").contains("deep text"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn arbitrary_text_never_panics(text in "[-=+|:`_*\\[\\]<>.a-z0-9 \n]{0,400}") {
            let _ = md(&text, "rst");
        }

        #[test]
        fn truncated_doc_never_panics(cut in 0usize..1200, flips in proptest::collection::vec((0usize..1200, any::<u8>()), 0..4)) {
            let bytes = crate::testing::damaged(DOC.as_bytes(), &flips, cut);
            crate::testing::never_panics(super::super::extract, &bytes, "rst", &[])?;
        }
    }
}
