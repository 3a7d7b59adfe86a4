//! AsciiDoc (`.adoc`, `.asciidoc`) to Markdown: the document title and `==` section titles
//! as headings, paragraphs, `*`/`-`/`.` lists and `term::` descriptions, listing and literal
//! blocks as fenced code (the language from `[source,lang]`), quote blocks quoted, example
//! and sidebar blocks by their text, `|===` tables as Markdown tables, `stem` blocks as
//! `$$`, links and cross references by their text, `image::` by its alt text, attribute
//! references (`{name}`) replaced. Comments (`//`, `////` blocks), attribute entries,
//! passthrough blocks, `include::` and other directives are dropped. The author line or
//! `:author:` goes to the metadata.

use std::collections::HashMap;

use super::{Doc, emphasis, tick, window};
use crate::markdown;
use crate::{Control, ExtractError};

pub fn convert(text: &str, doc: &mut Doc, control: &Control) -> Result<(), ExtractError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut attributes: HashMap<String, String> = HashMap::new();
    let mut para: Vec<&str> = Vec::new();
    // The block attribute line before a block (`[source,python]`, `[quote]`).
    let mut style: Option<String> = None;
    let mut i = 0;
    let mut in_header = true;
    while let Some(&line) = lines.get(i) {
        tick(control, i)?;
        if doc.full {
            break;
        }
        i += 1;
        let t = line.trim_end();
        if t.trim().is_empty() {
            flush(doc, &mut para, &attributes);
            in_header = false;
            continue;
        }
        // Comments.
        if t.starts_with("////") && t.chars().all(|c| c == '/') {
            while lines.get(i).is_some_and(|l| l.trim_end() != t) {
                i += 1;
            }
            i += 1;
            continue;
        }
        if t.starts_with("//") {
            continue;
        }
        // Attribute entries: `:name: value`.
        if let Some(entry) = t.strip_prefix(':')
            && let Some((name, value)) = entry.split_once(':')
            && !name.is_empty()
            && !name.contains(char::is_whitespace)
            && para.is_empty()
        {
            let name = name.trim_start_matches('!').trim_end_matches('!');
            let value = value.trim();
            match name {
                "author" | "authors" => doc.set_author(value),
                "description" => {}
                _ => {}
            }
            attributes.insert(name.to_string(), value.to_string());
            continue;
        }
        // Section titles (`=` in AsciiDoc, `#` in its Markdown-compatible syntax).
        let marks = t.len() - t.trim_start_matches(['=', '#']).len();
        if marks > 0
            && marks <= 6
            && t.get(marks..).is_some_and(|r| r.starts_with(' '))
            && t.chars()
                .take(marks)
                .all(|c| c == t.chars().next().unwrap_or('='))
        {
            flush(doc, &mut para, &attributes);
            let title = t
                .get(marks..)
                .unwrap_or("")
                .trim()
                .trim_end_matches([' ', '=']);
            let title = inline(title, &attributes);
            doc.heading(marks, &title);
            // The line after the document title is the author line.
            if marks == 1
                && in_header
                && let Some(next) = lines.get(i)
                && !next.trim().is_empty()
                && !next.starts_with(':')
                && !next.starts_with("//")
            {
                let authors: Vec<&str> = next
                    .split(';')
                    .map(|a| a.split('<').next().unwrap_or("").trim())
                    .collect();
                doc.set_author(&authors.join(", "));
                i += 1;
                // The revision line.
                if lines.get(i).is_some_and(|l| {
                    l.trim_start()
                        .starts_with(|c: char| c.is_ascii_digit() || c == 'v')
                }) && lines.get(i).is_some_and(|l| !l.contains(". "))
                {
                    i += 1;
                }
            }
            style = None;
            continue;
        }
        if let Some(attribute) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']'))
            && para.is_empty()
            && !t.starts_with("[[")
        {
            style = Some(attribute.to_string());
            continue;
        }
        if t.starts_with("[[") && t.ends_with("]]") && para.is_empty() {
            continue;
        }
        // Block titles: `.Title`.
        if let Some(title) = t.strip_prefix('.')
            && para.is_empty()
            && title.starts_with(|c: char| !c.is_whitespace() && c != '.')
        {
            doc.paragraph(&format!("*{}*", inline(title, &attributes)));
            continue;
        }
        if let Some(delimiter) = block_delimiter(t) {
            flush(doc, &mut para, &attributes);
            let start = i;
            while lines.get(i).is_some_and(|l| l.trim_end() != t) {
                i += 1;
            }
            let body = lines.get(start..i).unwrap_or(&[]);
            i += 1;
            block(doc, delimiter, body, style.take(), &attributes);
            continue;
        }
        // Block macros.
        if let Some((name, rest)) = t.split_once("::")
            && !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && rest.ends_with(']')
            && !rest.starts_with(' ')
        {
            flush(doc, &mut para, &attributes);
            if name == "image"
                && let Some(open) = rest.find('[')
            {
                let alt = rest.get(open + 1..rest.len() - 1).unwrap_or("");
                let alt = alt.split(',').next().unwrap_or("").trim().trim_matches('"');
                doc.paragraph(&inline(alt, &attributes));
            }
            continue;
        }
        if t == "'''" || t == "<<<" || t == "+" || t == "---" || t == "***" {
            flush(doc, &mut para, &attributes);
            continue;
        }
        if let Some((level, numbered, text)) = list_item(t.trim_start()) {
            flush(doc, &mut para, &attributes);
            let mut text = text.to_string();
            for (mark, out) in [("[ ] ", "[ ] "), ("[x] ", "[x] "), ("[*] ", "[x] ")] {
                if let Some(rest) = text.strip_prefix(mark) {
                    text = format!("{out}{rest}");
                    break;
                }
            }
            while let Some(next) = lines.get(i)
                && !next.trim().is_empty()
                && list_item(next.trim_start()).is_none()
                && next.trim() != "+"
                && block_delimiter(next.trim_end()).is_none()
            {
                text.push(' ');
                text.push_str(next.trim());
                i += 1;
            }
            let marker = if numbered { "1." } else { "-" };
            doc.item(&format!(
                "{}{marker} {}",
                "  ".repeat(level.saturating_sub(1)),
                inline(&text, &attributes)
            ));
            continue;
        }
        // Description lists: `term:: text`.
        if let Some((term, rest)) = t
            .split_once(":: ")
            .or_else(|| t.strip_suffix("::").map(|term| (term, "")))
            && !term.is_empty()
            && para.is_empty()
            && !term.contains("://")
        {
            flush(doc, &mut para, &attributes);
            let mut body = rest.trim().to_string();
            while let Some(next) = lines.get(i)
                && !next.trim().is_empty()
                && next.starts_with(char::is_whitespace)
            {
                body.push(' ');
                body.push_str(next.trim());
                i += 1;
            }
            doc.item(&format!(
                "- **{}**: {}",
                inline(term.trim(), &attributes),
                inline(body.trim(), &attributes)
            ));
            continue;
        }
        // Literal paragraphs (indented).
        if line.starts_with(' ') && para.is_empty() {
            let start = i - 1;
            while lines.get(i).is_some_and(|l| l.starts_with(' ')) {
                i += 1;
            }
            doc.code("", &super::dedent(lines.get(start..i).unwrap_or(&[])));
            continue;
        }
        para.push(t.trim());
        style = None;
    }
    flush(doc, &mut para, &attributes);
    Ok(())
}

fn flush(doc: &mut Doc, para: &mut Vec<&str>, attributes: &HashMap<String, String>) {
    if !para.is_empty() {
        doc.paragraph(&inline(&para.join(" "), attributes));
        para.clear();
    }
}

/// A delimited block's opening line: `----`, `....`, `____`, `====`, `****`, `++++`, `--`,
/// `|===`, and the Markdown-style ```` ``` ```` fence.
fn block_delimiter(t: &str) -> Option<char> {
    if t == "--" {
        // An open block.
        return Some('o');
    }
    if t.starts_with("```") {
        return Some('`');
    }
    if t.starts_with("|===") || t.starts_with(",===") || t.starts_with(":===") {
        return Some('|');
    }
    let first = t.chars().next()?;
    (t.len() >= 4 && "-._=*+".contains(first) && t.chars().all(|c| c == first)).then_some(first)
}

fn block(
    doc: &mut Doc,
    delimiter: char,
    body: &[&str],
    style: Option<String>,
    attributes: &HashMap<String, String>,
) {
    let style = style.unwrap_or_default();
    let mut parts = style.split(',').map(str::trim);
    let kind = parts.next().unwrap_or("");
    let language = parts.next().unwrap_or("");
    if kind == "comment" {
        return;
    }
    if matches!(kind, "stem" | "latexmath" | "asciimath") {
        let math = body.join("\n");
        let math = math.trim();
        if !math.is_empty() {
            doc.block(&format!("$$\n{math}\n$$"));
        }
        return;
    }
    match delimiter {
        '-' | '.' | '`' => {
            let language = if kind == "source" { language } else { "" };
            doc.code(language, &body.join("\n"));
        }
        '+' => {}
        '|' => {
            let mut cells: Vec<String> = Vec::new();
            let mut width = 0;
            for line in body {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let row: Vec<String> = line
                    .split('|')
                    .skip(1)
                    .map(|c| inline(c.trim(), attributes))
                    .collect();
                if width == 0 && line.starts_with('|') {
                    width = row.len();
                }
                if row.is_empty() || !line.starts_with('|') {
                    // A cell's continuation line.
                    if let Some(last) = cells.last_mut() {
                        last.push(' ');
                        last.push_str(&inline(line, attributes));
                    }
                    continue;
                }
                cells.extend(row);
            }
            let width = width.max(1);
            let rows: Vec<Vec<String>> = cells.chunks(width).map(<[String]>::to_vec).collect();
            doc.block(markdown::table(&rows).trim_end());
        }
        '_' => {
            let text: Vec<String> = body
                .split(|l| l.trim().is_empty())
                .map(|p| format!("> {}", inline(&p.join(" "), attributes)))
                .filter(|p| p.len() > 2)
                .collect();
            doc.block(&text.join("\n>\n"));
        }
        _ => {
            // Example, sidebar, open blocks and admonition blocks: their paragraphs.
            if matches!(kind, "NOTE" | "TIP" | "IMPORTANT" | "WARNING" | "CAUTION") {
                doc.paragraph(&format!("**{kind}:**"));
            }
            for paragraph in body.split(|l| l.trim().is_empty()) {
                let lines: Vec<&str> = paragraph
                    .iter()
                    .copied()
                    .filter(|l| !l.starts_with("//"))
                    .collect();
                if !lines.is_empty() {
                    doc.paragraph(&inline(&lines.join(" "), attributes));
                }
            }
        }
    }
}

/// `*`, `**`, `-`, `.`, `..`, `1.` list items: (level, numbered, text).
fn list_item(t: &str) -> Option<(usize, bool, &str)> {
    let (marker, rest) = t.split_once(' ')?;
    if rest.trim().is_empty() {
        return None;
    }
    if marker == "-" {
        return Some((1, false, rest.trim()));
    }
    if !marker.is_empty() && marker.len() <= 5 && marker.chars().all(|c| c == '*') {
        return Some((marker.len(), false, rest.trim()));
    }
    if !marker.is_empty() && marker.len() <= 5 && marker.chars().all(|c| c == '.') {
        return Some((marker.len(), true, rest.trim()));
    }
    let digits = marker.strip_suffix('.')?;
    (!digits.is_empty() && digits.len() <= 4 && digits.chars().all(|c| c.is_ascii_digit()))
        .then_some((1, true, rest.trim()))
}

/// Inline markup: links and cross references by their text, inline macros unwrapped,
/// attribute references replaced, emphasis converted.
fn inline(text: &str, attributes: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(c) = text.get(pos..).and_then(|r| r.chars().next()) {
        let rest = text.get(pos..).unwrap_or("");
        // `<<id>>` and `<<id,text>>`.
        if let Some(inner) = rest.strip_prefix("<<")
            && let Some(end) = window(inner, 512).find(">>")
        {
            let reference = inner.get(..end).unwrap_or("");
            let text = reference
                .split_once(',')
                .map_or(reference, |(_, t)| t.trim());
            out.push_str(text);
            pos += 2 + end + 2;
            continue;
        }
        // `{attribute}`.
        if c == '{'
            && let Some(end) = window(rest, 128).find('}')
            && let Some(value) = rest.get(1..end).and_then(|n| attributes.get(n))
        {
            out.push_str(value);
            pos += end + 1;
            continue;
        }
        // URLs and inline macros: `https://x[text]`, `link:x[text]`, `footnote:[text]`.
        if (pos == 0
            || text
                .get(..pos)
                .is_some_and(|b| b.ends_with(|p: char| p.is_whitespace() || p == '(')))
            && let Some((converted, used)) = macro_at(rest)
        {
            out.push_str(&converted);
            pos += used;
            continue;
        }
        out.push(c);
        pos += c.len_utf8();
    }
    let out = out.replace("**", "\u{1}").replace("__", "\u{2}");
    let out = emphasis(&out, '*', "**", "**");
    let out = emphasis(&out, '_', "*", "*");
    let out = emphasis(&out, '#', "", "");
    let out = emphasis(&out, '+', "", "");
    out.replace('\u{1}', "**").replace('\u{2}', "*")
}

/// An inline macro or URL at the start of `text`: its Markdown and the length read.
fn macro_at(text: &str) -> Option<(String, usize)> {
    let colon = window(text, 64).find(':')?;
    let name = text.get(..colon)?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return None;
    }
    let end = text
        .find(|c: char| c.is_whitespace() || c == '[')
        .unwrap_or(text.len());
    let target = text.get(colon + 1..end)?;
    let attrs = if text.get(end..)?.starts_with('[') {
        let close = window(text.get(end..)?, 2048).find(']')?;
        Some((text.get(end + 1..end + close)?, end + close + 1))
    } else {
        None
    };
    let label = |a: &str| {
        a.split(',')
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches('"')
            .to_string()
    };
    match name {
        "http" | "https" | "ftp" | "mailto" | "irc" => {
            let url = text.get(..end)?;
            Some(match attrs {
                Some((a, used)) if !label(a).is_empty() => (format!("[{}]({url})", label(a)), used),
                Some((_, used)) => (url.to_string(), used),
                None => (url.to_string(), end),
            })
        }
        "link" | "xref" => {
            let (a, used) = attrs?;
            let text = label(a);
            Some((
                match (text.is_empty(), name) {
                    (true, _) => target.to_string(),
                    // A link keeps its target; a cross reference's target is an anchor.
                    (false, "link") => format!("[{text}]({target})"),
                    (false, _) => text,
                },
                used,
            ))
        }
        "image" => attrs.map(|(a, used)| (label(a), used)),
        "footnote" | "footnoteref" => attrs.map(|(a, used)| (format!(" ({})", a.trim()), used)),
        "kbd" | "btn" | "menu" | "pass" | "indexterm2" => {
            attrs.map(|(a, used)| (a.to_string(), used))
        }
        "stem" | "latexmath" => attrs.map(|(a, used)| (format!("${a}$"), used)),
        "indexterm" | "anchor" => attrs.map(|(_, used)| (String::new(), used)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_converts, md};
    use proptest::prelude::*;

    const DOC: &str = r#"= Shelf User Guide
Ana Lima <ana@example.org>
v1.0, 2024-01-01
:toc:
:product: Shelf
:secret-attr: HIDDENATTR

// SECRET line comment
////
SECRET block comment
////

== Getting started

{product} is *fast* and _simple_, with `shelf serve`.
See https://shelf.dev[the site], link:docs/api.html[API docs] and <<install,Installing>>.

[source,bash]
----
shelf serve --port 8080
----

.A list title
* first item
** nested item
* [x] done item
. step one
. step two

CPU:: the processor
RAM::
  the memory

[quote]
____
Libraries are memory.
____

|===
|Name |Count

|Ana |3
|Bo |4
|===

NOTE: Keep backups.

image::diagram.png[Architecture diagram]
include::other.adoc[]

[stem]
++++
a^2 + b^2 = c^2
++++
"#;

    #[test]
    fn document_converts() {
        assert_converts(
            DOC,
            "adoc",
            "Shelf User Guide",
            "Ana Lima",
            &[
                "# Shelf User Guide",
                "## Getting started",
                "Shelf is **fast** and *simple*, with `shelf serve`. See [the site](https://shelf.dev), [API docs](docs/api.html) and Installing.",
                "```bash\nshelf serve --port 8080\n```",
                "*A list title*",
                "- first item\n  - nested item\n- [x] done item\n1. step one\n1. step two",
                "- **CPU**: the processor\n- **RAM**: the memory",
                "> Libraries are memory.",
                "| Name | Count |\n|---|---|\n| Ana | 3 |\n| Bo | 4 |",
                "NOTE: Keep backups.",
                "Architecture diagram",
                "$$\na^2 + b^2 = c^2\n$$",
            ],
            &[
                "SECRET",
                "HIDDENATTR",
                ":toc:",
                "include::",
                "other.adoc",
                "v1.0",
                "ana@example.org",
            ],
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn arbitrary_text_never_panics(text in "[-=*._+|:/#<>{}\\[\\]`a-z0-9 \n]{0,400}") {
            let _ = md(&text, "adoc");
        }

        #[test]
        fn truncated_doc_never_panics(cut in 0usize..1000, flips in proptest::collection::vec((0usize..1000, any::<u8>()), 0..4)) {
            let bytes = crate::testing::damaged(DOC.as_bytes(), &flips, cut);
            crate::testing::never_panics(super::super::extract, &bytes, "adoc", &[])?;
        }
    }
}
