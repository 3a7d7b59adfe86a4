//! Compressed RTF ([MS-OXRTFCP], "LZFu"): the decompression of the RTF body Outlook keeps in
//! `PR_RTF_COMPRESSED`, so that a `.msg` whose only body is RTF can still be read.
//!
//! The format: a 16-byte header (COMPSIZE, RAWSIZE, COMPTYPE, CRC, little-endian), then the
//! contents. `MELA` contents are the RTF as it is; `LZFu` contents are runs of a control byte
//! whose 8 bits, lowest first, say whether each following token is a literal byte (0) or a
//! 2-byte big-endian reference (1) into a 4096-byte circular dictionary: 12 bits of offset,
//! 4 bits of length minus 2. The dictionary starts with a fixed 207-byte RTF prefix and the
//! write position at 207; a reference whose offset is the write position ends the data.
//! Every output byte is also written into the dictionary, so a reference may read bytes it
//! writes itself (a run that crosses the write position).
//!
//! Bounded: the output never exceeds RAWSIZE, and RAWSIZE past the caller's budget is refused
//! before anything is decompressed.

use crate::{Control, ExtractError};

/// The dictionary's initial contents ([MS-OXRTFCP] 3.1.3.1, "Initial Dictionary"); the array
/// type pins its length to the 207 bytes the spec gives.
const INITIAL_DICTIONARY: &[u8; 207] = b"{\\rtf1\\ansi\\mac\\deff0\\deftab720{\\fonttbl;}\
{\\f0\\fnil \\froman \\fswiss \\fmodern \\fscript \\fdecor MS Sans SerifSymbolArialTimes New \
RomanCourier{\\colortbl\\red0\\green0\\blue0\r\n\\par \\pard\\plain\\f0\\fs20\\b\\i\\u\\tab\\tx";

const HEADER_LEN: usize = 16;
const DICTIONARY_LEN: usize = 4096;
/// `LZFu`, little-endian.
const COMPRESSED: u32 = 0x7546_5A4C;
/// `MELA`, little-endian.
const UNCOMPRESSED: u32 = 0x414C_454D;
/// Control bytes read between two `control.check()` calls.
const CHECK_EVERY: usize = 4096;

/// The RTF of a `PR_RTF_COMPRESSED` value. `max_raw` caps the decompressed size: a larger
/// RAWSIZE is `document_too_complex`. Damaged data (a short header, an unknown type, a CRC
/// mismatch, contents that end before their end marker) is `malformed_document`.
pub fn decompress(data: &[u8], max_raw: u64, control: &Control) -> Result<Vec<u8>, ExtractError> {
    let field = |at: usize| -> Option<u32> {
        let bytes = data.get(at..at + 4)?;
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    };
    let (Some(comp_size), Some(raw_size), Some(comp_type), Some(crc)) =
        (field(0), field(4), field(8), field(12))
    else {
        return Err(ExtractError::malformed(format!(
            "the compressed RTF has {} bytes, fewer than its {HEADER_LEN}-byte header",
            data.len()
        )));
    };
    if u64::from(raw_size) > max_raw {
        return Err(ExtractError::too_complex(format!(
            "the compressed RTF body decompresses to {raw_size} bytes, more than the {max_raw} \
             left of the limit on decompressed bytes"
        )));
    }
    let raw_size = usize::try_from(raw_size)
        .map_err(|_| ExtractError::too_complex("the compressed RTF body is too large"))?;
    // COMPSIZE counts the contents plus the 12 header bytes after the COMPSIZE field. Bytes
    // past it are padding some writers leave; fewer is a cut stream.
    let contents_len = usize::try_from(comp_size)
        .ok()
        .and_then(|n| n.checked_sub(12))
        .ok_or_else(|| {
            ExtractError::malformed(format!(
                "the compressed RTF's size field ({comp_size}) is smaller than its header"
            ))
        })?;
    let contents = data
        .get(HEADER_LEN..)
        .and_then(|rest| rest.get(..contents_len))
        .ok_or_else(|| {
            ExtractError::malformed(format!(
                "the compressed RTF is cut short: {contents_len} bytes announced, {} present",
                data.len().saturating_sub(HEADER_LEN)
            ))
        })?;
    match comp_type {
        UNCOMPRESSED => Ok(contents
            .get(..raw_size.min(contents.len()))
            .unwrap_or_default()
            .to_vec()),
        COMPRESSED => {
            let computed = crc32(contents);
            if computed != crc {
                return Err(ExtractError::malformed(format!(
                    "the compressed RTF fails its CRC check (0x{crc:08X} stored, \
                     0x{computed:08X} computed)"
                )));
            }
            inflate(contents, raw_size, control)
        }
        other => Err(ExtractError::malformed(format!(
            "the compressed RTF has an unknown compression type 0x{other:08X}"
        ))),
    }
}

/// The LZFu contents to at most `raw_size` bytes.
fn inflate(contents: &[u8], raw_size: usize, control: &Control) -> Result<Vec<u8>, ExtractError> {
    let truncated = || ExtractError::malformed("the compressed RTF ends before its end marker");
    let mut dictionary = [0u8; DICTIONARY_LEN];
    dictionary[..INITIAL_DICTIONARY.len()].copy_from_slice(INITIAL_DICTIONARY);
    let mut write = INITIAL_DICTIONARY.len();
    // RAWSIZE is bounded by the caller's budget but may still be large: grow as bytes come.
    let mut out = Vec::with_capacity(raw_size.min(1 << 20));
    let mut tokens = contents.iter().copied();
    let mut runs = 0usize;
    while out.len() < raw_size {
        runs += 1;
        if runs.is_multiple_of(CHECK_EVERY) {
            control.check()?;
        }
        let flags = tokens.next().ok_or_else(truncated)?;
        for bit in 0..8 {
            if out.len() >= raw_size {
                // RAWSIZE reached: what follows can only be the end marker (or, in a damaged
                // stream, bytes past what was announced, which are not read).
                break;
            }
            if flags & (1 << bit) == 0 {
                let byte = tokens.next().ok_or_else(truncated)?;
                out.push(byte);
                dictionary[write] = byte;
                write = (write + 1) % DICTIONARY_LEN;
                continue;
            }
            let (Some(high), Some(low)) = (tokens.next(), tokens.next()) else {
                return Err(truncated());
            };
            let reference = u16::from_be_bytes([high, low]);
            let offset = usize::from(reference >> 4);
            let length = usize::from(reference & 0x0F) + 2;
            if offset == write {
                return Ok(out);
            }
            for i in 0..length.min(raw_size - out.len()) {
                let byte = dictionary[(offset + i) % DICTIONARY_LEN];
                out.push(byte);
                dictionary[write] = byte;
                write = (write + 1) % DICTIONARY_LEN;
            }
        }
    }
    Ok(out)
}

/// The CRC-32 of [MS-OXRTFCP] 3.1.3.2: the IEEE polynomial (reflected, 0xEDB88320) and its
/// usual table, but starting from 0 with no final inversion, so not the zlib value.
pub fn crc32(data: &[u8]) -> u32 {
    data.iter().fold(0u32, |crc, &byte| {
        CRC_TABLE[usize::from(crc.to_le_bytes()[0] ^ byte)] ^ (crc >> 8)
    })
}

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut k = 0;
        while k < 8 {
            crc = if crc & 1 != 0 {
                0xEDB8_8320 ^ (crc >> 1)
            } else {
                crc >> 1
            };
            k += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// `rtf` as valid LZFu made only of literals and the end marker: what the tests of `.msg`
/// bodies store, without a compressor in the crate.
#[cfg(test)]
pub(crate) fn compress_literally(rtf: &[u8]) -> Vec<u8> {
    let mut contents = Vec::new();
    let mut write = INITIAL_DICTIONARY.len();
    let mut chunks = rtf.chunks(8);
    loop {
        match chunks.next() {
            Some(chunk) if chunk.len() == 8 => {
                contents.push(0);
                contents.extend_from_slice(chunk);
                write = (write + 8) % DICTIONARY_LEN;
            }
            last => {
                // A last short run (maybe empty): its literals, then the end marker.
                let chunk = last.unwrap_or_default();
                contents.push(1u8 << chunk.len());
                contents.extend_from_slice(chunk);
                write = (write + chunk.len()) % DICTIONARY_LEN;
                let marker = u16::try_from(write << 4).unwrap();
                contents.extend_from_slice(&marker.to_be_bytes());
                break;
            }
        }
    }
    let mut out = Vec::new();
    out.extend(u32::try_from(contents.len() + 12).unwrap().to_le_bytes());
    out.extend(u32::try_from(rtf.len()).unwrap().to_le_bytes());
    out.extend(COMPRESSED.to_le_bytes());
    out.extend(crc32(&contents).to_le_bytes());
    out.extend(contents);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// [MS-OXRTFCP] 3.1.1 / 3.2.1, "Example 1: Simple Compressed RTF".
    const SIMPLE: &[u8] = &[
        0x2d, 0x00, 0x00, 0x00, 0x2b, 0x00, 0x00, 0x00, 0x4c, 0x5a, 0x46, 0x75, 0xf1, 0xc5, 0xc7,
        0xa7, 0x03, 0x00, 0x0a, 0x00, 0x72, 0x63, 0x70, 0x67, 0x31, 0x32, 0x35, 0x42, 0x32, 0x0a,
        0xf3, 0x20, 0x68, 0x65, 0x6c, 0x09, 0x00, 0x20, 0x62, 0x77, 0x05, 0xb0, 0x6c, 0x64, 0x7d,
        0x0a, 0x80, 0x0f, 0xa0,
    ];
    const SIMPLE_RTF: &[u8] = b"{\\rtf1\\ansi\\ansicpg1252\\pard hello world}\r\n";

    /// [MS-OXRTFCP] 3.1.2 / 3.2.2, "Example 2: ... a Token ... that Crosses WritePosition".
    const CROSSING: &[u8] = &[
        0x1a, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x4c, 0x5a, 0x46, 0x75, 0xe2, 0xd4, 0x4b,
        0x51, 0x41, 0x00, 0x04, 0x20, 0x57, 0x58, 0x59, 0x5a, 0x0d, 0x6e, 0x7d, 0x01, 0x0e, 0xb0,
    ];
    const CROSSING_RTF: &[u8] = b"{\\rtf1 WXYZWXYZWXYZWXYZWXYZ}";

    fn unlimited(data: &[u8]) -> Result<Vec<u8>, ExtractError> {
        decompress(data, u64::MAX, &Control::default())
    }

    #[test]
    fn the_initial_dictionary_is_the_specs() {
        assert!(INITIAL_DICTIONARY.starts_with(b"{\\rtf1\\ansi\\mac\\deff0\\deftab720{"));
        assert!(INITIAL_DICTIONARY.ends_with(b"\\b\\i\\u\\tab\\tx"));
        assert!(INITIAL_DICTIONARY.windows(2).any(|w| w == b"\r\n"));
        // The CRC of the one-line string of the spec, computed apart from this code: pins
        // every byte, including the spaces at the literal's line breaks.
        assert_eq!(crc32(INITIAL_DICTIONARY), 0x06F4_4644);
    }

    #[test]
    fn the_specs_simple_example_decompresses_byte_exact() {
        assert_eq!(unlimited(SIMPLE).unwrap(), SIMPLE_RTF);
    }

    #[test]
    fn the_specs_crossing_example_decompresses_byte_exact() {
        assert_eq!(unlimited(CROSSING).unwrap(), CROSSING_RTF);
    }

    #[test]
    fn the_crc_is_the_specs_variant() {
        // The examples' stored CRCs are computed over their contents.
        assert_eq!(crc32(&SIMPLE[16..]), 0xA7C7_C5F1);
        assert_eq!(crc32(&CROSSING[16..]), 0x514B_D4E2);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn uncompressed_contents_are_the_rtf() {
        let mut data = Vec::new();
        data.extend((u32::try_from(SIMPLE_RTF.len()).unwrap() + 12).to_le_bytes());
        data.extend(u32::try_from(SIMPLE_RTF.len()).unwrap().to_le_bytes());
        data.extend(UNCOMPRESSED.to_le_bytes());
        data.extend(0u32.to_le_bytes());
        data.extend(SIMPLE_RTF);
        assert_eq!(unlimited(&data).unwrap(), SIMPLE_RTF);
    }

    #[test]
    fn the_test_compressor_round_trips() {
        for rtf in [
            &b""[..],
            b"{\\rtf1 x}",
            SIMPLE_RTF,
            CROSSING_RTF,
            &[b'a'; 5000],
        ] {
            assert_eq!(unlimited(&compress_literally(rtf)).unwrap(), rtf);
        }
    }

    #[test]
    fn a_raw_size_past_the_budget_is_too_complex() {
        let err = decompress(SIMPLE, 42, &Control::default()).unwrap_err();
        assert_eq!(err.code, "document_too_complex");
        assert_eq!(
            decompress(SIMPLE, 43, &Control::default()).unwrap(),
            SIMPLE_RTF
        );
    }

    #[test]
    fn damaged_data_is_malformed() {
        let mut bad_crc = SIMPLE.to_vec();
        bad_crc[20] ^= 1;
        let mut bad_type = SIMPLE.to_vec();
        bad_type[8] = b'X';
        let mut small_size = SIMPLE.to_vec();
        small_size[..4].copy_from_slice(&4u32.to_le_bytes());
        for (data, says) in [
            (&SIMPLE[..10], "header"),
            (&SIMPLE[..40], "cut short"),
            (&bad_crc[..], "CRC"),
            (&bad_type[..], "compression type"),
            (&small_size[..], "size field"),
        ] {
            let err = unlimited(data).unwrap_err();
            assert_eq!(err.code, "malformed_document");
            assert!(err.detail.contains(says), "{}", err.detail);
        }
        // Contents without their end marker (a consistent header and CRC over cut contents).
        let mut cut = SIMPLE[..SIMPLE.len() - 4].to_vec();
        let contents_len = u32::try_from(cut.len() - 4).unwrap();
        cut[..4].copy_from_slice(&contents_len.to_le_bytes());
        let crc = crc32(&cut[16..]);
        cut[12..16].copy_from_slice(&crc.to_le_bytes());
        let err = unlimited(&cut).unwrap_err();
        assert!(err.detail.contains("end marker"), "{}", err.detail);
    }

    /// A stream whose header is valid (sizes and CRC fitted to `contents`): the tokens are
    /// what the fuzzer controls.
    fn with_header(contents: &[u8], raw_size: u32) -> Vec<u8> {
        let mut data = Vec::new();
        data.extend((u32::try_from(contents.len()).unwrap() + 12).to_le_bytes());
        data.extend(raw_size.to_le_bytes());
        data.extend(COMPRESSED.to_le_bytes());
        data.extend(crc32(contents).to_le_bytes());
        data.extend(contents);
        data
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decompress(&data, 1 << 20, &Control::default());
        }

        #[test]
        fn arbitrary_tokens_stay_within_raw_size(
            contents in proptest::collection::vec(any::<u8>(), 0..2048),
            raw_size in 0u32..100_000,
        ) {
            let data = with_header(&contents, raw_size);
            if let Ok(out) = decompress(&data, 1 << 20, &Control::default()) {
                prop_assert!(out.len() <= raw_size as usize);
            }
        }

        #[test]
        fn truncated_examples_never_panic(cut in 0usize..64, which in 0usize..2) {
            let data = [SIMPLE, CROSSING][which];
            let data = &data[..cut.min(data.len())];
            let _ = decompress(data, 1 << 20, &Control::default());
        }
    }
}
