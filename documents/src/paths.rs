//! Path boundary checks for files Shelf owns under the data directory: no symlinked
//! `uploads` directory, no symlinked parents, and the fixed layout `uploads/<id>/<name>`.

use std::path::{Path, PathBuf};

use crate::error::{DocumentsError, Result};
use crate::filename::normalize_filename;
use crate::ids::is_document_id;

/// Directory of uploads under the data directory.
pub const UPLOADS_DIR: &str = "uploads";
/// Staging directory (under `uploads`) where callers write incoming uploads.
pub const STAGING_DIR: &str = ".staging";
/// Directory of kept OCR page images (`page-images/<id>/page-NNNN.png`).
pub const PAGE_IMAGES_DIR: &str = "page-images";
/// Directory (under `uploads`) that holds a deleted document's files until removal.
pub const TRASH_DIR: &str = ".trash";

/// Refuses when an existing component of `base/components...` (below `base`, which is
/// trusted configuration) is a symlink (`InvalidPath`), or fails when an existing intermediate
/// one is not a directory (`Io`: a broken data directory, not a refused request).
/// Components that do not exist yet end the walk.
pub(crate) async fn check_no_symlinks(base: &Path, components: &[&str]) -> Result<()> {
    // One trip to the blocking pool for the whole walk, not one per component.
    let base = base.to_path_buf();
    let components: Vec<String> = components.iter().map(|c| c.to_string()).collect();
    blocking(move || {
        let components: Vec<&str> = components.iter().map(String::as_str).collect();
        check_no_symlinks_now(&base, &components)
    })
    .await
}

/// Runs file-system work on the blocking pool, in one trip; a task that could not finish
/// (the runtime shutting down) is an I/O error.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| DocumentsError::Io(std::io::Error::other(e.to_string())))?
}

/// [`check_no_symlinks`] on the calling thread (for code already on the blocking pool).
pub(crate) fn check_no_symlinks_now(base: &Path, components: &[&str]) -> Result<()> {
    let mut path = base.to_path_buf();
    let mut shown = String::new();
    for (index, component) in components.iter().enumerate() {
        path.push(component);
        if !shown.is_empty() {
            shown.push('/');
        }
        shown.push_str(component);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(DocumentsError::InvalidPath {
                    detail: format!("{shown} under the data directory is a symlink"),
                });
            }
            // Not the client's doing (nothing a request names puts a file there): an internal
            // failure, which ingest callers report as `ingest_failed`.
            Ok(meta) if index + 1 < components.len() && !meta.is_dir() => {
                return Err(DocumentsError::Io(std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    format!("{shown} under the data directory is not a directory"),
                )));
            }
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// The `[uploads, id, name]` components of an owned upload's relative storage path, or
/// `None` when the stored path does not have exactly that safe shape.
pub(crate) fn owned_upload_components<'a>(
    document_id: &str,
    storage_path: &'a str,
) -> Option<[&'a str; 3]> {
    let mut parts = storage_path.split('/');
    let (Some(uploads), Some(id), Some(name), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let name_ok = !name.is_empty() && normalize_filename(name) == name;
    (uploads == UPLOADS_DIR && id == document_id && is_document_id(id) && name_ok)
        .then_some([uploads, id, name])
}

/// Joins components onto a base.
pub(crate) fn join_all(base: &Path, components: &[&str]) -> PathBuf {
    let mut path = base.to_path_buf();
    for component in components {
        path.push(component);
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_layout_is_strict() {
        let id = "doc_0123456789abcdef";
        assert!(owned_upload_components(id, "uploads/doc_0123456789abcdef/a.txt").is_some());
        for bad in [
            "uploads/doc_0123456789abcdef/../x.txt",
            "uploads/doc_0123456789abcdef/..",
            "uploads/doc_fedcba9876543210/a.txt",
            "/uploads/doc_0123456789abcdef/a.txt",
            "uploads/doc_0123456789abcdef/sub/a.txt",
            "uploads/doc_0123456789abcdef/",
            "other/doc_0123456789abcdef/a.txt",
            "/etc/passwd",
        ] {
            assert!(owned_upload_components(id, bad).is_none(), "{bad}");
        }
    }

    #[tokio::test]
    async fn symlinked_components_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path();
        assert!(check_no_symlinks(base, &["uploads", "x"]).await.is_ok());
        let outside = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(outside.path(), base.join("uploads")).expect("symlink");
        assert!(matches!(
            check_no_symlinks(base, &["uploads", "x"]).await,
            Err(DocumentsError::InvalidPath { .. })
        ));
        std::fs::write(base.join("file"), b"x").expect("write");
        assert!(matches!(
            check_no_symlinks(base, &["file", "x"]).await,
            Err(DocumentsError::Io(e)) if e.kind() == std::io::ErrorKind::NotADirectory
        ));
    }
}
