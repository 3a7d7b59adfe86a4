//! Which files Shelf accepts, as ingest sees it: the extractors' one table of formats
//! (`shelf_extractors::formats`) and content detection, with their refusals mapped to this
//! crate's errors.

use std::path::Path;

pub use shelf_extractors::detect::sniff_archive;
use shelf_extractors::detect::{self, Refusal};
pub use shelf_extractors::formats::{
    ACCEPTED_FORMATS, ARCHIVE_EXTENSIONS, Container, Format, Kind, accepted_extensions, format_for,
    is_archive_extension,
};

use crate::error::{DocumentsError, Result};

/// Validates an extension (as [`crate::extension_of`] returns it): the accepted format, or
/// `ArchiveNotSupported` for archives, or `UnsupportedFileType` naming the extension.
pub fn check_extension(extension: Option<&str>) -> Result<&'static Format> {
    let Some(ext) = extension else {
        return Err(DocumentsError::UnsupportedFileType {
            detail: "file has no extension (see docs/formats.md for the accepted ones)".into(),
        });
    };
    let ext = ext.to_ascii_lowercase();
    if let Some(format) = format_for(&ext) {
        return Ok(format);
    }
    if is_archive_extension(&ext) {
        return Err(DocumentsError::ArchiveNotSupported {
            detail: format!(".{ext} files are archives"),
        });
    }
    let shown: String = ext.chars().take(32).collect();
    Err(DocumentsError::UnsupportedFileType {
        detail: format!(
            ".{shown} files are not supported (see docs/formats.md for the accepted ones)"
        ),
    })
}

/// Validates the first bytes (up to 8 KiB) of a file of an accepted format: an archive
/// signature (other than the format's own container) is `ArchiveNotSupported`; content of
/// another type than the extension says, or binary bytes in a text format, is
/// `UnsupportedFileType` / `BinaryContent`.
pub fn check_content(format: &Format, head: &[u8]) -> Result<()> {
    detect::check_head(format, head).map_err(refused)
}

/// For ZIP-based formats, checks that the stored file holds what its extension says
/// (`[Content_Types].xml` and the main part, or the `mimetype` entry). A damaged container
/// passes: its run fails with a clear code and the document can be retried.
pub fn check_container(format: &Format, path: &Path) -> Result<()> {
    detect::check_container(format, path).map_err(refused)
}

fn refused(refusal: Refusal) -> DocumentsError {
    match refusal {
        Refusal::Archive(detail) => DocumentsError::ArchiveNotSupported { detail },
        Refusal::Mismatch(detail) => DocumentsError::UnsupportedFileType { detail },
        Refusal::Binary => DocumentsError::BinaryContent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_are_classified() {
        assert_eq!(
            check_extension(Some("MD")).map(|f| f.extension).ok(),
            Some("md")
        );
        for ext in ["docx", "pdf", "srt", "png", "doc"] {
            assert!(check_extension(Some(ext)).is_ok(), "{ext}");
        }
        for ext in ["zip", "tar", "gz", "7z", "rar", "jar", "iso", "zst"] {
            assert!(
                matches!(
                    check_extension(Some(ext)),
                    Err(DocumentsError::ArchiveNotSupported { .. })
                ),
                "{ext}"
            );
        }
        match check_extension(Some("exe")) {
            Err(DocumentsError::UnsupportedFileType { detail }) => {
                assert!(detail.contains("exe"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            check_extension(None),
            Err(DocumentsError::UnsupportedFileType { .. })
        ));
    }

    #[test]
    fn content_refusals_map_to_codes() {
        let txt = format_for("txt").expect("txt");
        assert!(check_content(txt, b"hello").is_ok());
        assert_eq!(
            check_content(txt, b"hel\0lo").map_err(|e| e.code()),
            Err("unsupported_file_type")
        );
        assert_eq!(
            check_content(txt, b"PK\x03\x04").map_err(|e| e.code()),
            Err("archive_not_supported")
        );
        let odt = format_for("odt").expect("odt");
        assert_eq!(
            check_content(odt, b"This is not a zip file!").map_err(|e| e.code()),
            Err("unsupported_file_type")
        );
    }
}
