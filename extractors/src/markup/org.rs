//! Org mode (`.org`) to Markdown: headlines as headings (TODO keywords, priorities and tags
//! dropped; `COMMENT` subtrees dropped), paragraphs, plain and description lists with
//! checkboxes, tables, `#+BEGIN_SRC`/`EXAMPLE` blocks and `:` lines as code, quotes, links
//! as Markdown links, emphasis converted (`*b*` → `**b**`, `/i/` → `*i*`, `=v=`/`~c~` →
//! code). Comments (`# ...`, `#+BEGIN_COMMENT`), drawers (`:PROPERTIES:`), planning lines,
//! export blocks and other `#+KEYWORD:` settings are dropped; `#+TITLE` and `#+AUTHOR` go to
//! the metadata.

use super::{Doc, emphasis, indent_of, tick, window};
use crate::markdown;
use crate::{Control, ExtractError};

const TODO_KEYWORDS: &[&str] = &[
    "TODO",
    "DONE",
    "NEXT",
    "WAITING",
    "WAIT",
    "HOLD",
    "CANCELLED",
    "CANCELED",
    "STARTED",
];

pub fn convert(text: &str, doc: &mut Doc, control: &Control) -> Result<(), ExtractError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut para: Vec<&str> = Vec::new();
    let mut i = 0;
    // Inside a COMMENT subtree: headlines at this level or above end it.
    let mut commented: Option<usize> = None;
    let mut title_written = false;
    while let Some(&line) = lines.get(i) {
        tick(control, i)?;
        if doc.full {
            break;
        }
        i += 1;
        let t = line.trim();
        if let Some((level, rest)) = headline(line) {
            if commented.is_some_and(|l| level > l) {
                continue;
            }
            commented = None;
            flush(doc, &mut para);
            let title = clean_headline(rest);
            if title.starts_with("COMMENT") {
                commented = Some(level);
                continue;
            }
            doc.heading(level, &inline(&title));
            continue;
        }
        if commented.is_some() {
            continue;
        }
        if t.is_empty() {
            flush(doc, &mut para);
            continue;
        }
        // Comments: `# text` and a lone `#`.
        if t == "#" || t.starts_with("# ") {
            continue;
        }
        if let Some(keyword) = t.strip_prefix("#+") {
            flush(doc, &mut para);
            let (name, value) = keyword.split_once(':').unwrap_or((keyword, ""));
            let name = name.split_whitespace().next().unwrap_or("");
            let upper = name.to_ascii_uppercase();
            let value = value.trim();
            if let Some(kind) = upper.strip_prefix("BEGIN_") {
                let end_tag = format!("#+END_{kind}");
                let start = i;
                while lines
                    .get(i)
                    .is_some_and(|l| !l.trim().to_ascii_uppercase().starts_with(&end_tag))
                {
                    i += 1;
                }
                let body = lines.get(start..i).unwrap_or(&[]);
                i += 1;
                block(doc, kind, keyword, body);
                continue;
            }
            match upper.as_str() {
                "TITLE" => {
                    doc.set_title(&inline(value));
                    if !title_written && !value.is_empty() {
                        doc.block(&markdown::heading(1, &inline(value)));
                        title_written = true;
                    }
                }
                "AUTHOR" => doc.set_author(&inline(value)),
                "CAPTION" => doc.paragraph(&inline(value)),
                _ => {}
            }
            continue;
        }
        // Drawers (`:PROPERTIES:` to `:END:`).
        if is_drawer_start(t) {
            flush(doc, &mut para);
            let start = i;
            while lines
                .get(i)
                .is_some_and(|l| !l.trim().eq_ignore_ascii_case(":END:"))
            {
                i += 1;
            }
            if lines.get(i).is_none() {
                // Never closed: not a drawer after all, keep the lines.
                i = start;
            } else {
                i += 1;
            }
            continue;
        }
        if ["SCHEDULED:", "DEADLINE:", "CLOSED:"]
            .iter()
            .any(|p| t.starts_with(p))
        {
            continue;
        }
        // Fixed-width lines.
        if t == ":" || t.starts_with(": ") {
            flush(doc, &mut para);
            let mut code = vec![t.get(2..).unwrap_or("")];
            while let Some(next) = lines.get(i).map(|l| l.trim())
                && (next == ":" || next.starts_with(": "))
            {
                code.push(next.get(2..).unwrap_or(""));
                i += 1;
            }
            doc.code("", &code.join("\n"));
            continue;
        }
        if t.starts_with('|') {
            flush(doc, &mut para);
            let mut rows: Vec<Vec<String>> = Vec::new();
            i -= 1;
            while let Some(row) = lines.get(i).map(|l| l.trim())
                && row.starts_with('|')
            {
                i += 1;
                if row.starts_with("|-") {
                    continue;
                }
                let cells: Vec<String> = row
                    .trim_matches('|')
                    .split('|')
                    .map(|c| inline(c.trim()))
                    .collect();
                rows.push(cells);
            }
            doc.block(markdown::table(&rows).trim_end());
            continue;
        }
        if let Some((numbered, rest)) = list_item(t) {
            flush(doc, &mut para);
            let indent = indent_of(line);
            let mut text = vec![rest.to_string()];
            while let Some(next) = lines.get(i)
                && !next.trim().is_empty()
                && indent_of(next) > indent
                && list_item(next.trim()).is_none()
                && headline(next).is_none()
            {
                text.push(next.trim().to_string());
                i += 1;
            }
            let mut text = text.join(" ");
            // A checkbox, then a description (`term :: text`).
            let mut check = "";
            for (mark, out) in [
                ("[ ] ", "[ ] "),
                ("[X] ", "[x] "),
                ("[x] ", "[x] "),
                ("[-] ", "[-] "),
            ] {
                if let Some(rest) = text.strip_prefix(mark) {
                    check = out;
                    text = rest.to_string();
                    break;
                }
            }
            let text = match text.split_once(" :: ") {
                Some((term, body)) => format!("**{}**: {}", inline(term), inline(body)),
                None => inline(&text),
            };
            let marker = if numbered { "1." } else { "-" };
            doc.item(&format!(
                "{}{marker} {check}{text}",
                "  ".repeat(indent / 2)
            ));
            continue;
        }
        para.push(t);
    }
    flush(doc, &mut para);
    Ok(())
}

fn flush(doc: &mut Doc, para: &mut Vec<&str>) {
    if !para.is_empty() {
        doc.paragraph(&inline(&para.join(" ")));
        para.clear();
    }
}

/// A `#+BEGIN_kind` ... `#+END_kind` block.
fn block(doc: &mut Doc, kind: &str, header: &str, body: &[&str]) {
    let text = super::dedent(body);
    let argument = header.split_whitespace().nth(1).unwrap_or("");
    match kind {
        "SRC" => doc.code(argument, &text),
        "EXAMPLE" | "VERBATIM" => doc.code("", &text),
        "COMMENT" | "EXPORT" | "HTML" | "LATEX" => {}
        "QUOTE" => {
            // Paragraphs only: a quote is not parsed again, so nesting cannot recurse.
            let paragraphs: Vec<String> = text
                .split("\n\n")
                .map(|p| format!("> {}", inline(&markdown::collapse_whitespace(p))))
                .filter(|p| p.len() > 2)
                .collect();
            doc.block(&paragraphs.join("\n>\n"));
        }
        "VERSE" => {
            let lines: Vec<String> = text.lines().map(|l| inline(l.trim())).collect();
            doc.block(&lines.join("  \n"));
        }
        _ => {
            // CENTER, NOTE, and the other special blocks: their text.
            for paragraph in text.split("\n\n") {
                doc.paragraph(&inline(paragraph));
            }
        }
    }
}

/// `*** Title` → (3, "Title").
fn headline(line: &str) -> Option<(usize, &str)> {
    let stars = line.len() - line.trim_start_matches('*').len();
    if stars == 0 {
        return None;
    }
    let rest = line.get(stars..)?;
    if !rest.starts_with(' ') && !rest.is_empty() {
        return None;
    }
    Some((stars, rest.trim()))
}

/// A headline without its TODO keyword, priority cookie and tags.
fn clean_headline(text: &str) -> String {
    let mut text = text.trim();
    if let Some((first, rest)) = text.split_once(' ')
        && TODO_KEYWORDS.contains(&first)
    {
        text = rest.trim_start();
    } else if TODO_KEYWORDS.contains(&text) {
        return String::new();
    }
    if let Some(rest) = text.strip_prefix("[#")
        && let Some(close) = rest.find(']')
        && close <= 2
    {
        text = rest.get(close + 1..).unwrap_or("").trim_start();
    }
    // Tags: a last word like `:work:urgent:`.
    if let Some((head, last)) = text.rsplit_once(char::is_whitespace)
        && is_tags(last)
    {
        text = head.trim_end();
    } else if is_tags(text) {
        return String::new();
    }
    text.to_string()
}

fn is_tags(word: &str) -> bool {
    word.len() > 2
        && word.starts_with(':')
        && word.ends_with(':')
        && word
            .chars()
            .all(|c| c == ':' || c.is_alphanumeric() || matches!(c, '_' | '@' | '#' | '%'))
}

fn is_drawer_start(t: &str) -> bool {
    t.len() > 2
        && t.starts_with(':')
        && t.ends_with(':')
        && !t.eq_ignore_ascii_case(":END:")
        && t.get(1..t.len() - 1).is_some_and(|n| {
            n.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        })
}

/// A list item: `- `, `+ `, ` * ` (indented only: at column 0 it is a headline), `1. `,
/// `1) `, `a. `. Returns whether it is numbered, and the text.
fn list_item(t: &str) -> Option<(bool, &str)> {
    for bullet in ["- ", "+ ", "* "] {
        if let Some(rest) = t.strip_prefix(bullet) {
            return Some((false, rest));
        }
    }
    let (marker, rest) = t.split_once(' ')?;
    let inner = marker
        .strip_suffix('.')
        .or_else(|| marker.strip_suffix(')'))?;
    let numbered =
        (!inner.is_empty() && inner.len() <= 4 && inner.chars().all(|c| c.is_ascii_digit()))
            || (inner.len() == 1 && inner.chars().all(|c| c.is_ascii_alphabetic()));
    numbered.then_some((true, rest))
}

/// Links and emphasis.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(c) = text.get(pos..).and_then(|r| r.chars().next()) {
        let rest = text.get(pos..).unwrap_or("");
        if let Some(link) = rest.strip_prefix("[[")
            && let Some(end) = window(link, 2048).find("]]")
        {
            let inner = link.get(..end).unwrap_or("");
            let (target, label) = match inner.split_once("][") {
                Some((target, label)) => (target, Some(label)),
                None => (inner, None),
            };
            let target = target.trim();
            let is_url = target.contains("://") || target.starts_with("mailto:");
            match (label, is_url) {
                (Some(label), true) => out.push_str(&format!("[{label}]({target})")),
                (Some(label), false) => out.push_str(label),
                (None, _) => out.push_str(target.strip_prefix("file:").unwrap_or(target)),
            }
            pos += 2 + end + 2;
            continue;
        }
        out.push(c);
        pos += c.len_utf8();
    }
    // Verbatim and code first, so that markers inside them are left alone.
    let out = emphasis(&out, '=', "`", "`");
    let out = emphasis(&out, '~', "`", "`");
    let out = emphasis(&out, '*', "**", "**");
    let out = emphasis(&out, '/', "*", "*");
    let out = emphasis(&out, '+', "~~", "~~");
    emphasis(&out, '_', "", "")
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_converts, md};
    use proptest::prelude::*;

    const DOC: &str = r#"#+TITLE: Garden Notes
#+AUTHOR: Ana Lima
#+OPTIONS: toc:nil SECRETOPTION
# A SECRET comment line

* TODO [#A] Planting plan                                     :garden:spring:
  SCHEDULED: <2024-03-01 Fri>
  :PROPERTIES:
  :CUSTOM_ID: HIDDENPROP
  :END:
Plant *tomatoes* and /basil/ with =ph 6.5= and ~soil-test~, see [[https://example.org/seeds][the seed shop]].
Path /usr/bin/ stays.

** Tasks
- [X] buy seeds
- [ ] dig beds
  deeper please
- Water :: every morning
1. first
2. second

#+BEGIN_SRC python
print("grow")
#+END_SRC

#+begin_comment
SECRET block comment
#+end_comment

| Plant  | Days |
|--------+------|
| Tomato | 80   |

: fixed width line

#+BEGIN_QUOTE
To plant a garden is to believe in tomorrow.
#+END_QUOTE

* COMMENT Hidden subtree
SECRET subtree text
** Also hidden
* Harvest
Math $E=mc^2$ stays.
"#;

    #[test]
    fn document_converts() {
        assert_converts(
            DOC,
            "org",
            "Garden Notes",
            "Ana Lima",
            &[
                "# Garden Notes",
                "# Planting plan",
                "Plant **tomatoes** and *basil* with `ph 6.5` and `soil-test`, see [the seed shop](https://example.org/seeds).",
                "## Tasks",
                "- [x] buy seeds\n- [ ] dig beds deeper please\n- **Water**: every morning\n1. first\n1. second",
                "```python\nprint(\"grow\")\n```",
                "| Plant | Days |\n|---|---|\n| Tomato | 80 |",
                "```\nfixed width line\n```",
                "> To plant a garden is to believe in tomorrow.",
                "# Harvest",
                "Math $E=mc^2$ stays.",
            ],
            &[
                "SECRET",
                "HIDDENPROP",
                "SCHEDULED",
                ":garden:",
                "TODO",
                "[#A]",
                "Hidden subtree",
                "Also hidden",
            ],
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn arbitrary_text_never_panics(text in "[-*+/=~_|:#\\[\\]a-zA-Z0-9 \n]{0,400}") {
            let _ = md(&text, "org");
        }

        #[test]
        fn truncated_doc_never_panics(cut in 0usize..1200, flips in proptest::collection::vec((0usize..1200, any::<u8>()), 0..4)) {
            let bytes = crate::testing::damaged(DOC.as_bytes(), &flips, cut);
            crate::testing::never_panics(super::super::extract, &bytes, "org", &[])?;
        }
    }
}
