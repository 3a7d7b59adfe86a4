//! The word helpers keyword classification and the extractive synopsis share: lowercase words,
//! a crude singular and term frequencies, all skipping the keyword stop words.

use std::collections::HashMap;

pub(super) use crate::provider::stop_words::is_keyword_stop_word;

/// Lowercase words: runs of letters (apostrophes split words).
pub(super) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// A crude singular: `horses` → `horse`, `stories` → `story`, `churches` → `church`.
pub(super) fn singular(word: &str) -> String {
    let n = word.chars().count();
    if n <= 3 {
        return word.to_string();
    }
    if let Some(stem) = word.strip_suffix("ies")
        && n > 4
    {
        return format!("{stem}y");
    }
    for suffix in ["sses", "ches", "shes", "xes", "zes"] {
        if word.ends_with(suffix) {
            return word[..word.len() - 2].to_string();
        }
    }
    if word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
        && !word.ends_with("is")
    {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

/// Term frequencies of the singular, non-stopword words.
pub(super) fn term_frequencies(text: &str) -> HashMap<String, usize> {
    let mut tf = HashMap::new();
    for word in words(text) {
        if word.chars().count() < 2 || is_keyword_stop_word(&word) {
            continue;
        }
        *tf.entry(singular(&word)).or_insert(0) += 1;
    }
    tf
}
