//! LaTeX (`.tex`, `.latex`) to Markdown: the text of the document body (after
//! `\begin{document}` when there is one), sections as headings, lists, tables, verbatim as
//! code, math kept as TeX (`$...$`, display math and equation environments as `$$...$$`),
//! common text commands converted (`\textbf` → `**`, `\emph` → `*`, `\href` → a link),
//! citations and references kept as `[key]`, labels, layout and definitions dropped, and
//! unknown commands unwrapped to the text of their braced arguments. `\title` and `\author`
//! go to the metadata. Macros are not expanded and `\input` files are not followed.

use super::{Doc, accent, balanced, letter_command, tick, window};
use crate::markdown;
use crate::{Control, ExtractError};

/// Deepest nesting of command arguments converted recursively; deeper ones are kept as raw
/// text, so hostile nesting cannot exhaust the stack.
const MAX_DEPTH: usize = 24;

/// How far inline math and optional arguments are looked for their closer: bounded, so
/// that many unclosed `$` or `[` cost linear time, not quadratic.
const MATH_WINDOW: usize = 8 * 1024;

/// Environments whose body is code, kept verbatim in a fence.
const VERBATIM: &[&str] = &[
    "verbatim",
    "verbatim*",
    "Verbatim",
    "lstlisting",
    "minted",
    "alltt",
    "BVerbatim",
    "LVerbatim",
    "code",
];
/// Environments whose body is display math, kept as TeX between `$$`.
const MATH: &[&str] = &[
    "equation",
    "equation*",
    "align",
    "align*",
    "alignat",
    "alignat*",
    "gather",
    "gather*",
    "multline",
    "multline*",
    "flalign",
    "flalign*",
    "eqnarray",
    "eqnarray*",
    "displaymath",
    "math",
    "dmath",
    "dmath*",
];
/// Environments dropped with their body (drawings, comments).
const DROPPED_ENVS: &[&str] = &[
    "comment",
    "tikzpicture",
    "pgfpicture",
    "picture",
    "filecontents",
    "filecontents*",
];
/// Commands dropped with this many braced arguments (optional `[...]` ones are dropped too).
const DROPPED: &[(&str, usize)] = &[
    ("label", 1),
    ("index", 1),
    ("vspace", 1),
    ("vspace*", 1),
    ("hspace", 1),
    ("hspace*", 1),
    ("includegraphics", 1),
    ("bibliographystyle", 1),
    ("bibliography", 1),
    ("addbibresource", 1),
    ("usepackage", 1),
    ("RequirePackage", 1),
    ("documentclass", 1),
    ("input", 1),
    ("include", 1),
    ("includeonly", 1),
    ("setlength", 2),
    ("addtolength", 2),
    ("setcounter", 2),
    ("addtocounter", 2),
    ("stepcounter", 1),
    ("pagestyle", 1),
    ("thispagestyle", 1),
    ("pagenumbering", 1),
    ("hypersetup", 1),
    ("graphicspath", 1),
    ("newtheorem", 2),
    ("newtheorem*", 2),
    ("newcommand", 2),
    ("newcommand*", 2),
    ("renewcommand", 2),
    ("renewcommand*", 2),
    ("providecommand", 2),
    ("providecommand*", 2),
    ("DeclareMathOperator", 2),
    ("DeclareMathOperator*", 2),
    ("newenvironment", 3),
    ("renewenvironment", 3),
    ("color", 1),
    ("definecolor", 3),
    ("fontsize", 2),
    ("linespread", 1),
    ("captionsetup", 1),
    ("geometry", 1),
    ("lstset", 1),
    ("setminted", 1),
    ("titleformat", 5),
    ("date", 1),
    ("thanks", 1),
    ("nocite", 1),
    ("newlength", 1),
    ("newcounter", 1),
    ("cline", 1),
    ("cmidrule", 1),
    ("setbeamertemplate", 2),
    ("usetheme", 1),
    ("usecolortheme", 1),
];

/// Converts a whole `.tex` file.
pub fn convert(text: &str, doc: &mut Doc, control: &Control) -> Result<(), ExtractError> {
    let stripped = strip_comments(text, control)?;
    let (preamble, body) = match stripped.find("\\begin{document}") {
        Some(at) => {
            let rest = stripped.get(at + "\\begin{document}".len()..).unwrap_or("");
            let end = rest.find("\\end{document}").unwrap_or(rest.len());
            (
                stripped.get(..at).unwrap_or(""),
                rest.get(..end).unwrap_or(""),
            )
        }
        None => ("", stripped.as_str()),
    };
    let mut tex = Tex::new(doc, control);
    tex.metadata(preamble);
    tex.metadata(body);
    if let Some(title) = tex.title.take() {
        tex.doc.block(&markdown::heading(1, &title));
    }
    tex.run(body, 0)?;
    tex.flush();
    tex.footnotes();
    Ok(())
}

/// A fragment of LaTeX (a BibTeX field) as one line of Markdown text.
pub fn inline(text: &str) -> String {
    let mut doc = Doc::new(usize::MAX);
    let control = Control::default();
    let mut tex = Tex::new(&mut doc, &control);
    tex.inline_only = true;
    // Inline conversion has no deadline of its own: its caller checks between fields.
    let _ = tex.run(text, 0);
    markdown::collapse_whitespace(&tex.para)
}

/// Drops `%` comments outside verbatim environments and `\verb`: a comment-only line
/// vanishes, and a comment after text joins the next line without a space, as TeX reads it.
fn strip_comments(text: &str, control: &Control) -> Result<String, ExtractError> {
    let mut out = String::with_capacity(text.len());
    let mut verbatim: Option<String> = None;
    let mut join = false;
    for (n, line) in text.lines().enumerate() {
        tick(control, n)?;
        if let Some(end) = &verbatim {
            out.push_str(line);
            out.push('\n');
            if line.contains(end.as_str()) {
                verbatim = None;
            }
            continue;
        }
        let line = if join { line.trim_start() } else { line };
        join = false;
        match comment_start(line) {
            Some(at) => {
                let before = line.get(..at).unwrap_or("");
                if before.trim().is_empty() {
                    continue;
                }
                out.push_str(before);
                join = true;
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
        for env in VERBATIM.iter().chain(["comment"].iter()) {
            let begin = format!("\\begin{{{env}}}");
            if let Some(at) = line.find(&begin) {
                let end = format!("\\end{{{env}}}");
                if !line.get(at..).is_some_and(|rest| rest.contains(&end)) {
                    verbatim = Some(end);
                    if join {
                        out.push('\n');
                        join = false;
                    }
                }
                break;
            }
        }
    }
    Ok(out)
}

/// The byte index of the `%` starting a comment on `line`, skipping `\%` and `\verb|...|`.
fn comment_start(line: &str) -> Option<usize> {
    let mut chars = line.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => {
                if line.get(at..).is_some_and(|r| r.starts_with("\\verb")) {
                    for _ in 0..4 {
                        chars.next();
                    }
                    if let Some((_, delimiter)) = chars.next() {
                        for (_, c) in chars.by_ref() {
                            if c == delimiter {
                                break;
                            }
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '%' => return Some(at),
            _ => {}
        }
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum List {
    Bullets,
    Numbers(usize),
    Descriptions,
}

struct Tex<'d, 'c> {
    doc: &'d mut Doc,
    control: &'c Control,
    /// The paragraph being built.
    para: String,
    /// The paragraph is a list item at this indentation.
    item: Option<usize>,
    lists: Vec<List>,
    footnotes: Vec<String>,
    /// Converting an argument or a field: block structure becomes spaces.
    inline_only: bool,
    steps: usize,
    warned_input: bool,
    /// `\title` as Markdown, written at the top.
    title: Option<String>,
}

impl<'d, 'c> Tex<'d, 'c> {
    fn new(doc: &'d mut Doc, control: &'c Control) -> Self {
        Tex {
            doc,
            control,
            para: String::new(),
            item: None,
            lists: Vec::new(),
            footnotes: Vec::new(),
            inline_only: false,
            steps: 0,
            warned_input: false,
            title: None,
        }
    }

    /// Reads `\title` and `\author` wherever they are.
    fn metadata(&mut self, text: &str) {
        for (command, is_title) in [("\\title", true), ("\\author", false)] {
            let Some(at) = text.find(command) else {
                continue;
            };
            let after = at + command.len();
            if text
                .get(after..)
                .and_then(|r| r.chars().next())
                .is_some_and(|c| c.is_ascii_alphabetic())
            {
                continue;
            }
            let mut pos = skip_optional(text, after);
            pos = skip_spaces(text, pos);
            if let Some((arg, _)) = text
                .get(pos..)
                .filter(|r| r.starts_with('{'))
                .and_then(|_| balanced(text, pos, '{', '}'))
            {
                let arg = arg.replace("\\and", ",").replace("\\\\", ", ");
                let value = self.arg_text(&arg, 1).replace(" ,", ",");
                let value = value.trim().trim_matches(',').trim().to_string();
                if is_title {
                    // The metadata title is plain text; the heading keeps the emphasis.
                    self.doc.set_title(&value.replace(['*', '`'], ""));
                    self.title = Some(value);
                } else {
                    self.doc.set_author(&value);
                }
            }
        }
    }

    /// Ends the paragraph (or list item) being built.
    fn flush(&mut self) {
        if self.inline_only {
            self.para.push(' ');
            return;
        }
        let text = markdown::collapse_whitespace(&self.para);
        self.para.clear();
        match self.item.take() {
            Some(indent) => {
                let marker = match self.lists.last() {
                    Some(List::Numbers(n)) => format!("{n}."),
                    _ => "-".to_string(),
                };
                let line = format!("{}{marker} {text}", "  ".repeat(indent));
                self.doc.item(line.trim_end());
            }
            None => {
                if !text.is_empty() {
                    self.doc.block(&text);
                }
            }
        }
    }

    /// Writes a block of its own (a heading, code, math), ending the paragraph before it.
    fn block(&mut self, text: &str) {
        if self.inline_only {
            self.para.push(' ');
            self.para.push_str(text);
            self.para.push(' ');
            return;
        }
        self.flush();
        self.doc.block(text);
    }

    fn heading(&mut self, level: usize, title: &str) {
        if self.inline_only {
            self.block(title);
            return;
        }
        self.flush();
        self.doc.heading(level, title);
    }

    fn footnotes(&mut self) {
        let notes = std::mem::take(&mut self.footnotes);
        for (n, note) in notes.iter().enumerate() {
            self.doc.block(&format!("[^{}]: {note}", n + 1));
        }
    }

    /// The text of an argument, converted on its own as one line.
    fn arg_text(&mut self, text: &str, depth: usize) -> String {
        if depth > MAX_DEPTH {
            return markdown::collapse_whitespace(&text.replace(['{', '}'], ""));
        }
        let saved_para = std::mem::take(&mut self.para);
        let saved_inline = std::mem::replace(&mut self.inline_only, true);
        // A deadline hit inside an argument is seen again by the caller's next check.
        let _ = self.run(text, depth + 1);
        self.inline_only = saved_inline;
        let out = std::mem::replace(&mut self.para, saved_para);
        markdown::collapse_whitespace(&out)
    }

    /// Converts `text`, appending to the paragraph and writing blocks.
    fn run(&mut self, text: &str, depth: usize) -> Result<(), ExtractError> {
        let mut pos = 0;
        while let Some(c) = text.get(pos..).and_then(|r| r.chars().next()) {
            self.steps += 1;
            tick(self.control, self.steps)?;
            if self.doc.full {
                return Ok(());
            }
            match c {
                '\\' => pos = self.command(text, pos, depth)?,
                '{' | '}' => pos += 1,
                '$' => pos = self.dollar_math(text, pos),
                '~' => {
                    self.para.push(' ');
                    pos += 1;
                }
                '\n' => {
                    let next = skip_spaces(text, pos + 1);
                    if text.get(next..).is_some_and(|r| r.starts_with('\n')) {
                        if self.item.is_none() {
                            self.flush();
                        } else {
                            self.para.push(' ');
                        }
                        pos = next + 1;
                    } else {
                        self.para.push(' ');
                        pos += 1;
                    }
                }
                '`' if text.get(pos..).is_some_and(|r| r.starts_with("``")) => {
                    self.para.push('"');
                    pos += 2;
                }
                '\'' if text.get(pos..).is_some_and(|r| r.starts_with("''")) => {
                    self.para.push('"');
                    pos += 2;
                }
                '-' if text.get(pos..).is_some_and(|r| r.starts_with("---")) => {
                    self.para.push('—');
                    pos += 3;
                }
                '-' if text.get(pos..).is_some_and(|r| r.starts_with("--")) => {
                    self.para.push('–');
                    pos += 2;
                }
                '&' => {
                    self.para.push(' ');
                    pos += 1;
                }
                _ => {
                    self.para.push(c);
                    pos += c.len_utf8();
                }
            }
        }
        Ok(())
    }

    /// `$...$` kept as it is, `$$...$$` as a display block; an unclosed `$` is text. The
    /// closer is looked for within the paragraph only.
    fn dollar_math(&mut self, text: &str, pos: usize) -> usize {
        let display = text.get(pos..).is_some_and(|r| r.starts_with("$$"));
        let open = if display { 2 } else { 1 };
        let rest = window(text.get(pos + open..).unwrap_or(""), MATH_WINDOW);
        let limit = rest.find("\n\n").unwrap_or(rest.len());
        let closer = if display { "$$" } else { "$" };
        let mut search = 0;
        while let Some(found) = rest.get(search..limit).and_then(|r| r.find(closer)) {
            let at = search + found;
            if rest.get(..at).is_some_and(|b| b.ends_with('\\')) {
                search = at + 1;
                continue;
            }
            let math = rest.get(..at).unwrap_or("").trim();
            if display {
                self.block(&format!("$$\n{math}\n$$"));
            } else {
                self.para.push_str(&format!("${math}$"));
            }
            return pos + open + at + closer.len();
        }
        self.para.push('$');
        pos + 1
    }

    /// Handles the command at `pos` (a backslash); returns the position after it.
    fn command(&mut self, text: &str, pos: usize, depth: usize) -> Result<usize, ExtractError> {
        let rest = text.get(pos + 1..).unwrap_or("");
        let Some(first) = rest.chars().next() else {
            return Ok(pos + 1);
        };
        if !first.is_ascii_alphabetic() {
            return Ok(self.symbol(text, pos, first));
        }
        let name_len = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let mut name = rest.get(..name_len).unwrap_or("").to_string();
        let mut after = pos + 1 + name_len;
        if text.get(after..).is_some_and(|r| r.starts_with('*')) {
            name.push('*');
            after += 1;
        }
        let base = name.trim_end_matches('*');
        if let Some(level) = heading_level(base) {
            let at = skip_optional(text, after);
            let (title, next) = self.braced(text, at);
            let title = self.arg_text(title, depth);
            if self.inline_only || base == "paragraph" || base == "subparagraph" {
                self.flush();
                self.para.push_str(&format!("**{title}** "));
            } else {
                self.heading(level, &title);
            }
            return Ok(next);
        }
        Ok(match base {
            "begin" => self.begin(text, after, depth)?,
            "end" => {
                let (env, next) = self.braced(text, after);
                if matches!(env, "itemize" | "enumerate" | "description") {
                    if self.item.is_some() {
                        self.flush();
                    }
                    self.lists.pop();
                } else if !self.inline_only {
                    self.flush();
                }
                next
            }
            "item" => {
                if self.inline_only {
                    self.para.push_str(" - ");
                } else {
                    self.flush();
                    if let Some(List::Numbers(n)) = self.lists.last_mut() {
                        *n += 1;
                    }
                    self.item = Some(self.lists.len().saturating_sub(1));
                }
                let (label, next) = optional(text, after);
                if let Some(label) = label {
                    let label = self.arg_text(label, depth);
                    self.para.push_str(&format!("**{label}** "));
                }
                skip_spaces(text, next)
            }
            "textbf" | "mathbf" => self.wrapped(text, after, depth, "**", "**"),
            "emph" | "textit" | "textsl" | "mathit" => self.wrapped(text, after, depth, "*", "*"),
            "texttt" | "code" | "path" => self.wrapped(text, after, depth, "`", "`"),
            "url" | "nolinkurl" => {
                let (url, next) = self.braced(text, after);
                self.para.push_str(&format!("<{}>", url.trim()));
                next
            }
            "href" => {
                let (url, next) = self.braced(text, after);
                let url = url.trim().to_string();
                let (label, next) = self.braced(text, next);
                let label = self.arg_text(label, depth);
                self.para.push_str(&format!("[{label}]({url})"));
                next
            }
            "footnote" | "footnotetext" => {
                let (note, next) = self.braced(text, skip_optional(text, after));
                let note = self.arg_text(note, depth);
                if self.inline_only {
                    self.para.push_str(&format!(" ({note})"));
                } else {
                    self.footnotes.push(note);
                    self.para.push_str(&format!("[^{}]", self.footnotes.len()));
                }
                next
            }
            "cite" | "citep" | "citet" | "citealp" | "citealt" | "citeauthor" | "citeyear"
            | "parencite" | "textcite" | "autocite" | "footcite" | "supercite" | "ref"
            | "eqref" | "autoref" | "cref" | "Cref" | "pageref" | "nameref" | "vref" => {
                let at = skip_optional(text, skip_optional(text, after));
                let (keys, next) = self.braced(text, at);
                let keys: Vec<&str> = keys.split(',').map(str::trim).collect();
                self.para.push_str(&format!("[{}]", keys.join(", ")));
                next
            }
            "caption" => {
                let (caption, next) = self.braced(text, skip_optional(text, after));
                let caption = self.arg_text(caption, depth);
                self.block(&caption);
                next
            }
            "title" | "author" => {
                // Already in the metadata (and the title at the top).
                let (_, next) = self.braced(text, skip_optional(text, after));
                next
            }
            "verb" => {
                let rest = text.get(after..).unwrap_or("");
                let mut chars = rest.chars();
                match chars.next() {
                    Some(delimiter) => {
                        let body = chars.as_str();
                        let end = body.find(delimiter).unwrap_or(body.len());
                        self.para
                            .push_str(&format!("`{}`", body.get(..end).unwrap_or("")));
                        after + delimiter.len_utf8() + (end + delimiter.len_utf8()).min(body.len())
                    }
                    None => after,
                }
            }
            "bibitem" => {
                self.flush();
                self.item = Some(self.lists.len().saturating_sub(1));
                let (_, next) = optional(text, after);
                let (key, next) = self.braced(text, next);
                self.para.push_str(&format!("[{}] ", key.trim()));
                next
            }
            "par" => {
                self.flush();
                after
            }
            "newline" | "linebreak" | "hline" | "toprule" | "midrule" | "bottomrule" => {
                self.para.push(' ');
                after
            }
            "def" | "gdef" | "edef" | "xdef" => {
                // \def\name#1#2{body}
                let rest = text.get(after..).unwrap_or("");
                match rest.find('{') {
                    Some(open) => self.braced(text, after + open).1,
                    None => text.len(),
                }
            }
            "ldots" | "dots" | "textellipsis" => self.symbol_text(text, after, "…"),
            "LaTeX" => self.symbol_text(text, after, "LaTeX"),
            "TeX" => self.symbol_text(text, after, "TeX"),
            "LaTeXe" => self.symbol_text(text, after, "LaTeX2e"),
            "BibTeX" => self.symbol_text(text, after, "BibTeX"),
            "textendash" => self.symbol_text(text, after, "–"),
            "textemdash" => self.symbol_text(text, after, "—"),
            "copyright" | "textcopyright" => self.symbol_text(text, after, "©"),
            "textregistered" => self.symbol_text(text, after, "®"),
            "texttrademark" => self.symbol_text(text, after, "™"),
            "S" => self.symbol_text(text, after, "§"),
            "P" => self.symbol_text(text, after, "¶"),
            "textbackslash" => self.symbol_text(text, after, "\\"),
            "textasciitilde" => self.symbol_text(text, after, "~"),
            "textbar" => self.symbol_text(text, after, "|"),
            "textless" => self.symbol_text(text, after, "<"),
            "textgreater" => self.symbol_text(text, after, ">"),
            "euro" => self.symbol_text(text, after, "€"),
            "pounds" => self.symbol_text(text, after, "£"),
            "degree" | "textdegree" => self.symbol_text(text, after, "°"),
            "quad" | "qquad" | "enspace" | "thinspace" => self.symbol_text(text, after, " "),
            "c" | "v" | "u" | "H" | "k" | "r" => {
                let (base, next) = accent_base(text, after);
                self.para.push_str(&accent(base_name(&name), &base));
                next
            }
            "input" | "include" => {
                if !self.warned_input {
                    self.warned_input = true;
                    self.doc
                        .warnings
                        .push("files included with \\input or \\include are not read".into());
                }
                self.drop_args(text, after, 1)
            }
            _ => {
                if let Some(letter) = letter_command(base) {
                    self.para.push_str(letter);
                    return Ok(after_control_word(text, after));
                }
                if let Some((_, args)) = DROPPED.iter().find(|(n, _)| *n == name || *n == base) {
                    return Ok(self.drop_args(text, after, *args));
                }
                // Unknown: the name goes, its optional arguments too; the braced arguments
                // are kept as text by the main loop (braces are skipped there).
                let next = after_control_word(text, after);
                if text.get(after..).is_some_and(|r| r.starts_with('[')) {
                    skip_optional(text, after)
                } else {
                    next
                }
            }
        })
    }

    /// `\\`, `\&`, accents on one character (`\'e`, `\"{o}`), and the other control symbols.
    fn symbol(&mut self, text: &str, pos: usize, first: char) -> usize {
        let after = pos + 1 + first.len_utf8();
        match first {
            '\\' => {
                self.para.push(' ');
                // \\[2pt] and \\* take an optional spacing.
                let next = if text.get(after..).is_some_and(|r| r.starts_with('*')) {
                    after + 1
                } else {
                    after
                };
                skip_optional(text, next)
            }
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                self.para.push(first);
                after
            }
            '\'' | '`' | '^' | '"' | '~' | '=' | '.' => {
                let (base, next) = accent_base(text, after);
                let mut name = [0u8; 4];
                self.para
                    .push_str(&accent(first.encode_utf8(&mut name), &base));
                next
            }
            ' ' | '\n' | '\t' | ',' | ';' | ':' => {
                self.para.push(' ');
                after
            }
            '[' => self.display_math(text, pos, "\\]"),
            '(' => {
                let rest = window(text.get(after..).unwrap_or(""), MATH_WINDOW);
                match rest.find("\\)") {
                    Some(end) => {
                        let math = rest.get(..end).unwrap_or("").trim();
                        self.para.push_str(&format!("${math}$"));
                        after + end + 2
                    }
                    None => after,
                }
            }
            _ => after,
        }
    }

    fn display_math(&mut self, text: &str, pos: usize, closer: &str) -> usize {
        let after = pos + 2;
        let rest = text.get(after..).unwrap_or("");
        // Unclosed, the math runs to the end, as TeX would read it.
        let (end, next) = match rest.find(closer) {
            Some(end) => (end, after + end + closer.len()),
            None => (rest.len(), text.len()),
        };
        let math = rest.get(..end).unwrap_or("").trim();
        self.block(&format!("$$\n{math}\n$$"));
        next
    }

    fn symbol_text(&mut self, text: &str, after: usize, symbol: &str) -> usize {
        self.para.push_str(symbol);
        // `\LaTeX{}` and `\ldots{}` end with an empty group.
        if text.get(after..).is_some_and(|r| r.starts_with("{}")) {
            after + 2
        } else {
            after
        }
    }

    /// `\begin{env}` at `pos` (just after `\begin`).
    fn begin(&mut self, text: &str, pos: usize, depth: usize) -> Result<usize, ExtractError> {
        let (env, after) = self.braced(text, pos);
        let env = env.trim().to_string();
        let end_tag = format!("\\end{{{env}}}");
        let body_end = |from: usize| -> (usize, usize) {
            match text.get(from..).and_then(|r| r.find(&end_tag)) {
                Some(at) => (from + at, from + at + end_tag.len()),
                None => (text.len(), text.len()),
            }
        };
        let name = env.as_str();
        if VERBATIM.contains(&name) {
            let (options, mut from) = optional(text, after);
            let mut language = options
                .and_then(|o| {
                    o.split(',')
                        .find_map(|kv| kv.trim().strip_prefix("language="))
                        .map(|l| l.trim().to_lowercase())
                })
                .unwrap_or_default();
            if name == "minted" {
                let (lang, next) = self.braced(text, from);
                language = lang.trim().to_lowercase();
                from = next;
            }
            let (end, next) = body_end(from);
            let code = text.get(from..end).unwrap_or("");
            if self.inline_only {
                self.para.push_str(&format!("`{}`", code.trim()));
            } else {
                self.flush();
                self.doc.code(&language, code);
            }
            return Ok(next);
        }
        if MATH.contains(&name) {
            let (end, next) = body_end(after);
            let math = text.get(after..end).unwrap_or("").trim();
            let math = strip_labels(math);
            self.block(&format!("$$\n{math}\n$$"));
            return Ok(next);
        }
        if DROPPED_ENVS.contains(&name) {
            return Ok(body_end(after).1);
        }
        match name {
            "itemize" | "enumerate" | "description" => {
                if self.item.is_some() || !self.para.trim().is_empty() {
                    self.flush();
                }
                self.lists.push(match name {
                    "itemize" => List::Bullets,
                    "enumerate" => List::Numbers(0),
                    _ => List::Descriptions,
                });
                Ok(skip_optional(text, after))
            }
            "tabular" | "tabular*" | "tabularx" | "tabulary" | "longtable" | "supertabular" => {
                let mut from = skip_optional(text, after);
                let widths = if matches!(name, "tabular*" | "tabularx" | "tabulary") {
                    2
                } else {
                    1
                };
                for _ in 0..widths {
                    from = self.braced(text, from).1;
                }
                let (end, next) = body_end(from);
                let body = text.get(from..end).unwrap_or("");
                self.table(body, depth);
                Ok(next)
            }
            "abstract" => {
                self.heading(2, "Abstract");
                Ok(after)
            }
            "thebibliography" => {
                self.heading(2, "References");
                self.lists.push(List::Bullets);
                let (_, next) = self.braced(text, after);
                Ok(next)
            }
            "minipage" | "wrapfigure" | "multicols" | "multicols*" | "adjustbox" => {
                let mut next = skip_optional(text, after);
                let args = if name == "wrapfigure" { 2 } else { 1 };
                for _ in 0..args {
                    next = self.braced(text, skip_optional(text, next)).1;
                }
                Ok(next)
            }
            _ => {
                if !self.inline_only {
                    self.flush();
                }
                Ok(skip_optional(text, after))
            }
        }
    }

    /// A `tabular` body as a Markdown table: rows split at `\\`, cells at `&`.
    fn table(&mut self, body: &str, depth: usize) {
        let mut rows = Vec::new();
        for row in split_top(body, "\\\\") {
            let cells: Vec<String> = split_top(row, "&")
                .into_iter()
                .map(|cell| self.arg_text(cell, depth))
                .collect();
            if cells.iter().any(|c| !c.is_empty()) {
                rows.push(cells);
            }
        }
        if self.inline_only {
            for row in rows {
                self.para.push_str(&row.join(" "));
                self.para.push(' ');
            }
        } else {
            self.flush();
            self.doc.block(markdown::table(&rows).trim_end());
        }
    }

    /// `**x**` around the converted braced argument at `pos`.
    fn wrapped(&mut self, text: &str, pos: usize, depth: usize, open: &str, close: &str) -> usize {
        let (arg, next) = self.braced(text, pos);
        let arg = self.arg_text(arg, depth);
        if !arg.is_empty() {
            self.para.push_str(&format!("{open}{arg}{close}"));
        }
        next
    }

    /// The braced argument at `pos` (after spaces) and the position after it; an empty
    /// argument when there is none (a one-token argument like `\ref x` is taken as is).
    fn braced<'t>(&self, text: &'t str, pos: usize) -> (&'t str, usize) {
        let pos = skip_spaces(text, pos);
        if !text.get(pos..).is_some_and(|r| r.starts_with('{')) {
            return ("", pos);
        }
        match balanced(text, pos, '{', '}') {
            Some((inner, next)) => (inner, next),
            // Unclosed: the rest of the line is the argument.
            None => {
                let rest = text.get(pos + 1..).unwrap_or("");
                let end = rest.find('\n').unwrap_or(rest.len());
                (rest.get(..end).unwrap_or(""), pos + 1 + end)
            }
        }
    }

    fn drop_args(&self, text: &str, mut pos: usize, count: usize) -> usize {
        pos = skip_optional(text, pos);
        for _ in 0..count {
            pos = skip_optional(text, self.braced(text, pos).1);
        }
        if count == 0 {
            after_control_word(text, pos)
        } else {
            pos
        }
    }
}

fn heading_level(name: &str) -> Option<usize> {
    Some(match name {
        "part" | "chapter" => 1,
        "section" => 2,
        "subsection" => 3,
        "subsubsection" => 4,
        "paragraph" => 5,
        "subparagraph" => 6,
        _ => return None,
    })
}

fn base_name(name: &str) -> &str {
    name.trim_end_matches('*')
}

/// The letter an accent applies to: `{o}`, `{\i}`, or the next character.
fn accent_base(text: &str, pos: usize) -> (String, usize) {
    let pos = skip_spaces(text, pos);
    let rest = text.get(pos..).unwrap_or("");
    if rest.starts_with('{') {
        if let Some((inner, next)) = balanced(text, pos, '{', '}') {
            let inner = inner.trim();
            let base = match inner.strip_prefix('\\') {
                Some(name) => letter_command(name).unwrap_or(name).to_string(),
                None => inner.to_string(),
            };
            return (base, next);
        }
        return (String::new(), pos + 1);
    }
    if let Some(name) = rest.strip_prefix('\\') {
        let len = name
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(name.len());
        let command = name.get(..len).unwrap_or("");
        if let Some(letter) = letter_command(command) {
            return (letter.to_string(), after_control_word(text, pos + 1 + len));
        }
    }
    match rest.chars().next() {
        Some(c) => (c.to_string(), pos + c.len_utf8()),
        None => (String::new(), pos),
    }
}

/// Skips an optional `[...]` argument at `pos`, if there is one.
fn skip_optional(text: &str, pos: usize) -> usize {
    optional(text, pos).1
}

fn optional(text: &str, pos: usize) -> (Option<&str>, usize) {
    if text.get(pos..).is_some_and(|r| r.starts_with('[')) {
        let rest = window(text.get(pos..).unwrap_or(""), MATH_WINDOW);
        // Options never span paragraphs: an unclosed bracket is text.
        let limit = rest.find("\n\n").unwrap_or(rest.len());
        if let Some((inner, next)) = balanced(rest.get(..limit).unwrap_or(""), 0, '[', ']') {
            return (Some(inner), pos + next);
        }
    }
    (None, pos)
}

fn skip_spaces(text: &str, pos: usize) -> usize {
    let rest = text.get(pos..).unwrap_or("");
    pos + (rest.len() - rest.trim_start_matches([' ', '\t']).len())
}

/// After a control word TeX skips spaces (and one newline).
fn after_control_word(text: &str, pos: usize) -> usize {
    let next = skip_spaces(text, pos);
    if text.get(next..).is_some_and(|r| r.starts_with('\n'))
        && !text
            .get(next + 1..)
            .is_some_and(|r| r.trim_start_matches([' ', '\t']).starts_with('\n'))
    {
        return next + 1;
    }
    next
}

/// Splits at `separator` outside braces and not escaped (`\&`).
fn split_top<'t>(text: &'t str, separator: &str) -> Vec<&'t str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut pos = 0;
    while let Some(c) = text.get(pos..).and_then(|r| r.chars().next()) {
        match c {
            '\\' if separator != "\\\\"
                || !text.get(pos..).is_some_and(|r| r.starts_with("\\\\")) =>
            {
                pos += 1;
                pos += text
                    .get(pos..)
                    .and_then(|r| r.chars().next())
                    .map_or(0, char::len_utf8);
                continue;
            }
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && text.get(pos..).is_some_and(|r| r.starts_with(separator)) {
            parts.push(text.get(start..pos).unwrap_or(""));
            pos += separator.len();
            start = pos;
            continue;
        }
        pos += c.len_utf8();
    }
    parts.push(text.get(start..).unwrap_or(""));
    parts
}

/// Equation bodies without their `\label{...}`, which say nothing to a reader.
fn strip_labels(math: &str) -> String {
    let mut out = String::with_capacity(math.len());
    let mut rest = math;
    while let Some(at) = rest.find("\\label{") {
        out.push_str(rest.get(..at).unwrap_or(""));
        match balanced(rest, at + "\\label".len(), '{', '}') {
            Some((_, next)) => rest = rest.get(next..).unwrap_or(""),
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_converts, md};
    use super::*;
    use proptest::prelude::*;

    const PAPER: &str = r#"\documentclass[11pt]{article}
\usepackage{amsmath} % math
\title{On the \emph{Shelf} of Books}
\author{Ana Lima \and Bo Chen\thanks{Funded.}}
\newcommand{\R}{\mathbb{R}}
\begin{document}
\maketitle
\begin{abstract}
We study shelves.
\end{abstract}
\section{Introduction}\label{sec:intro}
Books are \textbf{heavy} and \emph{many}.% joined
Here.
% SECRET comment line
See~\cite{knuth84,lamport94} and Section~\ref{sec:intro}, also \url{https://example.org}
and \href{https://shelf.dev}{the site}. Price is 5\% of \$10.
Inline $E = mc^2$ and \(a+b\).
\[ \int_0^1 x\,dx \]
\begin{equation}\label{eq:one}
  a^2 + b^2 = c^2
\end{equation}
\subsection*{Lists}
\begin{itemize}
  \item First point
  \item Second with \texttt{code}
  \begin{enumerate}
    \item nested one
    \item nested two
  \end{enumerate}
\end{itemize}
\begin{verbatim}
% not a comment here
fn main() {}
\end{verbatim}
\begin{tabular}{|l|r|}
\hline
Name & Count \\ \hline
Ana & 3 \\
\end{tabular}
Caf\'e, na\"{i}ve, {\"o}, \c{c}a, \ss, G\"odel\footnote{A logician.}.
\unknowncmd{kept text} and \vspace{2em}gone.
\end{document}
ignored after end
"#;

    #[test]
    fn paper_converts() {
        assert_converts(
            PAPER,
            "tex",
            "On the Shelf of Books",
            "Ana Lima, Bo Chen",
            &[
                "# On the *Shelf* of Books",
                "## Abstract",
                "We study shelves.",
                "## Introduction",
                "Books are **heavy** and *many*.Here.",
                "See [knuth84, lamport94] and Section [sec:intro], also <https://example.org> and [the site](https://shelf.dev). Price is 5% of $10.",
                "Inline $E = mc^2$ and $a+b$.",
                "$$\n\\int_0^1 x\\,dx\n$$",
                "$$\na^2 + b^2 = c^2\n$$",
                "### Lists",
                "- First point\n- Second with `code`\n  1. nested one\n  2. nested two",
                "```\n% not a comment here\nfn main() {}\n```",
                "| Name | Count |\n|---|---|\n| Ana | 3 |",
                "Café, naïve, ö, ça, ß, Gödel[^1].",
                "kept text and gone.",
                "[^1]: A logician.",
            ],
            &[
                "SECRET",
                "usepackage",
                "amsmath",
                "ignored after end",
                "2em",
                "eq:one",
                "mathbb",
                "Funded",
            ],
        );
    }

    #[test]
    fn fragment_without_document_env() {
        let md = md(
            "\\chapter{One}\nText with \\textbf{bold}.\n\n\\paragraph{Run-in} head.\n",
            "tex",
        );
        assert_eq!(md, "# One\n\nText with **bold**.\n\n**Run-in** head.");
    }

    #[test]
    fn inline_decodes_fields() {
        assert_eq!(
            inline("G{\\\"o}del, {\\'E}cole and \\emph{Set} Theory"),
            "Gödel, École and *Set* Theory"
        );
        assert_eq!(inline("{T}he {L}ambda--Calculus"), "The Lambda–Calculus");
    }

    #[test]
    fn hostile_nesting_and_unclosed() {
        let deep = "\\textbf{".repeat(20_000);
        let _ = md(&deep, "tex");
        let deep = format!("{}x{}", "\\emph{".repeat(5000), "}".repeat(5000));
        assert!(md(&deep, "tex").contains('x'));
        assert_eq!(md("cost $5 and more", "tex"), "cost $5 and more");
        let _ = md("\\begin{verbatim}\nnever closed", "tex");
        let _ = md("\\begin{itemize}\\item a", "tex");
        let _ = md("\\end{itemize}\\item a \\\\", "tex");
        let _ = md("\\'", "tex");
        let _ = md("\\verb", "tex");
        let _ = md("\\verb|x", "tex");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn arbitrary_text_never_panics(text in "[\\\\{}\\[\\]$%&~a-z \n'`\"^_*-]{0,300}") {
            let _ = md(&text, "tex");
        }

        #[test]
        fn truncated_paper_never_panics(cut in 0usize..2000, flips in proptest::collection::vec((0usize..2000, any::<u8>()), 0..4)) {
            let bytes = crate::testing::damaged(PAPER.as_bytes(), &flips, cut);
            crate::testing::never_panics(super::super::extract, &bytes, "tex", &[])?;
        }
    }
}
