//! Markdown building blocks every extractor shares: tables, headings, whitespace, and the
//! final tidy pass, so that every format's output looks the same.

/// Collapses runs of whitespace (newlines included) into single spaces and trims.
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: one line, pipes escaped.
pub fn cell(text: &str) -> String {
    collapse_whitespace(text).replace('|', "\\|")
}

/// A Markdown table; the first row is the header. Rows shorter than the widest are padded.
/// Returns an empty string for no rows.
pub fn table(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        out.push('|');
        for col in 0..width {
            out.push(' ');
            out.push_str(&cell(row.get(col).map(String::as_str).unwrap_or("")));
            out.push_str(" |");
        }
        out.push('\n');
        if i == 0 {
            out.push('|');
            for _ in 0..width {
                out.push_str("---|");
            }
            out.push('\n');
        }
    }
    out
}

/// `# text` at `level` (1 to 6), on one line.
pub fn heading(level: usize, text: &str) -> String {
    let level = level.clamp(1, 6);
    format!("{} {}", "#".repeat(level), collapse_whitespace(text))
}

/// `text` as a block quote: every line behind `> ` (an empty line as `>`).
pub fn quote(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                ">".to_string()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The final pass over every extraction: trailing spaces cut, CRLF to LF, at most one blank
/// line in a row, no blank lines at either end.
pub fn tidy(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut blank_run = 0usize;
    for line in markdown.replace("\r\n", "\n").replace('\r', "\n").lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
            if blank_run > 0 {
                out.push('\n');
            }
        }
        blank_run = 0;
        out.push_str(line);
    }
    out
}

/// Appends `block` to `out` as a paragraph of its own (a blank line between blocks).
pub fn push_block(out: &mut String, block: &str) {
    let block = block.trim_matches('\n');
    if block.trim().is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(block);
}

/// Markdown blocks: a blank line between blocks, none between items of one list.
#[derive(Debug, Default)]
pub struct Blocks {
    pub text: String,
    last_was_item: bool,
}

impl Blocks {
    pub fn push(&mut self, block: &str, is_item: bool) {
        if block.trim().is_empty() {
            return;
        }
        if !self.text.is_empty() {
            self.text.push_str(if is_item && self.last_was_item {
                "\n"
            } else {
                "\n\n"
            });
        }
        self.text.push_str(block.trim_end());
        self.last_was_item = is_item;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_and_escape() {
        let rows = vec![
            vec!["a".to_string(), "b|c".to_string()],
            vec!["1\n2".to_string()],
        ];
        assert_eq!(table(&rows), "| a | b\\|c |\n|---|---|\n| 1 2 |  |\n");
        assert_eq!(table(&[]), "");
    }

    #[test]
    fn tidy_collapses_blank_lines() {
        assert_eq!(tidy("\n\na  \n\n\n\nb\r\nc\n\n"), "a\n\nb\nc");
    }
}
