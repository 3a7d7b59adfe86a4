//! Keyword classification for the `local` provider: the Dewey division (or section, or class)
//! whose keywords ([`super::dewey_keywords`]) score highest by term frequency.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use super::dewey_keywords::KEYWORDS;
use super::words::{singular, term_frequencies};
use crate::provider::Classification;

struct Table {
    /// Normalized keyword → the entry codes it belongs to.
    index: HashMap<String, Vec<&'static str>>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut index: HashMap<String, Vec<&'static str>> = HashMap::new();
        for (code, words) in KEYWORDS {
            for word in words.split_whitespace() {
                let codes = index.entry(singular(word)).or_default();
                if !codes.contains(code) {
                    codes.push(code);
                }
            }
        }
        Table { index }
    })
}

/// The division (`630`) of an entry code (`636`).
fn division(code: &str) -> String {
    format!("{}0", &code[..2])
}

/// Keyword classification: the division with the highest term-frequency score (a section
/// such as `636` when its keywords carry the division), the class (`600`) when the evidence
/// is spread over its divisions, `000` with low confidence when no keyword matched.
/// Confidence grows with the margin over the runner-up and with the amount of evidence.
pub fn classify_text(text: &str) -> Classification {
    let table = table();
    let tf = term_frequencies(text);
    // Entry scores: each occurrence of a keyword counts 1, shared between the divisions that
    // list it; a keyword listed by both a division and its section counts for the section.
    let mut entries: BTreeMap<&'static str, f64> = BTreeMap::new();
    for (term, count) in &tf {
        let Some(codes) = table.index.get(term) else {
            continue;
        };
        let mut divisions: Vec<String> = codes.iter().map(|c| division(c)).collect();
        divisions.sort();
        divisions.dedup();
        let share = *count as f64 / divisions.len() as f64;
        for div in &divisions {
            let in_div: Vec<&&str> = codes.iter().filter(|c| division(c) == *div).collect();
            let target = in_div
                .iter()
                .find(|c| !c.ends_with('0'))
                .copied()
                .unwrap_or(in_div[0]);
            *entries.entry(target).or_insert(0.0) += share;
        }
    }
    let mut divisions: BTreeMap<String, f64> = BTreeMap::new();
    let mut classes: BTreeMap<char, f64> = BTreeMap::new();
    for (code, score) in &entries {
        *divisions.entry(division(code)).or_insert(0.0) += score;
        *classes
            .entry(code.chars().next().unwrap_or('0'))
            .or_insert(0.0) += score;
    }
    let mut ranked: Vec<(&String, f64)> = divisions.iter().map(|(c, s)| (c, *s)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let Some(&(best_division, best)) = ranked.first() else {
        return Classification {
            code: "000".into(),
            confidence: 0.05,
        };
    };
    if best < 1.5 {
        return Classification {
            code: "000".into(),
            confidence: 0.1,
        };
    }
    let runner_up = ranked.get(1).map_or(0.0, |r| r.1);
    let class_char = best_division.chars().next().unwrap_or('0');
    let class_score = classes.get(&class_char).copied().unwrap_or(best);
    // Within the division: the best section, if it carries at least half the division.
    let (section, section_score) = entries
        .iter()
        .filter(|(c, _)| division(c) == *best_division && !c.ends_with('0'))
        .max_by(|a, b| a.1.total_cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(c, s)| (Some(*c), *s))
        .unwrap_or((None, 0.0));
    let code = if best * 2.0 < class_score {
        format!("{class_char}00")
    } else if let Some(section) = section.filter(|_| section_score * 2.0 >= best) {
        section.to_string()
    } else {
        best_division.clone()
    };
    let margin = (best - runner_up) / best;
    let evidence = 1.0 - (-best / 6.0).exp();
    let confidence = (0.15 + 0.45 * margin * evidence + 0.3 * evidence).clamp(0.0, 0.9);
    Classification {
        code,
        confidence: (confidence * 100.0).round() / 100.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::local::testdata::{HORSES, corpus};

    #[test]
    fn horses_classify_under_agriculture() {
        let c = classify_text(HORSES);
        assert!(c.code == "636" || c.code == "630", "{c:?}");
        assert_eq!(c.code, "636");
        assert!(c.confidence >= 0.5, "{c:?}");
        assert_eq!(classify_text(HORSES), c);
    }

    #[test]
    fn corpus_texts_classify_sensibly() {
        let corpus = corpus();
        let get = |name: &str| &corpus.iter().find(|(n, _)| n == name).unwrap().1;
        let balkans = classify_text(get("8087_054.3B.txt"));
        assert_eq!(balkans.code, "940", "{balkans:?}");
        let fathers = classify_text(get("8071_093.3B.txt"));
        assert!(
            fathers.code.starts_with("30") || fathers.code.starts_with("64"),
            "{fathers:?}"
        );
        let nothing = classify_text(get("Strict.docx.md"));
        assert_eq!(nothing.code, "000");
        assert!(nothing.confidence <= 0.1);
        for (name, text) in &corpus {
            let c = classify_text(text);
            assert!(shelf_documents::dewey::is_valid_code(&c.code), "{name}");
            assert!((0.0..=1.0).contains(&c.confidence), "{name}");
        }
    }

    #[test]
    fn programming_and_cooking_find_their_sections() {
        let code = classify_text(
            "Programming in Python: the compiler, the software debugger and the algorithm. \
             Every programmer writes software; a database server stores the data.",
        );
        assert_eq!(code.code, "005");
        let food = classify_text(
            "A recipe for bread: the cook mixes the ingredients in the kitchen, then baking \
             takes an hour. Cooking good food for every meal.",
        );
        assert_eq!(food.code, "641");
    }
}
