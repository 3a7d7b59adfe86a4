//! Turning the bytes of a text file into text: byte-order marks, UTF-16 without a mark, legacy
//! 8-bit and CJK encodings by detection, and refusal of binary content.

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

pub fn decode_text(bytes: &[u8]) -> Result<Decoded, DecodeError> {
    if let Some((encoding, bom_len)) = Encoding::for_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(&bytes[bom_len..]);
        return finish(text.into_owned(), encoding);
    }
    if let Some(encoding) = utf16_without_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(bytes);
        return finish(text.into_owned(), encoding);
    }
    if bytes.contains(&0) {
        return Err(DecodeError::Binary);
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return finish(text.to_string(), UTF_8);
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Deny);
    detector.feed(bytes, true);
    let encoding = detector.guess(None, chardetng::Utf8Detection::Allow);
    let (text, _) = encoding.decode_without_bom_handling(bytes);
    finish(text.into_owned(), encoding)
}

/// UTF-16 text without a byte-order mark has NUL in every other byte for ASCII-range text.
fn utf16_without_bom(bytes: &[u8]) -> Option<&'static Encoding> {
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
    if odd_nul * 10 >= pairs * 9 && even_nul * 10 <= pairs {
        Some(UTF_16LE)
    } else if even_nul * 10 >= pairs * 9 && odd_nul * 10 <= pairs {
        Some(UTF_16BE)
    } else {
        None
    }
}

/// Text full of control characters is binary data that happened to decode.
fn finish(text: String, encoding: &'static Encoding) -> Result<Decoded, DecodeError> {
    let total = text.chars().count();
    let controls = text
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\u{c}'))
        .count();
    if total > 0 && controls * 100 > total {
        return Err(DecodeError::Binary);
    }
    Ok(Decoded {
        text,
        encoding: encoding.name(),
    })
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
