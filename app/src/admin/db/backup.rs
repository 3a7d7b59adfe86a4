//! `shelf admin db-backup` and `db-restore`: online backup (`VACUUM INTO` a verified temp
//! file that then replaces the destination) and restore (verify, set the old file and its
//! sidecars aside, rename; undone on failure). The workspace backup and restore reuse the
//! snapshot, the verification and the swap.

use shelf_db::sql::SqlExt;
use std::path::{Path, PathBuf};

use sea_orm::{DbBackend, Statement};
use serde::Serialize;
use shelf_migrations::known_migrations;

use super::super::lock;
use super::super::paths::{
    absolute, backup_destination, refuse_symlinks, sidecars, source_file, sync_dir,
};
use super::{
    AdminError, Settings, file_len, integrity, live_database, open_file, rows, sqlite_only,
};
use crate::db::{SchemaStatus, schema_status};

/// A written backup.
#[derive(Debug, Clone, Serialize)]
pub struct DbBackup {
    pub destination: PathBuf,
    pub bytes: u64,
    pub applied_migrations: Vec<String>,
}

/// A finished restore.
#[derive(Debug, Clone, Serialize)]
pub struct DbRestore {
    pub database: PathBuf,
    pub applied_migrations: Vec<String>,
    /// Migrations this shelf knows that the backup predates: `shelf migrate` applies them.
    pub pending_migrations: Vec<String>,
}
/// What to use instead of `db-backup` on PostgreSQL.
const PG_BACKUP: &str = "back the database up with \
     `pg_dump --format=custom --file=shelf.dump \"$SHELF_DATABASE_URL\"`";
/// What to use instead of `db-restore` on PostgreSQL.
const PG_RESTORE: &str = "stop the services, then restore a `pg_dump` archive with \
     `pg_restore --clean --if-exists --dbname=\"$SHELF_DATABASE_URL\" shelf.dump`";

/// Writes a consistent copy of the live database to `into` (an empty or missing file) with
/// `VACUUM INTO`, which reads one snapshot and so works while the API and workers write, then
/// verifies the copy.
pub(crate) async fn snapshot(settings: &Settings, into: &Path) -> Result<SchemaStatus, AdminError> {
    sqlite_only(settings, "a database snapshot", PG_BACKUP)?;
    let database = live_database(settings)?;
    let target = into
        .to_str()
        .ok_or_else(|| AdminError::InvalidDestination {
            detail: format!("{} is not a UTF-8 path", into.display()),
        })?;
    let db = open_file(&database).await?;
    let result = db
        .execute_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "VACUUM INTO ?",
            [target.into()],
        ))
        .await;
    db.close().await?;
    result?;
    verify_backup(into).await
}

/// Verifies a database file that is about to become (or was just written as) a backup: a
/// SQLite file that passes `integrity_check`, written by Shelf, and not by a newer one. The
/// file is switched to rollback journaling, so it is complete on its own, without sidecars.
pub(crate) async fn verify_backup(path: &Path) -> Result<SchemaStatus, AdminError> {
    let shown = path.display().to_string();
    let db = open_file(path)
        .await
        .map_err(|e| AdminError::invalid(format!("{shown}: {e}")))?;
    let result = async {
        rows(&db, "PRAGMA journal_mode = DELETE").await?;
        let integrity = integrity(&db).await;
        if integrity != ["ok"] {
            return Err(AdminError::invalid(format!(
                "the integrity check failed: {}",
                integrity.join("; ")
            )));
        }
        Ok(schema_status(&db).await.ok())
    }
    .await
    .map_err(|e| match e {
        AdminError::Db(detail) => AdminError::invalid(format!("{shown}: {detail}")),
        other => other,
    });
    db.close().await?;
    let status =
        result?.ok_or_else(|| AdminError::invalid("its migration history is unreadable"))?;
    let known = known_migrations();
    if !status.applied.iter().any(|m| known.contains(m)) {
        return Err(AdminError::invalid(
            "it is not a Shelf database (no Shelf migrations applied)",
        ));
    }
    if !status.unknown.is_empty() {
        return Err(AdminError::BackupTooNew {
            unknown: status.unknown,
        });
    }
    Ok(status)
}

/// Where a test makes a restore fail: called with the name of each step of the swap before it
/// runs (`move-files`, `put-files`, `keep-database`, `move-sidecars`, `rename-database`); an error there
/// fails the restore as a real one would. Restores outside tests pass [`no_fault`].
pub(crate) type Fault<'a> = &'a (dyn Fn(&'static str) -> std::io::Result<()> + Sync);

/// The [`Fault`] of every real restore: none.
pub(crate) fn no_fault(_step: &'static str) -> std::io::Result<()> {
    Ok(())
}

/// A new database in place, the one it replaced (and that one's sidecars) kept beside it in a
/// `.shelf-restore-previous-*` directory until [`commit`](Self::commit) removes them or
/// [`rollback`](Self::rollback) puts them back.
pub(crate) struct InstalledDatabase {
    database: PathBuf,
    dir: PathBuf,
    aside: tempfile::TempDir,
    /// The old database is hard-linked into `aside`.
    kept_database: bool,
    /// The old sidecars moved into `aside`, by their original paths.
    moved: Vec<PathBuf>,
    /// The new file took the database's name.
    renamed: bool,
}

impl InstalledDatabase {
    fn aside(&self, original: &Path) -> PathBuf {
        self.aside
            .path()
            .join(original.file_name().unwrap_or_default())
    }

    /// The restore is complete: the replaced database and its sidecars go.
    pub(crate) fn commit(self) {
        let kept = self.aside.path().to_path_buf();
        if let Err(error) = self.aside.close() {
            tracing::warn!(path = %kept.display(), %error, "cannot remove the replaced database");
        }
    }

    /// Puts the old database and its sidecars back as they were. If that fails too, the
    /// directory that holds them is kept, and the error names it.
    pub(crate) fn rollback(self) -> Result<(), AdminError> {
        let undo = || -> std::io::Result<()> {
            if self.renamed {
                if self.kept_database {
                    std::fs::rename(self.aside(&self.database), &self.database)?;
                } else {
                    std::fs::remove_file(&self.database)?;
                }
            }
            for sidecar in self.moved.iter().rev() {
                std::fs::rename(self.aside(sidecar), sidecar)?;
            }
            std::fs::File::open(&self.dir)?.sync_all()
        };
        match undo() {
            Ok(()) => {
                drop(self.aside);
                Ok(())
            }
            Err(source) => {
                let kept = self.aside.keep();
                Err(AdminError::Io {
                    what: format!(
                        "the old database could not be put back; it and its -wal/-shm files are \
                         in {}: move them back beside {} by hand",
                        kept.display(),
                        self.database.display()
                    ),
                    source,
                })
            }
        }
    }
}

/// Puts a verified database file in place so that a failure at any step leaves the old
/// database as it was, its committed transactions included:
///
/// 1. the old file is hard-linked into a `.shelf-restore-previous-*` directory beside it;
/// 2. its `-wal`, `-shm` and `-journal` sidecars are moved there (an old WAL left beside the
///    new file would be replayed into it and corrupt it, so they go first, but nothing is
///    deleted);
/// 3. the new file is renamed over the database, atomically, and the directory synced.
///
/// A failure undoes what was done. The caller commits (removing the old files) once the whole
/// restore has succeeded, or rolls back if a later step of its own fails.
pub(crate) fn install_database(
    verified: tempfile::TempPath,
    database: &Path,
    fault: Fault<'_>,
) -> Result<InstalledDatabase, AdminError> {
    std::fs::File::open(&verified)
        .and_then(|f| f.sync_all())
        .map_err(AdminError::io("cannot sync", &verified))?;
    let dir = database.parent().unwrap_or(Path::new("/")).to_path_buf();
    let aside = tempfile::Builder::new()
        .prefix(".shelf-restore-previous-")
        .tempdir_in(&dir)
        .map_err(AdminError::io(
            "cannot create a temporary directory in",
            &dir,
        ))?;
    let mut installed = InstalledDatabase {
        database: database.to_path_buf(),
        dir,
        aside,
        kept_database: false,
        moved: Vec::new(),
        renamed: false,
    };
    let failed = |installed: InstalledDatabase, e: AdminError| match installed.rollback() {
        Ok(()) => e.undone("the restore was undone: the old database and its WAL are in place"),
        Err(undo) => undo,
    };
    if let Err(e) = fault("keep-database").and_then(|()| {
        if std::fs::symlink_metadata(database).is_ok_and(|m| m.is_file()) {
            std::fs::hard_link(database, installed.aside(database))?;
            installed.kept_database = true;
        }
        Ok(())
    }) {
        let e = AdminError::io("cannot keep the current database", database)(e);
        return Err(failed(installed, e));
    }
    for sidecar in sidecars(database) {
        if std::fs::symlink_metadata(&sidecar).is_err() {
            continue;
        }
        let target = installed.aside(&sidecar);
        if let Err(e) = fault("move-sidecars").and_then(|()| std::fs::rename(&sidecar, &target)) {
            let e = AdminError::io("cannot move aside", &sidecar)(e);
            return Err(failed(installed, e));
        }
        installed.moved.push(sidecar);
    }
    // On failure the new file is dropped (and so removed) here.
    let renamed = fault("rename-database")
        .and_then(|()| verified.persist(database).map_err(|e| e.error).map(|_| ()));
    if let Err(e) = renamed {
        return Err(failed(
            installed,
            AdminError::io("cannot replace", database)(e),
        ));
    }
    installed.renamed = true;
    if let Err(e) = sync_dir(&installed.dir) {
        return Err(failed(installed, e));
    }
    Ok(installed)
}

/// A temp file beside `path` (same file system, so the final rename is atomic).
pub(crate) fn temp_beside(dir: &Path, prefix: &str) -> Result<tempfile::NamedTempFile, AdminError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(AdminError::io("cannot create a temporary file in", dir))
}

/// The database path a restore writes, checked for symlinks, with its directory created.
pub(crate) fn restore_target(
    settings: &Settings,
    what: &'static str,
) -> Result<PathBuf, AdminError> {
    let database = absolute(&settings.storage.database_path)?;
    refuse_symlinks(&database, what)?;
    if let Some(parent) = database.parent() {
        std::fs::create_dir_all(parent).map_err(AdminError::io("cannot create", parent))?;
    }
    Ok(database)
}

/// `shelf admin db-backup DEST`.
pub async fn backup(settings: &Settings, dest: &Path) -> Result<DbBackup, AdminError> {
    sqlite_only(settings, "db-backup", PG_BACKUP)?;
    let (destination, parent) = backup_destination(dest, "db-backup")?;
    let temp = temp_beside(&parent, ".shelf-db-backup-")?;
    let status = snapshot(settings, temp.path()).await?;
    temp.as_file()
        .sync_all()
        .map_err(AdminError::io("cannot sync", temp.path()))?;
    temp.persist(&destination)
        .map_err(|e| AdminError::io("cannot write", &destination)(e.error))?;
    sync_dir(&parent)?;
    Ok(DbBackup {
        bytes: file_len(&destination),
        destination,
        applied_migrations: status.applied,
    })
}

/// `shelf admin db-restore FILE --yes`: refused while any process holds the data directory.
/// A failure leaves the old database as it was (see [`install_database`]).
pub async fn restore(settings: &Settings, file: &Path) -> Result<DbRestore, AdminError> {
    restore_with(settings, file, &no_fault).await
}

pub(crate) async fn restore_with(
    settings: &Settings,
    file: &Path,
    fault: Fault<'_>,
) -> Result<DbRestore, AdminError> {
    sqlite_only(settings, "db-restore", PG_RESTORE)?;
    let source = source_file(file)?;
    let _lock = lock::hold_exclusive(&settings.storage.data_dir, "the database")?;
    let database = restore_target(settings, "db-restore")?;
    let parent = database.parent().unwrap_or(Path::new("/"));
    let temp = temp_beside(parent, ".shelf-db-restore-")?.into_temp_path();
    tokio::fs::copy(&source, &temp)
        .await
        .map_err(AdminError::io("cannot copy", &source))?;
    // The copy took the source's mode; a restored database is private to its owner.
    std::fs::set_permissions(&temp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(AdminError::io("cannot set the mode of", &temp))?;
    let status = verify_backup(&temp).await?;
    install_database(temp, &database, fault)?.commit();
    Ok(DbRestore {
        database,
        applied_migrations: status.applied,
        pending_migrations: status.pending,
    })
}
