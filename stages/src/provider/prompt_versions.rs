//! Every prompt version Shelf knows, declared once: the providers' prompt tables, the stages'
//! option checks and the settings (`SHELF_*_PROMPT_VERSION`, whose defaults are chosen there)
//! all read the names from here.
//!
//! A version names the prompt that made a stored result, so a new version is added beside the
//! old ones, never edited in place, and no version is ever renamed.

/// Cleaning prompts: each version adds stricter rules to the one before.
pub const CMOS_V1: &str = "cmos_v1";
pub const CMOS_V2: &str = "cmos_v2";
pub const CMOS_V3: &str = "cmos_v3";
pub const CMOS_V4: &str = "cmos_v4";

/// The cleaning prompt versions, oldest first (`SHELF_CLEANING_PROMPT_VERSION`, the `clean`
/// stage's `prompt_version` option).
pub const CLEANING_PROMPT_VERSIONS: &[&str] = &[CMOS_V1, CMOS_V2, CMOS_V3, CMOS_V4];

/// Classification prompts: `dewey_v2` adds the hundred divisions of the DDC summary.
pub const DEWEY_V1: &str = "dewey_v1";
pub const DEWEY_V2: &str = "dewey_v2";

/// The classification prompt versions, oldest first (`SHELF_CLASSIFICATION_PROMPT_VERSION`,
/// the `classify` stage's `prompt_version` option).
pub const CLASSIFICATION_PROMPT_VERSIONS: &[&str] = &[DEWEY_V1, DEWEY_V2];

/// The OCR-correction prompt.
pub const OCR_FIX_V1: &str = "ocr_fix_v1";

/// The OCR-correction prompt versions, oldest first.
pub const CORRECTION_PROMPT_VERSIONS: &[&str] = &[OCR_FIX_V1];

/// The OCR-correction prompt every `correct` call uses (not a setting).
pub const CORRECTION_PROMPT_VERSION: &str = OCR_FIX_V1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_distinct_and_current_correction_is_known() {
        let all: Vec<&str> = [
            CLEANING_PROMPT_VERSIONS,
            CLASSIFICATION_PROMPT_VERSIONS,
            CORRECTION_PROMPT_VERSIONS,
        ]
        .concat();
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), all.len(), "{all:?}");
        assert!(CORRECTION_PROMPT_VERSIONS.contains(&CORRECTION_PROMPT_VERSION));
    }
}
