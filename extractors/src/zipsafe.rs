//! Reading ZIP-based documents (DOCX, PPTX, XLSX, ODF, EPUB) under caps: entry count,
//! decompressed bytes across all reads, and compression ratio per entry. The sizes an archive
//! declares are not trusted: reads stop at the cap whatever the header says, which is what
//! defeats zip bombs.

use std::io::{Cursor, Read};

use zip::ZipArchive;

use crate::{ExtractError, Limits};

/// An opened ZIP container with a budget of decompressed bytes.
pub struct SafeZip<'a> {
    archive: ZipArchive<Cursor<&'a [u8]>>,
    budget: u64,
    max_ratio: u64,
}

impl<'a> SafeZip<'a> {
    /// Opens `bytes` as a ZIP container; `what` names the format in errors (`"DOCX"`).
    pub fn open(bytes: &'a [u8], what: &str, limits: &Limits) -> Result<Self, ExtractError> {
        let archive = ZipArchive::new(Cursor::new(bytes)).map_err(|e| {
            ExtractError::malformed(format!(
                "the {what} file is not a readable ZIP container: {e}"
            ))
        })?;
        if archive.len() > limits.max_zip_entries {
            return Err(ExtractError::too_complex(format!(
                "the {what} file lists {} entries; at most {} are read",
                archive.len(),
                limits.max_zip_entries
            )));
        }
        Ok(SafeZip {
            archive,
            budget: limits.max_decompressed_bytes,
            max_ratio: limits.max_compression_ratio,
        })
    }

    /// The entry names, in archive order.
    pub fn names(&self) -> Vec<String> {
        self.archive
            .file_names()
            .filter_map(|name| name.ok().map(|n| n.into_owned()))
            .collect()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.archive.index_for_name(name).is_some()
    }

    /// Reads an entry whole, or `None` if the archive has no such entry.
    pub fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ExtractError> {
        let Some(index) = self.archive.index_for_name(name) else {
            return Ok(None);
        };
        let max_ratio = self.max_ratio;
        let budget = self.budget;
        let mut entry = self
            .archive
            .by_index(index)
            .map_err(|e| ExtractError::malformed(format!("cannot open the entry {name}: {e}")))?;
        let compressed = entry.compressed_size().max(1);
        // Small entries compress well for innocent reasons (runs of spaces in XML): the ratio
        // cap applies past 1 MiB.
        let ratio_cap = compressed.saturating_mul(max_ratio).max(1024 * 1024);
        let cap = budget.min(ratio_cap);
        let mut out = Vec::new();
        (&mut entry)
            .take(cap.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| ExtractError::malformed(format!("the entry {name} is damaged: {e}")))?;
        let read = out.len() as u64;
        if read > cap {
            return Err(if read > ratio_cap {
                ExtractError::too_complex(format!(
                    "the entry {name} expands more than {max_ratio} times its compressed size"
                ))
            } else {
                ExtractError::too_complex(format!(
                    "the file expands past {} bytes when decompressed",
                    budget
                ))
            });
        }
        self.budget -= read;
        Ok(Some(out))
    }

    /// Reads an entry as UTF-8 text (a byte-order mark is dropped; invalid bytes are replaced).
    pub fn read_text(&mut self, name: &str) -> Result<Option<String>, ExtractError> {
        Ok(self.read(name)?.map(|bytes| {
            let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
            String::from_utf8_lossy(bytes).into_owned()
        }))
    }

    /// Reads an entry that must exist.
    pub fn require_text(&mut self, name: &str, what: &str) -> Result<String, ExtractError> {
        self.read_text(name)?
            .ok_or_else(|| ExtractError::malformed(format!("the {what} file has no {name}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::zip_of;

    #[test]
    fn reads_entries_within_the_caps() {
        let bytes = zip_of(&[("a.xml", b"<a/>".to_vec())]);
        let mut zip = SafeZip::open(&bytes, "test", &Limits::default()).unwrap();
        assert_eq!(zip.read_text("a.xml").unwrap().as_deref(), Some("<a/>"));
        assert_eq!(zip.read("missing").unwrap(), None);
    }

    #[test]
    fn a_bomb_entry_is_refused_by_ratio() {
        let bytes = zip_of(&[("bomb.xml", vec![b' '; 20 * 1024 * 1024])]);
        let mut zip = SafeZip::open(&bytes, "test", &Limits::default()).unwrap();
        assert_eq!(
            zip.read("bomb.xml").unwrap_err().code,
            "document_too_complex"
        );
    }

    #[test]
    fn the_budget_spans_entries() {
        let limits = Limits {
            max_decompressed_bytes: 1000,
            ..Limits::default()
        };
        let bytes = zip_of(&[("a", vec![b'a'; 600]), ("b", vec![b'b'; 600])]);
        let mut zip = SafeZip::open(&bytes, "test", &limits).unwrap();
        assert!(zip.read("a").is_ok());
        assert_eq!(zip.read("b").unwrap_err().code, "document_too_complex");
    }

    #[test]
    fn garbage_is_malformed() {
        let err = SafeZip::open(b"not a zip at all", "DOCX", &Limits::default())
            .err()
            .unwrap();
        assert_eq!(err.code, "malformed_document");
    }
}
