//! Dewey Decimal labels: the ten main classes, the hundred divisions and the thousand sections
//! with their standard English captions, code validation, and label lookup through a code's
//! ancestors.

use std::collections::BTreeMap;
use std::sync::LazyLock;

/// The ten main classes.
pub const CLASSES: [(&str, &str); 10] = [
    ("000", "Computer science, information & general works"),
    ("100", "Philosophy & psychology"),
    ("200", "Religion"),
    ("300", "Social sciences"),
    ("400", "Language"),
    ("500", "Science"),
    ("600", "Technology"),
    ("700", "Arts & recreation"),
    ("800", "Literature"),
    ("900", "History & geography"),
];

/// The hundred divisions (the DDC second summary). `x00` divisions share their class caption.
pub const DIVISIONS: [(&str, &str); 100] = [
    ("000", "Computer science, information & general works"),
    ("010", "Bibliographies"),
    ("020", "Library & information sciences"),
    ("030", "Encyclopedias & books of facts"),
    ("040", "Unassigned"),
    ("050", "Magazines, journals & serials"),
    ("060", "Associations, organizations & museums"),
    ("070", "News media, journalism & publishing"),
    ("080", "Quotations"),
    ("090", "Manuscripts & rare books"),
    ("100", "Philosophy & psychology"),
    ("110", "Metaphysics"),
    ("120", "Epistemology"),
    ("130", "Parapsychology & occultism"),
    ("140", "Philosophical schools of thought"),
    ("150", "Psychology"),
    ("160", "Philosophical logic"),
    ("170", "Ethics"),
    ("180", "Ancient, medieval & eastern philosophy"),
    ("190", "Modern western philosophy"),
    ("200", "Religion"),
    ("210", "Philosophy & theory of religion"),
    ("220", "The Bible"),
    ("230", "Christianity"),
    ("240", "Christian practice & observance"),
    ("250", "Christian pastoral practice & religious orders"),
    ("260", "Christian organization, social work & worship"),
    ("270", "History of Christianity"),
    ("280", "Christian denominations"),
    ("290", "Other religions"),
    ("300", "Social sciences"),
    ("310", "Statistics"),
    ("320", "Political science"),
    ("330", "Economics"),
    ("340", "Law"),
    ("350", "Public administration & military science"),
    ("360", "Social problems & social services"),
    ("370", "Education"),
    ("380", "Commerce, communications & transportation"),
    ("390", "Customs, etiquette & folklore"),
    ("400", "Language"),
    ("410", "Linguistics"),
    ("420", "English & Old English languages"),
    ("430", "German & related languages"),
    ("440", "French & related languages"),
    ("450", "Italian, Romanian & related languages"),
    ("460", "Spanish, Portuguese, Galician"),
    ("470", "Latin & Italic languages"),
    ("480", "Classical & modern Greek languages"),
    ("490", "Other languages"),
    ("500", "Science"),
    ("510", "Mathematics"),
    ("520", "Astronomy"),
    ("530", "Physics"),
    ("540", "Chemistry"),
    ("550", "Earth sciences & geology"),
    ("560", "Fossils & prehistoric life"),
    ("570", "Biology"),
    ("580", "Plants (Botany)"),
    ("590", "Animals (Zoology)"),
    ("600", "Technology"),
    ("610", "Medicine & health"),
    ("620", "Engineering"),
    ("630", "Agriculture"),
    ("640", "Home & family management"),
    ("650", "Management & public relations"),
    ("660", "Chemical engineering"),
    ("670", "Manufacturing"),
    ("680", "Manufacture for specific uses"),
    ("690", "Construction of buildings"),
    ("700", "Arts & recreation"),
    ("710", "Area planning & landscape architecture"),
    ("720", "Architecture"),
    ("730", "Sculpture, ceramics & metalwork"),
    ("740", "Graphic arts & decorative arts"),
    ("750", "Painting"),
    ("760", "Printmaking & prints"),
    ("770", "Photography, computer art, film, video"),
    ("780", "Music"),
    ("790", "Sports, games & entertainment"),
    ("800", "Literature"),
    ("810", "American literature in English"),
    ("820", "English & Old English literatures"),
    ("830", "German & related literatures"),
    ("840", "French & related literatures"),
    ("850", "Italian, Romanian & related literatures"),
    ("860", "Spanish, Portuguese, Galician literatures"),
    ("870", "Latin & Italic literatures"),
    ("880", "Classical & modern Greek literatures"),
    ("890", "Other literatures"),
    ("900", "History & geography"),
    ("910", "Geography & travel"),
    ("920", "Biography & genealogy"),
    ("930", "History of ancient world (to ca. 499)"),
    ("940", "History of Europe"),
    ("950", "History of Asia"),
    ("960", "History of Africa"),
    ("970", "History of North America"),
    ("980", "History of South America"),
    ("990", "History of other areas"),
];

/// The sections that are not divisions (the DDC third summary, `636 Animal husbandry`), one
/// `code caption` per line; unassigned and optional numbers are left out, so they take their
/// division's label.
const SECTIONS_TEXT: &str = include_str!("dewey_sections.txt");

static SECTIONS: LazyLock<BTreeMap<&'static str, &'static str>> = LazyLock::new(|| {
    SECTIONS_TEXT
        .lines()
        .filter_map(|line| line.split_once(' '))
        .collect()
});

/// True for three ASCII digits, optionally followed by `.` and at least one digit
/// (`636`, `636.1`, `004.678`).
pub fn is_valid_code(code: &str) -> bool {
    let (head, tail) = match code.split_once('.') {
        Some((head, tail)) => (head, Some(tail)),
        None => (code, None),
    };
    head.len() == 3
        && head.bytes().all(|b| b.is_ascii_digit())
        && tail.is_none_or(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
}

/// The exact label of a known class, division or section code.
pub fn exact_label(code: &str) -> Option<&'static str> {
    DIVISIONS
        .iter()
        .find(|(known, _)| *known == code)
        .map(|(_, label)| *label)
        .or_else(|| SECTIONS.get(code).copied())
}

/// The label of a code, or of its closest known ancestor: `636.1` resolves to the `636`
/// section, an unassigned section to its division. `None` for an invalid code.
pub fn label(code: &str) -> Option<&'static str> {
    let code = code.trim();
    if !is_valid_code(code) {
        return None;
    }
    ancestors(code).into_iter().find_map(|c| exact_label(&c))
}

/// The code itself, then each shorter ancestor down to its main class:
/// `636.12` → `636.12`, `636.1`, `636`, `630`, `600`.
pub fn ancestors(code: &str) -> Vec<String> {
    if !is_valid_code(code) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut current = code.to_string();
    while current.contains('.') {
        out.push(current.clone());
        current.pop();
        if current.ends_with('.') {
            current.pop();
        }
    }
    out.push(current.clone());
    if let (Some(a), Some(b)) = (current.get(0..1), current.get(1..2)) {
        let division = format!("{a}{b}0");
        if division != current {
            out.push(division.clone());
        }
        let class = format!("{a}00");
        if class != division {
            out.push(class);
        }
    }
    out
}

/// The main class (`600`) of a code.
pub fn class_of(code: &str) -> Option<String> {
    if !is_valid_code(code) {
        return None;
    }
    code.get(0..1).map(|a| format!("{a}00"))
}

/// The division (`630`) of a code.
pub fn division_of(code: &str) -> Option<String> {
    if !is_valid_code(code) {
        return None;
    }
    code.get(0..2).map(|ab| format!("{ab}0"))
}

/// The ten classes and hundred divisions with their labels (the classes are the `x00`
/// divisions): the list a classifier chooses from. Sections are found by [`label`].
pub fn all() -> BTreeMap<String, String> {
    DIVISIONS
        .iter()
        .map(|(code, label)| (code.to_string(), label.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_complete_and_consistent() {
        let all = all();
        assert_eq!(all.len(), 100);
        for (i, (code, _)) in DIVISIONS.iter().enumerate() {
            assert_eq!(*code, format!("{:03}", i * 10));
        }
        for (code, label) in CLASSES {
            assert_eq!(all.get(code).map(String::as_str), Some(label));
        }
        // Every section line parses, is a three-digit code that is not a division, and the
        // lines are in order without repeats.
        let lines: Vec<&str> = SECTIONS_TEXT.lines().collect();
        assert_eq!(SECTIONS.len(), lines.len());
        assert!(SECTIONS.len() > 800, "{}", SECTIONS.len());
        for (code, caption) in SECTIONS.iter() {
            assert!(is_valid_code(code) && !code.contains('.'), "{code}");
            assert!(!code.ends_with('0'), "{code} is a division");
            assert!(
                !caption.trim().is_empty() && caption.trim() == *caption,
                "{code}"
            );
        }
    }

    #[test]
    fn validation() {
        for ok in ["000", "636", "636.1", "004.678", "999.9"] {
            assert!(is_valid_code(ok), "{ok}");
        }
        for bad in [
            "",
            "63",
            "6361",
            "636.",
            ".1",
            "63a",
            "636.1a",
            "636..1",
            "６３６",
            " 636",
        ] {
            assert!(!is_valid_code(bad), "{bad}");
        }
    }

    #[test]
    fn labels_resolve_through_ancestors() {
        assert_eq!(label("636.1"), Some("Animal husbandry"));
        assert_eq!(label("636"), Some("Animal husbandry"));
        // Unassigned sections take their division's label.
        assert_eq!(label("626"), Some("Engineering"));
        assert_eq!(
            label("005.133"),
            Some("Computer programming, programs & data")
        );
        assert_eq!(label("630"), Some("Agriculture"));
        assert_eq!(label("600"), Some("Technology"));
        assert_eq!(label("nonsense"), None);
        assert_eq!(
            ancestors("636.12"),
            vec!["636.12", "636.1", "636", "630", "600"]
        );
        assert_eq!(ancestors("600"), vec!["600"]);
        assert_eq!(ancestors("630"), vec!["630", "600"]);
        assert_eq!(class_of("636.1").as_deref(), Some("600"));
        assert_eq!(division_of("636.1").as_deref(), Some("630"));
    }
}
