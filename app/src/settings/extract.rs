//! The extraction section: the `extract` stage's size and time limits, its cache, and the
//! universal converter's (LibreOffice) limits.

use super::reader::{BYTES, COUNT, Reader};

#[derive(Debug, Clone)]
pub struct ExtractSettings {
    pub max_bytes: u64,
    pub timeout_seconds: u64,
    pub cache: bool,
    pub universal_max_input_bytes: u64,
    pub universal_timeout_seconds: u64,
}

pub(super) fn parse(r: &mut Reader) -> ExtractSettings {
    ExtractSettings {
        max_bytes: r.parse("SHELF_EXTRACT_MAX_BYTES", 104_857_600, BYTES),
        timeout_seconds: r.parse("SHELF_EXTRACT_TIMEOUT_SECONDS", 300, COUNT),
        cache: r.bool("SHELF_EXTRACT_CACHE", true),
        universal_max_input_bytes: r.parse("SHELF_UNIVERSAL_MAX_INPUT_BYTES", 52_428_800, BYTES),
        universal_timeout_seconds: r.parse("SHELF_UNIVERSAL_TIMEOUT_SECONDS", 120, COUNT),
    }
}
