//! Rule-based cleaning for the `local` provider: whitespace normalized, ligatures spelled out,
//! words broken across line ends rejoined, hard-wrapped lines inside paragraphs rejoined.
//! Conservative by design: it must pass the fidelity check, so it never drops or reorders a word.

/// How a line may take part in paragraph rejoining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineKind {
    /// Ordinary wrapped prose.
    Prose,
    /// Markdown structure (heading, list item, table row, quote, HTML comment): kept on its own
    /// line.
    Structure,
    /// Layout that a rejoin would scramble (columns, aligned text, indented code).
    Layout,
}

struct Line {
    /// The line with spaces collapsed and no trailing space (leading indentation dropped).
    text: String,
    indent: usize,
    kind: LineKind,
}

/// Rule-based copy-editing of one chunk. Never drops or reorders a word: it only changes
/// whitespace, spells ligatures out and removes the hyphen of a word broken at a line end.
pub fn clean_text(text: &str) -> String {
    let text = spell_out(text);
    let mut out: Vec<String> = Vec::new();
    let mut block: Vec<Line> = Vec::new();
    let mut fence: Option<&str> = None;
    let mut open_tail = false;
    for raw in text.lines() {
        let raw = raw.trim_end();
        if let Some(marker) = fence {
            out.push(raw.to_string());
            if raw.trim_start().starts_with(marker) {
                fence = None;
            }
            continue;
        }
        let trimmed = raw.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            flush(&mut block, &mut out, &mut open_tail);
            open_tail = false;
            fence = Some(&trimmed[..3]);
            out.push(raw.to_string());
            continue;
        }
        if trimmed.is_empty() {
            flush(&mut block, &mut out, &mut open_tail);
            if out.last().is_some_and(|l| !l.is_empty()) {
                out.push(String::new());
            }
            continue;
        }
        block.push(classify_line(raw));
    }
    flush(&mut block, &mut out, &mut open_tail);
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    while out.first().is_some_and(String::is_empty) {
        out.remove(0);
    }
    out.join("\n")
}

/// Ligatures, soft hyphens and no-break spaces, which extraction leaves behind.
fn spell_out(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{FB00}' => out.push_str("ff"),
            '\u{FB01}' => out.push_str("fi"),
            '\u{FB02}' => out.push_str("fl"),
            '\u{FB03}' => out.push_str("ffi"),
            '\u{FB04}' => out.push_str("ffl"),
            '\u{FB06}' => out.push_str("st"),
            '\u{00AD}' => {}
            '\u{00A0}' | '\u{2007}' | '\u{202F}' => out.push(' '),
            '\r' => {}
            _ => out.push(c),
        }
    }
    out
}

fn collapse(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut space = false;
    for c in line.chars() {
        if c == ' ' || c == '\t' {
            if !space && !out.is_empty() {
                out.push(' ');
            }
            space = true;
        } else if !c.is_control() {
            out.push(c);
            space = false;
        }
    }
    out.trim_end().to_string()
}

fn classify_line(raw: &str) -> Line {
    let indent: usize = raw
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum();
    let body = raw.trim();
    let structure = body.starts_with('#')
        || body.starts_with('|')
        || body.ends_with('|')
        || body.starts_with('>')
        || body.starts_with("<!--")
        || body.starts_with('<') && body.ends_with('>')
        || ["- ", "* ", "+ ", "• ", "– "]
            .iter()
            .any(|p| body.starts_with(p))
        || body == "-"
        || body == "*"
        || numbered_item(body)
        || body
            .chars()
            .all(|c| matches!(c, '-' | '=' | '*' | '_' | ' '));
    // Runs of three or more spaces inside a line mean columns or aligned text.
    let layout = indent >= 4 || body.contains("   ") || body.contains('\t');
    Line {
        text: collapse(body),
        indent,
        kind: if structure {
            LineKind::Structure
        } else if layout {
            LineKind::Layout
        } else {
            LineKind::Prose
        },
    }
}

/// `1. `, `12) `, `a. ` list items.
fn numbered_item(body: &str) -> bool {
    let marker: String = body.chars().take_while(char::is_ascii_digit).collect();
    let rest = &body[marker.len()..];
    (1..=3).contains(&marker.len()) && (rest.starts_with(". ") || rest.starts_with(") "))
}

/// Rejoins a block (lines between blank lines) and appends it to `out`. `open_tail` says
/// whether the last line written is prose that stops mid-sentence: a block that continues it
/// (a lowercase start) was split off by a page or column break and is joined back.
fn flush(block: &mut Vec<Line>, out: &mut Vec<String>, open_tail: &mut bool) {
    if block.is_empty() {
        return;
    }
    let width = block
        .iter()
        .filter(|l| l.kind == LineKind::Prose)
        .map(|l| l.text.chars().count())
        .max()
        .unwrap_or(0);
    let mut current: Option<String> = None;
    let first = &block[0];
    if *open_tail
        && first.kind == LineKind::Prose
        && first.text.chars().next().is_some_and(char::is_lowercase)
        && out.last().is_some_and(String::is_empty)
        && out.len() >= 2
    {
        out.pop();
        let mut acc = out.pop().unwrap_or_default();
        append(&mut acc, &first.text);
        current = Some(acc);
    }
    let skip = usize::from(current.is_some());
    let mut previous: Option<&Line> = (skip == 1).then_some(first);
    for line in block.iter().skip(skip) {
        let joined = match (current.as_mut(), previous) {
            (Some(acc), Some(prev)) => join_lines(acc, prev, line, width),
            _ => false,
        };
        if !joined {
            if let Some(done) = current.take() {
                out.push(done);
                // An indented prose line after an unindented one starts a paragraph.
                if let Some(prev) = previous
                    && line.kind == LineKind::Prose
                    && prev.kind == LineKind::Prose
                    && line.indent >= 2
                    && prev.indent < 2
                {
                    out.push(String::new());
                }
            }
            current = Some(line.text.clone());
        }
        previous = Some(line);
    }
    if let Some(done) = current {
        *open_tail = previous.is_some_and(|l| l.kind == LineKind::Prose) && open_end(&done);
        out.push(done);
    }
    block.clear();
}

/// Prose that stops mid-sentence: after a word, a comma or a broken word.
fn open_end(text: &str) -> bool {
    text.chars()
        .last()
        .is_some_and(|c| c.is_alphanumeric() || c == ',')
        || broken_word(text).is_some()
}

/// Appends `next` to `acc` when `next` continues the paragraph `prev` is in.
fn join_lines(acc: &mut String, prev: &Line, next: &Line, width: usize) -> bool {
    if prev.kind != LineKind::Prose || next.kind != LineKind::Prose {
        return false;
    }
    if next.indent >= 2 && prev.indent < 2 {
        return false;
    }
    let long = width >= 25 && prev.text.chars().count() * 10 >= width * 6;
    if broken_word(&prev.text).is_none() && !long {
        return false;
    }
    append(acc, &next.text);
    true
}

/// Joins a continuation line: `exam-` + `ple` loses the hyphen that only broke the word,
/// `Greco-` + `Roman` and `1990-` + `1995` keep it with no space, anything else gets a space.
fn append(acc: &mut String, next: &str) {
    let first = next.chars().next().unwrap_or(' ');
    match broken_word(acc) {
        Some(true) if first.is_lowercase() => {
            acc.pop();
        }
        Some(_) if first.is_alphanumeric() => {}
        _ => acc.push(' '),
    }
    acc.push_str(next);
}

/// `Some(letters)` when the line ends in a hyphen right after a word character: `letters` is
/// true when that word is alphabetic. URLs and e-mail addresses are never split this way.
fn broken_word(line: &str) -> Option<bool> {
    let word = line.rsplit(' ').next()?;
    let stem = word.strip_suffix('-')?;
    if stem.ends_with('-') || word.contains("://") || word.contains('@') {
        return None;
    }
    let last = stem.chars().last()?;
    if !last.is_alphanumeric() {
        return None;
    }
    Some(last.is_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::{ChunkSettings, fidelity_problem, split};
    use crate::provider::local::testdata::corpus;

    #[test]
    fn rejoins_wrapped_lines_and_broken_words() {
        let source = "  SHE MOPED. She sighed. She\n  wandered around the house\n  with the look of an injured\npuppy, sometimes bursting into\ntears. How could she ex-\nplain it to the Greco-\nRoman scholars?\n  \"I've never forgotten that mo-\nment,\" she says.";
        assert_eq!(
            clean_text(source),
            "SHE MOPED. She sighed. She wandered around the house with the look of an injured puppy, sometimes bursting into tears. How could she explain it to the Greco-Roman scholars?\n\n\"I've never forgotten that moment,\" she says."
        );
    }

    #[test]
    fn keeps_structure_and_layout() {
        let md = "### Table with options\n\n| **List** |\n| - |\n| Breakfast |\n\n- [x] Design\n- [ ] Documentation of the task with a very long text that goes beyond\n\n```\nfn  main()  {\n    x\n}\n```\nThe Crazy Ones\nOctober 14, 1998";
        let cleaned = clean_text(md);
        assert!(cleaned.contains("| **List** |\n| - |\n| Breakfast |"));
        assert!(cleaned.contains("- [x] Design\n- [ ] Documentation"));
        assert!(cleaned.contains("```\nfn  main()  {\n    x\n}\n```"));
        assert!(cleaned.ends_with("The Crazy Ones\nOctober 14, 1998"));
        assert_eq!(
            clean_text("ligature: ﬁne ﬂow\u{00A0}here"),
            "ligature: fine flow here"
        );
        assert_eq!(
            clean_text("see http://example.com/a-\nb and 1990-\n1995 please"),
            "see http://example.com/a- b and 1990-1995 please"
        );
    }

    #[test]
    fn cleaned_corpus_passes_the_fidelity_check() {
        for (name, text) in corpus() {
            for settings in [
                ChunkSettings::default(),
                ChunkSettings {
                    target_chars: 300,
                    overlap_chars: 50,
                },
            ] {
                for chunk in split(&text, settings) {
                    let cleaned = clean_text(&chunk.text);
                    assert_eq!(
                        fidelity_problem(&chunk.text, &cleaned),
                        None,
                        "{name} chunk {}",
                        chunk.index
                    );
                }
            }
            assert_eq!(clean_text(&text), clean_text(&text), "{name}");
        }
    }

    #[test]
    fn corpus_prose_is_rejoined() {
        let corpus = corpus();
        let (_, text) = corpus.iter().find(|(n, _)| n == "8071_093.3B.txt").unwrap();
        let cleaned = clean_text(text);
        assert!(
            cleaned
                .contains("How could she explain she was desperately in love for the first time")
        );
        assert!(cleaned.contains("Fathers bring a unique presence, a special strength"));
        let (_, text) = corpus.iter().find(|(n, _)| n == "phototest.txt").unwrap();
        assert!(clean_text(text).starts_with(
            "This is a lot of 12 point text to test the ocr code and see if it works on all types of file format."
        ));
    }
}
