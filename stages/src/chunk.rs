//! Splitting text into chunks a language model can clean, and checking that a cleaned chunk is
//! a copy-edit of its source rather than a summary.

use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSettings {
    /// Target size of a chunk, in characters.
    pub target_chars: usize,
    /// How much preceding text is sent along as read-only context, in characters.
    pub overlap_chars: usize,
}

impl Default for ChunkSettings {
    fn default() -> Self {
        ChunkSettings {
            target_chars: 12_000,
            overlap_chars: 800,
        }
    }
}

/// One piece of the source. Chunks partition the text exactly: concatenating every `text`
/// gives the source back. `context` is the text just before the chunk, for the model's
/// orientation only; it is never part of the output, so overlaps never duplicate text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub index: usize,
    pub text: String,
    pub context: String,
}

pub fn split(text: &str, settings: ChunkSettings) -> Vec<Chunk> {
    let target = settings.target_chars.max(100);
    let mut chunks = Vec::new();
    let mut start = 0usize; // byte offset
    while start < text.len() {
        let rest = &text[start..];
        let end = if rest.chars().count() <= target {
            text.len()
        } else {
            start + cut_point(rest, target)
        };
        let context_start = floor_char_boundary_back(text, start, settings.overlap_chars);
        chunks.push(Chunk {
            index: chunks.len(),
            text: text[start..end].to_string(),
            context: text[context_start..start].to_string(),
        });
        start = end;
    }
    chunks
}

/// Byte offset at most `target` characters into `rest` where a chunk should end: after a blank
/// line if there is one in the second half, else after a line break, a sentence, a space, or
/// at the limit itself.
fn cut_point(rest: &str, target: usize) -> usize {
    let limit = rest
        .char_indices()
        .nth(target)
        .map(|(i, _)| i)
        .unwrap_or(rest.len());
    let window = &rest[..limit];
    let half = limit / 2;
    for separator in ["\n\n", "\n", ". ", " "] {
        if let Some(i) = window.rfind(separator)
            && i >= half
        {
            return i + separator.len();
        }
    }
    limit
}

/// The byte offset `chars` characters before `end`.
fn floor_char_boundary_back(text: &str, end: usize, chars: usize) -> usize {
    if chars == 0 {
        return end;
    }
    text[..end]
        .char_indices()
        .rev()
        .nth(chars - 1)
        .map(|(i, _)| i)
        .unwrap_or(0)
        .min(end)
}

/// Reassembles cleaned chunks, keeping the paragraph structure at the seams.
pub fn join(sources: &[Chunk], cleaned: &[String]) -> String {
    let mut out = String::new();
    for (source, text) in sources.iter().zip(cleaned) {
        if !out.is_empty() {
            let seam = if source.context.ends_with("\n\n") {
                "\n\n"
            } else if source.context.ends_with('\n') {
                "\n"
            } else {
                " "
            };
            while out.ends_with(char::is_whitespace) {
                out.pop();
            }
            out.push_str(seam);
        }
        out.push_str(text.trim());
    }
    out
}

/// Whitespace normalization every cleaner applies: trailing spaces dropped, runs of spaces and
/// tabs collapsed, at most one blank line between paragraphs, no control characters.
pub fn normalize_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_lines = 0;
    for line in text.lines() {
        let mut collapsed = String::with_capacity(line.len());
        let mut last_space = false;
        for c in line.chars() {
            if c == ' ' || c == '\t' {
                if !last_space {
                    collapsed.push(' ');
                }
                last_space = true;
            } else if !c.is_control() {
                collapsed.push(c);
                last_space = false;
            }
        }
        let trimmed = collapsed.trim_end();
        if trimmed.is_empty() {
            blank_lines += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank_lines > 0 { "\n\n" } else { "\n" });
        }
        blank_lines = 0;
        out.push_str(trimmed);
    }
    out
}

/// Why a cleaned chunk is not a faithful copy-edit of its source, if it is not.
pub fn fidelity_problem(source: &str, cleaned: &str) -> Option<String> {
    let visible = |s: &str| s.chars().filter(|c| !c.is_whitespace()).count();
    let (a, b) = (visible(source), visible(cleaned));
    if a > 0 {
        let ratio = b as f64 / a as f64;
        let (low, high) = if a >= 200 { (0.7, 1.3) } else { (0.5, 2.0) };
        if !(low..=high).contains(&ratio) {
            return Some(format!(
                "cleaned length is {:.0}% of the source (allowed {:.0}-{:.0}%)",
                ratio * 100.0,
                low * 100.0,
                high * 100.0
            ));
        }
    }
    let kept = tokens(cleaned);
    let missing: Vec<String> = tokens(source).difference(&kept).take(3).cloned().collect();
    if !missing.is_empty() {
        return Some(format!(
            "{} number(s) or identifier(s) of the source are missing",
            missing.len()
        ));
    }
    None
}

/// Numbers of two or more digits, URLs and e-mail addresses: what a copy-edit must keep.
fn tokens(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for word in text.split_whitespace() {
        let word = word
            .trim_matches(|c: char| matches!(c, '.' | ',' | ';' | ':' | ')' | '(' | '"' | '\''));
        if word.contains("://") || (word.contains('@') && word.contains('.')) {
            out.insert(word.to_string());
        }
    }
    let mut digits = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if digits.len() >= 2 {
                out.insert(std::mem::take(&mut digits));
            }
            digits.clear();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_text_is_one_chunk() {
        let chunks = split("hello world", ChunkSettings::default());
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].text, "hello world");
        assert!(chunks[0].context.is_empty());
    }

    #[test]
    fn splits_at_paragraphs_with_context() {
        let para = "word ".repeat(30);
        let text = format!("{para}\n\n{para}\n\n{para}");
        let chunks = split(
            &text,
            ChunkSettings {
                target_chars: 200,
                overlap_chars: 20,
            },
        );
        assert!(chunks.len() >= 2);
        assert!(chunks[0].text.ends_with("\n\n"));
        assert_eq!(chunks[1].context.chars().count(), 20);
        let cleaned: Vec<String> = chunks.iter().map(|c| c.text.clone()).collect();
        assert_eq!(
            normalize_whitespace(&join(&chunks, &cleaned)),
            normalize_whitespace(&text)
        );
    }

    #[test]
    fn whitespace_is_normalized() {
        assert_eq!(
            normalize_whitespace("a  b\t\tc  \n\n\n\nd\r\ne\u{7}"),
            "a b c\n\nd\ne"
        );
    }

    #[test]
    fn fidelity_catches_summaries_and_lost_numbers() {
        let source = "The 1998 survey of 4,200 farms found 37 percent used horses. ".repeat(10);
        assert_eq!(fidelity_problem(&source, &source), None);
        assert!(fidelity_problem(&source, "Farms used horses.").is_some());
        let changed = source.replace("1998", "1989");
        assert!(
            fidelity_problem(&source, &changed)
                .unwrap()
                .contains("missing")
        );
    }

    proptest! {
        #[test]
        fn chunks_partition_the_text(text in "\\PC{0,3000}", target in 100usize..500, overlap in 0usize..100) {
            let chunks = split(&text, ChunkSettings { target_chars: target, overlap_chars: overlap });
            let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
            prop_assert_eq!(joined, text);
            for c in &chunks {
                prop_assert!(c.text.chars().count() <= target);
                prop_assert!(c.context.chars().count() <= overlap);
            }
        }
    }
}
