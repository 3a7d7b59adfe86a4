//! Rich Text Format: a small streaming parser of groups and control words that keeps the
//! document's text as Markdown paragraphs, its tables as Markdown tables, and the title and
//! author of its `\info` group as metadata.
//!
//! Text bytes and `\'hh` escapes are decoded in the document's code page (`\ansicpg`,
//! `\mac`, `\pc`, `\pca`; Windows-1252 otherwise), `\uN` escapes with their `\ucN` fallback
//! characters skipped. Destinations that are not body text (font, colour and style tables,
//! pictures, objects, headers and footers, field instructions, `\*` destinations, ...) are
//! skipped, and `\bin N` data is stepped over. Per-font `\fcharset` is not read: Word writes
//! text outside the code page as `\u` escapes, which this parser reads.

use encoding_rs::Encoding;

use crate::markdown;
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

/// Destinations whose content is never body text.
const SKIPPED_DESTINATIONS: &[&str] = &[
    "fonttbl",
    "colortbl",
    "stylesheet",
    "pict",
    "object",
    "header",
    "headerl",
    "headerr",
    "headerf",
    "footer",
    "footerl",
    "footerr",
    "footerf",
    "fldinst",
    "themedata",
    "colorschememapping",
    "datastore",
    "latentstyles",
    "listtable",
    "listoverridetable",
    "rsidtbl",
    "generator",
    "xmlnstbl",
    "revtbl",
    "filetbl",
    "pgdsctbl",
    "nonshppict",
    "private",
    "bkmkstart",
    "bkmkend",
    "xe",
    "tc",
    "txe",
];

/// The upper halves of the DOS code pages, which encoding_rs does not carry.
const CP437_HIGH: &str = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u{a0}";
const CP850_HIGH: &str = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜø£Ø×ƒáíóúñÑªº¿®¬½¼¡«»░▒▓│┤ÁÂÀ©╣║╗╝¢¥┐└┴┬├─┼ãÃ╚╔╩╦╠═╬¤ðÐÊËÈıÍÎÏ┘┌█▄¦Ì▀ÓßÔÒõÕµþÞÚÛÙýÝ¯´\u{ad}±‗¾¶§÷¸°¨·¹³²■\u{a0}";

/// Longest control word and parameter read; longer ones are cut (the spec allows 32 and 10).
const MAX_WORD: usize = 32;
const MAX_PARAMETER_DIGITS: usize = 10;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let bytes = input.bytes.strip_prefix(UTF8_BOM).unwrap_or(input.bytes);
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let bytes = bytes.get(start..).unwrap_or_default();
    let headerless = !bytes.starts_with(b"{\\rtf");
    if headerless && !looks_like_rtf(bytes) {
        return as_plain_text(bytes);
    }
    let mut parser = Parser::new(limits);
    parser.run(bytes, headerless, limits, control)?;
    let mut extraction = parser.finish();
    if headerless {
        extraction.warnings.insert(
            0,
            "the file has no RTF header ({\\rtf); its control words were read as RTF".to_string(),
        );
    }
    Ok(extraction)
}

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// How much of a headerless file is looked at for control words.
const SNIFF_BYTES: usize = 4096;

/// Control words common in RTF bodies, for telling headerless RTF from text that happens to
/// hold a backslash (a Windows path, a TeX formula).
const BODY_WORDS: &[&str] = &[
    "par",
    "pard",
    "plain",
    "b",
    "i",
    "ul",
    "ulnone",
    "f",
    "fs",
    "cf",
    "cb",
    "highlight",
    "line",
    "tab",
    "ansi",
    "ansicpg",
    "deff",
    "fonttbl",
    "colortbl",
    "stylesheet",
    "sect",
    "cell",
    "row",
    "trowd",
    "intbl",
    "u",
    "uc",
    "lang",
    "ql",
    "qc",
    "qr",
    "qj",
    "li",
    "ri",
    "fi",
    "sa",
    "sb",
    "sl",
    "s",
    "cs",
    "deflang",
    "viewkind",
    "page",
];

/// A file without the `{\rtf` header that still reads as RTF: it opens with a group or a
/// control word (`{\f0 ...`, `\pard ...`, as some converters write a body alone), or its head
/// has at least three different common control words.
fn looks_like_rtf(bytes: &[u8]) -> bool {
    let opens_with_control = match bytes {
        [b'{', b'\\', ..] => true,
        [b'\\', next, ..] => next.is_ascii_alphabetic(),
        _ => false,
    };
    if opens_with_control {
        return true;
    }
    let head = bytes
        .get(..bytes.len().min(SNIFF_BYTES))
        .unwrap_or_default();
    let mut seen: Vec<&[u8]> = Vec::new();
    for (at, _) in head.iter().enumerate().filter(|(_, b)| **b == b'\\') {
        let word: &[u8] = head.get(at + 1..).unwrap_or_default();
        let len = word.iter().take_while(|b| b.is_ascii_lowercase()).count();
        let word = word.get(..len).unwrap_or_default();
        // A control word ends at a digit, a space or anything but a letter.
        let known = BODY_WORDS.iter().any(|w| w.as_bytes() == word);
        if known && !seen.contains(&word) {
            seen.push(word);
        }
        if seen.len() >= 3 {
            return true;
        }
    }
    false
}

/// A `.rtf` file with neither the header nor control words is read as the text it is, with a
/// warning; binary content is refused as a damaged RTF file.
fn as_plain_text(bytes: &[u8]) -> Result<Extraction, ExtractError> {
    let decoded = crate::text::decode_text(bytes).map_err(|_| {
        ExtractError::malformed("the file is neither RTF (no {\\rtf header) nor text")
    })?;
    let mut warnings = Vec::new();
    if !decoded.text.trim().is_empty() {
        warnings.push(
            "the file has no RTF header ({\\rtf) and no control words; it was read as plain text"
                .to_string(),
        );
    }
    Ok(Extraction {
        markdown: decoded.text,
        metadata: Metadata {
            encoding: Some(decoded.encoding.to_string()),
            ..Metadata::default()
        },
        warnings,
        ..Extraction::default()
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dest {
    Body,
    Skip,
    Info,
    Title,
    Author,
}

#[derive(Debug, Clone, Copy)]
struct Group {
    dest: Dest,
    /// `\ucN`: fallback characters after each `\u` escape.
    unicode_skip: usize,
}

#[derive(Debug, Clone, Copy)]
enum CodePage {
    Encoding(&'static Encoding),
    Table(&'static str),
}

impl CodePage {
    fn decode(self, bytes: &[u8]) -> String {
        match self {
            CodePage::Encoding(encoding) => {
                encoding.decode_without_bom_handling(bytes).0.into_owned()
            }
            CodePage::Table(high) => bytes
                .iter()
                .map(|&b| {
                    if b < 0x80 {
                        char::from(b)
                    } else {
                        high.chars()
                            .nth(usize::from(b - 0x80))
                            .unwrap_or('\u{fffd}')
                    }
                })
                .collect(),
        }
    }

    /// A Windows code page number (`\ansicpgN`) as an encoding.
    fn from_number(number: i32) -> Option<CodePage> {
        let label = match number {
            437 => return Some(CodePage::Table(CP437_HIGH)),
            850 => return Some(CodePage::Table(CP850_HIGH)),
            65001 => "utf-8",
            932 => "shift_jis",
            936 => "gbk",
            949 => "euc-kr",
            950 => "big5",
            10000 => "macintosh",
            20866 => "koi8-r",
            21866 => "koi8-u",
            28591..=28606 => {
                return Encoding::for_label(format!("iso-8859-{}", number - 28590).as_bytes())
                    .map(CodePage::Encoding);
            }
            _ => {
                return Encoding::for_label(format!("windows-{number}").as_bytes())
                    .map(CodePage::Encoding);
            }
        };
        Encoding::for_label(label.as_bytes()).map(CodePage::Encoding)
    }
}

struct Parser {
    stack: Vec<Group>,
    group: Group,
    codepage: CodePage,
    /// Text bytes not yet decoded, and where they go.
    pending: Vec<u8>,
    pending_dest: Dest,
    /// Fallback characters still to skip after a `\u` escape.
    fallback_left: usize,
    high_surrogate: Option<u32>,
    out: String,
    paragraph: String,
    in_table: bool,
    cell: String,
    row: Vec<String>,
    rows: Vec<Vec<String>>,
    title: String,
    author: String,
    warnings: Vec<String>,
    output_full: bool,
    max_output: usize,
    max_rows: usize,
    max_columns: usize,
}

impl Parser {
    fn new(limits: &Limits) -> Self {
        Parser {
            stack: Vec::new(),
            group: Group {
                dest: Dest::Body,
                unicode_skip: 1,
            },
            codepage: CodePage::Encoding(encoding_rs::WINDOWS_1252),
            pending: Vec::new(),
            pending_dest: Dest::Body,
            fallback_left: 0,
            high_surrogate: None,
            out: String::new(),
            paragraph: String::new(),
            in_table: false,
            cell: String::new(),
            row: Vec::new(),
            rows: Vec::new(),
            title: String::new(),
            author: String::new(),
            warnings: Vec::new(),
            output_full: false,
            max_output: limits.max_output_chars,
            max_rows: limits.max_table_rows,
            max_columns: limits.max_table_columns,
        }
    }

    /// Reads `bytes`. A document with the header ends where its root group closes; a
    /// `headerless` body is read to its end, stray closing braces skipped.
    fn run(
        &mut self,
        bytes: &[u8],
        headerless: bool,
        limits: &Limits,
        control: &Control,
    ) -> Result<(), ExtractError> {
        let mut at = 0usize;
        let mut steps = 0usize;
        let mut opened_root = false;
        while let Some(&byte) = bytes.get(at) {
            steps += 1;
            if steps.is_multiple_of(4096) {
                control.check()?;
                if self.output_full {
                    break;
                }
            }
            match byte {
                b'{' => {
                    self.flush_bytes();
                    if self.stack.len() >= limits.max_nesting_depth {
                        return Err(ExtractError::too_complex(format!(
                            "RTF groups nest deeper than {} levels",
                            limits.max_nesting_depth
                        )));
                    }
                    self.stack.push(self.group);
                    opened_root = true;
                    self.fallback_left = 0;
                    at += 1;
                }
                b'}' => {
                    self.flush_bytes();
                    self.fallback_left = 0;
                    match self.stack.pop() {
                        Some(group) => self.group = group,
                        None if headerless => {}
                        None => break,
                    }
                    at += 1;
                    if opened_root && self.stack.is_empty() && !headerless {
                        break;
                    }
                }
                b'\\' => at = self.control(bytes, at + 1),
                b'\r' | b'\n' => at += 1,
                _ => {
                    self.text_byte(byte);
                    at += 1;
                }
            }
        }
        if !self.stack.is_empty() {
            self.warnings
                .push("the RTF file ends before all its groups are closed".to_string());
        }
        self.flush_bytes();
        Ok(())
    }

    /// Reads the control word or symbol after a backslash at `at`; returns where reading
    /// goes on.
    fn control(&mut self, bytes: &[u8], at: usize) -> usize {
        let Some(&first) = bytes.get(at) else {
            return at;
        };
        if !first.is_ascii_alphabetic() {
            return self.control_symbol(bytes, at, first);
        }
        let word_end = bytes
            .get(at..)
            .unwrap_or_default()
            .iter()
            .take(MAX_WORD)
            .take_while(|b| b.is_ascii_alphabetic())
            .count()
            + at;
        let word = std::str::from_utf8(bytes.get(at..word_end).unwrap_or_default()).unwrap_or("");
        let mut next = word_end;
        let negative = bytes.get(next) == Some(&b'-');
        if negative {
            next += 1;
        }
        let digits = bytes
            .get(next..)
            .unwrap_or_default()
            .iter()
            .take(MAX_PARAMETER_DIGITS)
            .take_while(|b| b.is_ascii_digit())
            .count();
        let parameter = std::str::from_utf8(bytes.get(next..next + digits).unwrap_or_default())
            .ok()
            .and_then(|d| d.parse::<i64>().ok())
            .map(|n| if negative { -n } else { n })
            .map(|n| n.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32);
        if digits == 0 && negative {
            next -= 1;
        }
        next += digits;
        if bytes.get(next) == Some(&b' ') {
            next += 1;
        }
        if word == "bin" {
            self.flush_bytes();
            let skip = usize::try_from(parameter.unwrap_or(0)).unwrap_or(0);
            return next.saturating_add(skip).min(bytes.len());
        }
        self.control_word(word, parameter);
        next
    }

    fn control_symbol(&mut self, bytes: &[u8], at: usize, symbol: u8) -> usize {
        match symbol {
            b'\'' => {
                let hex = bytes
                    .get(at + 1..at + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(byte) => {
                        self.text_byte(byte);
                        return at + 3;
                    }
                    None => return at + 1,
                }
            }
            b'*' => {
                self.flush_bytes();
                self.group.dest = Dest::Skip;
            }
            b'~' => self.symbol_char('\u{a0}'),
            b'_' => self.symbol_char('-'),
            b'-' => self.symbol_char_dropped(),
            b'{' | b'}' | b'\\' => self.text_byte(symbol),
            b'\r' | b'\n' => {
                self.flush_bytes();
                self.end_paragraph();
            }
            b'\t' => self.symbol_char('\t'),
            _ => self.symbol_char_dropped(),
        }
        at + 1
    }

    fn symbol_char(&mut self, c: char) {
        if self.fallback_left > 0 {
            self.fallback_left -= 1;
            return;
        }
        self.flush_bytes();
        self.push_char(c);
    }

    fn symbol_char_dropped(&mut self) {
        self.fallback_left = self.fallback_left.saturating_sub(1);
    }

    fn control_word(&mut self, word: &str, parameter: Option<i32>) {
        self.flush_bytes();
        if SKIPPED_DESTINATIONS.contains(&word) {
            self.group.dest = Dest::Skip;
            return;
        }
        match word {
            "info" => self.set_dest(Dest::Info),
            "title" => self.set_dest(Dest::Title),
            "author" => self.set_dest(Dest::Author),
            "ansicpg" => {
                if let Some(codepage) = parameter.and_then(CodePage::from_number) {
                    self.codepage = codepage;
                }
            }
            "mac" => self.codepage = CodePage::Encoding(encoding_rs::MACINTOSH),
            "pc" => self.codepage = CodePage::Table(CP437_HIGH),
            "pca" => self.codepage = CodePage::Table(CP850_HIGH),
            "uc" => {
                self.group.unicode_skip =
                    usize::try_from(parameter.unwrap_or(1)).unwrap_or(0).min(16)
            }
            "u" => self.unicode(parameter.unwrap_or(0)),
            "par" | "sect" | "page" => self.end_paragraph(),
            "line" => self.push_char('\n'),
            "tab" => self.push_char('\t'),
            "intbl" => self.in_table = true,
            "pard" => self.in_table = false,
            "cell" | "nestcell" => self.end_cell(),
            "row" | "nestrow" => self.end_row(),
            _ => {
                if let Some(c) = special_char(word) {
                    self.push_char(c);
                }
            }
        }
    }

    fn set_dest(&mut self, dest: Dest) {
        if self.group.dest != Dest::Skip {
            self.group.dest = dest;
        }
    }

    fn unicode(&mut self, parameter: i32) {
        let unit = if parameter < 0 {
            (i64::from(parameter) + 65536) as u32
        } else {
            parameter as u32
        };
        self.fallback_left = self.group.unicode_skip;
        let c = match (self.high_surrogate.take(), unit) {
            (_, 0xD800..=0xDBFF) => {
                self.high_surrogate = Some(unit);
                return;
            }
            (Some(high), 0xDC00..=0xDFFF) => {
                char::from_u32(0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00))
            }
            (_, unit) => char::from_u32(unit),
        };
        self.push_char(c.unwrap_or('\u{fffd}'));
    }

    fn text_byte(&mut self, byte: u8) {
        if self.fallback_left > 0 {
            self.fallback_left -= 1;
            return;
        }
        if self.group.dest == Dest::Skip || self.group.dest == Dest::Info {
            return;
        }
        if self.pending_dest != self.group.dest {
            self.flush_bytes();
            self.pending_dest = self.group.dest;
        }
        self.pending.push(byte);
    }

    fn flush_bytes(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let text = self.codepage.decode(&self.pending);
        self.pending.clear();
        let dest = self.pending_dest;
        for c in text.chars() {
            self.push_to(dest, c);
        }
    }

    fn push_char(&mut self, c: char) {
        self.push_to(self.group.dest, c);
    }

    fn push_to(&mut self, dest: Dest, c: char) {
        match dest {
            Dest::Body => {
                if self.in_table {
                    self.cell.push(c);
                } else {
                    if !self.rows.is_empty() && !c.is_whitespace() {
                        self.flush_table();
                    }
                    self.paragraph.push(c);
                }
            }
            Dest::Title => self.title.push(c),
            Dest::Author => self.author.push(c),
            Dest::Skip | Dest::Info => {}
        }
    }

    fn end_paragraph(&mut self) {
        if self.group.dest != Dest::Body {
            return;
        }
        if self.in_table {
            self.cell.push(' ');
            return;
        }
        self.flush_table();
        let paragraph = std::mem::take(&mut self.paragraph);
        self.push_block(paragraph.trim());
    }

    fn push_block(&mut self, block: &str) {
        if self.output_full {
            return;
        }
        if self.out.len() + block.len() > self.max_output {
            self.output_full = true;
            self.warnings
                .push("the document was cut short at the output limit".to_string());
            return;
        }
        markdown::push_block(&mut self.out, block);
    }

    fn end_cell(&mut self) {
        let cell = std::mem::take(&mut self.cell);
        self.row.push(markdown::cell(&cell));
    }

    fn end_row(&mut self) {
        if !self.cell.trim().is_empty() {
            self.end_cell();
        }
        let row = std::mem::take(&mut self.row);
        if !row.is_empty() {
            self.rows.push(row);
        }
    }

    fn flush_table(&mut self) {
        if self.rows.is_empty() {
            return;
        }
        let mut rows = std::mem::take(&mut self.rows);
        self.cap_rows(&mut rows);
        let table = markdown::table(&rows);
        self.push_block(&table);
    }

    fn cap_rows(&mut self, rows: &mut Vec<Vec<String>>) {
        if rows.len() > self.max_rows {
            rows.truncate(self.max_rows);
            self.warnings
                .push(format!("a table was cut at {} rows", self.max_rows));
        }
        if rows.iter().any(|r| r.len() > self.max_columns) {
            for row in rows.iter_mut() {
                row.truncate(self.max_columns);
            }
            self.warnings
                .push(format!("a table was cut at {} columns", self.max_columns));
        }
    }

    fn finish(mut self) -> Extraction {
        self.in_table = false;
        self.group.dest = Dest::Body;
        if !self.row.is_empty() || !self.cell.trim().is_empty() {
            self.end_row();
        }
        self.end_paragraph();
        Extraction {
            markdown: self.out,
            metadata: Metadata {
                title: Some(markdown::collapse_whitespace(&self.title)),
                author: Some(markdown::collapse_whitespace(&self.author)),
                ..Metadata::default()
            },
            warnings: self.warnings,
            ..Extraction::default()
        }
    }
}

/// Control words that stand for one character.
fn special_char(word: &str) -> Option<char> {
    Some(match word {
        "emdash" => '—',
        "endash" => '–',
        "bullet" => '•',
        "lquote" => '‘',
        "rquote" => '’',
        "ldblquote" => '“',
        "rdblquote" => '”',
        "emspace" | "enspace" | "qmspace" => ' ',
        "zwj" => '\u{200d}',
        "zwnj" => '\u{200c}',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::Path;

    fn run_with(bytes: &[u8], limits: &Limits) -> Result<Extraction, ExtractError> {
        let input = Input {
            path: Path::new("test.rtf"),
            bytes,
            extension: "rtf",
        };
        crate::extract(crate::Kind::Rtf, input, limits, &Control::default())
    }

    fn run(bytes: &[u8]) -> Result<Extraction, ExtractError> {
        run_with(bytes, &Limits::default())
    }

    const WORDPAD: &str = r#"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fnil\fcharset0 Calibri;}{\f1\fswiss Arial;}}
{\colortbl ;\red255\green0\blue0;}
{\stylesheet{\s1 heading 1;}}
{\info{\title Quarterly report}{\author Ana Mar\'eda}{\operator nobody}{\creatim\yr2024}}
{\*\generator Riched20 10.0.19041}\viewkind4\uc1
\pard\sa200\sl276\slmult1\f0\fs22\lang9 Caf\'e9 cr\'e8me \b bold\b0  text.\par
Second\line line\tab tabbed\~nbsp\-soft\_hard \{braces\} back\\slash\par
{\pict\wmetafile8\picw100 0123456789abcdef}
{\field{\*\fldinst{HYPERLINK "http://example.com"}}{\fldrslt{\ul link text}}}\par
{\*\unknowndest secret words}\par
{\header header words\par}
Bin \bin5 {}\\x after\par
}"#;

    #[test]
    fn wordpad_document() {
        let e = run(WORDPAD.as_bytes()).unwrap();
        let md = &e.markdown;
        assert!(md.starts_with("Café crème bold text."), "{md}");
        assert!(
            md.contains("Second\nline\ttabbed\u{a0}nbspsoft-hard {braces} back\\slash"),
            "{md}"
        );
        assert!(md.contains("link text"), "{md}");
        assert!(md.contains("Bin  after"), "{md}");
        crate::testing::assert_absent(
            md,
            &[
                "Calibri",
                "Arial",
                "heading 1",
                "Riched20",
                "0123456789",
                "HYPERLINK",
                "secret",
                "header words",
                "nobody",
                "Quarterly",
            ],
        );
        assert_eq!(e.metadata.title.as_deref(), Some("Quarterly report"));
        assert_eq!(e.metadata.author.as_deref(), Some("Ana María"));
    }

    #[test]
    fn cyrillic_code_page() {
        let rtf = br"{\rtf1\ansi\ansicpg1251 \'cf\'f0\'e8\'e2\'e5\'f2, \'ec\'e8\'f0!\par}";
        assert_eq!(run(rtf).unwrap().markdown, "Привет, мир!");
    }

    #[test]
    fn dos_and_mac_code_pages() {
        assert_eq!(
            run(br"{\rtf1\pc caf\'82 \'e1\par}").unwrap().markdown,
            "café ß"
        );
        assert_eq!(run(br"{\rtf1\pca \'9d\'d0\par}").unwrap().markdown, "Øð");
        assert_eq!(run(br"{\rtf1\mac caf\'8e\par}").unwrap().markdown, "café");
    }

    #[test]
    fn unicode_escapes_and_fallbacks() {
        let rtf = br"{\rtf1\ansi\uc1 \u1055?\u1088?\u-3913?\par{\uc0 \u1052\u1080\u1088}\par\uc2 \u233\'e9\'e9x\par\u55357?\u56832?\par}";
        let md = run(rtf).unwrap().markdown;
        assert_eq!(md, "Пр\u{f0b7}\n\nМир\n\néx\n\n😀");
    }

    #[test]
    fn tables_become_markdown_tables() {
        let rtf = br"{\rtf1\ansi Before\par
\trowd\cellx1000\cellx2000\pard\intbl Name\cell Qty\cell\row
\trowd\cellx1000\cellx2000\pard\intbl Apple\cell 3\cell\row
\pard After\par}";
        let md = run(rtf).unwrap().markdown;
        assert_eq!(
            md,
            "Before\n\n| Name | Qty |\n|---|---|\n| Apple | 3 |\n\nAfter"
        );
    }

    #[test]
    fn table_caps_warn() {
        let mut rtf = String::from(r"{\rtf1 ");
        for i in 0..5 {
            rtf.push_str(&format!(r"\pard\intbl a{i}\cell b\cell c\cell\row "));
        }
        rtf.push('}');
        let limits = Limits {
            max_table_rows: 2,
            max_table_columns: 2,
            ..Limits::default()
        };
        let e = run_with(rtf.as_bytes(), &limits).unwrap();
        assert_eq!(e.markdown, "| a0 | b |\n|---|---|\n| a1 | b |");
        assert_eq!(e.warnings.len(), 2);
    }

    #[test]
    fn nested_destinations() {
        let rtf = br"{\rtf1{\*\listtable{\list{\listlevel{\leveltext\'02\'00.;}}}}{\shp{\*\shpinst{\sp{\sn x}{\sv y}}}}{\footnote kept {\*\bkmkstart b}note}Body\par}";
        let md = run(rtf).unwrap().markdown;
        assert_eq!(md, "kept noteBody");
    }

    #[test]
    fn headerless_bodies_are_read_as_rtf() {
        // A body alone, as some converters write it: groups and control words, no {\rtf1.
        let body = br"{\fonttbl{\f0 Arial;}}{\colortbl;\red0\green0\blue0;}
\pard\plain\f0\fs24 Caf\'e9 \b bold\b0  text.\par
{\i Second} paragraph.\par
}
\pard After a stray brace.\par";
        let e = run(body).unwrap();
        assert_eq!(
            e.markdown,
            "Café bold text.\n\nSecond paragraph.\n\nAfter a stray brace."
        );
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert!(e.warnings[0].contains("no RTF header"), "{:?}", e.warnings);
        // Opening with a control word, after a byte-order mark.
        let e = run(b"\xEF\xBB\xBF\\pard Hello\\par World\\par").unwrap();
        assert_eq!(e.markdown, "Hello\n\nWorld");
        // Text first, but three different body control words in its head.
        let e = run(br"Title line\par \b Bold\b0\par \i end\i0\par").unwrap();
        assert_eq!(e.markdown, "Title line\n\nBold\n\nend");
        // A byte-order mark before a real header is no longer refused.
        let e = run(b"\xEF\xBB\xBF{\\rtf1 ok\\par}").unwrap();
        assert_eq!(e.markdown, "ok");
        assert!(e.warnings.is_empty());
    }

    #[test]
    fn plain_text_in_an_rtf_file_is_read_as_text() {
        let e = run("Just a note,\nsaved as C:\\notes\\par.rtf — café".as_bytes()).unwrap();
        assert_eq!(
            e.markdown,
            "Just a note,\nsaved as C:\\notes\\par.rtf — café"
        );
        assert_eq!(e.metadata.encoding.as_deref(), Some("UTF-8"));
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert!(e.warnings[0].contains("plain text"));
        let e = run(b"").unwrap();
        assert_eq!(e.markdown, "");
        assert!(e.warnings.is_empty());
        // Binary content is not text either.
        assert_eq!(
            run(b"\x00\x01\x02PK\x03\x04\x00\x00").unwrap_err().code,
            "malformed_document"
        );
    }

    #[test]
    fn malformed_and_hostile() {
        let deep = format!("{{\\rtf1 {}x{}}}", "{".repeat(100_000), "}".repeat(100_000));
        assert_eq!(
            run(deep.as_bytes()).unwrap_err().code,
            "document_too_complex"
        );
        let e = run(br"{\rtf1 unclosed {\b group\par").unwrap();
        assert_eq!(e.markdown, "unclosed group");
        assert_eq!(e.warnings.len(), 1);
        let e = run(br"{\rtf1 big \bin999999999 x}").unwrap();
        assert_eq!(e.markdown, "big");
        let e = run(br"{\rtf1 \u99999999999999 \'zz \ucx \uc-5 ok\par}").unwrap();
        assert!(e.markdown.ends_with("ok"), "{}", e.markdown);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let mut rtf = b"{\\rtf1 ".to_vec();
            rtf.extend(&bytes);
            let _ = run(&rtf);
            let _ = run(&bytes);
        }

        #[test]
        fn mutated_sample_never_panics(cut in 0usize..2000, flips in proptest::collection::vec((0usize..2000, any::<u8>()), 0..8)) {
            let mut bytes = WORDPAD.as_bytes().to_vec();
            crate::testing::mutate(&mut bytes, &flips, cut);
            let _ = run(&bytes);
        }
    }
}
