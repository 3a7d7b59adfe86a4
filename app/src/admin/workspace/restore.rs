//! Restoring a workspace backup: the archive is inspected, its members staged beside their
//! targets, then the files and the database are swapped in, keeping everything they replace
//! until both are in place, so a failure at any step puts the old workspace back as it was.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use shelf_documents::DataDir;

use super::super::db::{self, install_database, restore_target, temp_beside};
use super::super::lock;
use super::super::paths::{absolute, refuse_symlinks, sidecars, source_file};
use super::super::{AdminError, Progress, blocking};
use super::inspect::{Archive, extract, inspect};
use super::{DATA_PREFIX, DATABASE_MEMBER, Manifest, RestoreLimits};
use crate::settings::Settings;

/// Top-level data-directory entries a restore always replaces, present in the backup or not:
/// the files the restored database refers to.
const MANAGED_DIRS: [&str; 2] = DataDir::MANAGED_DIRS;

#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceRestore {
    pub database: PathBuf,
    pub data_dir: PathBuf,
    pub files: usize,
    pub file_bytes: u64,
    pub applied_migrations: Vec<String>,
    pub pending_migrations: Vec<String>,
}
/// What a restore unpacked, not yet in place.
struct Staged {
    dir: tempfile::TempDir,
    database: tempfile::TempPath,
}

fn stage(
    mut zip: Archive,
    manifest: &Manifest,
    data_dir: &Path,
    database_dir: &Path,
    progress: &dyn Progress,
) -> Result<Staged, AdminError> {
    let total = manifest.database.bytes + manifest.files.iter().map(|f| f.bytes).sum::<u64>();
    progress.start("restoring", total);
    // Inside the data directory, so moving the files in is a rename on one file system.
    let dir = tempfile::Builder::new()
        .prefix(".shelf-restore-")
        .tempdir_in(data_dir)
        .map_err(AdminError::io(
            "cannot create a temporary directory in",
            data_dir,
        ))?;
    let temp = temp_beside(database_dir, ".shelf-db-restore-")?;
    let out = temp
        .as_file()
        .try_clone()
        .map_err(AdminError::io("cannot write", temp.path()))?;
    extract(&mut zip, DATABASE_MEMBER, &manifest.database, out, progress)?;
    let database = temp.into_temp_path();
    for file in &manifest.files {
        let target = dir.path().join("data").join(&file.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(AdminError::io("cannot create", parent))?;
        }
        let out = File::create_new(&target).map_err(AdminError::io("cannot create", &target))?;
        extract(
            &mut zip,
            &format!("{DATA_PREFIX}{}", file.path),
            file,
            out,
            progress,
        )?;
    }
    Ok(Staged { dir, database })
}

/// The top-level data-directory entries a restore replaces.
fn managed_entries(manifest: &Manifest) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = MANAGED_DIRS.iter().map(|s| s.to_string()).collect();
    for file in &manifest.files {
        if let Some(top) = file.path.split('/').next() {
            names.insert(top.to_string());
        }
    }
    names
}

/// The staged entries in place, what they replaced kept in the staging directory's
/// `previous/` until [`commit`](Self::commit) removes it or [`rollback`](Self::rollback) puts
/// it back.
struct InstalledFiles {
    data_dir: PathBuf,
    staged: tempfile::TempDir,
    /// Each top-level name handled, in order: whether an entry it replaced is in `previous/`,
    /// and whether the backup's entry took its place.
    swapped: Vec<(String, bool, bool)>,
}

impl InstalledFiles {
    fn previous(&self) -> PathBuf {
        self.staged.path().join("previous")
    }

    fn incoming(&self, name: &str) -> PathBuf {
        self.staged.path().join("data").join(name)
    }

    /// The restore is complete: the replaced files go with the staging directory.
    fn commit(self) {
        let kept = self.staged.path().to_path_buf();
        if let Err(error) = self.staged.close() {
            tracing::warn!(path = %kept.display(), %error, "cannot remove the replaced files");
        }
    }

    /// Puts every replaced entry back and the backup's entries back into staging, last first.
    /// If that fails too, the staging directory (holding them) is kept, and the error names it.
    fn rollback(self) -> Result<(), AdminError> {
        let undo = || -> std::io::Result<()> {
            for (name, replaced, put_in) in self.swapped.iter().rev() {
                let current = self.data_dir.join(name);
                if *put_in {
                    std::fs::rename(&current, self.incoming(name))?;
                }
                if *replaced {
                    std::fs::rename(self.previous().join(name), &current)?;
                }
            }
            std::fs::File::open(&self.data_dir)?.sync_all()
        };
        match undo() {
            Ok(()) => {
                drop(self.staged);
                Ok(())
            }
            Err(source) => {
                let kept = self.staged.keep();
                Err(AdminError::Io {
                    what: format!(
                        "the restore failed and the old files could not all be put back; they \
                         are in {}/previous: move them back into {} by hand",
                        kept.display(),
                        self.data_dir.display()
                    ),
                    source,
                })
            }
        }
    }
}

/// Swaps the staged entries in; what they replace moves into the staging directory (same
/// file system: renames only), kept until the whole restore has succeeded. A failure puts
/// back what was moved.
fn install_files(
    data_dir: &Path,
    staged: tempfile::TempDir,
    managed: &BTreeSet<String>,
    fault: db::Fault<'_>,
) -> Result<InstalledFiles, AdminError> {
    let mut installed = InstalledFiles {
        data_dir: data_dir.to_path_buf(),
        staged,
        swapped: Vec::new(),
    };
    let swap = |installed: &mut InstalledFiles| -> std::io::Result<()> {
        std::fs::create_dir(installed.previous())?;
        for name in managed {
            fault("move-files")?;
            let current = data_dir.join(name);
            let replaced = std::fs::symlink_metadata(&current).is_ok();
            if replaced {
                std::fs::rename(&current, installed.previous().join(name))?;
            }
            installed.swapped.push((name.clone(), replaced, false));
            let incoming = installed.incoming(name);
            if std::fs::symlink_metadata(&incoming).is_ok() {
                fault("put-files")?;
                std::fs::rename(&incoming, &current)?;
                if let Some(last) = installed.swapped.last_mut() {
                    last.2 = true;
                }
            }
        }
        std::fs::File::open(data_dir)?.sync_all()
    };
    match swap(&mut installed) {
        Ok(()) => Ok(installed),
        Err(source) => {
            let failed = AdminError::Io {
                what: "the restore stopped while moving files in; the old files are back".into(),
                source,
            };
            installed.rollback()?;
            Err(failed)
        }
    }
}

/// `shelf admin workspace-restore FILE.zip --yes`: refused while any process holds the data
/// directory, and before anything is written if the archive breaks any rule. A failure while
/// the files or the database are swapped in leaves the old workspace as it was.
pub async fn restore(
    settings: &Settings,
    file: &Path,
    limits: RestoreLimits,
    progress: Arc<dyn Progress>,
) -> Result<WorkspaceRestore, AdminError> {
    restore_with(settings, file, limits, progress, &db::no_fault).await
}

async fn restore_with(
    settings: &Settings,
    file: &Path,
    limits: RestoreLimits,
    progress: Arc<dyn Progress>,
    fault: db::Fault<'_>,
) -> Result<WorkspaceRestore, AdminError> {
    db::sqlite_only(
        settings,
        "workspace-restore",
        "stop the services, restore the database with `pg_restore --clean --if-exists \
         --dbname=\"$SHELF_DATABASE_URL\" shelf.dump` and copy the data directory's files back",
    )?;
    let source = source_file(file)?;
    let (zip, manifest) = blocking(move || inspect(&source, &limits)).await?;
    let _lock = lock::hold_exclusive(&settings.storage.data_dir, "the workspace")?;
    let data_dir = absolute(&settings.storage.data_dir)?;
    refuse_symlinks(&data_dir, "workspace-restore")?;
    let database = restore_target(settings, "workspace-restore")?;
    let managed = managed_entries(&manifest);
    let mut reserved = vec![DataDir::new(&data_dir).lock_file(), database.clone()];
    reserved.extend(sidecars(&database));
    for name in &managed {
        let path = data_dir.join(name);
        if reserved.contains(&path) || name.starts_with(".shelf-") {
            return Err(AdminError::UnsafeMember {
                name: format!("{DATA_PREFIX}{name}"),
                reason: "it would overwrite the live database or the lock file",
            });
        }
        refuse_symlinks(&path, "workspace-restore")?;
    }
    let database_dir = database.parent().unwrap_or(Path::new("/")).to_path_buf();
    let (staged, manifest) = {
        let data_dir = data_dir.clone();
        blocking(move || {
            let staged = stage(zip, &manifest, &data_dir, &database_dir, progress.as_ref())?;
            Ok((staged, manifest))
        })
        .await?
    };
    let status = db::verify_backup(&staged.database).await?;
    // Files first, then the database; until both are in place everything they replace is
    // kept, and a failure of either puts the old workspace back as it was.
    let files = install_files(&data_dir, staged.dir, &managed, fault)?;
    let installed = match install_database(staged.database, &database, fault) {
        Ok(installed) => installed,
        Err(e) => {
            files.rollback()?;
            return Err(e.undone("the old files are back too"));
        }
    };
    installed.commit();
    files.commit();
    Ok(WorkspaceRestore {
        database,
        data_dir,
        files: manifest.files.len(),
        file_bytes: manifest.files.iter().map(|f| f.bytes).sum(),
        applied_migrations: status.applied,
        pending_migrations: status.pending,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeMap;

    use zip::ZipArchive;

    use super::super::backup;
    use super::super::{FORMAT, FORMAT_VERSION, ManifestFile};

    use std::sync::atomic::{AtomicUsize, Ordering};

    use shelf_documents::DocumentStore;

    fn settings_for(data_dir: &Path) -> Settings {
        let vars = [("SHELF_DATA_DIR".to_string(), data_dir.display().to_string())];
        Settings::from_vars(&vars.into_iter().collect()).expect("settings")
    }

    async fn ingest(store: &DocumentStore, name: &str, body: &str) -> String {
        let mut sink =
            crate::uploads::UploadSink::begin(store.clone(), name, 1 << 20).expect("begin");
        sink.push(body.as_bytes()).await.expect("push");
        sink.finish().await.expect("finish").document.id
    }

    /// Every regular file under `dir`, relative, with its bytes.
    fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
                let path = entry.path();
                if entry.file_type().expect("type").is_dir() {
                    walk(root, &path, out);
                } else {
                    let rel = path
                        .strip_prefix(root)
                        .expect("prefix")
                        .display()
                        .to_string();
                    out.insert(rel, std::fs::read(&path).expect("read"));
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(dir, dir, &mut out);
        out
    }

    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
            let target = to.join(entry.file_name());
            if entry.file_type().expect("type").is_dir() {
                copy_tree(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).expect("copy");
            }
        }
    }

    /// A workspace as a killed service leaves it: documents A and B, backed up into the
    /// returned archive, then C, committed to the WAL (`shelf.sqlite-wal`) and not yet to the
    /// database file, so a restore that lost the WAL would lose C.
    struct Crashed {
        _dir: tempfile::TempDir,
        data: PathBuf,
        archive: PathBuf,
        ids: [String; 3],
    }

    async fn crashed_workspace() -> Crashed {
        let dir = tempfile::tempdir().expect("tempdir");
        let live = dir.path().join("live");
        let settings = settings_for(&live);
        let db = crate::db::connect(&settings.storage.database_path, 2)
            .await
            .expect("connect");
        crate::db::migrate(&db).await.expect("migrate");
        let store = DocumentStore::new(db.clone(), live.clone());
        let a = ingest(&store, "a.txt", "Document A, in the backup.\n").await;
        let b = ingest(&store, "b.txt", "Document B, in the backup.\n").await;
        // A page image the backup holds, changed after it: both swapped entries differ.
        let image = live.join("page-images").join(&a).join("page-0001.png");
        std::fs::create_dir_all(image.parent().expect("parent")).expect("mkdir");
        std::fs::write(&image, b"the page as backed up").expect("write");
        let archive = dir.path().join("workspace.zip");
        backup(&settings, &archive, Arc::new(crate::admin::Silent))
            .await
            .expect("backup");
        let c = ingest(&store, "c.txt", "Document C, written after the backup.\n").await;
        std::fs::write(&image, b"the page as read again").expect("write");
        // The copy is what SIGKILL would leave: the database file and its WAL (the
        // wal-index is rebuilt by the next opener), the uploads, no process.
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("mkdir");
        for name in ["shelf.sqlite", "shelf.sqlite-wal"] {
            std::fs::copy(live.join(name), data.join(name)).expect("copy");
        }
        copy_tree(&live.join("uploads"), &data.join("uploads"));
        copy_tree(&live.join("page-images"), &data.join("page-images"));
        std::fs::write(data.join("keep-me.txt"), b"not in the backup").expect("write");
        db.close().await.expect("close");
        drop(lock::hold_shared(&data).expect("lock file"));
        // Without its WAL the database file does not hold C.
        let alone = dir.path().join("alone.sqlite");
        std::fs::copy(data.join("shelf.sqlite"), &alone).expect("copy");
        let db = crate::db::connect(&alone, 1).await.expect("connect");
        let store = DocumentStore::new(db.clone(), dir.path());
        assert!(store.get(&c).await.is_err(), "C must be in the WAL only");
        db.close().await.expect("close");
        Crashed {
            _dir: dir,
            data,
            archive,
            ids: [a, b, c],
        }
    }

    /// Fails the `nth` time the swap reaches `step`.
    fn fail_at(
        step: &'static str,
        nth: usize,
    ) -> impl Fn(&'static str) -> std::io::Result<()> + Sync {
        let seen = AtomicUsize::new(0);
        move |at| {
            if at == step && seen.fetch_add(1, Ordering::SeqCst) + 1 == nth {
                Err(std::io::Error::other(format!("injected failure at {step}")))
            } else {
                Ok(())
            }
        }
    }

    async fn documents_readable(data: &Path, ids: &[String]) -> usize {
        let settings = settings_for(data);
        let db = crate::db::connect(&settings.storage.database_path, 1)
            .await
            .expect("connect");
        let store = DocumentStore::new(db.clone(), data);
        let (_, total) = store.list(&Default::default(), 100, 0).await.expect("list");
        for id in ids {
            let doc = store.get(id).await.expect("document");
            let bytes = std::fs::read(data.join(&doc.storage_path)).expect("file");
            assert_eq!(bytes.len() as u64, doc.byte_size);
        }
        db.close().await.expect("close");
        total as usize
    }

    #[tokio::test]
    async fn a_restore_that_fails_while_swapping_leaves_the_old_workspace_as_it_was() {
        let crashed = crashed_workspace().await;
        let settings = settings_for(&crashed.data);
        let before = snapshot(&crashed.data);
        assert!(
            before.contains_key("shelf.sqlite-wal"),
            "{:?}",
            before.keys()
        );
        for (step, nth) in [
            ("move-files", 1),
            ("put-files", 1),
            ("move-files", 2),
            ("put-files", 2),
            ("keep-database", 1),
            ("move-sidecars", 1),
            ("rename-database", 1),
        ] {
            let fault = fail_at(step, nth);
            let err = restore_with(
                &settings,
                &crashed.archive,
                RestoreLimits::default(),
                Arc::new(crate::admin::Silent),
                &fault,
            )
            .await
            .expect_err(step);
            assert_eq!(err.code(), "io_error", "{step} {nth}: {err}");
            assert!(err.to_string().contains("injected"), "{err}");
            // Byte for byte: the database, its WAL, every upload, nothing new beside them.
            let after = snapshot(&crashed.data);
            assert_eq!(
                after.keys().collect::<Vec<_>>(),
                before.keys().collect::<Vec<_>>(),
                "{step} {nth}"
            );
            assert!(after == before, "{step} {nth}: contents changed");
        }
        // `db-restore` swaps the database the same way.
        let backup_file = crashed.archive.with_file_name("backup.sqlite");
        let mut zip = ZipArchive::new(File::open(&crashed.archive).expect("open")).expect("zip");
        std::io::copy(
            &mut zip.by_name(DATABASE_MEMBER).expect("member"),
            &mut File::create(&backup_file).expect("create"),
        )
        .expect("extract");
        for step in ["keep-database", "move-sidecars", "rename-database"] {
            let err = db::restore_with(&settings, &backup_file, &fail_at(step, 1))
                .await
                .expect_err(step);
            assert!(err.to_string().contains("injected"), "{err}");
            assert!(snapshot(&crashed.data) == before, "db-restore at {step}");
        }
        // Every document committed before the failures, C included, is there.
        assert_eq!(documents_readable(&crashed.data, &crashed.ids).await, 3);

        // Without a fault the same restore goes through: A and B, and nothing of the old.
        let restored = restore(
            &settings,
            &crashed.archive,
            RestoreLimits::default(),
            Arc::new(crate::admin::Silent),
        )
        .await
        .expect("restore");
        assert_eq!(restored.files, 3);
        let image = crashed
            .data
            .join("page-images")
            .join(&crashed.ids[0])
            .join("page-0001.png");
        assert_eq!(
            std::fs::read(image).expect("image"),
            b"the page as backed up"
        );
        assert_eq!(
            documents_readable(&crashed.data, &crashed.ids[..2]).await,
            2
        );
        let names: Vec<String> = snapshot(&crashed.data).into_keys().collect();
        assert!(names.contains(&"keep-me.txt".to_string()), "{names:?}");
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with(".shelf-") || n.contains(&crashed.ids[2])),
            "{names:?}"
        );
    }

    #[test]
    fn managed_entries_always_include_the_document_directories() {
        let manifest = Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            shelf_version: "0".into(),
            created_at: String::new(),
            database: ManifestFile {
                path: DATABASE_MEMBER.into(),
                bytes: 0,
                sha256: String::new(),
            },
            applied_migrations: vec![],
            files: vec![ManifestFile {
                path: "converted/a.md".into(),
                bytes: 1,
                sha256: String::new(),
            }],
            skipped: vec![],
        };
        let names: Vec<_> = managed_entries(&manifest).into_iter().collect();
        assert_eq!(names, ["converted", "page-images", "uploads"]);
    }
}
