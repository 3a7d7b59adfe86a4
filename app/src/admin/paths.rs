//! Path rules of backups and restores: a destination is never a symlink and never reached
//! through a symlinked directory (a link planted in the path would send a backup, or a restore,
//! somewhere the operator did not name); files land by rename in their own directory, then the
//! directory is synced so the rename survives a crash.

use std::path::{Component, Path, PathBuf};

use super::AdminError;

/// `path` made absolute against the working directory, without resolving links (resolving
/// them is what would hide a symlink from the checks below).
pub fn absolute(path: &Path) -> Result<PathBuf, AdminError> {
    std::path::absolute(path).map_err(AdminError::io("cannot resolve", path))
}

/// Refuses `path` if it, or any existing directory on the way to it, is a symlink. `..` is
/// refused too: it would make the checked chain differ from the one the kernel walks.
pub fn refuse_symlinks(path: &Path, what: &'static str) -> Result<(), AdminError> {
    let path = absolute(path)?;
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(AdminError::InvalidDestination {
            detail: format!("{what}: {} contains `..`", path.display()),
        });
    }
    let mut walked = PathBuf::new();
    for component in path.components() {
        walked.push(component);
        match std::fs::symlink_metadata(&walked) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(AdminError::SymlinkedPath { what, path: walked });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(AdminError::io("cannot inspect", &walked)(e)),
        }
    }
    Ok(())
}

/// Checks a file a backup will write: no symlink anywhere on its path, an existing parent
/// directory, and not a directory itself. Returns the absolute destination and its parent.
pub fn backup_destination(
    dest: &Path,
    what: &'static str,
) -> Result<(PathBuf, PathBuf), AdminError> {
    let dest = absolute(dest)?;
    refuse_symlinks(&dest, what)?;
    let parent = dest
        .parent()
        .filter(|p| p.is_dir())
        .ok_or_else(|| AdminError::InvalidDestination {
            detail: format!(
                "{what}: the directory of {} does not exist; create it first",
                dest.display()
            ),
        })?
        .to_path_buf();
    if dest.is_dir() || dest.file_name().is_none() {
        return Err(AdminError::InvalidDestination {
            detail: format!("{what}: {} is a directory; name a file", dest.display()),
        });
    }
    Ok((dest, parent))
}

/// A backup or archive a restore reads: an existing regular file.
pub fn source_file(file: &Path) -> Result<PathBuf, AdminError> {
    let file = absolute(file)?;
    match std::fs::metadata(&file) {
        Ok(meta) if meta.is_file() => Ok(file),
        Ok(_) => Err(AdminError::invalid(format!(
            "{} is not a regular file",
            file.display()
        ))),
        Err(e) => Err(AdminError::io("cannot read", &file)(e)),
    }
}

/// Makes a finished rename durable: the directory entry is synced too.
pub fn sync_dir(dir: &Path) -> Result<(), AdminError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(AdminError::io("cannot sync", dir))
}

/// The SQLite sidecars of a database file (`-wal`, `-shm`, `-journal`).
pub fn sidecars(database: &Path) -> [PathBuf; 3] {
    ["-wal", "-shm", "-journal"].map(|suffix| {
        let mut name = database.as_os_str().to_os_string();
        name.push(suffix);
        PathBuf::from(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinked_files_and_parents_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(backup_destination(&real.join("b.sqlite"), "db-backup").is_ok());
        let err = backup_destination(&link.join("b.sqlite"), "db-backup").unwrap_err();
        assert_eq!(err.code(), "symlinked_path");
        std::os::unix::fs::symlink(real.join("target"), real.join("b.sqlite")).unwrap();
        let err = backup_destination(&real.join("b.sqlite"), "db-backup").unwrap_err();
        assert_eq!(err.code(), "symlinked_path");
    }

    #[test]
    fn missing_parents_directories_and_dot_dot_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let codes = [
            dir.path().join("missing/b.sqlite"),
            dir.path().to_path_buf(),
            dir.path().join("x/../b.sqlite"),
        ]
        .map(|p| backup_destination(&p, "db-backup").unwrap_err().code());
        assert_eq!(codes, ["invalid_destination"; 3]);
    }

    #[test]
    fn sidecars_are_named_after_the_file() {
        let [wal, shm, journal] = sidecars(Path::new("/d/shelf.sqlite"));
        assert_eq!(wal, Path::new("/d/shelf.sqlite-wal"));
        assert_eq!(shm, Path::new("/d/shelf.sqlite-shm"));
        assert_eq!(journal, Path::new("/d/shelf.sqlite-journal"));
    }
}
