//! The words the offline providers' keyword extraction (tags, keyword classification,
//! summary scoring) skips: the search stop words plus a few that only keyword extraction drops.

use std::collections::HashSet;
use std::sync::OnceLock;

/// Words keyword extraction skips besides [`shelf_documents::STOP_WORDS`].
///
/// Why the two lists differ: search drops a word from a query, where a dropped word can never
/// be matched, so its list holds only pure function words; "new york", "world war one",
/// "first aid" or "how to use" must keep every word. Keyword extraction picks the few words
/// that say what a document is about, so it also skips words frequent in any English text
/// that say nothing about a subject (`also`, `however`, `made`, `things`, counting words) and
/// the fragments left when its word splitter cuts at an apostrophe (`don't` → `don`, `t`).
pub const KEYWORD_EXTRA_STOP_WORDS: &[&str] = &[
    "also", "around", "cannot", "d", "didn", "doesn", "don", "done", "even", "ever", "every",
    "first", "get", "got", "however", "isn", "know", "last", "less", "let", "like", "ll", "m",
    "made", "make", "many", "may", "might", "much", "must", "never", "new", "often", "one", "per",
    "rather", "re", "really", "s", "said", "say", "says", "see", "seen", "shall", "since", "still",
    "t", "take", "thing", "things", "though", "three", "thus", "two", "upon", "us", "use", "used",
    "using", "ve", "via", "wasn", "way", "well", "whether", "whose", "within", "without", "won",
    "yet",
];

/// Whether keyword extraction skips `word` (a lowercase word).
pub fn is_keyword_stop_word(word: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| {
        shelf_documents::STOP_WORDS
            .iter()
            .chain(KEYWORD_EXTRA_STOP_WORDS)
            .copied()
            .collect()
    })
    .contains(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extras_are_sorted_and_not_already_search_stop_words() {
        assert!(
            KEYWORD_EXTRA_STOP_WORDS.windows(2).all(|w| w[0] < w[1]),
            "sorted, no repeats"
        );
        for word in KEYWORD_EXTRA_STOP_WORDS {
            assert!(!shelf_documents::STOP_WORDS.contains(word), "{word}");
        }
    }

    #[test]
    fn both_lists_are_skipped() {
        for word in ["the", "yourselves", "also", "don", "things"] {
            assert!(is_keyword_stop_word(word), "{word}");
        }
        for word in ["horse", "library", "The"] {
            assert!(!is_keyword_stop_word(word), "{word}");
        }
    }
}
