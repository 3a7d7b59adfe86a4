//! PDF with a text layer, through poppler's `pdftotext`: one page per PDF page,
//! pages without text marked for OCR, ligatures spelled out and line-end hyphens rejoined.

use std::ffi::OsStr;
use std::time::Duration;

use crate::subprocess::{self, Tool, ToolOutput};
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata, Page};

/// The poppler program the extractor runs; tests swap in a name that does not exist.
#[derive(Debug, Clone, Copy)]
struct Poppler {
    pdftotext: Tool,
}

const POPPLER: Poppler = Poppler {
    pdftotext: Tool {
        program: "pdftotext",
        package: "poppler-utils",
    },
};

/// Poppler, like other readers, accepts a header anywhere in the first KiB.
const HEADER_WINDOW: usize = 1024;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    extract_with(POPPLER, input, limits, control)
}

fn extract_with(
    tools: Poppler,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    if !has_pdf_header(input.bytes) {
        return Err(ExtractError::malformed(format!(
            "the .{} file is not a PDF (no %PDF- header)",
            input.extension
        )));
    }
    // Two poppler runs, at once: reading order, and the content stream's words with their
    // boxes (which also give the stream's text, the page count and the metadata).
    let (reading, boxes) = std::thread::scope(|scope| {
        let boxes = scope
            .spawn(|| run_pdftotext(tools.pdftotext, Mode::StreamBoxes, input, limits, control));
        let reading = run_pdftotext(tools.pdftotext, Mode::Reading, input, limits, control);
        let boxes = boxes
            .join()
            .unwrap_or_else(|_| Err(ExtractError::crashed()));
        (reading, boxes)
    });
    let reading = reading?;
    control.check()?;
    let (text, stream) = match boxes {
        Ok(html) => {
            let stream = parse_box_output(&html, control)?;
            (
                prefer_stream_order(&reading, &stream, control)?,
                Some(stream),
            )
        }
        Err(e) if matches!(e.code, "canceled" | "extraction_timeout") => return Err(e),
        // The boxes only refine the order and add metadata: the reading order stands alone.
        Err(_) => (reading, None),
    };
    let metadata = stream
        .as_ref()
        .map(|s| s.metadata.clone())
        .unwrap_or_default();
    let pages = split_pages(&text, metadata.page_count, control)?;
    let mut markdown = String::new();
    for page in pages.iter().filter(|p| p.has_text_layer) {
        crate::markdown::push_block(&mut markdown, &page.text);
    }
    let metadata = Metadata {
        page_count: Some(u32::try_from(pages.len()).unwrap_or(u32::MAX)),
        ..metadata
    };
    Ok(Extraction {
        markdown,
        pages,
        metadata,
        ..Extraction::default()
    })
}

/// What `pdftotext -raw -bbox` says: per page, the words in content-stream order with their
/// boxes; and the document's title and author from its head.
#[derive(Debug, Default)]
struct StreamPages {
    pages: Vec<Vec<Word>>,
    metadata: Metadata,
}

#[derive(Debug, Clone, PartialEq)]
struct Word {
    bounds: WordBox,
    text: String,
}

/// Replaces a page's reading-order text by its content-stream text when the stream is laid
/// out top to bottom (at most one jump back up the page that is not a move to a column on the
/// right, which is a header or footer drawn first) and the page has no right-to-left script.
/// Such pages are typeset in order, and the stream keeps table rows and captions together
/// where pdftotext's column detection splits them.
fn prefer_stream_order(
    reading: &str,
    stream: &StreamPages,
    control: &Control,
) -> Result<String, ExtractError> {
    let mut out = Vec::new();
    for (index, page) in reading.split('\u{c}').enumerate() {
        if index % 100 == 0 {
            control.check()?;
        }
        let chosen = match stream.pages.get(index) {
            Some(words)
                if !words.is_empty() && !has_right_to_left(page) && upward_jumps(words) <= 1 =>
            {
                stream_text(words)
            }
            _ => page.to_string(),
        };
        out.push(chosen);
    }
    Ok(out.join("\u{c}"))
}

/// The words of a page as lines: a new line where the next word starts left of the previous
/// one or on another baseline.
fn stream_text(words: &[Word]) -> String {
    let mut text = String::new();
    let mut previous: Option<&WordBox> = None;
    for word in words {
        if let Some(prev) = previous {
            let height = (prev.y_max - prev.y_min).max(1.0);
            let new_line = (word.bounds.y_max - prev.y_max).abs() > height / 2.0
                || word.bounds.x_min < prev.x_min;
            text.push(if new_line { '\n' } else { ' ' });
        }
        text.push_str(&word.text);
        previous = Some(&word.bounds);
    }
    text
}

/// A word's box from `pdftotext -bbox`: x and y grow right and down.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WordBox {
    x_min: f64,
    y_min: f64,
    x_max: f64,
    y_max: f64,
}

fn parse_box_output(html: &str, control: &Control) -> Result<StreamPages, ExtractError> {
    let mut out = StreamPages::default();
    let mut in_head = true;
    for (index, line) in html.lines().enumerate() {
        if index % 4096 == 0 {
            control.check()?;
        }
        let line = line.trim_start();
        if line.starts_with("<page ") {
            in_head = false;
            out.pages.push(Vec::new());
        } else if line.starts_with("<word ") {
            if let (Some(page), Some(word)) = (out.pages.last_mut(), parse_word(line)) {
                page.push(word);
            }
        } else if in_head {
            if let Some(title) = line
                .strip_prefix("<title>")
                .and_then(|rest| rest.strip_suffix("</title>"))
            {
                out.metadata.title = Some(unescape(title));
            } else if line.starts_with("<meta name=\"Author\"") {
                out.metadata.author = attribute(line, "content").map(unescape);
            }
        }
    }
    out.metadata.page_count = u32::try_from(out.pages.len()).ok().filter(|n| *n > 0);
    Ok(out)
}

fn attribute<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {name}=\""))? + name.len() + 3;
    let rest = line.get(start..)?;
    rest.get(..rest.find('"')?)
}

fn parse_word(line: &str) -> Option<Word> {
    let number = |name: &str| -> Option<f64> { attribute(line, name)?.parse().ok() };
    let text = line.get(line.find('>')? + 1..line.rfind("</word>")?)?;
    Some(Word {
        bounds: WordBox {
            x_min: number("xMin")?,
            y_min: number("yMin")?,
            x_max: number("xMax")?,
            y_max: number("yMax")?,
        },
        text: unescape(text),
    })
}

/// pdftotext escapes the five XML characters in its box output.
fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Jumps from a word to one more than two line heights higher on the page that do not move
/// to the right of it: the stream went back up the same column.
fn upward_jumps(words: &[Word]) -> usize {
    words
        .windows(2)
        .filter(|pair| match pair {
            [a, b] => {
                let (a, b) = (&a.bounds, &b.bounds);
                let height = (a.y_max - a.y_min).max(1.0);
                b.y_min < a.y_min - 2.0 * height && b.x_min < a.x_max
            }
            _ => false,
        })
        .count()
}

fn has_right_to_left(text: &str) -> bool {
    text.chars().any(|c| {
        matches!(c, '\u{0590}'..='\u{08FF}' | '\u{FB1D}'..='\u{FDFF}' | '\u{FE70}'..='\u{FEFF}')
    })
}

fn has_pdf_header(bytes: &[u8]) -> bool {
    let window = bytes.get(..HEADER_WINDOW).unwrap_or(bytes);
    window.windows(5).any(|w| w == b"%PDF-")
}

/// The time a tool may take: what is left of the extraction, capped by its own limit.
fn tool_timeout(limits: &Limits, control: &Control) -> Duration {
    control
        .remaining()
        .map_or(limits.timeout, |left| left.min(limits.timeout))
}

/// pdftotext's outputs: its reading order (columns found from geometry), and the content
/// stream's order with each word's box.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Reading,
    StreamBoxes,
}

fn run_pdftotext(
    tool: Tool,
    mode: Mode,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<String, ExtractError> {
    let max_stdout = u64::try_from(limits.max_output_chars)
        .unwrap_or(u64::MAX)
        .saturating_mul(4);
    let mut args = vec![OsStr::new("-enc"), OsStr::new("UTF-8")];
    match mode {
        Mode::Reading => {}
        // Boxes are several times the text; the cap above still bounds them.
        Mode::StreamBoxes => args.extend([OsStr::new("-raw"), OsStr::new("-bbox")]),
    }
    args.extend([input.path.as_os_str(), OsStr::new("-")]);
    let out = subprocess::run(
        tool,
        &args,
        &[],
        tool_timeout(limits, control),
        max_stdout,
        control,
    )?;
    check_status(&out)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Turns poppler's exit status and messages into an error: 1 is "cannot open the PDF",
/// with "Incorrect password" when a user password is needed.
fn check_status(out: &ToolOutput) -> Result<(), ExtractError> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Incorrect password") {
        return Err(ExtractError::encrypted(
            "the PDF is encrypted and needs a password to open",
        ));
    }
    match out.status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(ExtractError::malformed(format!(
            "poppler cannot open the PDF: {}",
            last_error_line(&stderr)
        ))),
        Some(3) => Err(ExtractError::encrypted(
            "the PDF's permissions forbid copying its text",
        )),
        code => Err(ExtractError::converter_failed(format!(
            "pdftotext failed (exit status {}): {}",
            code.map_or_else(|| "killed".to_string(), |c| c.to_string()),
            last_error_line(&stderr)
        ))),
    }
}

/// Poppler prints warnings before the error that stopped it: the last error line says most.
fn last_error_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .rev()
        .find(|l| l.contains("Error"))
        .or(lines.last())
        .copied()
        .unwrap_or("no message");
    line.chars().take(200).collect()
}

/// pdftotext ends every page with a form feed. `page_count` (from the box output) wins when known,
/// so that a page poppler printed nothing for still has its entry.
fn split_pages(
    text: &str,
    page_count: Option<u32>,
    control: &Control,
) -> Result<Vec<Page>, ExtractError> {
    let mut raw: Vec<&str> = text.split('\u{c}').collect();
    if raw.last().is_some_and(|last| last.trim().is_empty()) && raw.len() > 1 {
        raw.pop();
    }
    let count = match page_count {
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX).max(raw.len()),
        None => raw.len(),
    };
    let mut pages = Vec::with_capacity(count.min(100_000));
    for index in 0..count {
        if index % 100 == 0 {
            control.check()?;
        }
        let text = clean_page(raw.get(index).copied().unwrap_or(""));
        pages.push(Page {
            number: u32::try_from(index + 1).unwrap_or(u32::MAX),
            has_text_layer: !text.trim().is_empty(),
            text,
        });
    }
    Ok(pages)
}

/// Faithful text: ligatures spelled out, control characters dropped, words split at a line end
/// rejoined.
fn clean_page(text: &str) -> String {
    let mut spelled = String::with_capacity(text.len());
    for c in text.chars() {
        match ligature(c) {
            Some(letters) => spelled.push_str(letters),
            None if c.is_control() && c != '\n' && c != '\t' => {}
            None => spelled.push(c),
        }
    }
    let lines: Vec<&str> = spelled.lines().map(str::trim_end).collect();
    rejoin_hyphenated(&lines).trim_matches('\n').to_string()
}

fn ligature(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{FB00}' => "ff",
        '\u{FB01}' => "fi",
        '\u{FB02}' => "fl",
        '\u{FB03}' => "ffi",
        '\u{FB04}' => "ffl",
        '\u{FB05}' | '\u{FB06}' => "st",
        '\u{0132}' => "IJ",
        '\u{0133}' => "ij",
        '\u{0152}' => "OE",
        '\u{0153}' => "oe",
        '\u{A732}' => "AA",
        '\u{A733}' => "aa",
        _ => return None,
    })
}

/// Joins `line` to the next when it ends in a lowercase letter and a hyphen (or a soft hyphen)
/// and the next starts with a lowercase letter: a word split by the typesetter. Hyphens
/// before capitals, digits or blank lines are real and stay.
fn rejoin_hyphenated(lines: &[&str]) -> String {
    let mut out = String::new();
    let mut joined_to_previous = false;
    for (i, line) in lines.iter().enumerate() {
        let line = if joined_to_previous {
            line.trim_start()
        } else {
            line
        };
        let next = lines.get(i + 1).map(|l| l.trim_start());
        let split_word = next.is_some_and(starts_lowercase) && ends_with_split(line);
        if split_word {
            out.push_str(strip_hyphen(line));
        } else {
            out.push_str(line);
            out.push('\n');
        }
        joined_to_previous = split_word;
    }
    out
}

fn starts_lowercase(line: &str) -> bool {
    line.chars().next().is_some_and(char::is_lowercase)
}

fn ends_with_split(line: &str) -> bool {
    let mut tail = line.chars().rev();
    matches!(tail.next(), Some('-' | '\u{AD}')) && tail.next().is_some_and(char::is_lowercase)
}

fn strip_hyphen(line: &str) -> &str {
    line.strip_suffix('-')
        .or_else(|| line.strip_suffix('\u{AD}'))
        .unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::{Path, PathBuf};

    const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus");

    fn corpus(rel: &str) -> Option<PathBuf> {
        let path = Path::new(CORPUS).join(rel);
        if path.exists() {
            Some(path)
        } else {
            eprintln!("corpus file {} missing: test skipped", path.display());
            None
        }
    }

    fn run_path(path: &Path) -> Result<Extraction, ExtractError> {
        let bytes = std::fs::read(path).unwrap();
        run_bytes_at(path, &bytes)
    }

    fn run_bytes_at(path: &Path, bytes: &[u8]) -> Result<Extraction, ExtractError> {
        crate::extract(
            crate::Kind::Pdf,
            Input {
                path,
                bytes,
                extension: "pdf",
            },
            &Limits::default(),
            &Control::default(),
        )
    }

    fn run_bytes(bytes: &[u8]) -> Result<Extraction, ExtractError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file.pdf");
        std::fs::write(&path, bytes).unwrap();
        run_bytes_at(&path, bytes)
    }

    fn words(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    }

    /// A one-page PDF per entry of `pages` (an empty string: a page with no text), with
    /// correct xref offsets so poppler reads it without repair.
    fn synthetic_pdf(pages: &[&str]) -> Vec<u8> {
        let n = pages.len();
        let mut objects: Vec<String> = Vec::new();
        objects.push("<< /Type /Catalog /Pages 2 0 R >>".into());
        let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
        objects.push(format!(
            "<< /Type /Pages /Kids [{}] /Count {n} >>",
            kids.join(" ")
        ));
        objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".into());
        for (i, text) in pages.iter().enumerate() {
            objects.push(format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                5 + 2 * i
            ));
            let mut stream = String::new();
            for (l, line) in text.lines().enumerate() {
                stream.push_str(&format!(
                    "BT /F1 12 Tf 72 {} Td ({}) Tj ET\n",
                    700 - 14 * l,
                    line
                ));
            }
            objects.push(format!(
                "<< /Length {} >>\nstream\n{stream}endstream",
                stream.len()
            ));
        }
        let mut out = b"%PDF-1.4\n".to_vec();
        let mut offsets = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
        }
        let xref = out.len();
        out.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
        for offset in offsets {
            out.extend(format!("{offset:010} 00000 n \n").as_bytes());
        }
        out.extend(
            format!(
                "trailer\n<< /Size {} /Root 1 0 R /Info << /Title (Synthetic Title) /Author () >> >>\nstartxref\n{xref}\n%%EOF\n",
                objects.len() + 1
            )
            .as_bytes(),
        );
        out
    }

    #[test]
    fn pages_metadata_and_pages_without_text() {
        let pdf = synthetic_pdf(&["First page words", "", "Third page words"]);
        let extraction = run_bytes(&pdf).unwrap();
        assert_eq!(extraction.pages.len(), 3);
        assert_eq!(extraction.pages_needing_ocr(), vec![2]);
        assert_eq!(extraction.pages[0].text, "First page words");
        assert_eq!(extraction.pages[2].number, 3);
        assert_eq!(extraction.markdown, "First page words\n\nThird page words");
        assert_eq!(
            extraction.metadata.title.as_deref(),
            Some("Synthetic Title")
        );
        assert_eq!(extraction.metadata.author, None);
        assert_eq!(extraction.metadata.page_count, Some(3));
    }

    #[test]
    fn hyphenated_words_are_rejoined_and_real_hyphens_kept() {
        // Poppler itself joins every line-end hyphen inside a block (even before capitals);
        // clean_page covers the cases it leaves.
        let pdf = synthetic_pdf(&["an extrac-\ntion of text"]);
        let text = run_bytes(&pdf).unwrap().markdown;
        assert!(text.contains("an extraction of text"), "{text}");
    }

    #[test]
    fn stream_order_is_judged_from_word_boxes() {
        let html = r#"<page width="612" height="792">
<word xMin="72" yMin="700" xMax="100" yMax="712">footer</word>
<word xMin="72" yMin="70" xMax="100" yMax="82">top</word>
<word xMin="72" yMin="90" xMax="100" yMax="102">next</word>
</page>
<page width="612" height="792">
<word xMin="72" yMin="700" xMax="100" yMax="712">a</word>
<word xMin="72" yMin="70" xMax="100" yMax="82">b</word>
<word xMin="72" yMin="500" xMax="100" yMax="512">c</word>
<word xMin="72" yMin="90" xMax="100" yMax="102">d</word>
<word xMin="72" yMin="bad" xMax="100" yMax="102">e</word>
</page>"#;
        let pages = parse_box_output(html, &Control::default()).unwrap().pages;
        assert_eq!(pages.len(), 2);
        assert_eq!(pages[1].len(), 4);
        assert_eq!(upward_jumps(&pages[0]), 1);
        assert_eq!(upward_jumps(&pages[1]), 2);
        assert!(has_right_to_left("שלום"));
        assert!(!has_right_to_left("hello"));
    }

    #[test]
    fn ligatures_and_hyphens_in_clean_page() {
        assert_eq!(
            clean_page("the \u{FB01}rst e\u{FB00}ort, a \u{FB03}ce\nin\u{FB02}u-\nence\u{7}"),
            "the first effort, a ffice\ninfluence"
        );
        assert_eq!(clean_page("soft\u{AD}\nhyphen"), "softhyphen");
        assert_eq!(clean_page("pre-\n\npost"), "pre-\n\npost");
    }

    #[test]
    fn crazyones_text_and_ligatures() {
        let Some(path) = corpus("pdf/pypdf/crazyones.pdf") else {
            return;
        };
        let extraction = run_path(&path).unwrap();
        assert!(extraction.markdown.contains("The Crazy Ones"));
        assert!(extraction.markdown.contains("The misfits. The rebels."));
        assert!(!extraction.markdown.contains('\u{FB01}'));
        let expected = std::fs::read_to_string(path.with_extension("txt")).unwrap();
        let expected = words(&clean_page(&expected));
        assert_eq!(words(&extraction.markdown), expected);
    }

    #[test]
    fn multicolumn_pages_read_column_by_column() {
        let Some(path) = corpus("pdf/docling/sources/redp5110_sampled.pdf") else {
            return;
        };
        let extraction = run_path(&path).unwrap();
        assert_eq!(extraction.pages.len(), 18);
        assert_eq!(extraction.metadata.page_count, Some(18));
        let text = &extraction.markdown;
        let first = text.find("Row and Column Access Control").unwrap();
        let contents = text.find("Contents").unwrap();
        assert!(first < contents);
        let Some(paper) = corpus("pdf/docling/sources/normal_4pages.pdf") else {
            return;
        };
        let text = run_path(&paper).unwrap().markdown;
        // The first page has two columns: the left one is read to its end first.
        let heading = text.find("들어가며").unwrap();
        let left_column = text.find("9,661명").unwrap();
        let right_column = text.find("보험실무상 어떤 보험사는").unwrap();
        assert!(heading < left_column && left_column < right_column);
    }

    #[test]
    fn right_to_left_text_is_kept() {
        let Some(path) = corpus("pdf/docling/sources/right_to_left_01.pdf") else {
            return;
        };
        let text = run_path(&path).unwrap().markdown;
        assert!(text.chars().any(|c| ('\u{0590}'..='\u{06FF}').contains(&c)));
    }

    #[test]
    fn encrypted_files_open_or_need_a_password() {
        let Some(dir) = corpus("pdf/pypdf/encryption") else {
            return;
        };
        // Poppler opens r5/r6 "user-password" files with the empty password: their user
        // password is in fact empty.
        let need_password = [
            "r2-user-password.pdf",
            "r3-user-password.pdf",
            "r4-user-password.pdf",
            "r4-aes-user-password.pdf",
            "r6-both-passwords.pdf",
        ];
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let result = run_path(&path);
            if need_password.contains(&name.as_str()) {
                let err = result.unwrap_err();
                assert_eq!(err.code, "pdf_encrypted", "{name}");
                assert!(err.detail.contains("password"), "{name}");
            } else {
                let text = result.unwrap_or_else(|e| panic!("{name}: {e:?}")).markdown;
                assert!(text.contains("pdf encryption test"), "{name}: {text}");
            }
        }
    }

    #[test]
    fn hostile_files_fail_clearly_or_extract() {
        for name in [
            "empty.pdf",
            "Pages-tree-refs.pdf",
            "xref_command_missing.pdf",
        ] {
            let Some(path) = corpus(&format!("hostile/malformed/{name}")) else {
                return;
            };
            match run_path(&path) {
                Ok(extraction) => assert!(!extraction.pages.is_empty(), "{name}"),
                Err(e) => assert_eq!(e.code, "malformed_document", "{name}: {e:?}"),
            }
        }
        let Some(path) = corpus("hostile/malformed/empty.pdf") else {
            return;
        };
        assert_eq!(run_path(&path).unwrap_err().code, "malformed_document");
        let loops = run_path(&corpus("hostile/malformed/Pages-tree-refs.pdf").unwrap()).unwrap();
        assert!(loops.markdown.contains("Pages loop"));
    }

    #[test]
    fn non_pdf_and_truncated_pdf_are_malformed() {
        let err = run_bytes(b"just some text, not a PDF").unwrap_err();
        assert_eq!(err.code, "malformed_document");
        assert_eq!(
            run_bytes(b"%PDF-1.4\n").unwrap_err().code,
            "malformed_document"
        );
    }

    #[test]
    fn a_missing_pdftotext_names_poppler() {
        let pdf = synthetic_pdf(&["x"]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.pdf");
        std::fs::write(&path, &pdf).unwrap();
        let tools = Poppler {
            pdftotext: Tool {
                program: "shelf-no-such-pdftotext",
                package: "poppler-utils",
            },
        };
        let input = Input {
            path: &path,
            bytes: &pdf,
            extension: "pdf",
        };
        let err = extract_with(tools, input, &Limits::default(), &Control::default()).unwrap_err();
        assert_eq!(err.code, "converter_unavailable");
        assert!(err.detail.contains("poppler-utils"));
    }

    #[test]
    fn a_canceled_extraction_stops() {
        let pdf = synthetic_pdf(&["x"]);
        let control = Control::default();
        control.cancel();
        let input = Input {
            path: Path::new("/nonexistent.pdf"),
            bytes: &pdf,
            extension: "pdf",
        };
        let err = extract(input, &Limits::default(), &control).unwrap_err();
        assert_eq!(err.code, "canceled");
    }

    fn mutated_corpus() -> Vec<u8> {
        corpus("pdf/pypdf/crazyones.pdf")
            .and_then(|p| std::fs::read(p).ok())
            .unwrap_or_else(|| synthetic_pdf(&["fallback"]))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut pdf = b"%PDF-1.4\n".to_vec();
            pdf.extend(bytes);
            let _ = run_bytes(&pdf);
        }

        #[test]
        fn mutated_pdfs_never_panic(cut in 0.0f64..1.0, flips in proptest::collection::vec((0.0f64..1.0, any::<u8>()), 0..16)) {
            let mut pdf = mutated_corpus();
            for (at, byte) in flips {
                let i = (at * pdf.len() as f64) as usize;
                if let Some(b) = pdf.get_mut(i) {
                    *b = byte;
                }
            }
            pdf.truncate(((cut * pdf.len() as f64) as usize).max(1));
            let _ = run_bytes(&pdf);
        }

        #[test]
        fn clean_page_never_panics(text in "\\PC{0,200}") {
            let _ = clean_page(&text);
        }
    }
}
