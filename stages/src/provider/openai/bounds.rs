//! How long an answer may be: the `max_tokens` every chat completion sends. A model that
//! rambles or loops stops there instead of generating until its context is full, and an
//! answer cut there (`finish_reason: "length"`) is never taken for a whole one.

/// Classification answers one small JSON object (`{"code": "636.1", "confidence": 0.8}` is
/// about 20 tokens); the rest leaves room for a sentence a model puts before it.
pub const CLASSIFY_MAX_TOKENS: u32 = 128;

/// A summary answers a title, at most 400 characters of summary, up to eight tags and a stem:
/// about 200 tokens in English, up to twice that in a script of two- or three-byte characters.
pub const SUMMARY_MAX_TOKENS: u32 = 768;

/// Headroom of every rewrite (cleaning, OCR correction) over its text's own length: a short
/// chunk's answer may be longer than it (restored punctuation, rejoined words).
const REWRITE_HEADROOM: u32 = 256;

/// The most a rewrite ever asks for: the largest output bound of common hosted models
/// (gpt-4o's 16,384); a server refuses a larger one. A chunk this long is far past the
/// default `SHELF_CHUNK_TARGET_CHARS`.
const REWRITE_CEILING: u32 = 16_384;

/// The bound of a rewrite of `text` (a cleaning chunk without its context, or an OCR page):
/// half the text's UTF-8 bytes, plus [`REWRITE_HEADROOM`], at most [`REWRITE_CEILING`].
/// English takes about four bytes a token, so this is twice the answer's expected length;
/// scripts whose characters take two or three bytes (Cyrillic, Greek, CJK) get one to one
/// and a half tokens a character, what byte-level tokenizers spend on them.
pub fn rewrite_max_tokens(text: &str) -> u32 {
    let half = u32::try_from(text.len() / 2).unwrap_or(u32::MAX);
    half.saturating_add(REWRITE_HEADROOM).min(REWRITE_CEILING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_are_bounded_by_their_length() {
        assert_eq!(rewrite_max_tokens(""), 256);
        assert_eq!(rewrite_max_tokens(&"a".repeat(12_000)), 6_256);
        // Three bytes a character: 1.5 tokens a character, plus the headroom.
        assert_eq!(rewrite_max_tokens(&"語".repeat(1_000)), 1_756);
        assert_eq!(rewrite_max_tokens(&"a".repeat(1_000_000)), REWRITE_CEILING);
    }
}
