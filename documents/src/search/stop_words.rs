//! The one stop-word list of the workspace (`shelf_documents::STOP_WORDS`): the words search
//! leaves out of any-term matching, also the base of the words keyword extraction skips.

/// Words of a query that match nearly every English document. Unquoted single words on this
/// list are dropped from the matching expression of `auto` and `any` searches (they make the
/// any-term match select the whole index and cost the most), unless nothing else is left.
/// Phrases (quoted text, hyphenated words, `phrase: true`) keep every word. The list is the
/// common English list of the NLTK/Snowball family, lower case.
pub const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// Whether `word` is on [`STOP_WORDS`] (ASCII case-insensitive).
pub fn is_stop_word(word: &str) -> bool {
    word.len() <= 10
        && word.is_ascii()
        && STOP_WORDS
            .binary_search(&word.to_ascii_lowercase().as_str())
            .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_sorted_and_matched_case_insensitively() {
        assert!(
            STOP_WORDS.windows(2).all(|w| w[0] < w[1]),
            "sorted for binary search"
        );
        assert!(is_stop_word("The") && !is_stop_word("théâtre") && !is_stop_word("wing"));
    }
}
