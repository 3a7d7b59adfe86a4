//! Typst (`.typ`) to Markdown: `=` headings, paragraphs, `-`/`+`/`/ term:` lists, raw
//! blocks as fenced code, math kept between `$` as written (Typst math, not TeX), `*strong*`
//! and `_emph_` converted, `#link("url")[text]` as a Markdown link, other `#func(..)[content]`
//! calls unwrapped to their content, and calls without content (`#v(1em)`, `#image(..)`)
//! dropped. `#set`, `#show`, `#let`, `#import` and `#include` statements and `//`, `/* */`
//! comments are dropped; `#set document(title: .., author: ..)` goes to the metadata.

use super::{Doc, balanced, emphasis, indent_of, tick, window};
use crate::{Control, ExtractError};

/// Deepest nesting of content blocks converted; deeper ones are kept as raw text.
const MAX_DEPTH: usize = 16;
/// How far a call's arguments are looked for their closing parenthesis.
const ARGS_WINDOW: usize = 4 * 1024;

const STATEMENTS: &[&str] = &["#set ", "#show", "#let ", "#import ", "#include ", "#open "];

pub fn convert(text: &str, doc: &mut Doc, control: &Control) -> Result<(), ExtractError> {
    let text = strip_comments(text);
    let lines: Vec<&str> = text.lines().collect();
    let mut para: Vec<&str> = Vec::new();
    let mut i = 0;
    while let Some(&line) = lines.get(i) {
        tick(control, i)?;
        if doc.full {
            break;
        }
        i += 1;
        let t = line.trim();
        if t.is_empty() {
            flush(doc, &mut para);
            continue;
        }
        if STATEMENTS.iter().any(|s| t.starts_with(s)) {
            // A statement runs on while its brackets are open.
            let mut statement = t.to_string();
            let mut open = bracket_balance(t);
            while open > 0
                && let Some(next) = lines.get(i)
            {
                statement.push('\n');
                statement.push_str(next);
                open += bracket_balance(next);
                i += 1;
            }
            if statement.starts_with("#set document") {
                metadata(&statement, doc);
            }
            continue;
        }
        if t.starts_with("```") {
            flush(doc, &mut para);
            let ticks = t.len() - t.trim_start_matches('`').len();
            let fence = "`".repeat(ticks);
            let language = t.get(ticks..).unwrap_or("").trim();
            let start = i;
            while lines
                .get(i)
                .is_some_and(|l| !l.trim_start().starts_with(&fence))
            {
                i += 1;
            }
            let code = super::dedent(lines.get(start..i).unwrap_or(&[]));
            i += 1;
            doc.code(language, &code);
            continue;
        }
        let level = t.len() - t.trim_start_matches('=').len();
        if level > 0 && t.get(level..).is_some_and(|r| r.starts_with(' ')) {
            flush(doc, &mut para);
            doc.heading(level, &inline(t.get(level..).unwrap_or(""), 0));
            continue;
        }
        let item = t
            .strip_prefix("- ")
            .map(|r| ("-".to_string(), r.to_string()))
            .or_else(|| {
                t.strip_prefix("+ ")
                    .map(|r| ("1.".to_string(), r.to_string()))
            })
            .or_else(|| {
                let rest = t.strip_prefix("/ ")?;
                let (term, body) = rest.split_once(':')?;
                Some((
                    "-".to_string(),
                    format!("**{}**: {}", inline(term.trim(), 0), body.trim()),
                ))
            });
        if let Some((marker, first)) = item {
            flush(doc, &mut para);
            let indent = indent_of(line);
            let mut text = vec![first];
            while let Some(next) = lines.get(i)
                && !next.trim().is_empty()
                && indent_of(next) > indent
                && !["- ", "+ ", "/ "]
                    .iter()
                    .any(|m| next.trim().starts_with(m))
            {
                text.push(next.trim().to_string());
                i += 1;
            }
            let body = inline(&text.join(" "), 0);
            doc.item(&format!("{}{marker} {body}", "  ".repeat(indent / 2)));
            continue;
        }
        // A lone bracket closing a content block opened on another line.
        if matches!(t, "]" | ")" | "}" | "])" | "]," | ")]") {
            continue;
        }
        para.push(t);
    }
    flush(doc, &mut para);
    Ok(())
}

fn flush(doc: &mut Doc, para: &mut Vec<&str>) {
    if !para.is_empty() {
        doc.paragraph(&inline(&para.join("\n"), 0));
        para.clear();
    }
}

/// Drops `//` line comments and `/* */` block comments outside raw text and strings.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_raw = false;
    let mut in_string = false;
    let mut previous = '\n';
    while let Some(c) = chars.next() {
        if c == '`' {
            in_raw = !in_raw;
        } else if c == '"' && !in_raw && previous != '\\' {
            in_string = !in_string;
        } else if c == '\n' {
            in_string = false;
        }
        if !in_raw && !in_string && c == '/' {
            match chars.peek() {
                Some('/') if previous != ':' => {
                    for next in chars.by_ref() {
                        if next == '\n' {
                            out.push('\n');
                            break;
                        }
                    }
                    previous = '\n';
                    continue;
                }
                Some('*') => {
                    chars.next();
                    let mut last = ' ';
                    for next in chars.by_ref() {
                        if next == '\n' {
                            // Keep the line structure.
                            out.push('\n');
                        }
                        if last == '*' && next == '/' {
                            break;
                        }
                        last = next;
                    }
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
        previous = c;
    }
    out
}

/// Open minus closed brackets on a line (strings ignored).
fn bracket_balance(line: &str) -> isize {
    let mut balance = 0isize;
    let mut in_string = false;
    let mut previous = ' ';
    for c in line.chars() {
        match c {
            '"' if previous != '\\' => in_string = !in_string,
            '(' | '[' | '{' if !in_string => balance += 1,
            ')' | ']' | '}' if !in_string => balance -= 1,
            _ => {}
        }
        previous = c;
    }
    balance
}

/// `title:` and `author:` of `#set document(...)`.
fn metadata(statement: &str, doc: &mut Doc) {
    if let Some(at) = statement.find("title:")
        && let Some(title) = strings(statement.get(at + 6..).unwrap_or("")).first()
    {
        doc.set_title(title);
    }
    if let Some(at) = statement.find("author:") {
        let rest = statement.get(at + 7..).unwrap_or("").trim_start();
        let names = if rest.starts_with('(') {
            let inner = balanced(rest, 0, '(', ')').map_or(rest, |(inner, _)| inner);
            strings(inner)
        } else {
            strings(rest).into_iter().take(1).collect()
        };
        doc.set_author(&names.join(", "));
    }
}

/// The string literals in `text`, in order.
fn strings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut escaped = false;
    for c in text.chars() {
        match (&mut current, c) {
            (Some(s), _) if escaped => {
                s.push(c);
                escaped = false;
            }
            (Some(_), '\\') => escaped = true,
            (Some(_), '"') => out.extend(current.take()),
            (Some(s), _) => s.push(c),
            (None, '"') => current = Some(String::new()),
            (None, ')') if out.is_empty() => break,
            (None, _) => {}
        }
    }
    out
}

/// Inline markup: calls unwrapped, links, raw and math kept, labels dropped, emphasis.
fn inline(text: &str, depth: usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(c) = text.get(pos..).and_then(|r| r.chars().next()) {
        let rest = text.get(pos..).unwrap_or("");
        match c {
            '\\' => {
                let next = rest.get(1..).and_then(|r| r.chars().next());
                match next {
                    Some(n) if n.is_whitespace() => out.push(' '),
                    Some(n) => out.push(n),
                    None => {}
                }
                pos += 1 + next.map_or(0, char::len_utf8);
                continue;
            }
            '`' | '$' => {
                if let Some(end) = window(rest.get(1..).unwrap_or(""), 4096).find(c) {
                    out.push_str(rest.get(..end + 2).unwrap_or(""));
                    pos += end + 2;
                    continue;
                }
            }
            '#' => {
                if let Some((converted, used)) = call(rest, depth) {
                    out.push_str(&converted);
                    pos += used;
                    continue;
                }
            }
            '<' => {
                if let Some(end) = rest.get(1..).and_then(|r| r.find('>'))
                    && end > 0
                    && rest.get(1..end + 1).is_some_and(|l| {
                        l.chars()
                            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ':' | '.'))
                    })
                {
                    pos += end + 2;
                    continue;
                }
            }
            '~' => {
                out.push(' ');
                pos += 1;
                continue;
            }
            _ => {}
        }
        out.push(c);
        pos += c.len_utf8();
    }
    let out = emphasis(&out, '*', "**", "**");
    let out = emphasis(&out, '_', "*", "*");
    let out = crate::markdown::collapse_whitespace(&out);
    // Converted markers are hidden from the emphasis passes of enclosing calls, and shown
    // at the top.
    if depth == 0 {
        out.replace(HIDDEN_STAR, "*")
    } else {
        out.replace('*', HIDDEN_STAR)
    }
}

/// Stands for `*` in converted text until the outermost pass.
const HIDDEN_STAR: &str = "\u{1}";

/// A `#name(args)[content]` call at the start of `text`: its Markdown and length.
fn call(text: &str, depth: usize) -> Option<(String, usize)> {
    let body = text.get(1..)?;
    if body.starts_with('{') || body.starts_with('(') {
        let (open, close) = if body.starts_with('{') {
            ('{', '}')
        } else {
            ('(', ')')
        };
        let (_, end) = balanced(window(body, ARGS_WINDOW), 0, open, close)?;
        return Some((String::new(), 1 + end));
    }
    let name_len = body
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .unwrap_or(body.len());
    let name = body.get(..name_len)?.trim_end_matches('.');
    if name.is_empty() || !name.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        return None;
    }
    let mut pos = 1 + name.len();
    let mut args = "";
    if text.get(pos..).is_some_and(|r| r.starts_with('(')) {
        let rest = window(text.get(pos..)?, ARGS_WINDOW);
        let (inner, end) = balanced(rest, 0, '(', ')')?;
        args = inner;
        pos += end;
    }
    let mut content = String::new();
    while text.get(pos..).is_some_and(|r| r.starts_with('[')) {
        let rest = window(text.get(pos..)?, ARGS_WINDOW);
        let Some((inner, end)) = balanced(rest, 0, '[', ']') else {
            break;
        };
        let converted = if depth >= MAX_DEPTH {
            inner.to_string()
        } else {
            inline(inner, depth + 1)
        };
        if !content.is_empty() {
            content.push(' ');
        }
        content.push_str(&converted);
        pos += end;
    }
    let first_string = || strings(args).into_iter().next().unwrap_or_default();
    let out = match name {
        "link" => {
            let url = first_string();
            if content.is_empty() {
                url
            } else {
                format!("[{content}]({url})")
            }
        }
        "strong" => format!("{HIDDEN_STAR}{HIDDEN_STAR}{content}{HIDDEN_STAR}{HIDDEN_STAR}"),
        "emph" => format!("{HIDDEN_STAR}{content}{HIDDEN_STAR}"),
        "raw" => format!("`{}`", first_string()),
        "footnote" => format!(" ({content})"),
        "image" | "pagebreak" | "v" | "h" | "colbreak" | "outline" | "bibliography" => {
            String::new()
        }
        "heading" | "title" => content,
        _ => {
            // `caption: [..]` and other content arguments, then the trailing content.
            let mut parts = Vec::new();
            let mut search = args;
            while let Some(open) = search.find('[') {
                let Some((inner, end)) = balanced(search, open, '[', ']') else {
                    break;
                };
                parts.push(if depth >= MAX_DEPTH {
                    inner.to_string()
                } else {
                    inline(inner, depth + 1)
                });
                search = search.get(end..).unwrap_or("");
            }
            parts.push(content);
            parts.retain(|p| !p.is_empty());
            parts.join(" ")
        }
    };
    Some((out, pos))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_converts, md};
    use proptest::prelude::*;

    const DOC: &str = r#"#import "@preview/cetz:0.2.0": canvas
#set document(title: "Typst Field Notes", author: ("Ana Lima", "Bo Chen"))
#set page(
  paper: "a4",
  margin: 2cm,
)
#let secret = "SECRETVALUE"
// SECRET line comment
/* SECRET
   block comment */

= Introduction
This is *strong* and _emphasised_ text with `inline raw`, a #link("https://typst.app")[link to Typst] and #emph[more]. <intro>
Math $x^2 + y^2$ stays.

== Lists
- first item
- second item
  continued
+ numbered
/ Term: its description

```rust
fn main() { println!("hi"); }
```

#figure(image("plot.png"), caption: [A caption here])
#v(1em)
#block[Content in a block]
Footnote#footnote[The note.] done.
"#;

    #[test]
    fn document_converts() {
        assert_converts(
            DOC,
            "typ",
            "Typst Field Notes",
            "Ana Lima, Bo Chen",
            &[
                "# Introduction",
                "This is **strong** and *emphasised* text with `inline raw`, a [link to Typst](https://typst.app) and *more*. Math $x^2 + y^2$ stays.",
                "## Lists",
                "- first item\n- second item continued\n1. numbered\n- **Term**: its description",
                "```rust\nfn main() { println!(\"hi\"); }\n```",
                "A caption here Content in a block Footnote (The note.) done.",
            ],
            &[
                "SECRET", "a4", "cetz", "plot.png", "1em", "<intro>", "#v", "#block", "#figure",
            ],
        );
    }

    #[test]
    fn deep_content_blocks_are_bounded() {
        let deep = format!("{}x{}", "#strong[".repeat(3000), "]".repeat(3000));
        assert!(md(&deep, "typ").contains('x'));
        let _ = md(&"#block[".repeat(3000), "typ");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn arbitrary_text_never_panics(text in "[-=+/#*_`$<>()\\[\\]{}\"\\\\:a-z \n]{0,400}") {
            let _ = md(&text, "typ");
        }

        #[test]
        fn truncated_doc_never_panics(cut in 0usize..1000, flips in proptest::collection::vec((0usize..1000, any::<u8>()), 0..4)) {
            let bytes = crate::testing::damaged(DOC.as_bytes(), &flips, cut);
            crate::testing::never_panics(super::super::extract, &bytes, "typ", &[])?;
        }
    }
}
