//! Transcript citations: where a quote sits in a document's transcript segments, with its
//! times. Pure functions over [`Segment`]s; the callers (exports, search results) load the
//! segments and decide whether to ask.
//!
//! Three strategies, tried in order, each only when the one before found nothing:
//! - `exact`: the trimmed quote appears verbatim in the segments' texts joined by one space
//!   (confidence 1.0);
//! - `normalized`: the quote's words appear in order and contiguous once case, punctuation and
//!   whitespace are folded (a word is a run of letters and digits; confidence
//!   [`NORMALIZED_CONFIDENCE`]);
//! - `fuzzy`: a token-level semi-global alignment (edit distance over words, a near-identical
//!   word costing less than a different one) picks the best window; it is accepted only when its
//!   similarity reaches [`FUZZY_THRESHOLD`] and the quote has at least [`MIN_FUZZY_TOKENS`]
//!   words. The similarity is the confidence (always below 1).
//!
//! A quote that is not in the transcript gives no citation: a missing citation is harmless, a
//! wrong one is not, so the fuzzy rules lean strict.

use serde::{Deserialize, Serialize};
use shelf_extractors::Segment;

/// The lowest similarity a fuzzy window needs to be cited.
pub const FUZZY_THRESHOLD: f64 = 0.8;
/// Fewer words than this are never matched fuzzily: on short quotes one wrong word is most of
/// the quote.
pub const MIN_FUZZY_TOKENS: usize = 4;
/// The confidence of a `normalized` match.
pub const NORMALIZED_CONFIDENCE: f64 = 0.95;
/// Quotes are cut to this many characters before matching (a citation is a sentence or a
/// paragraph, not a document).
pub const MAX_QUOTE_CHARS: usize = 4096;
/// The fuzzy alignment is skipped when quote words times transcript words pass this, so one
/// request cannot buy unbounded CPU.
const MAX_FUZZY_CELLS: usize = 40_000_000;
/// Words at least this long may match a near-identical word (one typo in five letters).
const MIN_NEAR_WORD_CHARS: usize = 4;

/// How a citation was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CitationStrategy {
    Exact,
    Normalized,
    Fuzzy,
}

impl CitationStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            CitationStrategy::Exact => "exact",
            CitationStrategy::Normalized => "normalized",
            CitationStrategy::Fuzzy => "fuzzy",
        }
    }
}

/// Where a quote was found in a transcript. A match across several segments covers them all:
/// `start_seconds` is the first one's start, `end_seconds` the last one's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptCitation {
    /// The matched transcript text (segments joined by one space).
    pub text: String,
    pub start_seconds: f64,
    pub end_seconds: f64,
    /// `index` of the first and last segment covered.
    pub segment_start: u32,
    pub segment_end: u32,
    pub strategy: CitationStrategy,
    /// 1.0 for `exact`, below 1 otherwise.
    pub confidence: f64,
}

/// The segments' texts joined by one space, with each segment's byte range in the result.
struct Joined {
    text: String,
    ranges: Vec<(usize, usize)>,
}

fn join(segments: &[Segment]) -> Joined {
    let mut text = String::new();
    let mut ranges = Vec::with_capacity(segments.len());
    for (i, segment) in segments.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        let start = text.len();
        // Line breaks inside a cue are spaces to a reader, and to an exact quote.
        text.extend(
            segment
                .text
                .chars()
                .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
        );
        ranges.push((start, text.len()));
    }
    Joined { text, ranges }
}

/// A word of the joined text: folded form and byte range in the joined text.
struct Token {
    folded: String,
    start: usize,
    end: usize,
}

/// Words: maximal runs of letters and digits, lowercased. Everything else separates words.
fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut current: Option<Token> = None;
    for (at, c) in text.char_indices() {
        if c.is_alphanumeric() {
            let token = current.get_or_insert_with(|| Token {
                folded: String::new(),
                start: at,
                end: at,
            });
            token.folded.extend(c.to_lowercase());
            token.end = at + c.len_utf8();
        } else if let Some(token) = current.take() {
            out.push(token);
        }
    }
    out.extend(current);
    out
}

/// Finds `quote` in `segments`: exact, then normalized, then fuzzy. `None` when the quote is
/// empty, has no words, or is not there.
pub fn cite(segments: &[Segment], quote: &str) -> Option<TranscriptCitation> {
    let quote: String = quote.trim().chars().take(MAX_QUOTE_CHARS).collect();
    let quote = quote.trim();
    if quote.is_empty() || segments.is_empty() {
        return None;
    }
    let joined = join(segments);
    let quote_flat: String = quote
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if let Some(start) = joined.text.find(&quote_flat) {
        return citation(
            segments,
            &joined,
            start,
            start + quote_flat.len(),
            CitationStrategy::Exact,
            1.0,
        );
    }
    let text_tokens = tokens(&joined.text);
    let quote_tokens: Vec<String> = tokens(quote).into_iter().map(|t| t.folded).collect();
    if quote_tokens.is_empty() || text_tokens.is_empty() {
        return None;
    }
    if let Some(first) = text_tokens
        .windows(quote_tokens.len())
        .position(|w| w.iter().zip(&quote_tokens).all(|(t, q)| t.folded == *q))
    {
        let last = first + quote_tokens.len() - 1;
        return citation(
            segments,
            &joined,
            text_tokens[first].start,
            text_tokens[last].end,
            CitationStrategy::Normalized,
            NORMALIZED_CONFIDENCE,
        );
    }
    let (first, last, similarity) = align(&quote_tokens, &text_tokens)?;
    if similarity < FUZZY_THRESHOLD {
        return None;
    }
    citation(
        segments,
        &joined,
        text_tokens[first].start,
        text_tokens[last].end,
        CitationStrategy::Fuzzy,
        // A fuzzy window that aligns perfectly would have been a normalized match.
        similarity.min(0.99),
    )
}

/// The citation of the byte range `start..end` of the joined text.
fn citation(
    segments: &[Segment],
    joined: &Joined,
    start: usize,
    end: usize,
    strategy: CitationStrategy,
    confidence: f64,
) -> Option<TranscriptCitation> {
    // The first segment that ends after `start`, the last that starts before `end` (a match
    // that begins or ends on the joining space belongs to the segments it touches).
    let first = joined.ranges.iter().position(|&(_, e)| e > start)?;
    let last = joined.ranges.iter().rposition(|&(s, _)| s < end)?;
    let (first, last) = (first.min(last), last.max(first));
    let text = joined.text.get(start..end)?.trim().to_string();
    Some(TranscriptCitation {
        text,
        start_seconds: segments[first].start_seconds,
        end_seconds: segments[first..=last]
            .iter()
            .map(|s| s.end_seconds)
            .fold(segments[first].end_seconds, f64::max),
        segment_start: segments[first].index,
        segment_end: segments[last].index,
        strategy,
        confidence,
    })
}

/// The best window of `text` for `quote` by semi-global alignment over words: the window may
/// start and end anywhere in the text; inside it, a missing or extra word costs 1, a different
/// word 1, a near-identical word (one edit in five letters) its character distance ratio.
/// Returns the window's first and last token and its similarity (1 - cost / quote length).
fn align(quote: &[String], text: &[Token]) -> Option<(usize, usize, f64)> {
    let n = quote.len();
    if n < MIN_FUZZY_TOKENS || n.saturating_mul(text.len()) > MAX_FUZZY_CELLS {
        return None;
    }
    let quote_chars: Vec<Vec<char>> = quote.iter().map(|q| q.chars().collect()).collect();
    // Rows over the text (j = 0..=m), one per quote word; `start[j]` is the text position where
    // the alignment ending at j began.
    let m = text.len();
    let mut prev_cost: Vec<f64> = vec![0.0; m + 1];
    let mut prev_start: Vec<usize> = (0..=m).collect();
    let mut cost = vec![0.0; m + 1];
    let mut start = vec![0usize; m + 1];
    for (i, q) in quote.iter().enumerate() {
        cost[0] = (i + 1) as f64;
        start[0] = 0;
        for j in 1..=m {
            let sub = substitution(q, &quote_chars[i], &text[j - 1].folded);
            let diagonal = prev_cost[j - 1] + sub;
            let up = prev_cost[j] + 1.0;
            let left = cost[j - 1] + 1.0;
            if diagonal <= up && diagonal <= left {
                cost[j] = diagonal;
                start[j] = prev_start[j - 1];
            } else if up <= left {
                cost[j] = up;
                start[j] = prev_start[j];
            } else {
                cost[j] = left;
                start[j] = start[j - 1];
            }
        }
        std::mem::swap(&mut prev_cost, &mut cost);
        std::mem::swap(&mut prev_start, &mut start);
    }
    let (end, best) = prev_cost
        .iter()
        .enumerate()
        .skip(1)
        .min_by(|a, b| a.1.total_cmp(b.1))?;
    let begin = prev_start[end];
    if begin >= end {
        return None;
    }
    let similarity = (1.0 - best / n as f64).max(0.0);
    Some((begin, end - 1, similarity))
}

/// The cost of aligning quote word `q` with text word `t`.
fn substitution(q: &str, q_chars: &[char], t: &str) -> f64 {
    if q == t {
        return 0.0;
    }
    let t_chars: Vec<char> = t.chars().collect();
    let longest = q_chars.len().max(t_chars.len());
    if q_chars.len().min(t_chars.len()) < MIN_NEAR_WORD_CHARS
        || q_chars.len().abs_diff(t_chars.len()) * 5 > longest
    {
        return 1.0;
    }
    let ratio = levenshtein(q_chars, &t_chars) as f64 / longest as f64;
    if ratio <= 0.2 { ratio } else { 1.0 }
}

fn levenshtein(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let change = usize::from(ca != cb);
            row[j + 1] = (prev[j] + change).min(prev[j + 1] + 1).min(row[j] + 1);
        }
        std::mem::swap(&mut prev, &mut row);
    }
    prev[b.len()]
}

/// `hh:mm:ss` of a time in seconds (rounded down; negative and non-finite times are 0).
pub fn clock(seconds: f64) -> String {
    let total = if seconds.is_finite() && seconds > 0.0 {
        seconds.floor() as u64
    } else {
        0
    };
    format!(
        "{:02}:{:02}:{:02}",
        total / 3600,
        (total / 60) % 60,
        total % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seg(index: u32, start: f64, end: f64, text: &str) -> Segment {
        Segment {
            index,
            start_seconds: start,
            end_seconds: end,
            speaker: None,
            text: text.to_string(),
        }
    }

    fn sample() -> Vec<Segment> {
        vec![
            seg(0, 11.0, 13.0, "We are in New York City"),
            seg(
                1,
                13.0,
                16.0,
                "We’re actually at the Lucern Hotel, just down the street",
            ),
            seg(2, 16.0, 18.0, "from the American Museum of Natural History"),
            seg(3, 18.0, 20.0, "And with me is Neil deGrasse Tyson"),
        ]
    }

    #[test]
    fn exact_match_inside_one_segment() {
        let c = cite(&sample(), "New York City").expect("cited");
        assert_eq!(c.strategy, CitationStrategy::Exact);
        assert_eq!(c.confidence, 1.0);
        assert_eq!((c.segment_start, c.segment_end), (0, 0));
        assert_eq!((c.start_seconds, c.end_seconds), (11.0, 13.0));
        assert_eq!(c.text, "New York City");
    }

    #[test]
    fn exact_match_across_segments_covers_them_all() {
        let c = cite(&sample(), "down the street from the American Museum").expect("cited");
        assert_eq!(c.strategy, CitationStrategy::Exact);
        assert_eq!((c.segment_start, c.segment_end), (1, 2));
        assert_eq!((c.start_seconds, c.end_seconds), (13.0, 18.0));
    }

    #[test]
    fn normalized_match_folds_case_punctuation_and_spaces() {
        let c = cite(&sample(), "we're ACTUALLY at the   lucern hotel just").expect("cited");
        assert_eq!(c.strategy, CitationStrategy::Normalized);
        assert!(c.confidence < 1.0);
        assert_eq!((c.segment_start, c.segment_end), (1, 1));
        assert_eq!(c.text, "We’re actually at the Lucern Hotel, just");
    }

    #[test]
    fn fuzzy_match_tolerates_a_wrong_word_and_a_typo() {
        let c = cite(
            &sample(),
            "the American Musuem of Natural History and with me is Neil Tyson",
        )
        .expect("cited");
        assert_eq!(c.strategy, CitationStrategy::Fuzzy);
        assert!(
            c.confidence >= FUZZY_THRESHOLD && c.confidence < 1.0,
            "{c:?}"
        );
        assert_eq!((c.segment_start, c.segment_end), (2, 3));
        assert_eq!((c.start_seconds, c.end_seconds), (16.0, 20.0));
    }

    #[test]
    fn absent_quotes_give_no_citation() {
        for quote in [
            "",
            "   ",
            "?!",
            "horses",
            "the history of horse breeding in Kentucky",
            "New York Museum of Modern Art and the Guggenheim",
            "we are in los angeles county",
        ] {
            assert_eq!(cite(&sample(), quote), None, "{quote:?}");
        }
        assert_eq!(cite(&[], "New York"), None);
    }

    #[test]
    fn short_quotes_are_never_fuzzy() {
        // One typo in a three-word quote is a third of it.
        assert_eq!(cite(&sample(), "New Yerk City"), None);
    }

    #[test]
    fn clock_formats_hours_minutes_seconds() {
        assert_eq!(clock(0.0), "00:00:00");
        assert_eq!(clock(11.9), "00:00:11");
        assert_eq!(clock(3725.0), "01:02:05");
        assert_eq!(clock(-3.0), "00:00:00");
        assert_eq!(clock(f64::NAN), "00:00:00");
    }

    fn words() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec("[a-z]{1,8}", 1..60)
    }

    proptest! {
        /// Any run of words cut from the transcript is found, by exact match, at segments
        /// that contain it.
        #[test]
        fn slices_of_the_transcript_are_found(
            words in words(),
            per in 1usize..6,
            from in 0usize..60,
            len in 1usize..12,
        ) {
            let segments: Vec<Segment> = words
                .chunks(per)
                .enumerate()
                .map(|(i, c)| seg(i as u32, i as f64 * 2.0, i as f64 * 2.0 + 2.0, &c.join(" ")))
                .collect();
            let from = from % words.len();
            let to = (from + len).min(words.len());
            let quote = words[from..to].join(" ");
            let c = cite(&segments, &quote).expect("a slice is always found");
            prop_assert_eq!(c.strategy, CitationStrategy::Exact);
            prop_assert!(c.segment_start <= c.segment_end);
            prop_assert!(c.start_seconds <= c.end_seconds);
            prop_assert!(c.text.contains(&quote) || quote.contains(&c.text));
        }

        /// Arbitrary input never panics, and every citation is consistent.
        #[test]
        fn any_input_is_safe(
            texts in prop::collection::vec(".{0,40}", 0..8),
            quote in ".{0,60}",
        ) {
            let segments: Vec<Segment> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| seg(i as u32, i as f64, i as f64 + 1.0, t))
                .collect();
            if let Some(c) = cite(&segments, &quote) {
                prop_assert!(c.segment_start <= c.segment_end);
                prop_assert!((c.segment_end as usize) < segments.len());
                prop_assert!(c.confidence > 0.0 && c.confidence <= 1.0);
                if c.strategy == CitationStrategy::Fuzzy {
                    prop_assert!(c.confidence >= FUZZY_THRESHOLD);
                }
            }
        }

        /// Quotes made of words the transcript does not have are never cited.
        #[test]
        fn foreign_words_are_never_cited(words in words(), quote in prop::collection::vec("[0-9]{3,6}", 1..10)) {
            let segments = vec![seg(0, 0.0, 1.0, &words.join(" "))];
            prop_assert_eq!(cite(&segments, &quote.join(" ")), None);
        }
    }
}
