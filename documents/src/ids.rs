//! Content-addressed document ids (`doc_` + the first 16 hex digits of the SHA-256 of the
//! file's bytes) and the streaming hash that produces them.

use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// Prefix of every document id.
pub const DOCUMENT_ID_PREFIX: &str = "doc_";
/// Hex digits of the SHA-256 kept in a document id.
pub const DOCUMENT_ID_HEX_DIGITS: usize = 16;
/// Buffer size of streaming hashes.
pub const HASH_BUFFER_BYTES: usize = 64 * 1024;
/// How many leading bytes [`sha256_file`] keeps for content sniffing.
pub const SNIFF_BYTES: usize = 8 * 1024;

/// The document id of a file whose SHA-256 is `sha256_hex` (any case).
///
/// A digest shorter than 16 hex digits yields a shorter id that [`is_document_id`] rejects;
/// use [`is_sha256_hex`] to validate digests that come from outside.
pub fn document_id(sha256_hex: &str) -> String {
    let mut id = String::with_capacity(DOCUMENT_ID_PREFIX.len() + DOCUMENT_ID_HEX_DIGITS);
    id.push_str(DOCUMENT_ID_PREFIX);
    id.extend(
        sha256_hex
            .chars()
            .take(DOCUMENT_ID_HEX_DIGITS)
            .map(|c| c.to_ascii_lowercase()),
    );
    id
}

/// True for `doc_` followed by exactly 16 lowercase hex digits.
pub fn is_document_id(value: &str) -> bool {
    value
        .strip_prefix(DOCUMENT_ID_PREFIX)
        .is_some_and(|hex| hex.len() == DOCUMENT_ID_HEX_DIGITS && hex.bytes().all(is_lower_hex))
}

/// True for a 64-digit hex SHA-256 (either case).
pub fn is_sha256_hex(value: &str) -> bool {
    value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_lower_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// Lowercase hex SHA-256 of a byte slice.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What [`sha256_file`] learned about a file in one streaming pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    /// Lowercase hex SHA-256.
    pub sha256_hex: String,
    /// Bytes read.
    pub byte_size: u64,
    /// The first [`SNIFF_BYTES`] bytes (fewer for a shorter file).
    pub head: Vec<u8>,
}

/// Hashes a reader in [`HASH_BUFFER_BYTES`] chunks, never holding the whole content.
pub fn sha256_reader(mut reader: impl Read) -> std::io::Result<FileDigest> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; HASH_BUFFER_BYTES];
    let mut head = Vec::new();
    let mut byte_size: u64 = 0;
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        let chunk = buffer.get(..read).unwrap_or(&[]);
        hasher.update(chunk);
        if head.len() < SNIFF_BYTES {
            let wanted = (SNIFF_BYTES - head.len()).min(chunk.len());
            head.extend_from_slice(chunk.get(..wanted).unwrap_or(&[]));
        }
        byte_size = byte_size.saturating_add(read as u64);
    }
    Ok(FileDigest {
        sha256_hex: hex::encode(hasher.finalize()),
        byte_size,
        head,
    })
}

/// Hashes a file streaming (blocking I/O: call it from `spawn_blocking`).
pub fn sha256_file(path: &Path) -> std::io::Result<FileDigest> {
    sha256_reader(std::fs::File::open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefix_plus_sixteen_hex() {
        let digest = sha256_hex(b"hello");
        assert_eq!(
            digest,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        let id = document_id(&digest);
        assert_eq!(id, "doc_2cf24dba5fb0a30e");
        assert!(is_document_id(&id));
        assert_eq!(document_id(&digest.to_uppercase()), id);
    }

    #[test]
    fn validation_rejects_near_misses() {
        for bad in [
            "",
            "doc_",
            "doc_2cf24dba5fb0a30",
            "doc_2cf24dba5fb0a30e0",
            "doc_2CF24DBA5FB0A30E",
            "run_2cf24dba5fb0a30e",
            "doc_2cf24dba5fb0a30g",
            "doc_2cf24dba5fb0a3é",
        ] {
            assert!(!is_document_id(bad), "{bad}");
        }
        assert!(!is_document_id(&document_id("abc")));
        assert!(is_sha256_hex(&sha256_hex(b"")));
        assert!(!is_sha256_hex("xyz"));
    }

    #[test]
    fn streaming_hash_matches_and_keeps_the_head() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let digest = sha256_reader(&data[..]).expect("hash");
        assert_eq!(digest.sha256_hex, sha256_hex(&data));
        assert_eq!(digest.byte_size, data.len() as u64);
        assert_eq!(digest.head, data[..SNIFF_BYTES]);
    }
}
