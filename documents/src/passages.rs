//! Passages and their vectors: the splitter that cuts a cleaned text (or a transcript's cues)
//! into passages of about [`PASSAGE_TOKENS`] tokens on sentence and paragraph boundaries, and
//! the `document_passages` table that keeps each passage with the embedding the `embed` stage
//! computed for it and the identity of the model that computed it.
//!
//! A document has one set of passages, its latest embedding run's: a run's statements delete
//! the document's rows and insert its own in the same transaction (like the index), so a reader
//! sees the old set or the new one, never a mix. Rows of another model than the configured one
//! are stale: search ignores them and the backfill replaces them. This crate never embeds: the
//! vectors come from the caller (the `embed` stage, through `shelf-embed`).

use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult, Statement, Value};
use serde::Serialize;
use shelf_db::sql::SqlExt;

use crate::error::{DocumentsError, Result};
use crate::sql::{begin_immediate, get_u64, now_timestamp, stmt, to_i64};
use shelf_extractors::Segment;

/// Tokens a passage aims at (all-MiniLM-L6-v2 reads 256 word pieces).
pub const PASSAGE_TOKENS: usize = 256;
/// Tokens of the previous passage a passage starts with: one or two sentences, so a thought cut
/// at a passage's end is whole in the next one.
pub const OVERLAP_TOKENS: usize = 32;

/// Rows per insert: 11 values a row, far under SQLite's bound-value limit.
const BATCH_ROWS: usize = 200;

/// One passage of a text: its text, where it is in the text (in characters, Unicode scalar
/// values, end exclusive) and, for a transcript, the start time of its first cue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Passage {
    pub text: String,
    pub char_start: u64,
    pub char_end: u64,
    pub start_seconds: Option<f64>,
}

/// A stretch of the source that is never cut (a sentence, a line, a cue, or a word of one
/// that is over the budget): byte and char range, its tokens and the start time it carries.
#[derive(Debug, Clone, Copy)]
struct Unit {
    bytes: (usize, usize),
    chars: (usize, usize),
    tokens: usize,
    start_seconds: Option<f64>,
}

/// Cuts `text` into passages of at most `max_tokens` tokens as `budget` counts them (the
/// embedder's tokenizer without its special tokens; a word count in tests), each starting with
/// up to `overlap_tokens` tokens of the previous one's last sentences.
///
/// Sentences (ending in `.`, `!` or `?` before whitespace) and lines are never cut, except a
/// sentence over the budget, which is cut between words; a single word over the budget is a
/// passage of its own. Passages are trimmed of surrounding whitespace and come in text order;
/// every non-whitespace character of `text` is in at least one. `budget` is taken to be
/// additive over whitespace-separated pieces, which holds for WordPiece (BERT's pre-tokenizer
/// splits on whitespace first) and for a word count.
pub fn split_passages(
    text: &str,
    budget: &dyn Fn(&str) -> usize,
    max_tokens: usize,
    overlap_tokens: usize,
) -> Vec<Passage> {
    let units = sentence_units(text, budget, None);
    pack(
        text,
        &cut_long(text, units, budget, max_tokens),
        max_tokens,
        overlap_tokens,
    )
}

/// Cuts a transcript into passages of whole cues (a cue over the budget cut between words),
/// each with the start time of its first cue, so a hit can cite a time. The passages' text and
/// character ranges are those of the cues' trimmed texts joined by newlines (empty cues left
/// out).
pub fn split_transcript(
    segments: &[Segment],
    budget: &dyn Fn(&str) -> usize,
    max_tokens: usize,
    overlap_tokens: usize,
) -> Vec<Passage> {
    let mut joined = String::new();
    let mut units = Vec::new();
    let mut chars = 0usize;
    for segment in segments {
        let cue = segment.text.trim();
        if cue.is_empty() {
            continue;
        }
        if !joined.is_empty() {
            joined.push('\n');
            chars += 1;
        }
        let start = joined.len();
        joined.push_str(cue);
        let count = cue.chars().count();
        units.push(Unit {
            bytes: (start, joined.len()),
            chars: (chars, chars + count),
            tokens: budget(cue),
            start_seconds: Some(segment.start_seconds).filter(|s| s.is_finite()),
        });
        chars += count;
    }
    pack(
        &joined,
        &cut_long(&joined, units, budget, max_tokens),
        max_tokens,
        overlap_tokens,
    )
}

/// The sentences and lines of `text`, trimmed, empty ones left out.
fn sentence_units(
    text: &str,
    budget: &dyn Fn(&str) -> usize,
    start_seconds: Option<f64>,
) -> Vec<Unit> {
    let mut units = Vec::new();
    // (byte, char) of the unit's first non-whitespace character and just after its last.
    let mut start: Option<(usize, usize)> = None;
    let mut end = (0usize, 0usize);
    let mut close = |start: &mut Option<(usize, usize)>, end: (usize, usize)| {
        if let Some((b, c)) = start.take() {
            units.push(Unit {
                bytes: (b, end.0),
                chars: (c, end.1),
                tokens: budget(&text[b..end.0]),
                start_seconds,
            });
        }
    };
    let mut iter = text.char_indices().enumerate().peekable();
    while let Some((ci, (bi, c))) = iter.next() {
        if c.is_whitespace() {
            if c == '\n' {
                close(&mut start, end);
            }
            continue;
        }
        if start.is_none() {
            start = Some((bi, ci));
        }
        end = (bi + c.len_utf8(), ci + 1);
        let terminal = matches!(c, '.' | '!' | '?' | '。' | '！' | '？');
        if terminal
            && iter
                .peek()
                .is_none_or(|(_, (_, next))| next.is_whitespace())
        {
            close(&mut start, end);
        }
    }
    close(&mut start, end);
    units
}

/// Replaces every unit over `max_tokens` by runs of its words that fit (a word over the
/// budget alone).
fn cut_long(
    text: &str,
    units: Vec<Unit>,
    budget: &dyn Fn(&str) -> usize,
    max_tokens: usize,
) -> Vec<Unit> {
    let mut out = Vec::with_capacity(units.len());
    for unit in units {
        if unit.tokens <= max_tokens {
            out.push(unit);
            continue;
        }
        let mut piece: Option<Unit> = None;
        for mut word in words(text, unit) {
            word.tokens = budget(&text[word.bytes.0..word.bytes.1]);
            match piece.as_mut() {
                Some(p) if p.tokens + word.tokens <= max_tokens => {
                    p.bytes.1 = word.bytes.1;
                    p.chars.1 = word.chars.1;
                    p.tokens += word.tokens;
                }
                _ => {
                    out.extend(piece.take());
                    piece = Some(word);
                }
            }
        }
        out.extend(piece);
    }
    out
}

/// The whitespace-separated words of a unit, with their token counts.
fn words(text: &str, unit: Unit) -> Vec<Unit> {
    let mut out = Vec::new();
    let slice = &text[unit.bytes.0..unit.bytes.1];
    let mut start: Option<(usize, usize)> = None;
    let mut ci = unit.chars.0;
    let mut push = |from: (usize, usize), to: (usize, usize)| {
        let (b0, b1) = (unit.bytes.0 + from.0, unit.bytes.0 + to.0);
        out.push(Unit {
            bytes: (b0, b1),
            chars: (from.1, to.1),
            tokens: 0,
            start_seconds: unit.start_seconds,
        });
    };
    for (bi, c) in slice.char_indices() {
        if c.is_whitespace() {
            if let Some(from) = start.take() {
                push(from, (bi, ci));
            }
        } else if start.is_none() {
            start = Some((bi, ci));
        }
        ci += 1;
    }
    if let Some(from) = start {
        push(from, (slice.len(), ci));
    }
    out
}

/// Packs units into passages greedily, each next one starting with the last units of the
/// previous worth at most `overlap_tokens` (none when they would leave no room for a new unit).
fn pack(text: &str, units: &[Unit], max_tokens: usize, overlap_tokens: usize) -> Vec<Passage> {
    let mut passages = Vec::new();
    let mut i = 0;
    while i < units.len() {
        let mut j = i;
        let mut tokens = 0usize;
        while j < units.len() && (j == i || tokens + units[j].tokens <= max_tokens) {
            tokens += units[j].tokens;
            j += 1;
        }
        let (first, last) = (units[i], units[j - 1]);
        passages.push(Passage {
            text: text[first.bytes.0..last.bytes.1].to_string(),
            char_start: first.chars.0 as u64,
            char_end: last.chars.1 as u64,
            start_seconds: first.start_seconds,
        });
        if j == units.len() {
            break;
        }
        let mut k = j;
        let mut overlap = 0usize;
        while k > i + 1 && overlap + units[k - 1].tokens <= overlap_tokens {
            overlap += units[k - 1].tokens;
            k -= 1;
        }
        i = if overlap + units[j].tokens <= max_tokens {
            k
        } else {
            j
        };
    }
    passages
}

/// A passage as stored, with its vector.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredPassage {
    pub position: u32,
    pub run_id: String,
    pub text: String,
    pub char_start: u64,
    pub char_end: u64,
    pub start_seconds: Option<f64>,
    /// The identity of the model that computed the vector.
    pub model: String,
    pub vector: Vec<f32>,
}

/// Counts for monitoring and the backfill's progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PassageCounts {
    /// Passages of the current model.
    pub passages: u64,
    /// Passages of any other model (replaced by the backfill).
    pub stale_passages: u64,
    /// Documents with passages of the current model.
    pub embedded_documents: u64,
    /// Ready, indexed documents without passages of the current model (the backfill's work;
    /// a document whose cleaned text is empty stays here, having no passage to embed).
    pub pending_documents: u64,
}

/// The vector as stored: little-endian `f32`s.
pub fn vector_to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A stored vector; `None` when the bytes are not a whole number of `f32`s.
pub fn vector_from_bytes(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    )
}

/// The statements that make `passages` (with their vectors, in order: position 0, 1, …) the
/// document's passages, written by `run_id` with `model`, replacing every passage it had (of
/// any run and model), for the engine's `write_on_success` (or a caller's transaction).
/// `Corrupt` when the vectors are empty, of different lengths, or not finite: the embedder's
/// output is checked before it is stored.
pub fn put_passages_statements(
    document_id: &str,
    run_id: &str,
    model: &str,
    passages: &[(Passage, Vec<f32>)],
) -> Result<Vec<Statement>> {
    let dims = passages.first().map_or(0, |(_, v)| v.len());
    for (index, (_, vector)) in passages.iter().enumerate() {
        if vector.is_empty() || vector.len() != dims || !vector.iter().all(|v| v.is_finite()) {
            return Err(DocumentsError::corrupt(format!(
                "passage {index} of {document_id}: a vector of {} values, expected {dims} finite",
                vector.len()
            )));
        }
    }
    let mut statements = vec![delete_passages_statement(document_id)];
    let created_at = now_timestamp();
    for (batch_index, batch) in passages.chunks(BATCH_ROWS).enumerate() {
        let placeholders = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"; batch.len()].join(", ");
        let mut values: Vec<Value> = Vec::with_capacity(batch.len() * 11);
        for (offset, (passage, vector)) in batch.iter().enumerate() {
            let position = batch_index * BATCH_ROWS + offset;
            values.push(document_id.to_string().into());
            values.push(run_id.to_string().into());
            values.push(to_i64(position as u64).into());
            values.push(passage.text.clone().into());
            values.push(passage.start_seconds.filter(|s| s.is_finite()).into());
            values.push(to_i64(passage.char_start).into());
            values.push(to_i64(passage.char_end).into());
            values.push(model.to_string().into());
            values.push(to_i64(dims as u64).into());
            values.push(vector_to_bytes(vector).into());
            values.push(created_at.clone().into());
        }
        statements.push(stmt(
            &format!(
                "INSERT INTO document_passages (document_id, run_id, position, text, \
                 start_seconds, char_start, char_end, model, dims, vector, created_at) \
                 VALUES {placeholders}"
            ),
            values,
        ));
    }
    Ok(statements)
}

/// Deletes every passage of the document (its delete and a re-embedding start with it).
pub fn delete_passages_statement(document_id: &str) -> Statement {
    stmt(
        "DELETE FROM document_passages WHERE document_id = ?",
        [document_id.to_string().into()],
    )
}

/// [`put_passages_statements`] in one IMMEDIATE transaction, outside a run (tests, tools).
pub async fn put_passages(
    db: &DatabaseConnection,
    document_id: &str,
    run_id: &str,
    model: &str,
    passages: &[(Passage, Vec<f32>)],
) -> Result<()> {
    let statements = put_passages_statements(document_id, run_id, model, passages)?;
    let txn = begin_immediate(db).await?;
    txn.execute_all_sql(statements).await?;
    txn.commit().await?;
    Ok(())
}

/// The document's passages with their vectors, in order (any model).
pub async fn document_passages(
    conn: &impl ConnectionTrait,
    document_id: &str,
) -> Result<Vec<StoredPassage>> {
    let rows = conn
        .query_all_sql(stmt(
            "SELECT position, run_id, text, char_start, char_end, start_seconds, model, vector \
             FROM document_passages WHERE document_id = ? ORDER BY position",
            [document_id.to_string().into()],
        ))
        .await?;
    rows.iter().map(passage_from_row).collect()
}

fn passage_from_row(row: &QueryResult) -> Result<StoredPassage> {
    let position: i64 = row.try_get("", "position")?;
    let bytes: Vec<u8> = row.try_get("", "vector")?;
    let vector = vector_from_bytes(&bytes).ok_or_else(|| {
        DocumentsError::corrupt(format!(
            "passage {position}: a vector of {} bytes",
            bytes.len()
        ))
    })?;
    Ok(StoredPassage {
        position: u32::try_from(position).unwrap_or(u32::MAX),
        run_id: row.try_get("", "run_id")?,
        text: row.try_get("", "text")?,
        char_start: get_u64(row, "char_start")?,
        char_end: get_u64(row, "char_end")?,
        start_seconds: row.try_get("", "start_seconds")?,
        model: row.try_get("", "model")?,
        vector,
    })
}

/// The condition of a document the backfill embeds for `model`: ready, in the search index
/// (so it has a cleaned text), and without passages of `model` (none, or stale ones).
const PENDING_CONDITION: &str = "d.status = 'ready' \
     AND EXISTS (SELECT 1 FROM search_documents s WHERE s.pk = d.pk) \
     AND NOT EXISTS (SELECT 1 FROM document_passages p \
     WHERE p.document_id = d.id AND p.model = ?)";

/// Up to `limit` ids of documents that need embedding with `model` (see [`PassageCounts`]'s
/// `pending_documents`), in id order after `after`: the backfill walks them with the last id
/// it saw, so a document that yields no passage (an empty text) is passed once, not forever,
/// and a restarted backfill starts again from `None`.
pub async fn stale_documents(
    conn: &impl ConnectionTrait,
    model: &str,
    after: Option<&str>,
    limit: u64,
) -> Result<Vec<String>> {
    let rows = conn
        .query_all_sql(stmt(
            &format!(
                "SELECT d.id AS id FROM documents d WHERE {PENDING_CONDITION} AND d.id > ? \
                 ORDER BY d.id LIMIT ?"
            ),
            [
                model.to_string().into(),
                after.unwrap_or("").to_string().into(),
                to_i64(limit).into(),
            ],
        ))
        .await?;
    rows.iter()
        .map(|row| Ok(row.try_get::<String>("", "id")?))
        .collect()
}

/// Counts of passages and documents for `model` (monitoring, the backfill's progress bar).
pub async fn passage_counts(conn: &impl ConnectionTrait, model: &str) -> Result<PassageCounts> {
    let row = conn
        .query_one_sql(stmt(
            &format!(
                "SELECT \
                 (SELECT count(*) FROM document_passages WHERE model = ?) AS passages, \
                 (SELECT count(*) FROM document_passages WHERE model <> ?) AS stale, \
                 (SELECT count(DISTINCT document_id) FROM document_passages WHERE model = ?) \
                 AS embedded, \
                 (SELECT count(*) FROM documents d WHERE {PENDING_CONDITION}) AS pending"
            ),
            [
                model.to_string().into(),
                model.to_string().into(),
                model.to_string().into(),
                model.to_string().into(),
            ],
        ))
        .await?;
    let Some(row) = row else {
        return Ok(PassageCounts::default());
    };
    Ok(PassageCounts {
        passages: get_u64(&row, "passages")?,
        stale_passages: get_u64(&row, "stale")?,
        embedded_documents: get_u64(&row, "embedded")?,
        pending_documents: get_u64(&row, "pending")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn words_of(s: &str) -> usize {
        s.split_whitespace().count()
    }

    fn chars_of(text: &str, p: &Passage) -> String {
        text.chars()
            .skip(p.char_start as usize)
            .take((p.char_end - p.char_start) as usize)
            .collect()
    }

    #[test]
    fn sentences_pack_with_overlap() {
        let text = "One two three. Four five six.\n\nSeven eight. Nine ten eleven twelve.";
        let passages = split_passages(text, &words_of, 6, 2);
        let texts: Vec<&str> = passages.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "One two three. Four five six.",
                "Seven eight. Nine ten eleven twelve."
            ]
        );
        // Overlap: "Seven eight." (2 words) is repeated when room allows.
        let passages = split_passages(text, &words_of, 7, 3);
        let texts: Vec<&str> = passages.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "One two three. Four five six.",
                "Four five six.\n\nSeven eight.",
                "Seven eight. Nine ten eleven twelve."
            ]
        );
        for p in &passages {
            assert_eq!(chars_of(text, p), p.text);
        }
    }

    #[test]
    fn a_long_sentence_is_cut_between_words_and_a_long_word_stands_alone() {
        let text = "a b c d e f g h";
        let texts: Vec<String> = split_passages(text, &words_of, 3, 0)
            .into_iter()
            .map(|p| p.text)
            .collect();
        assert_eq!(texts, ["a b c", "d e f", "g h"]);
        let chars = |s: &str| s.chars().count();
        let texts: Vec<String> = split_passages("ab éééééé cd", &chars, 4, 0)
            .into_iter()
            .map(|p| p.text)
            .collect();
        assert_eq!(texts, ["ab", "éééééé", "cd"]);
        assert!(split_passages("  \n\n ", &words_of, 4, 1).is_empty());
    }

    #[test]
    fn transcripts_group_cues_with_the_first_start() {
        let cue = |index: u32, start: f64, text: &str| Segment {
            index,
            start_seconds: start,
            end_seconds: start + 1.0,
            speaker: None,
            text: text.into(),
        };
        let cues = [
            cue(0, 0.0, "hello there"),
            cue(1, 2.5, "general kenobi"),
            cue(2, 4.0, " "),
            cue(3, 5.0, "you are a bold one"),
        ];
        let passages = split_transcript(&cues, &words_of, 5, 0);
        assert_eq!(passages.len(), 2);
        assert_eq!(passages[0].text, "hello there\ngeneral kenobi");
        assert_eq!(passages[0].start_seconds, Some(0.0));
        assert_eq!(passages[1].text, "you are a bold one");
        assert_eq!(passages[1].start_seconds, Some(5.0));
        assert_eq!((passages[1].char_start, passages[1].char_end), (27, 45));
    }

    #[test]
    fn vectors_round_trip_their_bytes() {
        let v = vec![0.5f32, -1.25, 3.0e-7];
        assert_eq!(vector_from_bytes(&vector_to_bytes(&v)), Some(v));
        assert_eq!(vector_from_bytes(&[1, 2, 3]), None);
        let bad = put_passages_statements(
            "doc",
            "run",
            "m",
            &[
                (
                    Passage {
                        text: "a".into(),
                        char_start: 0,
                        char_end: 1,
                        start_seconds: None,
                    },
                    vec![1.0, 0.0],
                ),
                (
                    Passage {
                        text: "b".into(),
                        char_start: 2,
                        char_end: 3,
                        start_seconds: None,
                    },
                    vec![1.0],
                ),
            ],
        );
        assert!(bad.is_err(), "vectors of different lengths are refused");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn passages_cover_the_text_in_order_within_budget(
            text in "(\\PC{0,12}[ .!?\n]{0,3}){0,60}",
            max in 1usize..24,
            overlap in 0usize..8,
        ) {
            let passages = split_passages(&text, &words_of, max, overlap);
            let total = text.chars().count() as u64;
            let mut covered = vec![false; total as usize];
            let mut previous: Option<&Passage> = None;
            for p in &passages {
                prop_assert!(p.char_start < p.char_end && p.char_end <= total);
                prop_assert_eq!(chars_of(&text, p), p.text.clone());
                prop_assert_eq!(p.text.trim(), p.text.as_str());
                let words = words_of(&p.text);
                prop_assert!(words <= max || words == 1, "{} words over {}", words, max);
                if let Some(q) = previous {
                    prop_assert!(p.char_start > q.char_start, "in order");
                    prop_assert!(p.char_end > q.char_end, "each adds text");
                }
                for c in p.char_start..p.char_end {
                    covered[c as usize] = true;
                }
                previous = Some(p);
            }
            for (i, c) in text.chars().enumerate() {
                prop_assert!(c.is_whitespace() || covered[i], "char {} ({:?}) uncovered", i, c);
            }
        }

        #[test]
        fn any_text_splits_without_panicking(text in "\\PC*", max in 0usize..50, overlap in 0usize..60) {
            let chars = |s: &str| s.chars().count();
            let _ = split_passages(&text, &chars, max, overlap);
            let _ = split_passages(&text, &words_of, max, overlap);
        }
    }
}
