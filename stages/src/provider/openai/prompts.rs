//! The `generic-compatible` provider's prompts: the system prompt of every prompt version
//! ([`crate::provider::prompt_versions`]) and the user messages that wrap the text.

use shelf_documents::dewey;

use crate::provider::CleanRequest;
use crate::provider::prompt_versions::{
    CMOS_V1, CMOS_V2, CMOS_V3, CMOS_V4, DEWEY_V1, DEWEY_V2, OCR_FIX_V1,
};

const CLEAN_BASE: &str = "You are a copy editor applying The Chicago Manual of Style (CMOS). \
You receive one piece of a longer document, between the markers <<<TEXT and TEXT>>>. \
Copy-edit it; do not summarize, shorten, expand, translate or comment on it.

Rules for every edit:
- Keep every sentence and every word of content, in the original order and language.
- Keep every number, date, amount, code, URL and e-mail address exactly as written (never spell numerals out or convert them).
- Fix spacing: collapse runs of spaces, remove spaces before punctuation, one space after it.
- Rejoin words split by a line-end hyphen (\"exam-\\nple\" becomes \"example\").
- Fix obvious typing and OCR errors only when the intended word is certain.";

const CLEAN_V2: &str = "
- Rejoin lines that were hard-wrapped inside a paragraph; keep real paragraph breaks as one blank line.
- Apply CMOS punctuation: consistent quotation marks, commas and periods inside closing quotation marks, \
no double spaces, ellipses as three periods.
- Keep headings, list items and table rows as they are, one per line.";

const CLEAN_V3: &str = "
- Apply CMOS typography: em dashes without surrounding spaces, en dashes in number ranges, \
curly quotation marks and apostrophes.
- Apply CMOS capitalization and hyphenation of compound modifiers where it is unambiguous.
- Keep Markdown markup (#, -, *, |, links) and keep the author's wording, spelling variety and voice.";

const CLEAN_V4: &str = "
- Strict fidelity: the edited text must be within 10% of the original's length; when unsure about an edit, leave the text as it is.
- Never drop page content such as captions, footnotes, headers or numbers, and never add headings, notes or explanations.";

const CLEAN_OUTPUT: &str = "

The text between <<<CONTEXT and CONTEXT>>>, if any, comes just before the piece and is for orientation only: \
never copy-edit it and never repeat it in your answer.
Answer with the edited text only: no preface, no explanation, no markers, no code fences.";

/// The system prompt for a cleaning prompt version; each version adds stricter rules.
pub fn cleaning_system_prompt(version: &str) -> Option<String> {
    let extra: &[&str] = match version {
        CMOS_V1 => &[],
        CMOS_V2 => &[CLEAN_V2],
        CMOS_V3 => &[CLEAN_V2, CLEAN_V3],
        CMOS_V4 => &[CLEAN_V2, CLEAN_V3, CLEAN_V4],
        _ => return None,
    };
    let mut prompt = CLEAN_BASE.to_string();
    for part in extra {
        prompt.push_str(part);
    }
    prompt.push_str(CLEAN_OUTPUT);
    Some(prompt)
}

/// The user message for one chunk.
pub fn cleaning_user_prompt(request: &CleanRequest<'_>) -> String {
    let mut out = String::new();
    if !request.context.trim().is_empty() {
        out.push_str("<<<CONTEXT\n");
        out.push_str(request.context);
        out.push_str("\nCONTEXT>>>\n\n");
    }
    out.push_str("<<<TEXT\n");
    out.push_str(request.text);
    out.push_str("\nTEXT>>>");
    out
}

const CORRECT_V1: &str = "You are proofreading the text that optical character recognition (OCR) read from \
one scanned page, given between the markers <<<TEXT and TEXT>>>. Fix OCR errors only: do not copy-edit, reword, \
summarize, shorten, complete, translate or comment on the text.

Fix only these:
- Misread characters inside words, when the intended word is certain (for example \"rn\" read for \"m\", \
\"0\" for \"o\", \"1\" or \"I\" for \"l\", \"vv\" for \"w\", \"cl\" for \"d\", \"li\" for \"h\").
- Words hyphenated or split across line ends: rejoin them (\"infor-\\nmation\" becomes \"information\").
- Stray symbols that are scanning noise (specks read as dots, commas, quotes or bars where the text has none).

Keep everything else exactly as it is:
- The wording and the order of the words; the spelling variety and the language.
- The line structure: one line for each line of the page, except where a split word was rejoined.
- Every number, date, amount, code, name, URL and e-mail address, character for character.
When unsure whether something is an OCR error, leave it as it is.
Answer with the corrected text only: no preface, no explanation, no markers, no code fences.";

/// The system prompt for an OCR-correction prompt version.
pub fn correction_system_prompt(version: &str) -> Option<&'static str> {
    match version {
        OCR_FIX_V1 => Some(CORRECT_V1),
        _ => None,
    }
}

/// The user message for one OCR page.
pub fn correction_user_prompt(text: &str) -> String {
    format!("<<<TEXT\n{text}\nTEXT>>>")
}

const CLASSIFY_BASE: &str = "You are a librarian classifying documents with the Dewey Decimal Classification (DDC). \
Read the document between <<<DOCUMENT and DOCUMENT>>> and choose the single most specific DDC number you are sure of: \
a three-digit class such as 636, optionally with decimals such as 636.1. \
Answer with one JSON object and nothing else, for example {\"code\": \"636.1\", \"confidence\": 0.8}, \
where code is a string and confidence is a number from 0 to 1 saying how sure you are.";

/// The system prompt for a classification prompt version: `dewey_v2` adds the hundred
/// divisions of the DDC summary.
pub fn classification_system_prompt(version: &str) -> Option<String> {
    match version {
        DEWEY_V1 => Some(CLASSIFY_BASE.to_string()),
        DEWEY_V2 => {
            let mut prompt = CLASSIFY_BASE.to_string();
            prompt.push_str(
                "\n\nThe hundred DDC divisions, for orientation (answer with a more specific number when the document allows, \
                 and never with 040, which is unassigned):\n",
            );
            for (code, label) in dewey::all() {
                prompt.push_str(&code);
                prompt.push(' ');
                prompt.push_str(&label);
                prompt.push('\n');
            }
            Some(prompt)
        }
        _ => None,
    }
}

const SUMMARIZE_PROMPT: &str = "You are a librarian cataloguing a document. Read the document between <<<DOCUMENT and DOCUMENT>>> \
and answer with one JSON object and nothing else:
{\"title\": \"...\", \"summary\": \"...\", \"tags\": [\"...\"], \"suggested_stem\": \"...\"}
- title: the document's own title if it has one, else a short descriptive title (at most 12 words), in the document's language.
- summary: two to four plain sentences (at most 400 characters) on what the document says.
- tags: three to eight lowercase subject keywords.
- suggested_stem: a file name stem from the title: lowercase ASCII words joined by hyphens, at most 60 characters.";

/// The system prompt for summaries.
pub fn summary_system_prompt() -> &'static str {
    SUMMARIZE_PROMPT
}

pub(super) fn document_prompt(text: &str) -> String {
    format!("<<<DOCUMENT\n{text}\nDOCUMENT>>>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::prompt_versions::{
        CLASSIFICATION_PROMPT_VERSIONS, CLEANING_PROMPT_VERSIONS, CORRECTION_PROMPT_VERSION,
        CORRECTION_PROMPT_VERSIONS,
    };

    #[test]
    fn prompts_get_stricter_and_v2_lists_divisions() {
        let lengths: Vec<usize> = CLEANING_PROMPT_VERSIONS
            .iter()
            .map(|v| cleaning_system_prompt(v).unwrap().len())
            .collect();
        assert!(lengths.windows(2).all(|w| w[0] < w[1]), "{lengths:?}");
        assert!(cleaning_system_prompt("cmos_v9").is_none());
        for version in CLASSIFICATION_PROMPT_VERSIONS {
            assert!(classification_system_prompt(version).is_some(), "{version}");
        }
        let v1 = classification_system_prompt("dewey_v1").unwrap();
        let v2 = classification_system_prompt("dewey_v2").unwrap();
        assert!(!v1.contains("590 Animals"));
        assert!(v2.contains("630 Agriculture") && v2.contains("990 History of other areas"));
    }

    #[test]
    fn the_correction_prompt_fixes_ocr_errors_only() {
        for version in CORRECTION_PROMPT_VERSIONS {
            assert!(correction_system_prompt(version).is_some(), "{version}");
        }
        assert!(CORRECTION_PROMPT_VERSIONS.contains(&CORRECTION_PROMPT_VERSION));
        assert!(correction_system_prompt("ocr_fix_v9").is_none());
        let v1 = correction_system_prompt("ocr_fix_v1").unwrap();
        for needle in [
            "Fix OCR errors only",
            "Misread characters",
            "split across line ends",
            "Stray symbols",
            "line structure",
            "number, date",
            "name",
            "corrected text only",
        ] {
            assert!(v1.contains(needle), "{needle}");
        }
        assert_eq!(
            correction_user_prompt("c0ld\nday"),
            "<<<TEXT\nc0ld\nday\nTEXT>>>"
        );
    }
}
