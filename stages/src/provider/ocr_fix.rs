//! Rule-based OCR correction for the `local` provider: words broken across line ends are
//! rejoined and common character confusions (`rn`/`m`, `0`/`o`, `1`/`l`/`I`, `vv`/`w`,
//! `cl`/`d`, `li`/`h`) are undone, but only where a word list can verify the result.
//!
//! The rules are deliberately timid. A token is changed only when it is not a known word and
//! exactly one spelling within three substitutions is; numbers, URLs, e-mail addresses, codes
//! and anything the list cannot vouch for stay as they were. No rule ever adds a digit, a
//! space or a word, and the whole correction is idempotent: correcting twice is correcting
//! once (the `correct` stage relies on an unchanged page meaning "nothing found").

use std::collections::HashSet;
use std::sync::LazyLock;

/// About 3,800 common English words and inflections, lowercase, one per line.
static WORDS: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("ocr_words.txt")
        .lines()
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect()
});

/// Passes of (rejoin, fix) until nothing changes; two almost always suffice (a fix can turn
/// `c1ear-` into `clear-`, which the next pass may rejoin). The bound only guards the loop.
const MAX_PASSES: usize = 8;

/// Longest word (in characters) for which substitutions are tried.
const MAX_WORD_CHARS: usize = 32;

/// Most substitutions in one word: real OCR damage is a character or two per word, and every
/// extra substitution widens the net for false corrections.
const MAX_SUBSTITUTIONS: usize = 3;

/// Most spellings tried for one word; a word with more is left alone.
const MAX_CANDIDATES: usize = 4096;

/// Whether `word` (any case) is in the word list.
pub fn is_known(word: &str) -> bool {
    if word.chars().all(|c| c.is_ascii_lowercase()) {
        WORDS.contains(word)
    } else {
        WORDS.contains(word.to_lowercase().as_str())
    }
}

/// Corrects one OCR page; see the module documentation for what is changed.
pub fn correct_ocr(text: &str) -> String {
    correct_counted(text).0
}

/// The corrected text and how many line-end hyphen joins were made.
fn correct_counted(text: &str) -> (String, usize) {
    let mut current = text.to_string();
    let mut joins = 0;
    for _ in 0..MAX_PASSES {
        let (joined, n) = rejoin_hyphenated(&current);
        let next = fix_words(&joined);
        joins += n;
        if next == current {
            break;
        }
        current = next;
    }
    (current, joins)
}

// ---------------------------------------------------------------------------------------------
// Words broken across line ends

/// Rejoins `infor-` + `mation` across a line end when the joined word is known, or when
/// neither half is (then the hyphen only broke the word). `well-` + `known` keeps its hyphen.
/// The continuation moves up to the first line; the rest of its line stays where it was.
fn rejoin_hyphenated(text: &str) -> (String, usize) {
    if !text.contains('-') {
        return (text.to_string(), 0);
    }
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let mut joins = 0;
    let mut i = 0;
    while i + 1 < lines.len() {
        if let Some((first, rest)) = join_pair(&lines[i], &lines[i + 1]) {
            joins += 1;
            lines[i] = first;
            match rest {
                Some(rest) => lines[i + 1] = rest,
                None => {
                    lines.remove(i + 1);
                }
            }
        }
        i += 1;
    }
    (lines.join("\n"), joins)
}

/// The two lines after a join (`None`: the second line was only the continuation), or `None`
/// when they are not a broken word.
fn join_pair(line: &str, next: &str) -> Option<(String, Option<String>)> {
    let (body, cr) = split_cr(line);
    let (next_body, next_cr) = split_cr(next);
    // Columns side by side: the next line's start continues another column.
    if [body, next_body]
        .iter()
        .any(|l| l.trim().contains("   ") || l.trim().contains('\t'))
    {
        return None;
    }
    let body = body.trim_end_matches([' ', '\t']);
    let head = body.strip_suffix('-')?;
    let word = head.rsplit([' ', '\t']).next()?;
    if word.ends_with('-') || word.contains("://") || word.contains('@') {
        return None;
    }
    if word.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    let stem_start = word
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphabetic())
        .last()
        .map(|(i, _)| i)?;
    let stem = &word[stem_start..];

    let indent_len = next_body.len() - next_body.trim_start_matches([' ', '\t']).len();
    let (indent, rest) = next_body.split_at(indent_len);
    let token_len = rest.find([' ', '\t']).unwrap_or(rest.len());
    let (token, remainder) = rest.split_at(token_len);
    if token.ends_with('-') || token.contains("://") || token.contains('@') {
        return None;
    }
    if token.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    let half_len = token
        .char_indices()
        .find(|(_, c)| !c.is_alphabetic())
        .map_or(token.len(), |(i, _)| i);
    let (half, after) = token.split_at(half_len);
    if !half.chars().next().is_some_and(char::is_lowercase) {
        return None;
    }
    // Only punctuation (or a possessive) may travel with the continuation: `tia-~people` is
    // not the end of one word.
    let after = after
        .strip_prefix("'s")
        .or_else(|| after.strip_prefix("\u{2019}s"))
        .unwrap_or(after);
    if after.chars().any(char::is_alphanumeric) {
        return None;
    }
    let joined = format!("{stem}{half}");
    if !(is_known(&joined) || !is_known(stem) && !is_known(half)) {
        return None;
    }
    let first = format!("{head}{token}{cr}");
    let remainder = remainder.trim_start_matches([' ', '\t']);
    let rest = (!remainder.is_empty()).then(|| format!("{indent}{remainder}{next_cr}"));
    Some((first, rest))
}

/// A line without its `\r`, and the `\r` (or nothing).
fn split_cr(line: &str) -> (&str, &'static str) {
    match line.strip_suffix('\r') {
        Some(body) => (body, "\r"),
        None => (line, ""),
    }
}

// ---------------------------------------------------------------------------------------------
// Character confusions

/// Every whitespace-separated token corrected on its own; whitespace is kept byte for byte.
/// Whether a token starts a sentence (the text's start, after a blank line or after `.`, `!`,
/// `?` or `:`) decides whether a capitalized word may be a name.
fn fix_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut start: Option<usize> = None;
    let mut sentence_start = true;
    let mut newlines = 0;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                let token = &text[s..i];
                push_fixed_token(&mut out, token, sentence_start);
                sentence_start = next_starts_sentence(token, sentence_start);
                newlines = 0;
            }
            if c == '\n' {
                newlines += 1;
                if newlines >= 2 {
                    sentence_start = true;
                }
            }
            out.push(c);
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        push_fixed_token(&mut out, &text[s..], sentence_start);
    }
    out
}

/// Whether the token after `token` starts a sentence. Punctuation alone (a bullet, a dash)
/// changes nothing.
fn next_starts_sentence(token: &str, sentence_start: bool) -> bool {
    let end = token.trim_end_matches(['"', '\'', ')', ']', '\u{201D}', '\u{2019}', '*', '_']);
    if !token.chars().any(char::is_alphanumeric) {
        return sentence_start;
    }
    end.ends_with(['.', '!', '?', ':'])
}

/// `(rnother's,` → `(mother's,`: surrounding punctuation kept, each hyphen-separated part
/// of the word corrected on its own. URLs, e-mail addresses and tokens with other inner
/// punctuation (`e.g.`, `3.5`, `a/b`, `x_y`) are copied as they are.
fn push_fixed_token(out: &mut String, token: &str, sentence_start: bool) {
    let lower = token.to_ascii_lowercase();
    if token.contains("://") || token.contains('@') || lower.starts_with("www.") {
        out.push_str(token);
        return;
    }
    let Some(start) = token.find(|c: char| c.is_alphanumeric()) else {
        out.push_str(token);
        return;
    };
    let end = token
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_alphanumeric())
        .map_or(token.len(), |(i, c)| i + c.len_utf8());
    let core = &token[start..end];
    if !core
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '\'' | '\u{2019}'))
    {
        out.push_str(token);
        return;
    }
    out.push_str(&token[..start]);
    for (n, part) in core.split('-').enumerate() {
        if n > 0 {
            out.push('-');
        }
        // A capitalized word inside a sentence may be a name (`Walt` is not `Wait`).
        match fix_part(part, !(n == 0 && sentence_start)) {
            Some(fixed) => out.push_str(&fixed),
            None => out.push_str(part),
        }
    }
    out.push_str(&token[end..]);
}

/// One word, possibly with a possessive `'s`.
fn fix_part(part: &str, may_be_name: bool) -> Option<String> {
    for suffix in ["'s", "\u{2019}s", "'S", "\u{2019}S"] {
        if let Some(stem) = part.strip_suffix(suffix) {
            return fix_word(stem, may_be_name).map(|w| format!("{w}{suffix}"));
        }
    }
    fix_word(part, may_be_name)
}

/// The single known spelling of an unknown word within the confusion rules, if there is
/// exactly one. When `may_be_name`, a capitalized word is read differently only at its first
/// letter (`Rnother` → `Mother`, `Iittle` → `little`), never inside (`Walt` stays).
fn fix_word(word: &str, may_be_name: bool) -> Option<String> {
    let chars: Vec<char> = word.chars().collect();
    if chars.len() < 2 || chars.len() > MAX_WORD_CHARS {
        return None;
    }
    if !chars.iter().all(char::is_ascii_alphanumeric) {
        return None;
    }
    let letters = chars.iter().filter(|c| c.is_ascii_alphabetic()).count();
    let digits = chars.len() - letters;
    // Numbers, codes such as `A4` or `0N`, and numerals with a suffix are not words: a digit
    // is only a misread letter inside a mostly alphabetic word. Two digits in a row are a
    // number (and the stage's check would refuse a page that lost one).
    if digits >= letters || chars.windows(2).any(|w| w.iter().all(char::is_ascii_digit)) {
        return None;
    }
    if chars[0].is_ascii_digit() {
        let suffix: String = chars
            .iter()
            .skip_while(|c| c.is_ascii_digit())
            .collect::<String>()
            .to_ascii_lowercase();
        if matches!(
            suffix.as_str(),
            "st" | "nd" | "rd" | "th" | "s" | "am" | "pm"
        ) {
            return None;
        }
    }
    if is_known(word) {
        return None;
    }
    let caps = all_caps(&chars);
    let mut search = Search {
        chars: &chars,
        caps,
        first_only: may_be_name && !caps && chars[0].is_ascii_uppercase(),
        buffer: String::with_capacity(word.len() + 4),
        found: Vec::new(),
        tried: 0,
    };
    if !search.walk(0, 0, false) || search.found.len() != 1 {
        return None;
    }
    search.found.pop()
}

/// Whether the word is set in capitals, judged on its letters other than `l` and `I` (the
/// ones being questioned); needs at least two such letters.
fn all_caps(chars: &[char]) -> bool {
    let judged: Vec<&char> = chars
        .iter()
        .filter(|c| c.is_ascii_alphabetic() && !matches!(c, 'l' | 'I'))
        .collect();
    judged.len() >= 2 && judged.iter().all(|c| c.is_ascii_uppercase())
}

/// A depth-first walk over every way to read one word with at most `MAX_SUBSTITUTIONS`
/// substitutions.
struct Search<'a> {
    chars: &'a [char],
    caps: bool,
    /// Only the first letter may be read differently (a capitalized word that may be a name).
    first_only: bool,
    /// The reading built so far.
    buffer: String,
    /// Known readings, distinct ignoring case.
    found: Vec<String>,
    /// Complete readings looked up.
    tried: usize,
}

impl Search<'_> {
    /// Returns false when the walk was cut short by `MAX_CANDIDATES` (the caller then
    /// changes nothing).
    fn walk(&mut self, at: usize, substitutions: usize, changed: bool) -> bool {
        if at == self.chars.len() {
            self.tried += 1;
            if changed
                && is_known(&self.buffer)
                && !self
                    .found
                    .iter()
                    .any(|f| f.eq_ignore_ascii_case(&self.buffer))
            {
                self.found.push(self.buffer.clone());
            }
            return self.tried <= MAX_CANDIDATES;
        }
        // A second known reading already means the word is left alone.
        if self.found.len() > 1 {
            return true;
        }
        let mark = self.buffer.len();
        self.buffer.push(self.chars[at]);
        if !self.walk(at + 1, substitutions, changed) {
            return false;
        }
        self.buffer.truncate(mark);
        if substitutions >= MAX_SUBSTITUTIONS || self.first_only && at > 0 {
            return true;
        }
        for (consumed, replacement) in readings(self.chars, at, self.caps) {
            self.buffer.push_str(&replacement);
            let complete = self.walk(at + consumed, substitutions + 1, true);
            self.buffer.truncate(mark);
            if !complete {
                return false;
            }
        }
        true
    }
}

/// The other readings of the characters at `at`: how many characters each consumes and what
/// it reads them as, already in the word's case.
fn readings(chars: &[char], at: usize, caps: bool) -> Vec<(usize, String)> {
    let c = chars[at];
    let next = chars.get(at + 1).copied();
    let mut out = Vec::new();
    // The case of a letter replacing `first`: capital when the word is, or when `first` was.
    let cased = |first: char, lower: char| -> char {
        if caps || first.is_ascii_uppercase() {
            lower.to_ascii_uppercase()
        } else {
            lower
        }
    };
    if let Some(n) = next {
        let pair = [c.to_ascii_lowercase(), n.to_ascii_lowercase()];
        let single = match pair {
            ['r', 'n'] => Some('m'),
            ['v', 'v'] => Some('w'),
            ['c', 'l'] => Some('d'),
            ['l', 'i'] => Some('h'),
            _ => None,
        };
        if let Some(s) = single
            && c.is_ascii_alphabetic()
        {
            out.push((2, cased(c, s).to_string()));
        }
    }
    match c {
        'm' | 'M' => out.push((
            1,
            if caps {
                "RN".into()
            } else if c == 'M' {
                "Rn".into()
            } else {
                "rn".into()
            },
        )),
        'h' | 'H' => out.push((
            1,
            if caps {
                "LI".into()
            } else if c == 'H' {
                "Li".into()
            } else {
                "li".into()
            },
        )),
        '0' => out.push((1, if caps { "O" } else { "o" }.into())),
        '1' => {
            out.push((1, if caps { "L" } else { "l" }.into()));
            out.push((1, if caps || at == 0 { "I" } else { "i" }.into()));
        }
        // A lowercase `l` read for a capital `I` (or for `i` inside a word).
        'l' => out.push((1, if caps || at == 0 { "I" } else { "i" }.into())),
        // A capital `I` read for a lowercase `l` (one read for `i` is the known word already,
        // since words are compared ignoring case).
        'I' => out.push((1, if caps { "L" } else { "l" }.into())),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_word_list_loads() {
        assert!(WORDS.len() > 2000, "{}", WORDS.len());
        assert!(is_known("information") && is_known("The") && is_known("MODERN"));
        assert!(!is_known("rnodern") && !is_known(""));
        assert!(
            WORDS
                .iter()
                .all(|w| w.chars().all(|c| c.is_ascii_lowercase())),
            "lowercase ASCII only"
        );
    }

    #[test]
    fn broken_words_are_rejoined() {
        assert_eq!(correct_ocr("infor-\nmation"), "information");
        assert_eq!(
            correct_ocr("the infor-\nmation was new\nand more"),
            "the information\nwas new\nand more"
        );
        // Neither half is a word: the hyphen only broke the word.
        assert_eq!(correct_ocr("a quix-\notic plan"), "a quixotic\nplan");
        // Punctuation travels with the continuation; indentation and CRLF are kept.
        assert_eq!(
            correct_ocr("(infor-\r\n  mation), said"),
            "(information),\r\n  said"
        );
        // Known halves that do not make a known word keep their hyphen and line break.
        assert_eq!(correct_ocr("a well-\nknown fact"), "a well-\nknown fact");
        // Capitalized continuations, numbers, URLs and dashes are left alone.
        for kept in [
            "Greco-\nRoman",
            // Columns side by side, and a continuation with more than punctuation.
            "morbi tris-          cursus vulpu-\ntique senectus      tate metus",
            "in Croa-\ntia-~people want",
            "1990-\n1995",
            "see http://example.com/infor-\nmation",
            "a dash -\nthen more",
            "a rule --\nthen",
            "-\nlist",
        ] {
            assert_eq!(correct_ocr(kept), kept);
        }
    }

    #[test]
    fn confusions_are_undone_when_the_list_agrees() {
        assert_eq!(
            correct_ocr("The rnorning vvorld was c0ld."),
            "The morning world was cold."
        );
        assert_eq!(correct_ocr("Iittle wlth tlie clog"), "little with the clog");
        assert_eq!(correct_ocr("lt is clear"), "It is clear");
        // Capitalized words inside a sentence may be names: only their first letter is
        // questioned.
        assert_eq!(
            correct_ocr("writes author Walt and Rnother. Tirne wa1ks"),
            "writes author Walt and Mother. Time walks"
        );
        assert_eq!(correct_ocr("THE C0LD RNORNING"), "THE COLD MORNING");
        assert_eq!(correct_ocr("Rnother's wa1k"), "Mother's walk");
        assert_eq!(correct_ocr("\"tirne,\" she said"), "\"time,\" she said");
        assert_eq!(correct_ocr("self-rnade"), "self-made");
    }

    #[test]
    fn what_cannot_be_verified_is_left_alone() {
        for kept in [
            // Unknown words with no known reading; names; codes and numbers.
            "Kim met Zorblax in Milan",
            "A4 B12 0N 1st 2nd 10th 3.5 1,000 42 007 H2O",
            // Two digits in a row are a number even inside letters.
            "b00k",
            // URLs, e-mail addresses and other inner punctuation.
            "http://rnodern.example/c0ld mail@rnodern.org e.g. a/b x_c0ld",
            // Whitespace is kept byte for byte.
            "a  b\t c \n\n d",
        ] {
            assert_eq!(correct_ocr(kept), kept);
        }
    }

    #[test]
    fn known_and_ambiguous_words_are_left_alone() {
        // Known words are never questioned, even with a known reading (`clay`/`day`).
        for known in ["clay", "stern", "burn", "modern", "tall", "slip"] {
            assert_eq!(fix_word(known, false), None, "{known}");
        }
        assert_eq!(fix_word("rnorning", false).as_deref(), Some("morning"));
        // `rnodern` reads as `modern` and as `modem`: left alone.
        assert_eq!(fix_word("rnodern", false), None);
        assert_eq!(fix_word("wa1k", false).as_deref(), Some("walk"));
        // Case alone is no error: `wIth` is the known word `with`.
        assert_eq!(fix_word("wIth", false), None);
        // `rnall` reads as `mall` and as `mail`: two known readings, no change.
        assert_eq!(fix_word("rnall", false), None);
    }

    fn known_word() -> impl Strategy<Value = String> {
        let words: Vec<&'static str> = {
            let mut w: Vec<&'static str> = WORDS.iter().copied().collect();
            w.sort_unstable();
            w
        };
        proptest::sample::select(words).prop_map(str::to_string)
    }

    fn styled(word: String, style: u8) -> String {
        match style % 4 {
            0 => word,
            1 => word.to_uppercase(),
            2 => {
                let mut c = word.chars();
                c.next()
                    .map(|f| f.to_uppercase().chain(c).collect())
                    .unwrap_or_default()
            }
            _ => format!("({word},"),
        }
    }

    /// OCR-looking text: words from the list, damaged ones, numbers and broken words.
    fn ocr_text() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            3 => known_word(),
            2 => known_word().prop_map(|w| w.replace('m', "rn").replace('o', "0")),
            1 => known_word().prop_map(|w| w.replace('l', "1").replace('w', "vv")),
            1 => known_word().prop_map(|w| w.replace('d', "cl").replace('h', "li")),
            1 => "[a-zA-Z0-9]{1,8}",
            1 => "[0-9]{1,6}",
            1 => "[a-z]{2,6}-",
            1 => "[a-zA-Z0-9.,@:/()'-]{1,10}",
        ];
        let sep = prop_oneof![4 => Just(" "), 2 => Just("\n"), 1 => Just("-\n"), 1 => Just("  ")];
        proptest::collection::vec((token, sep), 0..40)
            .prop_map(|parts| parts.into_iter().map(|(t, s)| format!("{t}{s}")).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn correcting_twice_is_correcting_once(text in ocr_text()) {
            let once = correct_ocr(&text);
            prop_assert_eq!(correct_ocr(&once), once);
        }

        #[test]
        fn text_of_known_words_is_never_changed(
            words in proptest::collection::vec((known_word(), any::<u8>(), 0u8..3), 0..40)
        ) {
            let mut text = String::new();
            for (word, style, sep) in words {
                text.push_str(&styled(word, style));
                text.push_str(["  ", " ", "\n"][usize::from(sep)]);
            }
            prop_assert_eq!(correct_ocr(&text), text);
        }

        #[test]
        fn digit_tokens_are_never_changed(
            numbers in proptest::collection::vec("[0-9]{1,12}", 1..20),
            text in ocr_text(),
        ) {
            let source = format!("{text} {}", numbers.join(" "));
            let corrected = correct_ocr(&source);
            let digit_tokens = |s: &str| -> Vec<String> {
                s.split_whitespace()
                    .filter(|t| t.chars().all(|c| c.is_ascii_digit()))
                    .map(str::to_string)
                    .collect()
            };
            prop_assert_eq!(digit_tokens(&corrected), digit_tokens(&source));
        }

        #[test]
        fn words_are_only_lost_to_joins(text in ocr_text()) {
            let (corrected, joins) = correct_counted(&text);
            let before = text.split_whitespace().count();
            let after = corrected.split_whitespace().count();
            prop_assert!(after + joins >= before, "{} + {} < {}", after, joins, before);
            prop_assert!(after <= before);
        }
    }
}
