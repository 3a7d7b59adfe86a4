//! Writing a workspace backup: a database snapshot, the data directory's files (walked
//! without following symlinks, uploads in flight left out) and the manifest, streamed into one
//! ZIP written beside its destination and renamed into place.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use shelf_documents::{DataDir, STAGING_DIR, TRASH_DIR, UPLOADS_DIR};
use zip::write::SimpleFileOptions;

use super::super::db;
use super::super::paths::{absolute, backup_destination, sidecars, sync_dir};
use super::super::{AdminError, Hashing, Progress, blocking};
use super::{
    DATA_PREFIX, DATABASE_MEMBER, FORMAT, FORMAT_VERSION, MANIFEST_MEMBER, Manifest, ManifestFile,
    Skipped, refuse_member_name,
};
use crate::settings::Settings;

/// Work in flight under `uploads/` (the document store's staging and trash), never backed up.
const TRANSIENT_UPLOAD_DIRS: [&str; 2] = [STAGING_DIR, TRASH_DIR];

#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceBackup {
    pub destination: PathBuf,
    pub bytes: u64,
    pub files: usize,
    pub file_bytes: u64,
    pub skipped: Vec<Skipped>,
    pub applied_migrations: Vec<String>,
}
/// A file found in the data directory.
struct Found {
    relative: String,
    path: PathBuf,
    bytes: u64,
}

/// Lists the data directory's regular files (sorted), without following symlinks, leaving out
/// `exclude` (the live database and its sidecars, the lock file, the backup being written),
/// Shelf's own temporary entries, and uploads in flight.
fn walk(data_dir: &Path, exclude: &[PathBuf]) -> Result<(Vec<Found>, Vec<Skipped>), AdminError> {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    let mut pending = vec![(data_dir.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        let mut entries = std::fs::read_dir(&dir)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(AdminError::io("cannot list", &dir))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let name = entry.file_name();
            let top = prefix.is_empty();
            let transient = match name.to_str() {
                Some(n) if top => n.starts_with(".shelf-") || n.starts_with(".ready-probe-"),
                Some(n) => {
                    prefix.strip_suffix('/') == Some(UPLOADS_DIR)
                        && TRANSIENT_UPLOAD_DIRS.contains(&n)
                }
                None => false,
            };
            if transient || exclude.contains(&path) {
                continue;
            }
            let Some(relative) = name.to_str().map(|n| format!("{prefix}{n}")) else {
                skipped.push(Skipped {
                    path: format!("{prefix}{}", name.to_string_lossy()),
                    reason: "the name is not UTF-8".into(),
                });
                continue;
            };
            if let Some(reason) = refuse_member_name(&format!("{DATA_PREFIX}{relative}")) {
                skipped.push(Skipped {
                    path: relative,
                    reason: reason.into(),
                });
                continue;
            }
            let kind = entry
                .file_type()
                .map_err(AdminError::io("cannot inspect", &path))?;
            if kind.is_symlink() {
                skipped.push(Skipped {
                    path: relative,
                    reason: "symbolic link".into(),
                });
            } else if kind.is_dir() {
                pending.push((path, format!("{relative}/")));
            } else if kind.is_file() {
                let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
                found.push(Found {
                    relative,
                    path,
                    bytes,
                });
            } else {
                skipped.push(Skipped {
                    path: relative,
                    reason: "not a regular file".into(),
                });
            }
        }
    }
    found.sort_by(|a, b| a.relative.cmp(&b.relative));
    Ok((found, skipped))
}

/// Streams one file into the archive as `name`.
fn add_member(
    zip: &mut zip::ZipWriter<BufWriter<File>>,
    name: &str,
    mut source: File,
    progress: &dyn Progress,
) -> Result<(u64, String), AdminError> {
    let length = source.metadata().map(|m| m.len()).unwrap_or(0);
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o600)
        // ZIP64 headers only where a member needs them (4 GiB and over).
        .large_file(length >= u64::from(u32::MAX));
    zip.start_file(name, options)
        .map_err(|e| zip_write_error(name, e))?;
    let mut sink = Hashing::new(&mut *zip, progress);
    std::io::copy(&mut source, &mut sink).map_err(|e| AdminError::Io {
        what: format!("cannot archive {name}"),
        source: e,
    })?;
    Ok(sink.finish())
}

fn zip_write_error(name: &str, e: zip::result::ZipError) -> AdminError {
    AdminError::Io {
        what: format!("cannot write the archive member {name}"),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Writes the archive at `out`: the database snapshot, the files, then the manifest.
fn write_archive(
    out: &Path,
    snapshot: &Path,
    files: Vec<Found>,
    mut manifest: Manifest,
    progress: &dyn Progress,
) -> Result<Manifest, AdminError> {
    let file = File::create_new(out).map_err(AdminError::io("cannot create", out))?;
    let mut zip = zip::ZipWriter::new(BufWriter::new(file));
    let total = std::fs::metadata(snapshot).map(|m| m.len()).unwrap_or(0)
        + files.iter().map(|f| f.bytes).sum::<u64>();
    progress.start("backing up", total);
    let db = File::open(snapshot).map_err(AdminError::io("cannot open", snapshot))?;
    let (bytes, sha256) = add_member(&mut zip, DATABASE_MEMBER, db, progress)?;
    manifest.database = ManifestFile {
        path: DATABASE_MEMBER.into(),
        bytes,
        sha256,
    };
    for found in files {
        // A document deleted since the walk: its file is gone, and so is nothing else.
        let source = match File::open(&found.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                manifest.skipped.push(Skipped {
                    path: found.relative,
                    reason: "removed during the backup".into(),
                });
                continue;
            }
            Err(e) => return Err(AdminError::io("cannot open", &found.path)(e)),
        };
        let name = format!("{DATA_PREFIX}{}", found.relative);
        let (bytes, sha256) = add_member(&mut zip, &name, source, progress)?;
        manifest.files.push(ManifestFile {
            path: found.relative,
            bytes,
            sha256,
        });
    }
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| AdminError::Io {
        what: "cannot encode the manifest".into(),
        source: std::io::Error::other(e),
    })?;
    zip.start_file(MANIFEST_MEMBER, SimpleFileOptions::default())
        .map_err(|e| zip_write_error(MANIFEST_MEMBER, e))?;
    zip.write_all(&text)
        .map_err(AdminError::io("cannot write", out))?;
    let file = zip
        .finish()
        .map_err(|e| zip_write_error(MANIFEST_MEMBER, e))?
        .into_inner()
        .map_err(|e| AdminError::io("cannot write", out)(e.into_error()))?;
    file.sync_all()
        .map_err(AdminError::io("cannot sync", out))?;
    Ok(manifest)
}

/// `shelf admin workspace-backup DEST.zip`.
pub async fn backup(
    settings: &Settings,
    dest: &Path,
    progress: Arc<dyn Progress>,
) -> Result<WorkspaceBackup, AdminError> {
    db::sqlite_only(
        settings,
        "workspace-backup",
        "back the database up with `pg_dump --format=custom --file=shelf.dump \
         \"$SHELF_DATABASE_URL\"` and copy the data directory's files (uploads/, page-images/, \
         converted/) with your own tools, after the dump",
    )?;
    let (destination, parent) = backup_destination(dest, "workspace-backup")?;
    let data_dir = absolute(&settings.storage.data_dir)?;
    let database = absolute(&settings.storage.database_path)?;
    let work = tempfile::Builder::new()
        .prefix(".shelf-backup-")
        .tempdir_in(&parent)
        .map_err(AdminError::io(
            "cannot create a temporary directory in",
            &parent,
        ))?;
    let snapshot = work.path().join(DATABASE_MEMBER);
    let status = db::snapshot(settings, &snapshot).await?;
    let mut exclude = vec![
        database.clone(),
        DataDir::new(&data_dir).lock_file(),
        destination.clone(),
        work.path().to_path_buf(),
    ];
    exclude.extend(sidecars(&database));
    let manifest = Manifest {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        shelf_version: env!("CARGO_PKG_VERSION").into(),
        created_at: chrono::Utc::now().to_rfc3339(),
        database: ManifestFile {
            path: DATABASE_MEMBER.into(),
            bytes: 0,
            sha256: String::new(),
        },
        applied_migrations: status.applied.clone(),
        files: Vec::new(),
        skipped: Vec::new(),
    };
    let archive = work.path().join("backup.zip");
    let written = archive.clone();
    let manifest = blocking(move || {
        let (files, skipped) = if data_dir.is_dir() {
            walk(&data_dir, &exclude)?
        } else {
            (Vec::new(), Vec::new())
        };
        let manifest = Manifest {
            skipped,
            ..manifest
        };
        write_archive(&written, &snapshot, files, manifest, progress.as_ref())
    })
    .await?;
    std::fs::rename(&archive, &destination)
        .map_err(AdminError::io("cannot write", &destination))?;
    sync_dir(&parent)?;
    Ok(WorkspaceBackup {
        bytes: std::fs::metadata(&destination)
            .map(|m| m.len())
            .unwrap_or(0),
        files: manifest.files.len(),
        file_bytes: manifest.files.iter().map(|f| f.bytes).sum(),
        skipped: manifest.skipped,
        applied_migrations: status.applied,
        destination,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_skips_symlinks_transient_entries_and_exclusions() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, body) in [
            ("uploads/doc_1/a.txt", "a"),
            ("uploads/.staging/x", "in flight"),
            ("uploads/.trash/y", "deleted"),
            ("page-images/doc_1/page-0001.png", "png"),
            (".shelf-restore-1/z", "temp"),
            ("shelf.sqlite", "db"),
        ] {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        std::os::unix::fs::symlink("/etc/hostname", root.join("uploads/link")).unwrap();
        let (found, skipped) = walk(root, &[root.join("shelf.sqlite")]).unwrap();
        let names: Vec<_> = found.iter().map(|f| f.relative.as_str()).collect();
        assert_eq!(
            names,
            ["page-images/doc_1/page-0001.png", "uploads/doc_1/a.txt"]
        );
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].path, "uploads/link");
        assert_eq!(skipped[0].reason, "symbolic link");
    }
}
