//! PDF with a text layer, through poppler's `pdftotext`: one page per PDF page, pages without
//! text marked for OCR, ligatures spelled out, line-end hyphens rejoined, grids written as
//! Markdown tables.
//!
//! One pass of `pdftotext -raw -bbox` gives every page's words in content-stream order with
//! their boxes. Pages typeset in order are written from those words; only the others (columns
//! drawn out of order, right-to-left scripts) take poppler's reading order. Large documents
//! are split into page ranges read by parallel processes, then only the pages that need it are
//! read again in reading order, by page range; a small document runs the box pass and a
//! whole-document reading pass at once, since a second poppler start costs more than its pages.

mod boxes;
mod table;

use std::ffi::OsStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use boxes::Word;

use crate::subprocess::{self, Tool, ToolOutput};
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata, Page};

/// The poppler programs the extractor runs and when it splits a document; tests swap in
/// names that do not exist, or split small files.
#[derive(Debug, Clone, Copy)]
struct Poppler {
    pdftotext: Tool,
    pdfinfo: Tool,
    /// Smaller files are read by one process: splitting costs a `pdfinfo` run and a document
    /// load per process, more than a few dozen pages take.
    split_min_bytes: usize,
    /// The fewest pages a parallel range gets.
    min_range_pages: u32,
}

const POPPLER: Poppler = Poppler {
    pdftotext: Tool {
        program: "pdftotext",
        package: "poppler-utils",
    },
    pdfinfo: Tool {
        program: "pdfinfo",
        package: "poppler-utils",
    },
    split_min_bytes: 1024 * 1024,
    min_range_pages: 64,
};

/// Poppler, like other readers, accepts a header anywhere in the first KiB.
const HEADER_WINDOW: usize = 1024;
/// Parallel poppler processes at most (each holds the document's fonts and one page).
const MAX_WORKERS: usize = 4;
/// Pages needing the reading order this close together share one run: starting poppler and
/// loading the document costs about as much as reading a dozen pages.
const RANGE_GAP: u32 = 12;
/// Reading-order runs per document at most; past it, nearby ranges are merged.
const MAX_READING_RANGES: usize = 64;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    extract_with(POPPLER, input, limits, control)
}

/// What one page's words became.
#[derive(Debug)]
enum PageText {
    /// Typeset in order: the content stream's text (tables included).
    Stream(String),
    /// Needs poppler's reading order; the stream's text stands in if that run fails.
    Reading(String),
}

impl PageText {
    fn into_text(self) -> String {
        match self {
            PageText::Stream(text) | PageText::Reading(text) => text,
        }
    }
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
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_WORKERS);
    let page_count = if workers > 1 && input.bytes.len() >= tools.split_min_bytes {
        count_pages(tools.pdfinfo, input, limits, control)?
    } else {
        None
    };
    let ranges = match page_count {
        Some(count) => split_range(1, count, workers, tools.min_range_pages),
        None => vec![None],
    };
    if ranges.len() <= 1 {
        return extract_whole(tools, input, limits, control);
    }
    let max_stdout = stdout_cap(limits) / u64::try_from(ranges.len()).unwrap_or(1).max(1);
    let chunks = run_jobs(&ranges, workers, |range| {
        stream_pages(tools, *range, max_stdout, input, limits, control)
    });
    let mut pages: Vec<PageText> = Vec::new();
    let mut metadata = None;
    for chunk in chunks {
        match chunk {
            Ok(chunk) => {
                metadata.get_or_insert(chunk.metadata);
                pages.extend(chunk.pages);
            }
            Err(e) if matches!(e.code, "canceled" | "extraction_timeout") => return Err(e),
            // The boxes only refine the order and add metadata: the reading order stands alone.
            Err(_) => return reading_only(tools, input, limits, control),
        }
    }
    control.check()?;
    let texts = read_out_of_order_pages(tools, pages, workers, input, limits, control)?;
    let metadata = metadata.unwrap_or_default();
    finish(texts, metadata, control)
}

/// The box output of `range` (`None`: the whole document), each page turned into text.
fn stream_pages(
    tools: Poppler,
    range: Option<(u32, u32)>,
    max_stdout: u64,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<boxes::Chunk<PageText>, ExtractError> {
    let html = run_pdftotext(
        tools.pdftotext,
        Mode::StreamBoxes,
        range,
        max_stdout,
        input,
        limits,
        control,
    )?;
    boxes::parse(&html, control, page_text)
}

/// A document read in one piece: the box pass and the reading-order pass at once, so that a
/// small document waits for one poppler run, not two in a row (the second process's CPU is
/// the price; a split document reads only the pages that need it instead).
fn extract_whole(
    tools: Poppler,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let max_stdout = stdout_cap(limits);
    let (stream, reading) = std::thread::scope(|scope| {
        let stream = scope.spawn(|| stream_pages(tools, None, max_stdout, input, limits, control));
        let reading = run_pdftotext(
            tools.pdftotext,
            Mode::Reading,
            None,
            max_stdout,
            input,
            limits,
            control,
        );
        let stream = stream
            .join()
            .unwrap_or_else(|_| Err(ExtractError::crashed()));
        (stream, reading)
    });
    let reading = reading?;
    control.check()?;
    let chunk = match stream {
        Ok(chunk) => chunk,
        Err(e) if matches!(e.code, "canceled" | "extraction_timeout") => return Err(e),
        // The boxes only refine the order and add metadata: the reading order stands alone.
        Err(_) => return finish(reading_pages(&reading), Metadata::default(), control),
    };
    let mut reading = reading_pages(&reading).into_iter();
    let mut stream = chunk.pages.into_iter();
    let mut texts = Vec::new();
    loop {
        let text = match (stream.next(), reading.next()) {
            (None, None) => break,
            (Some(PageText::Stream(text)), _) => text,
            (Some(PageText::Reading(_)) | None, Some(text)) => text,
            (Some(PageText::Reading(text)), None) => text,
        };
        texts.push(text);
    }
    finish(texts, chunk.metadata, control)
}

/// pdftotext ends every page with a form feed.
fn reading_pages(text: &str) -> Vec<String> {
    let mut pages: Vec<String> = text.split('\u{c}').map(str::to_string).collect();
    if pages.len() > 1 && pages.last().is_some_and(|last| last.trim().is_empty()) {
        pages.pop();
    }
    pages
}

/// The old way, when the box output is unusable: poppler's reading order for every page.
fn reading_only(
    tools: Poppler,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let text = run_pdftotext(
        tools.pdftotext,
        Mode::Reading,
        None,
        stdout_cap(limits),
        input,
        limits,
        control,
    )?;
    finish(reading_pages(&text), Metadata::default(), control)
}

fn finish(
    texts: Vec<String>,
    metadata: Metadata,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let mut pages = Vec::with_capacity(texts.len());
    for (index, text) in texts.iter().enumerate() {
        if index % 100 == 0 {
            control.check()?;
        }
        let text = clean_page(text);
        pages.push(Page {
            number: u32::try_from(index + 1).unwrap_or(u32::MAX),
            has_text_layer: !text.trim().is_empty(),
            text,
        });
    }
    if pages.is_empty() {
        pages.push(Page {
            number: 1,
            has_text_layer: false,
            text: String::new(),
        });
    }
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

/// A page's words in content-stream order: kept when the stream is laid out top to bottom (at
/// most one jump back up the page that is not a move to a column on the right, which is a
/// header or footer drawn first) and the page has no right-to-left script. Such pages are
/// typeset in order, and the stream keeps table rows and captions together where
/// pdftotext's column detection splits them.
fn page_text(words: Vec<Word>) -> PageText {
    let text = stream_text(&words);
    if words.is_empty() || (!has_right_to_left(&text) && upward_jumps(&words) <= 1) {
        PageText::Stream(text)
    } else {
        PageText::Reading(text)
    }
}

/// Replaces the text of pages not typeset in order by poppler's reading order, read by page
/// ranges in parallel.
fn read_out_of_order_pages(
    tools: Poppler,
    pages: Vec<PageText>,
    workers: usize,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Vec<String>, ExtractError> {
    let needed: Vec<u32> = pages
        .iter()
        .enumerate()
        .filter(|(_, page)| matches!(page, PageText::Reading(_)))
        .filter_map(|(index, _)| u32::try_from(index + 1).ok())
        .collect();
    let mut texts: Vec<String> = pages.into_iter().map(PageText::into_text).collect();
    if needed.is_empty() {
        return Ok(texts);
    }
    let ranges: Vec<Option<(u32, u32)>> = reading_ranges(&needed, workers, tools.min_range_pages)
        .into_iter()
        .map(Some)
        .collect();
    let max_stdout = stdout_cap(limits);
    let results = run_jobs(&ranges, workers, |range| {
        run_pdftotext(
            tools.pdftotext,
            Mode::Reading,
            *range,
            max_stdout,
            input,
            limits,
            control,
        )
    });
    for (range, result) in ranges.iter().zip(results) {
        let (Some((first, last)), Ok(text)) = (range, &result) else {
            match result {
                Err(e) if matches!(e.code, "canceled" | "extraction_timeout") => return Err(e),
                // The stream's text stands for pages the second run could not give.
                _ => continue,
            }
        };
        for (page, text) in (*first..=*last).zip(text.split('\u{c}')) {
            let index = usize::try_from(page)
                .unwrap_or(usize::MAX)
                .saturating_sub(1);
            if needed.binary_search(&page).is_ok()
                && let Some(slot) = texts.get_mut(index)
            {
                *slot = text.to_string();
            }
        }
    }
    Ok(texts)
}

/// Page ranges covering `pages` (sorted, 1-based): neighbours within `RANGE_GAP` share a
/// range, at most `MAX_READING_RANGES` of them, long ranges cut so every worker gets a share.
fn reading_ranges(pages: &[u32], workers: usize, min_pages: u32) -> Vec<(u32, u32)> {
    let mut gap = RANGE_GAP;
    let mut ranges = merge_pages(pages, gap);
    while ranges.len() > MAX_READING_RANGES {
        gap = gap.saturating_mul(2);
        ranges = merge_pages(pages, gap);
    }
    let covered = ranges.iter().fold(0u32, |sum, (a, b)| {
        sum.saturating_add(b.saturating_sub(*a)).saturating_add(1)
    });
    let share = covered
        .div_ceil(u32::try_from(workers).unwrap_or(1).max(1))
        .max(min_pages);
    ranges
        .into_iter()
        .flat_map(|(first, last)| cut(first, last, share))
        .collect()
}

/// `first..=last` cut into pieces of at most `size` pages.
fn cut(first: u32, last: u32, size: u32) -> Vec<(u32, u32)> {
    let size = size.max(1);
    let mut out = Vec::new();
    let mut start = first;
    while start <= last {
        let end = start.saturating_add(size - 1).min(last);
        out.push((start, end));
        match end.checked_add(1) {
            Some(next) => start = next,
            None => break,
        }
    }
    out
}

fn merge_pages(pages: &[u32], gap: u32) -> Vec<(u32, u32)> {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for &page in pages {
        match ranges.last_mut() {
            Some((_, last)) if page <= last.saturating_add(gap) => *last = page,
            _ => ranges.push((page, page)),
        }
    }
    ranges
}

/// `count` pages from `first` as ranges for `workers` processes, each at least `min_pages`
/// long; one range (`None`: the whole document) when that is all it takes.
fn split_range(first: u32, count: u32, workers: usize, min_pages: u32) -> Vec<Option<(u32, u32)>> {
    let workers = u32::try_from(workers).unwrap_or(1).max(1);
    let pieces = (count / min_pages.max(1)).clamp(1, workers);
    if pieces <= 1 || count == 0 {
        return vec![None];
    }
    let last = first.saturating_add(count - 1);
    cut(first, last, count.div_ceil(pieces))
        .into_iter()
        .map(Some)
        .collect()
}

/// Runs `run` on every job with up to `workers` threads; results in job order.
fn run_jobs<J: Sync, R: Send>(
    jobs: &[J],
    workers: usize,
    run: impl Fn(&J) -> Result<R, ExtractError> + Sync,
) -> Vec<Result<R, ExtractError>> {
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<R, ExtractError>>> = jobs.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers.clamp(1, jobs.len().max(1)))
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = jobs.get(index) else {
                            break done;
                        };
                        done.push((index, run(job)));
                    }
                })
            })
            .collect();
        for handle in handles {
            // A panicking worker leaves its slots empty: they read as a crash below.
            if let Ok(done) = handle.join() {
                for (index, result) in done {
                    if let Some(slot) = slots.get_mut(index) {
                        *slot = Some(result);
                    }
                }
            }
        }
    });
    slots
        .into_iter()
        .map(|slot| slot.unwrap_or_else(|| Err(ExtractError::crashed())))
        .collect()
}

/// The page count from `pdfinfo`, to split the document; `None` when it cannot say (the
/// extraction then reads the document in one process and reports poppler's own error).
fn count_pages(
    tool: Tool,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Option<u32>, ExtractError> {
    let args = [input.path.as_os_str()];
    let out = match subprocess::run(
        tool,
        &args,
        &[],
        tool_timeout(limits, control),
        1024 * 1024,
        control,
    ) {
        Ok(out) => out,
        Err(e) if matches!(e.code, "canceled" | "extraction_timeout") => return Err(e),
        Err(_) => return Ok(None),
    };
    if !out.status.success() {
        return Ok(None);
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("Pages:"))
        .and_then(|count| count.trim().parse().ok())
        .filter(|count| *count > 0))
}

/// The words of a page as lines (a new line where the next word starts left of the previous
/// one or on another baseline), grids among them as Markdown tables.
fn stream_text(words: &[Word]) -> String {
    let mut lines: Vec<&[Word]> = Vec::new();
    let mut start = 0;
    for (index, pair) in words.windows(2).enumerate() {
        if let [prev, word] = pair {
            let new_line = (word.bounds.y_max - prev.bounds.y_max).abs()
                > prev.bounds.height() / 2.0
                || word.bounds.x_min < prev.bounds.x_min;
            if new_line {
                lines.extend(words.get(start..=index));
                start = index + 1;
            }
        }
    }
    lines.extend(words.get(start..).filter(|rest| !rest.is_empty()));
    table::render(&lines)
}

/// Jumps from a word to one more than two line heights higher on the page that do not move
/// to the right of it: the stream went back up the same column.
fn upward_jumps(words: &[Word]) -> usize {
    words
        .windows(2)
        .filter(|pair| match pair {
            [a, b] => {
                let (a, b) = (&a.bounds, &b.bounds);
                b.y_min < a.y_min - 2.0 * a.height() && b.x_min < a.x_max
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

/// What poppler may print for the whole document: the box output is several times the text.
fn stdout_cap(limits: &Limits) -> u64 {
    u64::try_from(limits.max_output_chars)
        .unwrap_or(u64::MAX)
        .saturating_mul(4)
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
    range: Option<(u32, u32)>,
    max_stdout: u64,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<String, ExtractError> {
    let mut args: Vec<std::ffi::OsString> = vec!["-enc".into(), "UTF-8".into()];
    if mode == Mode::StreamBoxes {
        args.extend(["-raw".into(), "-bbox".into()]);
    }
    if let Some((first, last)) = range {
        args.extend([
            "-f".into(),
            first.to_string().into(),
            "-l".into(),
            last.to_string().into(),
        ]);
    }
    args.extend([input.path.as_os_str().to_owned(), "-".into()]);
    let args: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let out = subprocess::run(
        tool,
        &args,
        &[],
        tool_timeout(limits, control),
        max_stdout,
        control,
    )?;
    check_status(&out)?;
    // Valid UTF-8 (the usual case) is taken as is, without a copy of a large output.
    Ok(String::from_utf8(out.stdout)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
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
        let pages = boxes::parse(html, &Control::default(), |words| words)
            .unwrap()
            .pages;
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
    fn a_form_table_comes_out_as_a_markdown_table() {
        let Some(path) = corpus("pdf/docling/sources/table_mislabeled_as_picture.pdf") else {
            return;
        };
        let expected = std::fs::read_to_string(
            path.with_file_name("../expected/table_mislabeled_as_picture.md"),
        )
        .unwrap();
        assert!(expected.contains("| y y | Persons with disabilities | * | * |"));
        let text = run_path(&path).unwrap().markdown;
        // Checkbox, label and two marks per row, the checkbox drawn after its label; before,
        // each row came out as two loose lines.
        assert!(
            text.contains(
                "| y y | Persons with disabilities | * | * |\n|---|---|---|---|\n| y y | Children | * | * |"
            ),
            "{text}"
        );
        assert!(text.contains("| y y | Internally displaced persons | * | * |"));
        // The prose around it stays as it was.
        assert!(text.contains("\n(Please select all that apply)\n"));
        assert_eq!(text.lines().filter(|l| l.starts_with("|---")).count(), 1);
    }

    #[test]
    fn a_document_split_across_processes_reads_the_same() {
        let Some(path) = corpus("pdf/docling/sources/redp5110_sampled.pdf") else {
            return;
        };
        let bytes = std::fs::read(&path).unwrap();
        let input = Input {
            path: &path,
            bytes: &bytes,
            extension: "pdf",
        };
        let whole = extract_with(POPPLER, input, &Limits::default(), &Control::default()).unwrap();
        let split = Poppler {
            split_min_bytes: 0,
            min_range_pages: 2,
            ..POPPLER
        };
        let parts = extract_with(split, input, &Limits::default(), &Control::default()).unwrap();
        assert_eq!(parts.markdown, whole.markdown);
        assert_eq!(parts.pages, whole.pages);
        assert_eq!(parts.metadata, whole.metadata);
        assert_eq!(parts.metadata.page_count, Some(18));
        // Without pdfinfo the document is read in one process, to the same text.
        let no_info = Poppler {
            pdfinfo: Tool {
                program: "shelf-no-such-pdfinfo",
                package: "poppler-utils",
            },
            ..split
        };
        let one = extract_with(no_info, input, &Limits::default(), &Control::default()).unwrap();
        assert_eq!(one.markdown, whole.markdown);
    }

    #[test]
    fn page_ranges_for_workers_and_reading_order() {
        assert_eq!(split_range(1, 10, 2, 64), vec![None]);
        assert_eq!(
            split_range(1, 1611, 2, 64),
            vec![Some((1, 806)), Some((807, 1611))]
        );
        assert_eq!(
            split_range(1, 100, 4, 30),
            vec![Some((1, 34)), Some((35, 68)), Some((69, 100))]
        );
        // Close pages share a run; far ones get their own; long runs are cut per worker.
        assert_eq!(reading_ranges(&[3, 5, 40], 2, 64), vec![(3, 5), (40, 40)]);
        assert_eq!(reading_ranges(&[1, 100], 2, 10), vec![(1, 1), (100, 100)]);
        let dense: Vec<u32> = (1..=200).collect();
        assert_eq!(reading_ranges(&dense, 2, 64), vec![(1, 100), (101, 200)]);
        // Scattered pages past the cap on runs are merged into fewer, longer runs.
        let scattered: Vec<u32> = (0..500).map(|i| 1 + i * 20).collect();
        assert!(reading_ranges(&scattered, 2, 64).len() <= MAX_READING_RANGES);
        assert_eq!(cut(5, 5, 3), vec![(5, 5)]);
        assert_eq!(
            cut(u32::MAX - 1, u32::MAX, 1),
            vec![(u32::MAX - 1, u32::MAX - 1), (u32::MAX, u32::MAX)]
        );
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
            ..POPPLER
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
