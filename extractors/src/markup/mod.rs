//! Lightweight markup sources (reStructuredText, Org, LaTeX, Typst, AsciiDoc, BibTeX) turned
//! into Markdown by small hand-written, line-based converters, one module per language.
//!
//! No parser crate is used: the maintained ones are either heavy (pandoc-class converters),
//! unmaintained or pre-release (`orgize` has been `0.10.0-alpha` since 2023), and search only
//! needs the text with its headings, lists, code and math, not a full document model. Each
//! converter keeps what carries meaning (headings, paragraphs, lists, tables where simple,
//! code blocks, math as TeX, link text) and drops what does not (comments, directives,
//! preambles, settings). Every converter is linear in the input, bounds its recursion, checks
//! the deadline between lines and stops at the output limit.

mod asciidoc;
mod bibtex;
pub(crate) mod latex;
mod org;
mod rst;
mod typst;

use crate::markdown;
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

/// Lines (or entries) converted between two checks of the deadline.
pub(crate) const CHECK_EVERY: usize = 256;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let decoded = crate::plain::decode_without_bom(input.bytes)?;
    let text = decoded.text.replace("\r\n", "\n").replace('\r', "\n");
    let mut doc = Doc::new(limits.max_output_chars);
    match input.extension {
        "rst" | "rest" => rst::convert(&text, &mut doc, control)?,
        "org" => org::convert(&text, &mut doc, control)?,
        "tex" | "latex" | "ltx" => latex::convert(&text, &mut doc, control)?,
        "typ" => typst::convert(&text, &mut doc, control)?,
        "adoc" | "asciidoc" | "asc" => asciidoc::convert(&text, &mut doc, control)?,
        "bib" => bibtex::convert(&text, &mut doc, control)?,
        other => {
            return Err(ExtractError::unsupported(format!(
                "no markup converter for .{other}"
            )));
        }
    }
    Ok(doc.finish(decoded.encoding))
}

/// The Markdown being built: blocks, the metadata found on the way, warnings, and the output
/// cap (once reached, further blocks are dropped and one warning says so).
#[derive(Debug)]
pub(crate) struct Doc {
    blocks: markdown::Blocks,
    pub title: Option<String>,
    pub author: Option<String>,
    pub warnings: Vec<String>,
    max_chars: usize,
    pub full: bool,
}

impl Doc {
    pub fn new(max_chars: usize) -> Self {
        Doc {
            blocks: markdown::Blocks::default(),
            title: None,
            author: None,
            warnings: Vec::new(),
            max_chars,
            full: false,
        }
    }

    /// Appends a block (a blank line before it).
    pub fn block(&mut self, text: &str) {
        self.push(text, false);
    }

    /// Appends a list item (no blank line between consecutive items).
    pub fn item(&mut self, text: &str) {
        self.push(text, true);
    }

    fn push(&mut self, text: &str, is_item: bool) {
        if self.full || text.trim().is_empty() {
            return;
        }
        if self.blocks.text.len() + text.len() + 2 > self.max_chars {
            self.full = true;
            self.warnings.push(format!(
                "the document was cut short at {} characters of Markdown",
                self.max_chars
            ));
            return;
        }
        self.blocks.push(text, is_item);
    }

    /// A heading at `level`; the first one becomes the title unless the source named one.
    pub fn heading(&mut self, level: usize, text: &str) {
        let text = markdown::collapse_whitespace(text);
        if text.is_empty() {
            return;
        }
        if self.title.is_none() {
            self.title = Some(text.clone());
        }
        self.block(&markdown::heading(level, &text));
    }

    /// A fenced code block; the fence is longer than any backtick run inside.
    pub fn code(&mut self, language: &str, code: &str) {
        let code = code.trim_matches('\n');
        if code.trim().is_empty() {
            return;
        }
        self.block(&fence(language, code));
    }

    /// A paragraph from source lines, whitespace collapsed.
    pub fn paragraph(&mut self, text: &str) {
        self.block(&markdown::collapse_whitespace(text));
    }

    pub fn set_author(&mut self, author: &str) {
        let author = markdown::collapse_whitespace(author);
        if self.author.is_none() && !author.is_empty() {
            self.author = Some(author);
        }
    }

    pub fn set_title(&mut self, title: &str) {
        let title = markdown::collapse_whitespace(title);
        if !title.is_empty() {
            self.title = Some(title);
        }
    }

    pub fn finish(self, encoding: &str) -> Extraction {
        Extraction {
            markdown: self.blocks.text,
            metadata: Metadata {
                title: self.title,
                author: self.author,
                encoding: Some(encoding.to_string()),
                ..Metadata::default()
            },
            warnings: self.warnings,
            ..Extraction::default()
        }
    }
}

/// `code` in a fence tagged `language`, the fence longer than any backtick run in the code.
pub(crate) fn fence(language: &str, code: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in code.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let ticks = "`".repeat((longest + 1).max(3));
    let language: String = language
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '+' | '-' | '_' | '#' | '.'))
        .collect();
    format!("{ticks}{language}\n{}\n{ticks}", code.trim_matches('\n'))
}

/// Checks the deadline every [`CHECK_EVERY`] steps.
pub(crate) fn tick(control: &Control, step: usize) -> Result<(), ExtractError> {
    if step.is_multiple_of(CHECK_EVERY) {
        control.check()?;
    }
    Ok(())
}

/// At most the first `max` bytes of `text`, cut at a character boundary.
pub(crate) fn window(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or("")
}

/// Removes the common leading whitespace of `lines` (blank lines ignored).
pub(crate) fn dedent(lines: &[&str]) -> String {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent_of(l))
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The number of leading spaces (a tab counts as one: indentation is compared, not rendered).
pub(crate) fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// The text from `open` (a byte index of an opening bracket in `text`) to its matching
/// closing bracket, exclusive, and the index just past the closer; `None` when unbalanced.
pub(crate) fn balanced(text: &str, open: usize, left: char, right: char) -> Option<(&str, usize)> {
    let mut depth = 0usize;
    let mut escaped = false;
    for (at, c) in text.get(open..)?.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
        } else if c == left {
            depth += 1;
        } else if c == right {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                let inner = text.get(open + left.len_utf8()..open + at)?;
                return Some((inner, open + at + right.len_utf8()));
            }
        }
    }
    None
}

/// How many characters an emphasis marker looks ahead for its closer.
const EMPHASIS_WINDOW: usize = 1024;

/// Inline emphasis delimited by `marker` (`*`, `/`, `_`, ...), converted to `open`/`close`
/// where the marker sits at a word boundary on the outside and touches text on the inside,
/// as Org, AsciiDoc and Typst require. Anything else is left as it is.
pub(crate) fn emphasis(text: &str, marker: char, open: &str, close: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let outer_ok =
        |c: Option<&char>| c.is_none_or(|c| c.is_whitespace() || "-([{'\"<>.,;:!?)]}".contains(*c));
    while i < chars.len() {
        let c = chars[i];
        if c == marker
            && outer_ok(i.checked_sub(1).and_then(|p| chars.get(p)))
            && chars
                .get(i + 1)
                .is_some_and(|n| !n.is_whitespace() && *n != marker)
        {
            // The closer: the next marker touching text, followed by a boundary, on the
            // same line and near (a bounded search keeps many openers linear).
            let mut j = i + 1;
            let mut found = None;
            let limit = chars.len().min(i + EMPHASIS_WINDOW);
            while j < limit && chars[j] != '\n' {
                if chars[j] == marker && !chars[j - 1].is_whitespace() && outer_ok(chars.get(j + 1))
                {
                    found = Some(j);
                    break;
                }
                j += 1;
            }
            if let Some(j) = found {
                out.push_str(open);
                out.extend(&chars[i + 1..j]);
                out.push_str(close);
                i = j + 1;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// A letter with a TeX accent command (`\'` + `e` → é), composed where a precomposed letter
/// exists, else the base followed by the combining mark.
pub(crate) fn accent(command: &str, base: &str) -> String {
    let mut chars = base.chars();
    let (Some(letter), None) = (chars.next(), chars.next()) else {
        return base.to_string();
    };
    // Dotless i and j take accents as i and j.
    let letter = match letter {
        'ı' => 'i',
        'ȷ' => 'j',
        c => c,
    };
    let (table, combining) = match command {
        "`" => ("aàeèiìoòuùAÀEÈIÌOÒUÙnǹNǸ", '\u{300}'),
        "'" => (
            "aáeéiíoóuúyýAÁEÉIÍOÓUÚYÝcćCĆnńNŃsśSŚzźZŹlĺLĹrŕRŔgǵGǴ",
            '\u{301}',
        ),
        "^" => (
            "aâeêiîoôuûAÂEÊIÎOÔUÛcĉCĈgĝGĜhĥHĤjĵJĴsŝSŜwŵWŴyŷYŶ",
            '\u{302}',
        ),
        "~" => ("aãoõnñAÃOÕNÑiĩIĨuũUŨ", '\u{303}'),
        "\"" => ("aäeëiïoöuüyÿAÄEËIÏOÖUÜYŸ", '\u{308}'),
        "=" => ("aāeēiīoōuūAĀEĒIĪOŌUŪ", '\u{304}'),
        "." => ("cċCĊeėEĖgġGĠzżZŻIİ", '\u{307}'),
        "u" => ("aăAĂgğGĞuŭUŬ", '\u{306}'),
        "v" => ("cčCČsšSŠzžZŽrřRŘeěEĚnňNŇdďDĎtťTŤ", '\u{30C}'),
        "H" => ("oőOŐuűUŰ", '\u{30B}'),
        "c" => ("cçCÇsşSŞtţTŢ", '\u{327}'),
        "k" => ("aąAĄeęEĘ", '\u{328}'),
        "r" => ("aåAÅuůUŮ", '\u{30A}'),
        _ => return base.to_string(),
    };
    let pairs: Vec<char> = table.chars().collect();
    for pair in pairs.chunks(2) {
        if let [from, to] = pair
            && *from == letter
        {
            return to.to_string();
        }
    }
    format!("{letter}{combining}")
}

/// A TeX letter command without argument (`\ss`, `\o`, ...) as its character.
pub(crate) fn letter_command(name: &str) -> Option<&'static str> {
    Some(match name {
        "ss" => "ß",
        "ae" => "æ",
        "AE" => "Æ",
        "oe" => "œ",
        "OE" => "Œ",
        "o" => "ø",
        "O" => "Ø",
        "aa" => "å",
        "AA" => "Å",
        "l" => "ł",
        "L" => "Ł",
        "i" => "ı",
        "j" => "ȷ",
        _ => return None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing;

    pub fn run(text: &str, extension: &str) -> Extraction {
        let mut e = testing::run(extract, text.as_bytes(), extension).expect("extracts");
        e.finish();
        e
    }

    pub fn md(text: &str, extension: &str) -> String {
        run(text, extension).markdown
    }

    /// A converter's test document: converted from `doc`, it has this title and author,
    /// shows `blocks` in this order and none of `absent`.
    pub fn assert_converts(
        doc: &str,
        extension: &str,
        title: &str,
        author: &str,
        blocks: &[&str],
        absent: &[&str],
    ) {
        let e = run(doc, extension);
        assert_eq!(e.metadata.title.as_deref(), Some(title));
        assert_eq!(e.metadata.author.as_deref(), Some(author));
        testing::assert_in_order(&e.markdown, blocks);
        testing::assert_absent(&e.markdown, absent);
    }

    #[test]
    fn accents_compose_or_combine() {
        assert_eq!(accent("\"", "o"), "ö");
        assert_eq!(accent("'", "e"), "é");
        assert_eq!(accent("'", "\u{131}"), "í");
        assert_eq!(accent("v", "s"), "š");
        assert_eq!(accent("'", "x"), "x\u{301}");
        assert_eq!(accent("'", "ab"), "ab");
    }

    #[test]
    fn emphasis_needs_boundaries() {
        assert_eq!(emphasis("a *b c* d", '*', "**", "**"), "a **b c** d");
        assert_eq!(
            emphasis("and/or a/b/ and /it/.", '/', "*", "*"),
            "and/or a/b/ and *it*."
        );
        assert_eq!(emphasis("2 * 3 * 4", '*', "**", "**"), "2 * 3 * 4");
        assert_eq!(emphasis("*", '*', "**", "**"), "*");
    }

    #[test]
    fn fences_outgrow_backticks() {
        assert_eq!(fence("py", "a ```` b"), "`````py\na ```` b\n`````");
        assert_eq!(balanced("x{a{b}c}d", 1, '{', '}'), Some(("a{b}c", 8)));
        assert_eq!(balanced("x{a", 1, '{', '}'), None);
    }

    #[test]
    fn empty_and_blank_sources_give_no_text() {
        for ext in [
            "rst", "org", "tex", "latex", "typ", "adoc", "asciidoc", "bib",
        ] {
            assert_eq!(md("", ext), "", "{ext}");
            assert_eq!(md("  \n\t\n  ", ext), "", "{ext}");
        }
        let err = testing::run(extract, b"\x00\x01\x02\x03\x04", "rst").unwrap_err();
        assert_eq!(err.code, "unsupported_file_type");
    }

    #[test]
    fn large_hostile_sources_finish() {
        // Unclosed constructs repeated: each converter must stay near-linear on them.
        for (ext, unit) in [
            ("tex", "$\\( \\textbf{ [ \\[ {"),
            ("rst", "``a `b :r:`c [d .. e::\n"),
            ("org", "[[a *b /c =d #+BEGIN_X\n"),
            ("typ", "#f( #g[ $a `b <c\n"),
            ("adoc", "<<a {b https://x[ link:y[ ----\n"),
            ("bib", "@a{k, t = {x "),
        ] {
            let text = unit.repeat(200_000 / unit.len());
            let started = std::time::Instant::now();
            let _ = testing::run(extract, text.as_bytes(), ext);
            eprintln!("{ext}: {:?}", started.elapsed());
        }
    }

    #[test]
    fn output_cap_warns() {
        let text = "para one\n\npara two\n\npara three\n".repeat(50);
        let limits = Limits {
            max_output_chars: 100,
            ..Limits::default()
        };
        let input = Input {
            path: std::path::Path::new("t"),
            bytes: text.as_bytes(),
            extension: "rst",
        };
        let e = extract(input, &limits, &Control::default()).unwrap();
        assert!(e.markdown.len() <= 100, "{}", e.markdown.len());
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
    }
}
