//! Tidy rules that read the workspace's source text, fast and without building any binary
//! (`cargo test -p shelf-tidy`). The helpers here (a small Rust lexer that yields string literals outside comments and
//! `#[cfg(test)]` items) are shared by the rules below; a new rule is one more `#[test]`.
//!
//! Rule `one_owner_per_table`: each table is written, and read by SQL, only by the crate that
//! owns it (ARCHITECTURE.md, "Who owns which table"); other crates call the owner's functions,
//! or splice in an `SqlFragment` the owner built. `migrations/` creates every table and is
//! exempt.

use shelf_tidy::{members, root, rust_files, shown};

/// A string literal's value: `\n`, `\t`, `\r`, `\"`, `\'` and `\\` decoded, other escapes
/// left as written, and a `\` line continuation dropping the newline and the next line's
/// leading whitespace (as in Rust). `lines[i]` is the source line of `text`'s byte `i`.
#[derive(Debug)]
struct Literal {
    text: String,
    lines: Vec<usize>,
}

impl Literal {
    fn line_at(&self, byte: usize) -> usize {
        self.lines
            .get(byte)
            .or(self.lines.last())
            .copied()
            .unwrap_or(0)
    }
}

/// The string literals of a Rust source file outside comments and outside items marked
/// `#[cfg(test)]` (a test module's fixtures may name any table). Plain, byte and raw strings
/// are read; char literals and lifetimes are told apart so a `'"'` never opens a string.
fn string_literals(src: &str) -> Vec<Literal> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let mut depth: usize = 0;
    // `Some(d)`: a `#[cfg(test)]` item is pending at depth `d` (its `{` not yet met);
    // `skip_until`: inside that item, until the brace depth falls back to this.
    let mut pending_test: Option<usize> = None;
    let mut skip_until: Option<usize> = None;
    let at = |i: usize, s: &str| -> bool {
        s.chars()
            .enumerate()
            .all(|(k, c)| chars.get(i + k) == Some(&c))
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        // Comments (nested block comments included).
        if at(i, "//") {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if at(i, "/*") {
            let mut nest = 0;
            while i < chars.len() {
                if at(i, "/*") {
                    nest += 1;
                    i += 2;
                } else if at(i, "*/") {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            continue;
        }
        if at(i, "#[cfg(test)]") {
            pending_test = Some(depth);
            i += "#[cfg(test)]".len();
            continue;
        }
        // Raw strings: r"…", r#"…"#, br"…" (an identifier ending in `r` is not one).
        let prev_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let raw_start = if !prev_ident && c == 'r' {
            Some(i + 1)
        } else if !prev_ident && c == 'b' && chars.get(i + 1) == Some(&'r') {
            Some(i + 2)
        } else {
            None
        };
        if let Some(mut j) = raw_start {
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) == Some(&'"') {
                let close: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let mut lit = Literal {
                    text: String::new(),
                    lines: Vec::new(),
                };
                j += 1;
                while j < chars.len() && !at(j, &close) {
                    lit.text.push(chars[j]);
                    lit.lines
                        .extend(std::iter::repeat_n(line, chars[j].len_utf8()));
                    if chars[j] == '\n' {
                        line += 1;
                    }
                    j += 1;
                }
                i = j + close.chars().count();
                if skip_until.is_none() {
                    out.push(lit);
                }
                continue;
            }
        }
        if c == '"' || (!prev_ident && c == 'b' && chars.get(i + 1) == Some(&'"')) {
            i += if c == 'b' { 2 } else { 1 };
            let mut lit = Literal {
                text: String::new(),
                lines: Vec::new(),
            };
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' && chars.get(i + 1) == Some(&'\n') {
                    // A line continuation: the newline and the next line's indent vanish.
                    i += 2;
                    line += 1;
                    while i < chars.len() && chars[i].is_whitespace() {
                        if chars[i] == '\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                    continue;
                }
                if chars[i] == '\\' {
                    // Whitespace escapes separate words as the characters they stand for.
                    let decoded = match chars.get(i + 1) {
                        Some('n') => Some('\n'),
                        Some('t') => Some('\t'),
                        Some('r') => Some('\r'),
                        Some(&q @ ('"' | '\\' | '\'')) => Some(q),
                        _ => None,
                    };
                    if let Some(d) = decoded {
                        lit.text.push(d);
                        lit.lines.push(line);
                        i += 2;
                        continue;
                    }
                    lit.text.push('\\');
                    lit.lines.push(line);
                    i += 1;
                }
                if let Some(&ch) = chars.get(i) {
                    lit.text.push(ch);
                    lit.lines.extend(std::iter::repeat_n(line, ch.len_utf8()));
                    if ch == '\n' {
                        line += 1;
                    }
                }
                i += 1;
            }
            i += 1;
            if skip_until.is_none() {
                out.push(lit);
            }
            continue;
        }
        // A char literal (`'x'`, `'\''`, `'\u{..}'`) or a lifetime (`'a`).
        if c == '\'' {
            if chars.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
            continue;
        }
        match c {
            '{' => {
                if pending_test.take().is_some() && skip_until.is_none() {
                    skip_until = Some(depth);
                }
                depth += 1;
            }
            '}' => {
                depth = depth.saturating_sub(1);
                if skip_until == Some(depth) {
                    skip_until = None;
                }
            }
            // `#[cfg(test)] use …;` or `… fn f();`: the attribute's item ended without a body.
            ';' if pending_test == Some(depth) => pending_test = None,
            _ => {}
        }
        i += 1;
    }
    out
}

/// The tables of Shelf and the crate (directory) that owns each. A name ending in `*` is a
/// prefix: `search_*` covers the search tables, views and full-text indexes.
const TABLE_OWNERS: &[(&str, &str)] = &[
    ("runs", "engine"),
    ("run_stages", "engine"),
    ("run_events", "engine"),
    ("run_stage_parts", "engine"),
    ("documents", "documents"),
    ("document_texts", "documents"),
    ("document_pages", "documents"),
    ("document_passages", "documents"),
    ("document_segments", "documents"),
    ("extraction_cache", "documents"),
    ("search_*", "documents"),
    ("api_audit_events", "app"),
    ("web_sessions", "app"),
];

/// Crates that may name any table: the schema's migrations create them all.
const EXEMPT_FROM_TABLE_OWNERS: &[&str] = &["migrations"];

/// SQL words after which a table name follows.
const TABLE_KEYWORDS: &[&str] = &["FROM", "JOIN", "INTO", "UPDATE", "TABLE"];

fn owner_of(table: &str) -> Option<&'static str> {
    TABLE_OWNERS.iter().find_map(|(name, owner)| {
        let hit = match name.strip_suffix('*') {
            Some(prefix) => table.starts_with(prefix) && table.len() > prefix.len(),
            None => table == *name,
        };
        hit.then_some(*owner)
    })
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `(byte offset, table)` of every table a literal's SQL names after a [`TABLE_KEYWORDS`]
/// word (upper case, as Shelf writes SQL; whole words; any whitespace, line breaks included,
/// in between; an optional `"` around the name).
fn tables_named(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for keyword in TABLE_KEYWORDS {
        for (start, _) in text.match_indices(keyword) {
            let before = text[..start].chars().next_back();
            let end = start + keyword.len();
            if before.is_some_and(is_word) {
                continue;
            }
            let rest = &text[end..];
            let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '"');
            if trimmed.len() == rest.len() {
                continue; // `FROMAGE`: no separator after the keyword.
            }
            let name: String = trimmed.chars().take_while(|c| is_word(*c)).collect();
            if name.is_empty() {
                continue;
            }
            out.push((start, name.to_ascii_lowercase()));
        }
    }
    out.sort();
    out
}

/// `file:line: …` for every literal in `crate_dir`'s `src/` naming a table another crate owns.
fn table_owner_violations(crate_dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    for file in rust_files(&root().join(crate_dir).join("src")) {
        let Ok(src) = std::fs::read_to_string(&file) else {
            continue;
        };
        for lit in string_literals(&src) {
            for (at, table) in tables_named(&lit.text) {
                let Some(owner) = owner_of(&table) else {
                    continue;
                };
                if owner != crate_dir {
                    out.push(format!(
                        "{}:{}: names table `{table}`, owned by the `{owner}` crate",
                        shown(&file),
                        lit.line_at(at)
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn one_owner_per_table() {
    let mut violations = Vec::new();
    for member in members() {
        if EXEMPT_FROM_TABLE_OWNERS.contains(&member.as_str()) {
            continue;
        }
        violations.extend(table_owner_violations(&member));
    }
    assert!(
        violations.is_empty(),
        "SQL naming a table outside its owning crate (call the owner's functions, or splice \
         in an SqlFragment the owner builds; owners are listed in ARCHITECTURE.md):\n{}",
        violations.join("\n")
    );
}

#[test]
fn lexer_reads_literals_outside_comments_and_test_modules() {
    let src = r####"
// "FROM runs" in a comment
/* "FROM runs" /* nested */ still a comment */
const A: &str = "SELECT 1 FROM \
                 runs";
const B: char = '"';
fn f<'a>(x: &'a str) -> &'a str { x }
const C: &str = r#"UPDATE "documents" SET x = 1"#;
#[cfg(test)]
use something;
const D: &str = "INSERT INTO api_audit_events";
#[cfg(test)]
mod tests {
    const E: &str = "DELETE FROM runs";
    fn g() { let _ = "{"; }
}
const F: &str = "FROMAGE runs; JOIN\n  run_events; search_x FROM search_cleaned";
"####;
    let lits = string_literals(src);
    let texts: Vec<&str> = lits.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "SELECT 1 FROM runs",
            "UPDATE \"documents\" SET x = 1",
            "INSERT INTO api_audit_events",
            "FROMAGE runs; JOIN\n  run_events; search_x FROM search_cleaned",
        ]
    );
    assert_eq!(lits[0].line_at(lits[0].text.find("runs").unwrap()), 5);
    let named: Vec<Vec<String>> = lits
        .iter()
        .map(|l| tables_named(&l.text).into_iter().map(|(_, t)| t).collect())
        .collect();
    assert_eq!(
        named,
        [
            vec!["runs".to_string()],
            vec!["documents".to_string()],
            vec!["api_audit_events".to_string()],
            vec!["run_events".to_string(), "search_cleaned".to_string()],
        ]
    );
    assert_eq!(owner_of("search_cleaned"), Some("documents"));
    assert_eq!(owner_of("search_"), None);
    assert_eq!(owner_of("runs_active"), None);
}
