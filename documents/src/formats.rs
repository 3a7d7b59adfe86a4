//! Which files Shelf accepts, as ingest sees it: the extractors' one table of formats
//! (`shelf_extractors::formats`) and content detection, with their refusals mapped to this
//! crate's errors.

use std::path::Path;

pub use shelf_extractors::detect::Identified;
pub use shelf_extractors::detect::sniff_archive;
use shelf_extractors::detect::{self, Refusal};
pub use shelf_extractors::formats::{
    ACCEPTED_FORMATS, ARCHIVE_EXTENSIONS, Container, Format, Kind, accepted_extensions, format_for,
    is_archive_extension,
};

use crate::error::{DocumentsError, Result};

/// Refuses an archive extension (`ArchiveNotSupported`) before any byte of a file is read.
/// Any other name passes: an unknown extension may still hold content Shelf reads, which
/// [`identify`] decides.
pub fn check_extension(extension: Option<&str>) -> Result<()> {
    match extension {
        Some(ext) if is_archive_extension(&ext.to_ascii_lowercase()) => {
            Err(DocumentsError::ArchiveNotSupported {
                detail: format!(".{} files are archives", ext.to_ascii_lowercase()),
            })
        }
        _ => Ok(()),
    }
}

/// The format a stored file is read as, from its extension (as [`crate::extension_of`]
/// returns it), its first bytes (up to 8 KiB) and, for ZIP and OLE2 containers, its entries
/// (see `shelf_extractors::detect::identify`). Refusals: `ArchiveNotSupported`,
/// `UnsupportedFileType` naming what was found, `BinaryContent`.
pub fn identify(extension: Option<&str>, head: &[u8], path: &Path) -> Result<Identified> {
    match detect::identify(extension, head, Some(path)) {
        Ok(Some(identified)) => Ok(identified),
        // With a path every container is read, so this is not reached.
        Ok(None) => Err(DocumentsError::UnsupportedFileType {
            detail: "the file's container could not be read".into(),
        }),
        Err(refusal) => Err(refused(refusal)),
    }
}

/// Checks the first bytes of an upload still arriving (at least 8 KiB, or the whole file
/// when it is shorter): refuses what those bytes already rule out, before the rest is
/// stored. Containers are decided by [`identify`] once the file is whole.
pub fn check_upload_head(extension: Option<&str>, head: &[u8]) -> Result<()> {
    detect::identify(extension, head, None)
        .map(|_| ())
        .map_err(refused)
}

/// Refuses the first bytes of an upload when they already show an archive: a signature other
/// than ZIP's, or a ZIP whose first entry no document begins with (a DOCX named `.txt` passes
/// on to [`identify`]). Safe on any prefix: a signature, and an entry's name, need all their
/// bytes.
pub fn check_upload_prefix(prefix: &[u8]) -> Result<()> {
    match sniff_archive(prefix) {
        Some(kind) if kind != "zip" => Err(DocumentsError::ArchiveNotSupported {
            detail: format!("content is a {kind} archive"),
        }),
        Some(_) if shelf_extractors::sniff::zip_is_plain_archive(prefix) => {
            Err(DocumentsError::ArchiveNotSupported {
                detail: "content is a zip archive".into(),
            })
        }
        _ => Ok(()),
    }
}

fn refused(refusal: Refusal) -> DocumentsError {
    match refusal {
        Refusal::Archive(detail) => DocumentsError::ArchiveNotSupported { detail },
        Refusal::Mismatch(detail) | Refusal::Unsupported(detail) => {
            DocumentsError::UnsupportedFileType { detail }
        }
        Refusal::Binary => DocumentsError::BinaryContent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(bytes: &[u8]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(file.path(), bytes).expect("write");
        file
    }

    fn identified(extension: Option<&str>, bytes: &[u8]) -> Result<&'static str> {
        let file = file(bytes);
        identify(extension, bytes, file.path()).map(|found| found.format.extension)
    }

    #[test]
    fn archive_extensions_are_refused_before_reading() {
        for ext in ["zip", "tar", "gz", "7z", "rar", "jar", "iso", "zst", "ZIP"] {
            assert!(
                matches!(
                    check_extension(Some(ext)),
                    Err(DocumentsError::ArchiveNotSupported { .. })
                ),
                "{ext}"
            );
        }
        for ext in [Some("docx"), Some("exe"), Some("MD"), None] {
            assert!(check_extension(ext).is_ok(), "{ext:?}");
        }
    }

    #[test]
    fn files_are_identified_and_refusals_map_to_codes() {
        assert_eq!(identified(Some("MD"), b"# hello").ok(), Some("md"));
        assert_eq!(identified(Some("txt"), b"hello").ok(), Some("txt"));
        assert_eq!(
            identified(Some("txt"), b"hel\0lo\x01\x02").map_err(|e| e.code()),
            Err("unsupported_file_type")
        );
        assert_eq!(
            identified(Some("txt"), b"PK\x03\x04").map_err(|e| e.code()),
            Err("archive_not_supported")
        );
        assert_eq!(
            identified(Some("odt"), b"This is not a zip file!").ok(),
            Some("txt"),
            "text under a wrong extension is read as text"
        );
        match identified(Some("exe"), b"MZ\x90\0\x03\0\0\0") {
            Err(DocumentsError::UnsupportedFileType { detail }) => {
                assert!(detail.contains(".exe files"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(identified(None, b"plain words").ok(), Some("txt"));
    }

    #[test]
    fn upload_heads_refuse_archives_on_any_prefix() {
        assert!(check_upload_prefix(b"Rar!\x1a\x07\x00").is_err());
        assert!(check_upload_prefix(b"PK\x03\x04").is_ok());
        let mut plain = b"PK\x03\x04".to_vec();
        plain.extend([0u8; 22]);
        plain.extend([9, 0, 0, 0]);
        plain.extend(b"notes.txtHello");
        assert!(check_upload_prefix(&plain).is_err());
        assert!(
            check_upload_prefix(&plain[..35]).is_ok(),
            "the name is not whole yet"
        );
        assert!(check_upload_prefix(b"Ra").is_ok());
        assert!(check_upload_head(Some("docx"), b"PK\x03\x04rest").is_ok());
        assert_eq!(
            check_upload_head(Some("bin"), &[0u8, 1, 2, 3, 0, 0, 0, 1]).map_err(|e| e.code()),
            Err("unsupported_file_type")
        );
    }
}
