//! Turning the bytes of a text file into text: byte-order marks, UTF-16 and UTF-32 with or
//! without a mark, legacy 8-bit and CJK encodings by detection, and refusal of binary content.
//! [`wide_text`] is also what the ingest check asks, so a file the decoder reads is never
//! refused at the door as binary.

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("binary content in a text file")]
    Binary,
}

/// The decoded text and the name of the encoding it was read as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub text: String,
    pub encoding: &'static str,
}

/// A text encoding of two or four bytes a character, which puts NUL bytes in text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wide {
    Utf16Le,
    Utf16Be,
    Utf32Le,
    Utf32Be,
}

impl Wide {
    pub fn name(self) -> &'static str {
        match self {
            Wide::Utf16Le => "UTF-16LE",
            Wide::Utf16Be => "UTF-16BE",
            Wide::Utf32Le => "UTF-32LE",
            Wide::Utf32Be => "UTF-32BE",
        }
    }
}

/// The wide encoding of `bytes` (a file's head will do) and the length of its byte-order
/// mark: by the mark, or without one by where the NUL bytes of ASCII-range text fall.
pub fn wide_text(bytes: &[u8]) -> Option<(Wide, usize)> {
    // UTF-32's marks first: UTF-32LE's begins with UTF-16LE's.
    if bytes.starts_with(&[0xFF, 0xFE, 0, 0]) {
        return Some((Wide::Utf32Le, 4));
    }
    if bytes.starts_with(&[0, 0, 0xFE, 0xFF]) {
        return Some((Wide::Utf32Be, 4));
    }
    if bytes.starts_with(&[0xFF, 0xFE]) {
        return Some((Wide::Utf16Le, 2));
    }
    if bytes.starts_with(&[0xFE, 0xFF]) {
        return Some((Wide::Utf16Be, 2));
    }
    utf32_without_bom(bytes)
        .or_else(|| utf16_without_bom(bytes))
        .map(|wide| (wide, 0))
}

pub fn decode_text(bytes: &[u8]) -> Result<Decoded, DecodeError> {
    if let Some((wide, mark)) = wide_text(bytes) {
        let body = &bytes[mark..];
        return match wide {
            Wide::Utf16Le => finish(
                UTF_16LE.decode_without_bom_handling(body).0.into_owned(),
                UTF_16LE.name(),
            ),
            Wide::Utf16Be => finish(
                UTF_16BE.decode_without_bom_handling(body).0.into_owned(),
                UTF_16BE.name(),
            ),
            Wide::Utf32Le | Wide::Utf32Be => finish(decode_utf32(body, wide), wide.name()),
        };
    }
    if let Some((encoding, bom_len)) = Encoding::for_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(&bytes[bom_len..]);
        return finish(text.into_owned(), encoding.name());
    }
    if bytes.contains(&0) {
        return Err(DecodeError::Binary);
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return finish(text.to_string(), UTF_8.name());
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    detector.feed(bytes, true);
    let encoding = detector.guess(None, chardetng::Utf8Detection::Allow);
    let (text, _) = encoding.decode_without_bom_handling(bytes);
    finish(text.into_owned(), encoding.name())
}

/// UTF-32 (which `encoding_rs` does not read): each unit that is not a Unicode scalar value
/// becomes U+FFFD, a trailing partial unit too.
fn decode_utf32(body: &[u8], wide: Wide) -> String {
    body.chunks(4)
        .map(|unit| {
            let Ok(unit) = <[u8; 4]>::try_from(unit) else {
                return char::REPLACEMENT_CHARACTER;
            };
            let value = if wide == Wide::Utf32Le {
                u32::from_le_bytes(unit)
            } else {
                u32::from_be_bytes(unit)
            };
            char::from_u32(value).unwrap_or(char::REPLACEMENT_CHARACTER)
        })
        .collect()
}

/// UTF-32 without a mark: for ASCII- and BMP-range text, the two high bytes of nearly every
/// unit are NUL (the last two of each four in big-endian, the first two in little-endian).
fn utf32_without_bom(bytes: &[u8]) -> Option<Wide> {
    let sample = &bytes[..bytes.len().min(4096) & !3];
    let units = sample.len() / 4;
    if units < 2 {
        return None;
    }
    let high_nul = |first: usize| {
        sample
            .chunks_exact(4)
            .filter(|u| u[first] == 0 && u[first + 1] == 0)
            .count()
    };
    nul_pattern(
        high_nul(2),
        high_nul(0),
        units,
        Wide::Utf32Le,
        Wide::Utf32Be,
    )
}

/// `le` when at least nine in ten of `units` have their NUL bytes where `le` puts them and at
/// most one in ten where `be` does; `be` the other way round.
fn nul_pattern(le_hits: usize, be_hits: usize, units: usize, le: Wide, be: Wide) -> Option<Wide> {
    if le_hits * 10 >= units * 9 && be_hits * 10 <= units {
        Some(le)
    } else if be_hits * 10 >= units * 9 && le_hits * 10 <= units {
        Some(be)
    } else {
        None
    }
}

/// UTF-16 text without a byte-order mark has NUL in every other byte for ASCII-range text.
fn utf16_without_bom(bytes: &[u8]) -> Option<Wide> {
    let sample = &bytes[..bytes.len().min(4096) & !1];
    if sample.len() < 4 {
        return None;
    }
    let pairs = sample.len() / 2;
    let even_nul = sample.iter().step_by(2).filter(|b| **b == 0).count();
    let odd_nul = sample
        .iter()
        .skip(1)
        .step_by(2)
        .filter(|b| **b == 0)
        .count();
    nul_pattern(odd_nul, even_nul, pairs, Wide::Utf16Le, Wide::Utf16Be)
}

/// Text full of control characters is binary data that happened to decode. Only C0 controls
/// and DEL count: binary bytes decode to them whatever the encoding, while C1 controls
/// (U+0080 to U+009F) are what mis-encoded punctuation in real text becomes (a bullet written
/// as U+0084 in a UTF-8 Markdown file).
fn finish(text: String, encoding: &'static str) -> Result<Decoded, DecodeError> {
    let total = text.chars().count();
    let controls = text
        .chars()
        .filter(|c| (*c < ' ' || *c == '\u{7f}') && !matches!(c, '\n' | '\r' | '\t' | '\u{c}'))
        .count();
    if total > 0 && controls * 100 > total {
        return Err(DecodeError::Binary);
    }
    Ok(Decoded { text, encoding })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn utf8_with_and_without_bom() {
        assert_eq!(decode_text(b"hello").unwrap().text, "hello");
        assert_eq!(decode_text(b"\xEF\xBB\xBFhello").unwrap().text, "hello");
    }

    #[test]
    fn utf16_with_and_without_bom() {
        let le: Vec<u8> = "héllo wörld"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        let be: Vec<u8> = "héllo wörld"
            .encode_utf16()
            .flat_map(|u| u.to_be_bytes())
            .collect();
        let mut le_bom = vec![0xFF, 0xFE];
        le_bom.extend(&le);
        let mut be_bom = vec![0xFE, 0xFF];
        be_bom.extend(&be);
        for bytes in [le, be, le_bom, be_bom] {
            assert_eq!(decode_text(&bytes).unwrap().text, "héllo wörld");
        }
    }

    #[test]
    fn utf32_with_and_without_bom() {
        let text = "héllo wörld, 𝄞 and more text";
        let le: Vec<u8> = text
            .chars()
            .flat_map(|c| (c as u32).to_le_bytes())
            .collect();
        let be: Vec<u8> = text
            .chars()
            .flat_map(|c| (c as u32).to_be_bytes())
            .collect();
        let mut le_bom = vec![0xFF, 0xFE, 0, 0];
        le_bom.extend(&le);
        let mut be_bom = vec![0, 0, 0xFE, 0xFF];
        be_bom.extend(&be);
        for (bytes, name) in [
            (le, "UTF-32LE"),
            (be, "UTF-32BE"),
            (le_bom, "UTF-32LE"),
            (be_bom, "UTF-32BE"),
        ] {
            let decoded = decode_text(&bytes).unwrap();
            assert_eq!(decoded.text, text);
            assert_eq!(decoded.encoding, name);
            assert!(wide_text(&bytes).is_some());
        }
        // A truncated last unit and an invalid one become U+FFFD, never a panic.
        let mut odd: Vec<u8> = "twenty letters here."
            .chars()
            .flat_map(|c| (c as u32).to_le_bytes())
            .collect();
        odd.extend([0xFF, 0xFF, 0xFF, 0x7F, b'c', 0]);
        let decoded = decode_text(&odd).unwrap();
        assert_eq!(decoded.text, "twenty letters here.\u{FFFD}\u{FFFD}");
    }

    #[test]
    fn binary_with_nul_bytes_is_not_wide_text() {
        let mut binary = vec![0u8; 64];
        binary.extend((0..=255u8).cycle().take(512));
        assert_eq!(wide_text(&binary), None);
        assert_eq!(decode_text(&binary), Err(DecodeError::Binary));
    }

    #[test]
    fn legacy_encodings_are_detected() {
        let gb2312 = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/corpus/transcripts/srt/gb2312.srt"
        ))
        .unwrap_or_default();
        if !gb2312.is_empty() {
            let decoded = decode_text(&gb2312).unwrap();
            assert!(decoded.text.contains("-->"), "{}", decoded.encoding);
        }
        let latin1 = b"caf\xe9 cr\xe8me br\xfbl\xe9e";
        assert_eq!(decode_text(latin1).unwrap().text, "café crème brûlée");
    }

    #[test]
    fn binary_is_refused() {
        assert_eq!(
            decode_text(b"PK\x03\x04\x00\x00binary"),
            Err(DecodeError::Binary)
        );
        let noise: Vec<u8> = (0u8..=255).cycle().take(4096).collect();
        assert_eq!(decode_text(&noise), Err(DecodeError::Binary));
        let controls = b"\x01\x02\x03\x04\x05\x06\x07\x08abc";
        assert_eq!(decode_text(controls), Err(DecodeError::Binary));
        // C1 controls are mis-encoded punctuation in real text, not binary.
        let bullets = "- \u{84} \u{84} They work in parallel\n".repeat(20);
        assert!(decode_text(bullets.as_bytes()).is_ok());
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = decode_text(&bytes);
        }

        #[test]
        fn utf8_text_round_trips(text in "[\\PC\t\n]{0,300}") {
            prop_assert_eq!(decode_text(text.as_bytes()).unwrap().text, text);
        }
    }
}
