//! BibTeX (`.bib`) to Markdown: one list item per entry, with its title, authors (`Last,
//! First` turned to `First Last`), year, venue (journal, book title, publisher, school...),
//! type and key, and its abstract when it has one. Values are decoded like LaTeX text
//! (braces dropped, accents such as `{\"o}` composed, `--` as a dash), `@string` macros and
//! `#` concatenation are resolved, `@comment` and `@preamble` are dropped, and so is the
//! text between entries (which BibTeX ignores). A damaged entry is skipped with a warning.

use std::collections::HashMap;

use super::latex::inline;
use super::{Doc, balanced, tick};
use crate::{Control, ExtractError};

/// Fields that name where a work appeared, in order of preference.
const VENUES: &[&str] = &[
    "journal",
    "journaltitle",
    "booktitle",
    "series",
    "publisher",
    "school",
    "institution",
    "organization",
    "howpublished",
];

pub fn convert(text: &str, doc: &mut Doc, control: &Control) -> Result<(), ExtractError> {
    let mut macros: HashMap<String, String> = [
        ("jan", "January"),
        ("feb", "February"),
        ("mar", "March"),
        ("apr", "April"),
        ("may", "May"),
        ("jun", "June"),
        ("jul", "July"),
        ("aug", "August"),
        ("sep", "September"),
        ("oct", "October"),
        ("nov", "November"),
        ("dec", "December"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut pos = 0;
    let mut entries = 0usize;
    let mut damaged = 0usize;
    while let Some(at) = text.get(pos..).and_then(|r| r.find('@')) {
        entries += 1;
        tick(control, entries)?;
        if doc.full {
            break;
        }
        let start = pos + at + 1;
        let rest = text.get(start..).unwrap_or("");
        let kind_len = rest
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(rest.len());
        let kind = rest.get(..kind_len).unwrap_or("").to_ascii_lowercase();
        let open = skip_ws(text, start + kind_len);
        let Some(opener) = text.get(open..).and_then(|r| r.chars().next()) else {
            break;
        };
        if kind.is_empty() || !matches!(opener, '{' | '(') {
            pos = start;
            continue;
        }
        let closer = if opener == '{' { '}' } else { ')' };
        match kind.as_str() {
            "comment" | "preamble" => {
                pos = balanced(text, open, opener, closer).map_or(open + 1, |(_, end)| end);
            }
            kind => {
                // `@string` holds macro definitions; any other kind is an entry with a key.
                let (key, fields_start) = if kind == "string" {
                    (String::new(), open + 1)
                } else {
                    let key_start = skip_ws(text, open + 1);
                    let key_rest = text.get(key_start..).unwrap_or("");
                    let key_len = key_rest
                        .find(|c: char| c == ',' || c == closer || c.is_whitespace())
                        .unwrap_or(key_rest.len());
                    let key = key_rest.get(..key_len).unwrap_or("").to_string();
                    let after_key = skip_ws(text, key_start + key_len);
                    let fields_start = if text.get(after_key..).is_some_and(|r| r.starts_with(','))
                    {
                        after_key + 1
                    } else {
                        after_key
                    };
                    (key, fields_start)
                };
                match fields(text, fields_start, closer, &macros) {
                    Ok((found, end)) if kind == "string" => {
                        macros.extend(found);
                        pos = end;
                    }
                    Ok((found, end)) => {
                        doc.item(&entry(kind, &key, &found));
                        pos = end;
                    }
                    Err(Fail::Damaged) => {
                        damaged += 1;
                        pos = open + 1;
                    }
                    // BibTeX reads the rest of the file into the unclosed value; so do we,
                    // which also keeps a file of unclosed entries linear.
                    Err(Fail::Unclosed) => {
                        damaged += 1;
                        break;
                    }
                }
            }
        }
    }
    if damaged > 0 {
        doc.warnings
            .push(format!("{damaged} damaged BibTeX entries were skipped"));
    }
    Ok(())
}

/// Why an entry could not be read.
enum Fail {
    /// A syntax error: reading resumes after the entry's opening.
    Damaged,
    /// A value or the entry runs to the end of the file.
    Unclosed,
}

type Fields = (Vec<(String, String)>, usize);

/// The `name = value` fields from `pos` up to `closer`: (name, raw value) pairs and the
/// position after the closer.
fn fields(
    text: &str,
    pos: usize,
    closer: char,
    macros: &HashMap<String, String>,
) -> Result<Fields, Fail> {
    let mut unclosed = false;
    match read_fields(text, pos, closer, macros, &mut unclosed) {
        Some(found) => Ok(found),
        None if unclosed => Err(Fail::Unclosed),
        None => Err(Fail::Damaged),
    }
}

fn read_fields(
    text: &str,
    mut pos: usize,
    closer: char,
    macros: &HashMap<String, String>,
    unclosed: &mut bool,
) -> Option<Fields> {
    let mut out = Vec::new();
    *unclosed = true;
    loop {
        pos = skip_ws(text, pos);
        let c = text.get(pos..)?.chars().next()?;
        if c == closer {
            return Some((out, pos + 1));
        }
        if c == ',' {
            pos += 1;
            continue;
        }
        let rest = text.get(pos..)?;
        let name_len = rest.find(|c: char| c == '=' || c.is_whitespace() || c == closer)?;
        let name = rest.get(..name_len)?.trim().to_ascii_lowercase();
        if name.is_empty() || name.contains(['{', '}', '@', ',']) {
            *unclosed = false;
            return None;
        }
        pos = skip_ws(text, pos + name_len);
        if !text.get(pos..)?.starts_with('=') {
            *unclosed = false;
            return None;
        }
        pos += 1;
        let mut value = String::new();
        loop {
            pos = skip_ws(text, pos);
            let c = text.get(pos..)?.chars().next()?;
            match c {
                '{' => {
                    let (inner, end) = balanced(text, pos, '{', '}')?;
                    value.push_str(inner);
                    pos = end;
                }
                '"' => {
                    let end = quoted_end(text, pos + 1)?;
                    value.push_str(text.get(pos + 1..end)?);
                    pos = end + 1;
                }
                _ => {
                    let rest = text.get(pos..)?;
                    let len = rest
                        .find(|c: char| c.is_whitespace() || c == ',' || c == '#' || c == closer)
                        .unwrap_or(rest.len());
                    let word = rest.get(..len)?;
                    if word.is_empty() {
                        *unclosed = false;
                        return None;
                    }
                    match macros.get(&word.to_ascii_lowercase()) {
                        Some(expansion) => value.push_str(expansion),
                        None => value.push_str(word),
                    }
                    pos += len;
                }
            }
            pos = skip_ws(text, pos);
            if text.get(pos..)?.starts_with('#') {
                pos += 1;
                continue;
            }
            break;
        }
        out.push((name, value));
    }
}

/// The index of the `"` ending a quoted value that starts at `pos` (braces may hold `"`).
fn quoted_end(text: &str, pos: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut escaped = false;
    for (at, c) in text.get(pos..)?.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            '"' if depth == 0 => return Some(pos + at),
            _ => {}
        }
    }
    None
}

fn skip_ws(text: &str, pos: usize) -> usize {
    let rest = text.get(pos..).unwrap_or("");
    pos + (rest.len() - rest.trim_start().len())
}

/// One entry as a Markdown list item.
fn entry(kind: &str, key: &str, fields: &[(String, String)]) -> String {
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| inline(v))
            .filter(|v| !v.is_empty())
    };
    let raw = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let mut parts = Vec::new();
    if let Some(title) = field("title") {
        parts.push(format!("**{}**.", title.trim_end_matches('.')));
    }
    let people = raw("author").or_else(|| raw("editor")).map(authors);
    let year = field("year").or_else(|| field("date").map(|d| d.chars().take(4).collect()));
    match (people, year) {
        (Some(p), Some(y)) if !p.is_empty() => parts.push(format!("{p} ({y}).")),
        (Some(p), _) if !p.is_empty() => parts.push(format!("{p}.")),
        (_, Some(y)) => parts.push(format!("({y}).")),
        _ => {}
    }
    if let Some(venue) = VENUES.iter().find_map(|v| field(v)) {
        parts.push(format!("*{}*.", venue.trim_end_matches('.')));
    }
    parts.push(format!("[{kind}: {key}]"));
    let mut item = format!("- {}", parts.join(" "));
    if let Some(text) = field("abstract") {
        item.push_str("\n  ");
        item.push_str(&text);
    }
    item
}

/// The byte index of the first comma outside braces.
fn top_level_comma(name: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in name.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => return Some(at),
            _ => {}
        }
    }
    None
}

/// `Knuth, Donald E. and Lamport, Leslie and others` → `Donald E. Knuth, Leslie Lamport et al.`
fn authors(raw: &str) -> String {
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let lower = raw.to_ascii_lowercase();
    let mut pos = 0;
    while let Some(c) = raw.get(pos..).and_then(|r| r.chars().next()) {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0
            && c.is_whitespace()
            && lower.get(pos + 1..).is_some_and(|r| r.starts_with("and"))
            && lower
                .get(pos + 4..)
                .is_some_and(|r| r.starts_with(char::is_whitespace))
        {
            names.push(raw.get(start..pos).unwrap_or(""));
            pos += 4;
            start = pos;
            continue;
        }
        pos += c.len_utf8();
    }
    names.push(raw.get(start..).unwrap_or(""));
    let mut out: Vec<String> = Vec::new();
    let mut others = false;
    for name in names {
        let name = name.trim();
        if name.eq_ignore_ascii_case("others") {
            others = true;
            continue;
        }
        let name = match top_level_comma(name).map(|at| (name.get(..at), name.get(at + 1..))) {
            Some((Some(last), Some(first))) => {
                // `von Last, Jr, First` keeps Jr after the name.
                match first.split_once(',') {
                    Some((jr, first)) => format!("{} {}, {}", first.trim(), last.trim(), jr.trim()),
                    None => format!("{} {}", first.trim(), last.trim()),
                }
            }
            _ => name.to_string(),
        };
        let name = inline(&name);
        if !name.is_empty() {
            out.push(name);
        }
    }
    let mut joined = out.join(", ");
    if others {
        joined.push_str(" et al.");
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::super::tests::{md, run};
    use proptest::prelude::*;

    const BIB: &str = r#"% SECRET comment before entries
@string{tug = "TUGboat"}
@comment{SECRET commented entry}
@preamble{"\newcommand{\noop}[1]{}"}

@book{knuth84,
  author    = {Knuth, Donald E.},
  title     = {The {\TeX}book},
  publisher = {Addison--Wesley},
  year      = 1984,
}

@article{goedel31,
  author  = "G{\"o}del, Kurt and {\'E}cole, Jean and others",
  title   = "{\"U}ber formal unentscheidbare S{\"a}tze",
  journal = tug # " Monthly",
  year    = {1931},
  month   = jan,
  abstract = {We prove \emph{incompleteness}.},
}

@inproceedings(lamport94,
  author = {Leslie Lamport},
  title = {{LaTeX}: A Document Preparation System},
  booktitle = {Proc. of Things},
  year = 1994
)

@misc{broken, title = {never closed
"#;

    #[test]
    fn entries_convert() {
        let e = run(BIB, "bib");
        let md = &e.markdown;
        crate::testing::assert_in_order(
            md,
            &[
                "- **The TeXbook**. Donald E. Knuth (1984). *Addison–Wesley*. [book: knuth84]",
                "- **Über formal unentscheidbare Sätze**. Kurt Gödel, Jean École et al. (1931). *TUGboat Monthly*. [article: goedel31]\n  We prove *incompleteness*.",
                "- **LaTeX: A Document Preparation System**. Leslie Lamport (1994). *Proc. of Things*. [inproceedings: lamport94]",
            ],
        );
        assert!(!md.contains("SECRET"), "{md}");
        assert!(!md.contains("noop"), "{md}");
        assert_eq!(
            e.warnings,
            vec!["1 damaged BibTeX entries were skipped".to_string()]
        );
    }

    #[test]
    fn text_without_entries_is_empty() {
        assert_eq!(md("just words, no entries", "bib"), "");
        assert_eq!(md("@", "bib"), "");
        assert_eq!(md("@@@{", "bib"), "");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn arbitrary_text_never_panics(text in "[@{}()\"#=,\\\\a-z0-9 \n]{0,400}") {
            let _ = md(&text, "bib");
        }

        #[test]
        fn truncated_bib_never_panics(cut in 0usize..900, flips in proptest::collection::vec((0usize..900, any::<u8>()), 0..4)) {
            let bytes = crate::testing::damaged(BIB.as_bytes(), &flips, cut);
            crate::testing::never_panics(super::super::extract, &bytes, "bib", &[])?;
        }
    }
}
