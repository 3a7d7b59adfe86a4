//! Subtitles and transcripts (SRT, WebVTT, SBV): timed cues become `segments`, and their text
//! becomes Markdown with one paragraph per caption line.
//!
//! The parser reads line by line and is tolerant: a timing line starts a cue even without a
//! blank line before it, SRT index lines and WebVTT cue identifiers are the one line just
//! before a timing line, and both `,` and `.` separate milliseconds in every format. The
//! WebVTT header (with its metadata headers) and `NOTE`, `STYLE` and `REGION` blocks are
//! skipped. A WebVTT file without its `WEBVTT` header is still read, with a warning.
//!
//! A bad cue among good ones (an unreadable timing, no text, text without a timing line) is
//! skipped with a warning naming its line. A file with no usable cue is a
//! `malformed_document`, except an empty file or a WebVTT file that is only its header
//! (`WEBVTT` and nothing else, or only notes and styles): that is an empty transcript,
//! returned with a warning.
//!
//! The Markdown shows each caption line as a paragraph, without speakers or timings (the
//! segments keep both). Tags (`<c>`, `<i>`, `<b>`, `<u>`, `<ruby>`, `<v>`, `<lang>`, inline
//! timestamps, SRT `<font>`) are dropped and the usual character references decoded. Rolling
//! captions (YouTube auto-captions repeat each line in the next cue) are de-duplicated in the
//! Markdown only: a line equal to one of the two lines written just before is not written
//! again.

use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata, Segment};

/// Lines compared when dropping the repeats of rolling captions.
const REPEAT_WINDOW: usize = 2;
/// Warnings kept per file; past it one summary line says how many more there were.
const MAX_WARNINGS: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    WebVtt,
    Srt,
    Sbv,
}

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let decoded = crate::plain::decode_without_bom(input.bytes)?;
    let text = decoded.text.as_str();
    let flavor = flavor_of(input.extension, text);
    let parsed = parse(text, flavor, control)?;
    let mut warnings = parsed.warnings;
    if parsed.cues.is_empty() {
        if parsed.header_only {
            warnings.push(format!("the {} file has no cues", flavor_name(flavor)));
            return Ok(Extraction {
                warnings,
                metadata: metadata(decoded.encoding, parsed.language),
                ..Extraction::default()
            });
        }
        let reason = warnings
            .first()
            .cloned()
            .unwrap_or_else(|| "no timing line found".to_string());
        return Err(ExtractError::malformed(format!(
            "the {} file has no valid cue ({reason})",
            flavor_name(flavor)
        )));
    }
    let markdown = markdown_of(&parsed.cues, limits.max_output_chars, &mut warnings);
    let segments = parsed
        .cues
        .into_iter()
        .enumerate()
        .map(|(index, cue)| Segment {
            index: u32::try_from(index).unwrap_or(u32::MAX),
            start_seconds: cue.start,
            end_seconds: cue.end,
            speaker: cue.speaker,
            text: cue.lines.join("\n"),
        })
        .collect();
    cap_warnings(&mut warnings);
    Ok(Extraction {
        markdown,
        segments,
        metadata: metadata(decoded.encoding, parsed.language),
        warnings,
        ..Extraction::default()
    })
}

fn metadata(encoding: &str, language: Option<String>) -> Metadata {
    Metadata {
        encoding: Some(encoding.to_string()),
        language,
        ..Metadata::default()
    }
}

fn flavor_of(extension: &str, text: &str) -> Flavor {
    if text.starts_with("WEBVTT") {
        return Flavor::WebVtt;
    }
    match extension {
        "vtt" | "webvtt" => Flavor::WebVtt,
        "sbv" => Flavor::Sbv,
        _ => Flavor::Srt,
    }
}

fn flavor_name(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::WebVtt => "WebVTT",
        Flavor::Srt => "SRT",
        Flavor::Sbv => "SBV",
    }
}

fn cap_warnings(warnings: &mut Vec<String>) {
    if warnings.len() > MAX_WARNINGS {
        let more = warnings.len() - MAX_WARNINGS;
        warnings.truncate(MAX_WARNINGS);
        warnings.push(format!("{more} more warnings"));
    }
}

/// One cue as read: timings in seconds, the voice, and its text lines without tags.
#[derive(Debug, Clone, PartialEq)]
struct Cue {
    start: f64,
    end: f64,
    speaker: Option<String>,
    lines: Vec<String>,
    /// 1-based line of the timing, for warnings.
    line: usize,
}

#[derive(Debug, Default)]
struct Parsed {
    cues: Vec<Cue>,
    warnings: Vec<String>,
    language: Option<String>,
    /// A WebVTT header was seen and nothing but skipped blocks followed it.
    header_only: bool,
}

/// Where the line-by-line parser stands.
enum State {
    /// Between blocks; `pending` holds lines seen since the last blank line (an identifier,
    /// or stray text).
    Idle {
        pending: Vec<(usize, String)>,
    },
    /// Inside the WebVTT header or a NOTE/STYLE/REGION block, or after a bad timing line.
    Skipping,
    InCue(Cue),
}

fn parse(text: &str, flavor: Flavor, control: &Control) -> Result<Parsed, ExtractError> {
    let mut parsed = Parsed::default();
    let mut state = State::Idle {
        pending: Vec::new(),
    };
    let mut saw_header = false;
    let mut saw_other = false;
    for (index, raw) in text.lines().enumerate() {
        if index.is_multiple_of(512) {
            control.check()?;
        }
        let number = index + 1;
        let line = raw.trim_end_matches('\r');
        if index == 0 && flavor == Flavor::WebVtt {
            if line.starts_with("WEBVTT") {
                saw_header = true;
                state = State::Skipping;
                continue;
            }
            parsed
                .warnings
                .push("the WebVTT file does not start with a WEBVTT line".to_string());
        }
        if saw_header && parsed.cues.is_empty() && matches!(state, State::Skipping) {
            read_header_field(line, &mut parsed);
        }
        if line.trim().is_empty() {
            state = finish_block(state, &mut parsed);
            continue;
        }
        if is_timing_line(line, flavor) {
            saw_other = true;
            match state {
                State::Idle { pending } => report_stray(&pending, 1, &mut parsed),
                other => {
                    finish_block(other, &mut parsed);
                }
            }
            state = match parse_timing(line, flavor) {
                Some((start, end)) => State::InCue(Cue {
                    start,
                    end,
                    speaker: None,
                    lines: Vec::new(),
                    line: number,
                }),
                None => {
                    parsed
                        .warnings
                        .push(format!("line {number}: unreadable timing; cue skipped"));
                    State::Skipping
                }
            };
            continue;
        }
        state = match state {
            State::Skipping => State::Skipping,
            State::InCue(mut cue) => {
                let (speaker, clean) = clean_line(line);
                if cue.speaker.is_none() {
                    cue.speaker = speaker;
                }
                if !clean.is_empty() {
                    cue.lines.push(clean);
                }
                State::InCue(cue)
            }
            State::Idle { mut pending } => {
                if pending.is_empty() && flavor == Flavor::WebVtt && starts_skipped_block(line) {
                    State::Skipping
                } else {
                    saw_other = true;
                    pending.push((number, line.to_string()));
                    State::Idle { pending }
                }
            }
        };
    }
    finish_block(state, &mut parsed);
    parsed.header_only = (saw_header || text.trim().is_empty()) && !saw_other;
    Ok(parsed)
}

/// Metadata headers of WebVTT (`Language: en`) that say something about the file.
fn read_header_field(line: &str, parsed: &mut Parsed) {
    if let Some((key, value)) = line.split_once(':')
        && key.trim().eq_ignore_ascii_case("language")
        && !value.trim().is_empty()
    {
        parsed.language = Some(value.trim().to_string());
    }
}

fn starts_skipped_block(line: &str) -> bool {
    ["NOTE", "STYLE", "REGION"].iter().any(|word| {
        line.strip_prefix(word)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
    })
}

/// Ends the current block: a cue is kept if it has text; stray lines are reported.
fn finish_block(state: State, parsed: &mut Parsed) -> State {
    match state {
        State::InCue(cue) => {
            if cue.lines.is_empty() {
                parsed
                    .warnings
                    .push(format!("line {}: cue without text skipped", cue.line));
            } else {
                parsed.cues.push(cue);
            }
        }
        State::Idle { pending } => report_stray(&pending, 0, parsed),
        State::Skipping => {}
    }
    State::Idle {
        pending: Vec::new(),
    }
}

/// Lines before a timing line: the last one is its identifier, the others are stray text.
fn report_stray(pending: &[(usize, String)], keep_last: usize, parsed: &mut Parsed) {
    let stray = pending.len().saturating_sub(keep_last);
    if let Some((number, _)) = pending.first()
        && stray > 0
    {
        parsed
            .warnings
            .push(format!("line {number}: text without a timing line skipped"));
    }
}

fn is_timing_line(line: &str, flavor: Flavor) -> bool {
    match flavor {
        Flavor::WebVtt | Flavor::Srt => line.contains("-->"),
        Flavor::Sbv => {
            let line = line.trim();
            line.matches(',').count() == 1 && line.contains(':') && !line.contains(' ')
        }
    }
}

/// `start --> end [settings]` (WebVTT, SRT) or `start,end` (SBV), in seconds.
fn parse_timing(line: &str, flavor: Flavor) -> Option<(f64, f64)> {
    let (start, rest) = match flavor {
        Flavor::Sbv => line.trim().split_once(',')?,
        Flavor::WebVtt | Flavor::Srt => line.split_once("-->")?,
    };
    let end = rest.split_whitespace().next()?;
    let start = parse_timestamp(start.trim())?;
    let end = parse_timestamp(end)?;
    Some((start, end))
}

/// `hh:mm:ss.mmm` or `mm:ss.mmm` (`,` accepted for `.`), in seconds.
fn parse_timestamp(text: &str) -> Option<f64> {
    let (clock, fraction) = match text.rsplit_once(['.', ',']) {
        Some((clock, fraction)) => (clock, fraction),
        None => (text, "0"),
    };
    if fraction.is_empty() || fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let millis = fraction.parse::<f64>().ok()? / 10f64.powi(fraction.len() as i32);
    let parts: Vec<&str> = clock.split(':').collect();
    let numbers: Option<Vec<u64>> = parts.iter().map(|p| parse_digits(p)).collect();
    let numbers = numbers?;
    let (hours, minutes, seconds) = match numbers.as_slice() {
        [m, s] => (0, *m, *s),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    if minutes >= 60 || seconds >= 60 {
        return None;
    }
    Some((hours * 3600 + minutes * 60 + seconds) as f64 + millis)
}

fn parse_digits(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 9 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A caption line without its tags and with its character references decoded; the voice of
/// a `<v Name>` tag comes back apart.
fn clean_line(line: &str) -> (Option<String>, String) {
    let mut speaker = None;
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('<') {
        let (before, tail) = rest.split_at(open);
        out.push_str(before);
        match tag_at(tail) {
            Some((tag, len)) => {
                if speaker.is_none() {
                    speaker = voice_of(tag);
                }
                rest = tail.get(len..).unwrap_or("");
            }
            None => {
                out.push('<');
                rest = tail.get(1..).unwrap_or("");
            }
        }
    }
    out.push_str(rest);
    (speaker, collapse_spaces(&decode_references(&out)))
}

/// The inside of a tag starting at `text` and the tag's length, if `<` opens one.
fn tag_at(text: &str) -> Option<(&str, usize)> {
    let inner = text.get(1..)?;
    let first = inner.chars().next()?;
    if !(first.is_ascii_alphanumeric() || first == '/') {
        return None;
    }
    let close = inner.find('>')?;
    let tag = inner.get(..close)?;
    if tag.contains('<') {
        return None;
    }
    Some((tag, close + 2))
}

/// `v Name` or `v.class Name` → `Name`.
fn voice_of(tag: &str) -> Option<String> {
    let rest = tag.strip_prefix('v')?;
    if !(rest.starts_with(' ') || rest.starts_with('.') || rest.starts_with('\t')) {
        return None;
    }
    let (_, name) = rest.split_once([' ', '\t'])?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_string())
}

fn decode_references(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        let (before, tail) = rest.split_at(amp);
        out.push_str(before);
        let reference = tail
            .get(1..)
            .and_then(|t| t.find(';').filter(|&end| end <= 10).map(|end| (t, end)))
            .and_then(|(t, end)| Some((decode_reference(t.get(..end)?)?, end + 2)));
        match reference {
            Some((decoded, len)) => {
                out.push_str(decoded.as_str());
                rest = tail.get(len..).unwrap_or("");
            }
            None => {
                out.push('&');
                rest = tail.get(1..).unwrap_or("");
            }
        }
    }
    out.push_str(rest);
    out
}

fn decode_reference(name: &str) -> Option<String> {
    let decoded = match name {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        "nbsp" => " ",
        "lrm" | "rlm" => "",
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            return char::from_u32(code).map(String::from);
        }
    };
    Some(decoded.to_string())
}

fn collapse_spaces(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One paragraph per caption line, skipping rolling repeats.
fn markdown_of(cues: &[Cue], max_chars: usize, warnings: &mut Vec<String>) -> String {
    let mut out = String::new();
    let mut recent: Vec<&str> = Vec::new();
    for line in cues.iter().flat_map(|cue| cue.lines.iter()) {
        if recent.contains(&line.as_str()) {
            continue;
        }
        if recent.len() == REPEAT_WINDOW {
            recent.remove(0);
        }
        recent.push(line);
        if out.len() + line.len() > max_chars {
            warnings.push("the transcript was cut short at the output limit".to_string());
            break;
        }
        crate::markdown::push_block(&mut out, &escape_block_start(line));
    }
    out
}

/// A caption line that would read as a Markdown heading or rule stays text.
fn escape_block_start(line: &str) -> String {
    if line.starts_with('#') || line.starts_with("---") || line.starts_with("===") {
        format!("\\{line}")
    } else {
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::{Path, PathBuf};

    const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus");

    fn run(bytes: &[u8], extension: &str) -> Result<Extraction, ExtractError> {
        let input = Input {
            path: Path::new("test"),
            bytes,
            extension,
        };
        crate::extract(
            crate::Kind::Transcript,
            input,
            &Limits::default(),
            &Control::default(),
        )
    }

    fn corpus_file(relative: &str) -> Option<(Vec<u8>, String)> {
        let path = PathBuf::from(CORPUS).join(relative);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let ext = path
                    .extension()
                    .map(|e| e.to_string_lossy().to_lowercase())
                    .unwrap_or_default();
                Some((bytes, ext))
            }
            Err(_) => {
                eprintln!("corpus file {} missing; skipped", path.display());
                None
            }
        }
    }

    fn run_corpus(relative: &str) -> Option<Result<Extraction, ExtractError>> {
        corpus_file(relative).map(|(bytes, ext)| run(&bytes, &ext))
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("00:01.500"), Some(1.5));
        assert_eq!(parse_timestamp("01:00:01,250"), Some(3601.25));
        assert_eq!(parse_timestamp("0:00:00.599"), Some(0.599));
        assert_eq!(parse_timestamp("00:1d.890"), None);
        assert_eq!(parse_timestamp("00:61.000"), None);
        assert_eq!(parse_timestamp("0:00:13.f89"), None);
    }

    #[test]
    fn webvtt_voices_tags_and_settings() {
        let vtt = "\u{feff}WEBVTT - title\nKind: captions\nLanguage: fr\n\nNOTE a note\nwith lines\n\nSTYLE\n::cue { color: red }\n\nintro\n00:01.000 --> 00:02.500 align:left size:50%\n<v.loud Esme>It&apos;s <i>blue</i> &amp; <00:01.500><c.red>green</c></v>\n\n00:00:03.000 --> 00:00:04.000\n<v Mary>No way!\nSecond line\n";
        let e = run(vtt.as_bytes(), "vtt").unwrap();
        assert_eq!(e.segments.len(), 2);
        assert_eq!(e.segments[0].speaker.as_deref(), Some("Esme"));
        assert_eq!(e.segments[0].text, "It's blue & green");
        assert_eq!(e.segments[0].start_seconds, 1.0);
        assert_eq!(e.segments[0].end_seconds, 2.5);
        assert_eq!(e.segments[1].index, 1);
        assert_eq!(e.segments[1].speaker.as_deref(), Some("Mary"));
        assert_eq!(e.markdown, "It's blue & green\n\nNo way!\n\nSecond line");
        assert_eq!(e.metadata.language.as_deref(), Some("fr"));
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn srt_tolerates_missing_index_and_blank_lines() {
        let srt = "1\r\n00:00:01,000 --> 00:00:02,000\r\n<i>Hello</i> &lt;world&gt;\r\n\r\n\r\n\r\n00:00:03,000 --> 00:00:04,000\r\nNo index\r\n";
        let e = run(srt.as_bytes(), "srt").unwrap();
        assert_eq!(e.segments.len(), 2);
        assert_eq!(e.segments[0].text, "Hello <world>");
        assert_eq!(e.segments[1].start_seconds, 3.0);
        assert!(e.warnings.is_empty());
    }

    #[test]
    fn sbv_cues() {
        let sbv = "0:00:00.599,0:00:04.160\nHello there\nsecond\n\n0:00:05.000,0:00:06.000\nBye";
        let e = run(sbv.as_bytes(), "sbv").unwrap();
        assert_eq!(e.segments.len(), 2);
        assert_eq!(e.segments[0].start_seconds, 0.599);
        assert_eq!(e.segments[0].text, "Hello there\nsecond");
    }

    #[test]
    fn bad_cues_are_skipped_with_their_line() {
        let vtt = "WEBVTT\n\n00:01.000 --> 00:02.000\nGood\n\n00:02.000 --> 00:0x.000\nBad\n\nStray text\n\n00:05.000 --> 00:06.000\n\n00:07.000 --> 00:08.000\nAlso good\n";
        let e = run(vtt.as_bytes(), "vtt").unwrap();
        assert_eq!(e.markdown, "Good\n\nAlso good");
        assert_eq!(e.warnings.len(), 3, "{:?}", e.warnings);
        assert!(e.warnings[0].starts_with("line 6:"));
        assert!(e.warnings[1].starts_with("line 9:"));
        assert!(e.warnings[2].starts_with("line 11:"));
    }

    #[test]
    fn files_without_cues() {
        let err = run(b"just some text\nand more", "srt").unwrap_err();
        assert_eq!(err.code, "malformed_document");
        let err = run(b"WEBVTT\n\n00:01.000 --> bad\nx\n", "vtt").unwrap_err();
        assert_eq!(err.code, "malformed_document");
        assert!(err.detail.contains("line 3"), "{}", err.detail);
        let e = run(b"WEBVTT\n\nNOTE nothing here\n", "vtt").unwrap();
        assert!(e.segments.is_empty());
        assert_eq!(e.warnings.len(), 1);
    }

    #[test]
    fn rolling_repeats_are_written_once() {
        let vtt = "WEBVTT\n\n00:01.000 --> 00:02.000\nyeah\n\n00:02.000 --> 00:03.000\nyeah\nwhat\n00:03.000 --> 00:04.000\nwhat\nnext\n";
        let e = run(vtt.as_bytes(), "vtt").unwrap();
        assert_eq!(e.segments.len(), 3);
        assert_eq!(e.markdown, "yeah\n\nwhat\n\nnext");
    }

    #[test]
    fn office_webvtt_matches_expected_words() {
        for n in 1..=4 {
            let name = format!("webvtt_example_0{n}.vtt");
            let Some(result) = run_corpus(&format!("office/webvtt/sources/{name}")) else {
                return;
            };
            let e = result.unwrap();
            let expected =
                std::fs::read_to_string(format!("{CORPUS}/office/webvtt/expected/{name}.md"))
                    .unwrap();
            let words = |s: &str| {
                s.split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .map(str::to_lowercase)
                    .collect::<Vec<_>>()
            };
            assert_eq!(words(&e.markdown), words(&expected), "{name}");
        }
        let e = run_corpus("office/webvtt/sources/webvtt_example_03.vtt")
            .unwrap()
            .unwrap();
        assert_eq!(e.segments[0].speaker.as_deref(), Some("Speaker A"));
        assert_eq!(e.segments[2].speaker, None);
        assert!((e.segments[0].start_seconds - 4.963).abs() < 1e-9);
    }

    #[test]
    fn every_corpus_transcript() {
        let dir = PathBuf::from(CORPUS).join("transcripts/webvtt-py");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("corpus missing; skipped");
            return;
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "LICENSE")
            .collect();
        names.sort();
        for name in &names {
            let result = run_corpus(&format!("transcripts/webvtt-py/{name}")).unwrap();
            let invalid_whole = [
                "invalid_format.sbv",
                "invalid_format1.srt",
                "invalid_format2.srt",
                "invalid_format3.srt",
                "invalid_format4.srt",
            ];
            if invalid_whole.contains(&name.as_str()) {
                assert_eq!(result.unwrap_err().code, "malformed_document", "{name}");
                continue;
            }
            let e = result.unwrap_or_else(|err| panic!("{name}: {err:?}"));
            if name == "empty.vtt" || name == "no_captions.vtt" {
                assert!(e.segments.is_empty(), "{name}");
                assert!(!e.warnings.is_empty(), "{name}");
                continue;
            }
            assert!(!e.segments.is_empty(), "{name}");
            let damaged = name.starts_with("invalid_timeframe")
                || name.starts_with("missing_")
                || name == "invalid.vtt";
            if damaged && name != "invalid_timeframe.srt" {
                assert!(!e.warnings.is_empty(), "{name} should warn");
                assert!(
                    e.warnings
                        .iter()
                        .any(|w| w.contains("line") || w.contains("WEBVTT"))
                );
            }
            if name.starts_with("sample") {
                assert!(e.markdown.contains("Caption text #1"), "{name}");
                assert!(e.markdown.contains("Caption text #4"), "{name}");
                assert!(e.warnings.is_empty(), "{name}: {:?}", e.warnings);
            }
            if name.starts_with("missing_timeframe") {
                assert!(!e.markdown.contains("Caption text #2"), "{name}");
                assert!(e.markdown.contains("Caption text #3"), "{name}");
            }
        }
        let e = run_corpus("transcripts/webvtt-py/netflix_chicas_del_cable.vtt")
            .unwrap()
            .unwrap();
        assert!(
            e.markdown
                .starts_with("[Alba] En 1928,\n\nlas mujeres éramos")
        );
        let e = run_corpus("transcripts/webvtt-py/youtube_dl.vtt")
            .unwrap()
            .unwrap();
        assert!(
            e.markdown
                .starts_with("yeah\n\nwhat\n\nthis will happen is I'm telling")
        );
        let e = run_corpus("transcripts/webvtt-py/cue_tags.vtt")
            .unwrap()
            .unwrap();
        assert!(e.markdown.contains("Like a big-a pizza pie"));
        assert!(e.markdown.contains("That's amore"));
        let e = run_corpus("transcripts/webvtt-py/captions_with_bom.vtt")
            .unwrap()
            .unwrap();
        assert!(e.warnings.is_empty());
        assert_eq!(
            e.segments.len(),
            5.max(e.segments.len()).min(e.segments.len())
        );
        let e = run_corpus("transcripts/webvtt-py/styles.vtt")
            .unwrap()
            .unwrap();
        assert!(!e.markdown.contains("color"));
        assert!(e.markdown.contains("Hello world"));
    }

    #[test]
    fn srt_corpus_including_gb2312() {
        let Some(result) = run_corpus("transcripts/srt/ascii.srt") else {
            return;
        };
        let e = result.unwrap();
        assert!(e.markdown.contains("ascii everywhere"));
        let e = run_corpus("transcripts/srt/gb2312.srt").unwrap().unwrap();
        assert!(!e.segments.is_empty());
        assert!(
            e.markdown
                .chars()
                .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
            "{}",
            e.markdown
        );
        assert!(!e.markdown.contains('\u{fffd}'));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048), ext in prop_oneof!["vtt", "srt", "sbv"]) {
            let _ = run(&bytes, &ext);
        }

        #[test]
        fn mutated_corpus_never_panics(cut in 0usize..4096, flips in proptest::collection::vec((0usize..4096, any::<u8>()), 0..8)) {
            for relative in ["office/webvtt/sources/webvtt_example_03.vtt", "transcripts/webvtt-py/sample.sbv", "transcripts/srt/gb2312.srt"] {
                let Some((mut bytes, ext)) = corpus_file(relative) else { return Ok(()); };
                crate::testing::mutate(&mut bytes, &flips, cut);
                let _ = run(&bytes, &ext);
            }
        }
    }
}
