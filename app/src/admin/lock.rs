//! Who is using the data directory: every process that writes the database or the data
//! directory (`shelf api`, `worker`, `import` and `import --watch`, `process`, `delete`,
//! `migrate`, and the other commands that open the Shelf, admin ones included) and the
//! backups hold a shared `flock` on `<data_dir>/shelf.lock` for as long as they run, and a
//! restore takes it exclusively without waiting. The kernel drops a lock when its process dies
//! (even on SIGKILL), so a crashed process never blocks a restore and no PID file can go
//! stale. The lock is a file, so it coordinates the processes of one host that share the data
//! directory, on either backend.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use shelf_documents::DataDir;

use super::AdminError;

/// A held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
    pub path: PathBuf,
}

fn open_lock_file(data_dir: &Path) -> Result<(File, PathBuf), AdminError> {
    std::fs::create_dir_all(data_dir).map_err(AdminError::io("cannot create", data_dir))?;
    let path = DataDir::new(data_dir).lock_file();
    // A symlinked lock file could point two data directories at one lock, or at a file the
    // operator cares about: refuse it.
    if let Ok(meta) = std::fs::symlink_metadata(&path)
        && meta.file_type().is_symlink()
    {
        return Err(AdminError::SymlinkedPath {
            what: "the data directory lock",
            path,
        });
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(AdminError::io("cannot open the lock file", &path))?;
    Ok((file, path))
}

/// Held by every writer while it runs: many may share it; a restore in progress (the
/// exclusive holder) makes them refuse to start (`restore_in_progress`).
pub fn hold_shared(data_dir: &Path) -> Result<DataDirLock, AdminError> {
    let (file, path) = open_lock_file(data_dir)?;
    match file.try_lock_shared() {
        Ok(()) => Ok(DataDirLock { _file: file, path }),
        Err(TryLockError::WouldBlock) => Err(AdminError::RestoreInProgress { lock: path }),
        Err(TryLockError::Error(e)) => Err(AdminError::io("cannot lock", &path)(e)),
    }
}

/// Taken by restores: fails at once, without waiting, while any process holds the shared lock
/// (`database_in_use`).
pub fn hold_exclusive(data_dir: &Path, what: &'static str) -> Result<DataDirLock, AdminError> {
    let (file, path) = open_lock_file(data_dir)?;
    match file.try_lock() {
        Ok(()) => Ok(DataDirLock { _file: file, path }),
        Err(TryLockError::WouldBlock) => Err(AdminError::DatabaseInUse { what, lock: path }),
        Err(TryLockError::Error(e)) => Err(AdminError::io("cannot lock", &path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_holders_block_the_exclusive_one_and_the_other_way_round() {
        let dir = tempfile::tempdir().unwrap();
        let api = hold_shared(dir.path()).unwrap();
        let worker = hold_shared(dir.path()).unwrap();
        let err = hold_exclusive(dir.path(), "db-restore").unwrap_err();
        assert_eq!(err.code(), "database_in_use");
        drop(api);
        assert!(hold_exclusive(dir.path(), "db-restore").is_err());
        drop(worker);
        let restore = hold_exclusive(dir.path(), "db-restore").unwrap();
        assert_eq!(
            hold_shared(dir.path()).unwrap_err().code(),
            "restore_in_progress"
        );
        drop(restore);
        assert!(hold_shared(dir.path()).is_ok());
    }

    #[test]
    fn a_symlinked_lock_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let lock_file = DataDir::new(dir.path()).lock_file();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), lock_file).unwrap();
        assert_eq!(
            hold_shared(dir.path()).unwrap_err().code(),
            "symlinked_path"
        );
    }
}
