//! Query normalization: user text into quoted FTS5 terms (no user syntax reaches `MATCH`),
//! with the content terms left after stop words and the text each term came from.

use crate::error::{DocumentsError, Result};

use super::stop_words::is_stop_word;

/// Queries with at most this many content terms (terms left after stop words) are keyword
/// queries: `auto` requires all of them first. Longer queries are natural-language
/// questions, matched on any content term and ranked by BM25, which finds more relevant
/// documents (measured on Cranfield, docs/search.md).
pub const KEYWORD_QUERY_TERMS: usize = 3;

/// A query normalized into quoted FTS5 terms (single tokens or phrases).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizedQuery {
    /// Each term as an FTS5 string literal, e.g. `"mail"` or `"e mail"`.
    pub terms: Vec<String>,
    /// The terms without stop words (unquoted single words on [`super::STOP_WORDS`]); every term
    /// when all are stop words.
    pub content_terms: Vec<String>,
    /// The text each term came from, as typed (a word with its punctuation, the text between
    /// quotes, or the whole query in phrase mode), parallel to `terms`. PostgreSQL splits it
    /// with the parser that split the documents (which keeps `U.S.A.` or `e-mail` whole).
    pub sources: Vec<String>,
    /// [`Self::sources`] of the content terms, parallel to `content_terms`.
    pub content_sources: Vec<String>,
    /// Every term is a stop word ("to be or not to be"): searched like a keyword query.
    pub stop_words_only: bool,
}

impl NormalizedQuery {
    /// All terms must match.
    pub fn all_expression(&self) -> String {
        self.terms.join(" AND ")
    }

    /// Any term may match.
    pub fn any_expression(&self) -> String {
        self.terms.join(" OR ")
    }

    /// All content terms must match (stop words dropped).
    pub fn all_content_expression(&self) -> String {
        self.content_terms.join(" AND ")
    }

    /// Any content term may match (stop words dropped).
    pub fn any_content_expression(&self) -> String {
        self.content_terms.join(" OR ")
    }

    /// A keyword query: few content terms (or only stop words), so `auto` tries all of
    /// them first.
    pub fn is_keyword_query(&self) -> bool {
        self.stop_words_only || self.content_terms.len() <= KEYWORD_QUERY_TERMS
    }
}

/// Turns user text into FTS5 terms so that no user syntax reaches `MATCH`.
///
/// Words are split on whitespace; a word is split further on ASCII punctuation and its parts
/// form one phrase (`e-mail` → `"e mail"`, `c++` → `"c"`); text between double quotes is one
/// phrase; with `phrase` the whole query is one phrase. Parts with no letter or digit are
/// dropped. `InvalidSearchQuery` when nothing is left.
pub fn normalize_query(query: &str, phrase: bool) -> Result<NormalizedQuery> {
    // (words, quoted): a quoted group is a phrase even when it holds one word.
    let mut groups: Vec<(Vec<String>, bool, &str)> = Vec::new();
    if phrase {
        groups.push((words_of(query), true, query));
    } else {
        let segments: Vec<&str> = query.split('"').collect();
        let unmatched_last = segments.len().is_multiple_of(2);
        for (index, segment) in segments.iter().enumerate() {
            let quoted = index % 2 == 1 && !(unmatched_last && index + 1 == segments.len());
            if quoted {
                groups.push((words_of(segment), true, segment));
            } else {
                groups.extend(segment.split_whitespace().map(|w| (words_of(w), false, w)));
            }
        }
    }
    let mut terms = Vec::new();
    let mut content_terms = Vec::new();
    let mut sources = Vec::new();
    let mut content_sources = Vec::new();
    for (words, quoted, source) in groups.into_iter().filter(|(words, ..)| !words.is_empty()) {
        let stop = !quoted && words.len() == 1 && words.iter().all(|w| is_stop_word(w));
        let term = format!("\"{}\"", words.join(" ").replace('"', "\"\""));
        if !stop {
            content_terms.push(term.clone());
            content_sources.push(source.to_string());
        }
        terms.push(term);
        sources.push(source.to_string());
    }
    if terms.is_empty() {
        return Err(DocumentsError::InvalidSearchQuery);
    }
    let stop_words_only = content_terms.is_empty();
    if stop_words_only {
        content_terms = terms.clone();
        content_sources = sources.clone();
    }
    Ok(NormalizedQuery {
        terms,
        content_terms,
        sources,
        content_sources,
        stop_words_only,
    })
}

/// The searchable parts of a text, in order.
fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c.is_ascii_punctuation() || c.is_control())
        .filter(|part| part.chars().any(char::is_alphanumeric))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(query: &str, phrase: bool) -> Vec<String> {
        normalize_query(query, phrase)
            .map(|q| q.terms)
            .unwrap_or_default()
    }

    #[test]
    fn words_are_quoted_and_anded() {
        assert_eq!(
            terms("horse saddle", false),
            vec!["\"horse\"", "\"saddle\""]
        );
        let q = normalize_query("horse saddle", false).expect("query");
        assert_eq!(q.all_expression(), "\"horse\" AND \"saddle\"");
        assert_eq!(q.any_expression(), "\"horse\" OR \"saddle\"");
    }

    #[test]
    fn punctuation_and_operators_are_neutralized() {
        assert_eq!(terms("e-mail", false), vec!["\"e mail\""]);
        assert_eq!(terms("c++", false), vec!["\"c\""]);
        assert_eq!(terms("AND", false), vec!["\"AND\""]);
        assert_eq!(terms("NEAR(a b)", false), vec!["\"NEAR a\"", "\"b\""]);
        assert_eq!(terms("body:x* ^y", false), vec!["\"body x\"", "\"y\""]);
        assert_eq!(terms("-- && || ()", false), Vec::<String>::new());
        assert_eq!(terms("naïve — café", false), vec!["\"naïve\"", "\"café\""]);
    }

    #[test]
    fn quoted_phrases_and_phrase_mode() {
        assert_eq!(
            terms("\"wing slipstream\" lift", false),
            vec!["\"wing slipstream\"", "\"lift\""]
        );
        assert_eq!(terms("say \"it's", false), vec!["\"say\"", "\"it s\""]);
        assert_eq!(terms("a \"\" b", false), vec!["\"a\"", "\"b\""]);
        assert_eq!(
            terms("wing \"in a\" slip-stream", true),
            vec!["\"wing in a slip stream\""]
        );
    }

    #[test]
    fn stop_words_leave_content_terms_but_never_phrases() {
        let q = normalize_query("What is the lift of a wing", false).expect("query");
        assert_eq!(q.terms.len(), 7);
        assert_eq!(q.content_terms, vec!["\"lift\"", "\"wing\""]);
        assert_eq!(q.any_content_expression(), "\"lift\" OR \"wing\"");
        assert_eq!(q.all_content_expression(), "\"lift\" AND \"wing\"");
        assert!(q.is_keyword_query());
        // Only stop words: every term stays.
        let q = normalize_query("to be or NOT to be", false).expect("query");
        assert_eq!(q.content_terms, q.terms);
        assert!(q.stop_words_only && q.is_keyword_query());
        // Quoted text, hyphenated words and phrase mode keep their stop words.
        let q = normalize_query("\"the wing\" state-of-the-art \"of\"", false).expect("q");
        assert_eq!(
            q.content_terms,
            vec!["\"the wing\"", "\"state of the art\"", "\"of\""]
        );
        let q = normalize_query("of the wing", true).expect("phrase");
        assert_eq!(q.content_terms, vec!["\"of the wing\""]);
        assert!(
            !normalize_query("lift drag wing slipstream", false)
                .expect("q")
                .is_keyword_query()
        );
    }

    #[test]
    fn empty_queries_are_invalid() {
        for q in ["", "   ", "\"\"", "!!!", "- - -", "\u{E000}"] {
            assert!(
                matches!(
                    normalize_query(q, false),
                    Err(DocumentsError::InvalidSearchQuery)
                ),
                "{q:?}"
            );
        }
    }
}
