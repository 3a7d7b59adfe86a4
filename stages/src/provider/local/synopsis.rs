//! The `local` provider's extractive synopsis: a title from the headings or first lines, a
//! summary of the top-scoring sentences, tags from the most frequent terms, and a stem.

use std::collections::{BTreeMap, HashMap};

use super::clean::clean_text;
use super::words::{is_keyword_stop_word, singular, term_frequencies, words};
use crate::provider::{Synopsis, slug};

/// The longest summary, in characters.
pub const SUMMARY_CHARS: usize = 400;

/// The extractive synopsis: title, summary, tags and stem.
pub fn synopsis(text: &str) -> Synopsis {
    let text = clean_text(text);
    let title = title(&text);
    let tf = term_frequencies(&text);
    let summary = summary(&text, &tf);
    let tags = tags(&text);
    Synopsis {
        suggested_stem: slug(&title),
        title,
        summary,
        tags,
    }
}

/// Real words rather than spaced-out letters (`d a t e l i n e`).
fn wordy(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    !words.is_empty() && words.iter().map(|w| w.chars().count()).sum::<usize>() >= words.len() * 2
}

/// Whether a line is a candidate title: short, with real words (not `d a t e l i n e`).
fn title_like(line: &str) -> bool {
    let letters = line.chars().filter(|c| c.is_alphabetic()).count();
    let words = line.split_whitespace().count();
    letters >= 3
        && line.chars().count() <= 100
        && !line.ends_with([',', ';', ':'])
        && letters * 10 >= line.chars().count() * 5
        && words <= 16
        && wordy(line)
}

/// The first Markdown heading, else the first short line, else the start of the first
/// sentence (at most 80 characters).
pub fn title(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("<!--") && !l.starts_with('|'))
        .collect();
    let heading = lines
        .iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .find(|l| l.chars().any(char::is_alphabetic));
    let chosen = heading
        .map(str::to_string)
        .or_else(|| {
            lines
                .iter()
                .take(5)
                .find(|l| title_like(l))
                .map(|l| l.trim_start_matches(['-', '*', '>', ' ']).to_string())
        })
        .or_else(|| {
            sentences(text)
                .into_iter()
                .find(|s| wordy(&s.text))
                .map(|s| cut_at_word(&s.text, 80))
        })
        .unwrap_or_default();
    let chosen = chosen
        .trim()
        .trim_end_matches(['.', ',', ';', ':'])
        .trim()
        .to_string();
    if chosen.is_empty() {
        "Untitled document".to_string()
    } else {
        cut_at_word(&chosen, 120)
    }
}

/// At most `max` characters, cut at a word boundary.
fn cut_at_word(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out = String::new();
    for word in text.split_whitespace() {
        let extra = usize::from(!out.is_empty()) + word.chars().count();
        if out.chars().count() + extra > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        text.chars().take(max).collect()
    } else {
        out
    }
}

struct Sentence {
    text: String,
    position: usize,
}

/// Sentences of the prose (headings, tables and comments left out), whitespace collapsed.
/// Lines are boundaries too: cleaning has already rejoined the lines of a paragraph.
fn sentences(text: &str) -> Vec<Sentence> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty()
            || line.starts_with('#')
            || line.starts_with('|')
            || line.starts_with("<!--")
        {
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut current = String::new();
        let mut i = 0;
        while i < chars.len() {
            current.push(chars[i]);
            if matches!(chars[i], '.' | '!' | '?') {
                while let Some(&c) = chars.get(i + 1).filter(|c| CLOSERS.contains(c)) {
                    current.push(c);
                    i += 1;
                }
                if chars.get(i + 1).is_none_or(|c| c.is_whitespace()) {
                    push_sentence(&mut out, &mut current);
                }
            }
            i += 1;
        }
        push_sentence(&mut out, &mut current);
    }
    out
}

/// Closing quotation marks and brackets that belong to the sentence before them.
const CLOSERS: &[char] = &['"', '\'', '\u{201D}', '\u{2019}', '\u{BB}', ')', ']'];

fn push_sentence(out: &mut Vec<Sentence>, current: &mut String) {
    let text = current.split_whitespace().collect::<Vec<_>>().join(" ");
    current.clear();
    if text.chars().filter(|c| c.is_alphabetic()).count() >= 3
        && !out.iter().any(|s: &Sentence| s.text == text)
    {
        out.push(Sentence {
            position: out.len(),
            text,
        });
    }
}

/// The top-scoring sentences by term frequency, in their original order, at most
/// [`SUMMARY_CHARS`] characters in all.
fn summary(text: &str, tf: &HashMap<String, usize>) -> String {
    let all = sentences(text);
    let mut scored: Vec<(f64, &Sentence)> = all
        .iter()
        .map(|s| {
            let terms: Vec<String> = words(&s.text)
                .filter(|w| w.chars().count() >= 2 && !is_keyword_stop_word(w))
                .map(|w| singular(&w))
                .collect();
            let sum: usize = terms.iter().map(|t| tf.get(t).copied().unwrap_or(0)).sum();
            let score = if terms.len() < 3 {
                0.0
            } else {
                sum as f64 / (terms.len() as f64).sqrt()
            };
            (score, s)
        })
        .collect();
    scored.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.1.position.cmp(&b.1.position))
    });
    // Fragments with too few content words only fill in when nothing else scored.
    if scored.iter().any(|(score, _)| *score > 0.0) {
        scored.retain(|(score, _)| *score > 0.0);
    }
    let mut chosen: Vec<&Sentence> = Vec::new();
    let mut used = 0usize;
    for (_, sentence) in &scored {
        let len = sentence.text.chars().count() + usize::from(!chosen.is_empty());
        if used + len <= SUMMARY_CHARS {
            chosen.push(sentence);
            used += len;
        }
        if chosen.len() >= 4 {
            break;
        }
    }
    if chosen.is_empty() {
        return scored
            .first()
            .map(|(_, s)| {
                let mut cut = cut_at_word(&s.text, SUMMARY_CHARS - 1);
                cut.push('…');
                cut
            })
            .unwrap_or_default();
    }
    chosen.sort_by_key(|s| s.position);
    chosen
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The most frequent non-stopword terms (four letters or more), shown in their most common
/// spelling; ties go to the term seen first.
fn tags(text: &str) -> Vec<String> {
    struct Term {
        count: usize,
        first: usize,
        forms: BTreeMap<String, usize>,
    }
    let mut terms: HashMap<String, Term> = HashMap::new();
    for (position, word) in words(text).enumerate() {
        if word.chars().count() < 4 || is_keyword_stop_word(&word) {
            continue;
        }
        let term = terms.entry(singular(&word)).or_insert(Term {
            count: 0,
            first: position,
            forms: BTreeMap::new(),
        });
        term.count += 1;
        *term.forms.entry(word).or_insert(0) += 1;
    }
    let mut ranked: Vec<&Term> = terms.values().collect();
    ranked.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.first.cmp(&b.first)));
    let repeated = ranked.iter().filter(|t| t.count >= 2).count();
    let take = if repeated >= 3 { repeated.min(6) } else { 3 };
    ranked
        .into_iter()
        .take(take)
        .filter_map(|t| {
            t.forms
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(form, _)| form.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::local::testdata::{HORSES, corpus};

    #[test]
    fn synopsis_is_extractive() {
        let s = synopsis(HORSES);
        assert_eq!(s.title, "Keeping Horses");
        assert_eq!(s.suggested_stem, "keeping-horses");
        assert_eq!(s.tags[0], "horses");
        assert!(s.tags.contains(&"mare".to_string()) || s.tags.contains(&"foals".to_string()));
        assert!(s.summary.chars().count() <= SUMMARY_CHARS);
        assert!(!s.summary.is_empty());
        // Sentences appear in their original order.
        let sentences: Vec<&str> = s.summary.split(". ").collect();
        let positions: Vec<usize> = sentences
            .iter()
            .map(|p| {
                HORSES
                    .replace('\n', " ")
                    .find(&p[..20.min(p.len())])
                    .unwrap()
            })
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{}", s.summary);
    }

    #[test]
    fn corpus_synopses() {
        let corpus = corpus();
        let get = |name: &str| &corpus.iter().find(|(n, _)| n == name).unwrap().1;
        let crazy = synopsis(get("crazyones.txt"));
        assert_eq!(crazy.title, "The Crazy Ones");
        assert_eq!(crazy.suggested_stem, "the-crazy-ones");
        assert!(
            crazy.tags.contains(&"crazy".to_string()),
            "{:?}",
            crazy.tags
        );
        let lorem = synopsis(get("multicolumn-lorem-ipsum.txt"));
        assert_eq!(lorem.title, "Two-Column Document with Lorem Ipsum");
        let checkboxes = synopsis(get("docx_checkboxes.docx.md"));
        assert_eq!(checkboxes.title, "Table with options");
        let dateline = synopsis(get("8087_054.3B.txt"));
        assert_ne!(dateline.title, "d a t e l i n e");
        for (name, text) in &corpus {
            let s = synopsis(text);
            assert!(!s.title.is_empty(), "{name}");
            assert!(s.summary.chars().count() <= SUMMARY_CHARS, "{name}");
            assert_eq!(s.suggested_stem, slug(&s.title), "{name}");
            assert_eq!(synopsis(text), s, "{name}");
        }
        assert_eq!(synopsis("").title, "Untitled document");
    }
}
