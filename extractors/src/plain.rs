//! Plain text and Markdown: decoded (byte-order marks, UTF-16, legacy encodings) and kept as
//! they are, since Markdown is already the output format.

use crate::text::{DecodeError, decode_text};
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

pub fn extract(
    input: Input<'_>,
    _limits: &Limits,
    _control: &Control,
) -> Result<Extraction, ExtractError> {
    let decoded = decode(input.bytes)?;
    Ok(Extraction {
        markdown: decoded.text,
        metadata: Metadata {
            encoding: Some(decoded.encoding.to_string()),
            ..Metadata::default()
        },
        ..Extraction::default()
    })
}

/// Decodes a text-based file, refusing binary content with `unsupported_file_type`.
pub fn decode(bytes: &[u8]) -> Result<crate::text::Decoded, ExtractError> {
    decode_text(bytes).map_err(|e| match e {
        DecodeError::Binary => ExtractError::unsupported("binary content in a text file"),
    })
}

/// [`decode`] for sources parsed as a language (JSON, YAML, markup, XML...), whose parsers
/// do not expect the byte-order marks some editors leave at the start.
pub fn decode_without_bom(bytes: &[u8]) -> Result<crate::text::Decoded, ExtractError> {
    let mut decoded = decode(bytes)?;
    let marks = decoded.text.len() - decoded.text.trim_start_matches('\u{feff}').len();
    decoded.text.drain(..marks);
    Ok(decoded)
}
