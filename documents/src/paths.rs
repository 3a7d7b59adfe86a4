//! The data directory's layout (`DataDir`, the one place its names are spelled) and the path
//! boundary checks for files Shelf owns under it: no symlinked `uploads` directory, no
//! symlinked parents, and the fixed layout `uploads/<id>/<name>`.

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
/// The SQLite database file, unless `SHELF_DATABASE_PATH` puts it elsewhere.
pub const DATABASE_FILE: &str = "shelf.sqlite";
/// The lock file maintenance commands and backups hold (`flock`).
pub const LOCK_FILE: &str = "shelf.lock";
/// Directory of directory-import outputs in `workspace` mode.
pub const CONVERTED_DIR: &str = "converted";
/// Directory of `shelf import`'s hot-folder manifests.
pub const HOT_FOLDERS_DIR: &str = "hot-folders";

/// The layout of the data directory, in one place: every file and directory Shelf keeps
/// under it is named by a method here (the names are the constants above).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DataDir { root: root.into() }
    }

    /// The data directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<data_dir>/uploads`: one directory per document.
    pub fn uploads(&self) -> PathBuf {
        self.root.join(UPLOADS_DIR)
    }

    /// `<data_dir>/uploads/.staging`, where incoming uploads are written.
    pub fn staging(&self) -> PathBuf {
        self.uploads().join(STAGING_DIR)
    }

    /// `<data_dir>/uploads/.trash`, deleted documents' files until removal.
    pub fn trash(&self) -> PathBuf {
        self.uploads().join(TRASH_DIR)
    }

    /// `<data_dir>/page-images`.
    pub fn page_images(&self) -> PathBuf {
        self.root.join(PAGE_IMAGES_DIR)
    }

    /// `<data_dir>/page-images/<id>`: one document's kept OCR page images.
    pub fn document_page_images(&self, id: &str) -> PathBuf {
        join_all(&self.root, &[PAGE_IMAGES_DIR, id])
    }

    /// `page-NNNN.png`: the name of a kept page image in its document's directory.
    pub fn page_image_name(number: u32) -> String {
        format!("page-{number:04}.png")
    }

    /// `<data_dir>/shelf.sqlite`: the default SQLite database file.
    pub fn database_file(&self) -> PathBuf {
        self.root.join(DATABASE_FILE)
    }

    /// `<data_dir>/shelf.lock`.
    pub fn lock_file(&self) -> PathBuf {
        self.root.join(LOCK_FILE)
    }

    /// `<data_dir>/converted`: directory-import outputs in `workspace` mode.
    pub fn converted(&self) -> PathBuf {
        self.root.join(CONVERTED_DIR)
    }

    /// `<data_dir>/hot-folders`: `shelf import`'s default manifests.
    pub fn hot_folders(&self) -> PathBuf {
        self.root.join(HOT_FOLDERS_DIR)
    }

    /// The directories a workspace backup carries besides the database (`shelf admin
    /// workspace-backup`); both hold only files Shelf wrote.
    pub const MANAGED_DIRS: [&'static str; 2] = [UPLOADS_DIR, PAGE_IMAGES_DIR];
}

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
    fn the_layout_is_the_documented_one() {
        let d = DataDir::new("/d");
        assert_eq!(d.root(), Path::new("/d"));
        assert_eq!(d.uploads(), Path::new("/d/uploads"));
        assert_eq!(d.staging(), Path::new("/d/uploads/.staging"));
        assert_eq!(d.trash(), Path::new("/d/uploads/.trash"));
        assert_eq!(d.page_images(), Path::new("/d/page-images"));
        assert_eq!(
            d.document_page_images("doc_1"),
            Path::new("/d/page-images/doc_1")
        );
        assert_eq!(DataDir::page_image_name(7), "page-0007.png");
        assert_eq!(d.database_file(), Path::new("/d/shelf.sqlite"));
        assert_eq!(d.lock_file(), Path::new("/d/shelf.lock"));
        assert_eq!(d.converted(), Path::new("/d/converted"));
        assert_eq!(d.hot_folders(), Path::new("/d/hot-folders"));
    }

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
