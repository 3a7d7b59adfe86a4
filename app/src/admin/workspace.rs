//! Workspace backups: one ZIP with a consistent database snapshot (`shelf.sqlite`), the data
//! directory's files under `data/`, and `manifest.json` listing every file with its size and
//! SHA-256. Files are streamed (never held whole in memory); symlinks are skipped and listed.
//! A restore inspects the whole archive before it writes anything: member count, names (no
//! absolute, `..`, backslash or duplicate paths), no symlink members, declared expanded size,
//! manifest size and agreement with the members. Reads stop at each member's declared size,
//! so an archive that lies about its sizes cannot write more than it declared. It then swaps
//! the files and the database in, keeping everything they replace until both are in place: a
//! failure at any step puts the old workspace back as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use zip::ZipArchive;
use zip::write::SimpleFileOptions;

use super::db::{self, install_database, restore_target, temp_beside};
use super::lock::{self, LOCK_FILE};
use super::paths::{
    absolute, backup_destination, refuse_symlinks, sidecars, source_file, sync_dir,
};
use super::{AdminError, Hashing, Progress, blocking};
use crate::settings::Settings;

pub const MANIFEST_MEMBER: &str = "manifest.json";
pub const DATABASE_MEMBER: &str = "shelf.sqlite";
pub const DATA_PREFIX: &str = "data/";
pub const FORMAT: &str = "shelf-workspace-backup";
pub const FORMAT_VERSION: u32 = 1;
/// SPEC "Limits": 10 GiB unless `--max-expanded-bytes` says otherwise.
pub const DEFAULT_MAX_EXPANDED_BYTES: u64 = 10 * 1024 * 1024 * 1024;
pub const DEFAULT_MAX_FILES: usize = 100_000;
/// A manifest line is about 150 bytes: 64 MiB holds several times the default file cap.
pub const DEFAULT_MAX_MANIFEST_BYTES: u64 = 64 * 1024 * 1024;
/// Top-level data-directory entries a restore always replaces, present in the backup or not:
/// the files the restored database refers to.
const MANAGED_DIRS: [&str; 2] = ["uploads", "page-images"];
/// Work in flight under `uploads/` (the document store's staging and trash), never backed up.
const TRANSIENT_UPLOAD_DIRS: [&str; 2] = [".staging", ".trash"];
const S_IFMT: u32 = 0o170000;
const S_IFLNK: u32 = 0o120000;

/// `manifest.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub format_version: u32,
    pub shelf_version: String,
    pub created_at: String,
    pub database: ManifestFile,
    pub applied_migrations: Vec<String>,
    /// Paths relative to the data directory (members are `data/<path>`).
    pub files: Vec<ManifestFile>,
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestFile {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// A data-directory entry the backup left out, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceBackup {
    pub destination: PathBuf,
    pub bytes: u64,
    pub files: usize,
    pub file_bytes: u64,
    pub skipped: Vec<Skipped>,
    pub applied_migrations: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceRestore {
    pub database: PathBuf,
    pub data_dir: PathBuf,
    pub files: usize,
    pub file_bytes: u64,
    pub applied_migrations: Vec<String>,
    pub pending_migrations: Vec<String>,
}

/// Caps a restore checks before writing anything.
#[derive(Debug, Clone, Copy)]
pub struct RestoreLimits {
    pub max_expanded_bytes: u64,
    pub max_files: usize,
    pub max_manifest_bytes: u64,
}

impl Default for RestoreLimits {
    fn default() -> Self {
        RestoreLimits {
            max_expanded_bytes: DEFAULT_MAX_EXPANDED_BYTES,
            max_files: DEFAULT_MAX_FILES,
            max_manifest_bytes: DEFAULT_MAX_MANIFEST_BYTES,
        }
    }
}

/// Why a member name is refused, if it is: the one rule for names a backup writes and a
/// restore accepts. Directory members end with one `/`.
pub fn refuse_member_name(name: &str) -> Option<&'static str> {
    let path = name.strip_suffix('/').unwrap_or(name);
    if path.is_empty() {
        Some("empty name")
    } else if path.starts_with('/') || path.as_bytes().get(1) == Some(&b':') {
        Some("absolute path")
    } else if path.contains('\\') {
        Some("backslash in the name")
    } else if path.chars().any(char::is_control) {
        Some("control character in the name")
    } else if path.split('/').any(|c| c == "..") {
        Some("`..` path component")
    } else if path.split('/').any(|c| c.is_empty() || c == ".") {
        Some("empty or `.` path component")
    } else if path.len() > 4096 {
        Some("name over 4096 bytes")
    } else {
        None
    }
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
                Some(n) => prefix == "uploads/" && TRANSIENT_UPLOAD_DIRS.contains(&n),
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
    let data_dir = absolute(&settings.data_dir)?;
    let database = absolute(&settings.database_path)?;
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
        data_dir.join(LOCK_FILE),
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

type Archive = ZipArchive<BufReader<File>>;

/// Checks everything about the archive that can be checked without writing: see the module
/// documentation. Returns the open archive and its manifest.
pub fn inspect(path: &Path, limits: &RestoreLimits) -> Result<(Archive, Manifest), AdminError> {
    let file = File::open(path).map_err(AdminError::io("cannot open", path))?;
    let mut zip = ZipArchive::new(BufReader::new(file))
        .map_err(|e| AdminError::invalid(format!("not a readable ZIP archive: {e}")))?;
    if zip.has_duplicate_names() {
        return Err(AdminError::DuplicateMember { name: None });
    }
    if zip.len() > limits.max_files {
        return Err(AdminError::TooManyMembers {
            count: zip.len(),
            max: limits.max_files,
        });
    }
    let mut sizes = BTreeMap::new();
    let mut total: u64 = 0;
    for index in 0..zip.len() {
        let entry = zip
            .by_index_raw(index)
            .map_err(|e| AdminError::invalid(format!("member {index} is unreadable: {e}")))?;
        let name = std::str::from_utf8(entry.name_raw()).map_err(|_| AdminError::UnsafeMember {
            name: String::from_utf8_lossy(entry.name_raw()).into_owned(),
            reason: "the name is not UTF-8",
        })?;
        let refuse = |reason| AdminError::UnsafeMember {
            name: name.to_string(),
            reason,
        };
        if let Some(reason) = refuse_member_name(name) {
            return Err(refuse(reason));
        }
        if entry.is_symlink() || entry.unix_mode().is_some_and(|m| m & S_IFMT == S_IFLNK) {
            return Err(AdminError::SymlinkMember { name: name.into() });
        }
        if entry.encrypted() {
            return Err(refuse("encrypted member"));
        }
        let expected =
            name == MANIFEST_MEMBER || name == DATABASE_MEMBER || name.starts_with(DATA_PREFIX);
        if !expected {
            return Err(refuse("not a member of a Shelf workspace backup"));
        }
        if entry.is_dir() {
            continue;
        }
        total = total.saturating_add(entry.size());
        sizes.insert(name.to_string(), entry.size());
    }
    if total > limits.max_expanded_bytes {
        return Err(AdminError::ExpandedTooLarge {
            total,
            max: limits.max_expanded_bytes,
        });
    }
    let manifest = read_manifest(&mut zip, &sizes, limits)?;
    Ok((zip, manifest))
}

fn read_manifest(
    zip: &mut Archive,
    sizes: &BTreeMap<String, u64>,
    limits: &RestoreLimits,
) -> Result<Manifest, AdminError> {
    let size = *sizes
        .get(MANIFEST_MEMBER)
        .ok_or_else(|| AdminError::invalid(format!("it has no {MANIFEST_MEMBER}")))?;
    if size > limits.max_manifest_bytes {
        return Err(AdminError::ManifestTooLarge {
            size,
            max: limits.max_manifest_bytes,
        });
    }
    let mut text = Vec::new();
    zip.by_name(MANIFEST_MEMBER)
        .map_err(|e| AdminError::invalid(format!("{MANIFEST_MEMBER} is unreadable: {e}")))?
        .take(limits.max_manifest_bytes.saturating_add(1))
        .read_to_end(&mut text)
        .map_err(|e| AdminError::invalid(format!("{MANIFEST_MEMBER} is damaged: {e}")))?;
    if text.len() as u64 > limits.max_manifest_bytes {
        return Err(AdminError::ManifestTooLarge {
            size: text.len() as u64,
            max: limits.max_manifest_bytes,
        });
    }
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| AdminError::invalid(format!("{MANIFEST_MEMBER} does not parse: {e}")))?;
    if manifest.format != FORMAT {
        return Err(AdminError::invalid(format!(
            "{MANIFEST_MEMBER} is not a {FORMAT} manifest"
        )));
    }
    if manifest.format_version > FORMAT_VERSION {
        return Err(AdminError::invalid(format!(
            "the archive format {} is newer than this shelf reads ({FORMAT_VERSION}); upgrade shelf",
            manifest.format_version
        )));
    }
    let disagree = |what: &str| {
        AdminError::invalid(format!(
            "{MANIFEST_MEMBER} and the archive disagree: {what}"
        ))
    };
    if manifest.database.path != DATABASE_MEMBER
        || sizes.get(DATABASE_MEMBER) != Some(&manifest.database.bytes)
    {
        return Err(disagree("the database member"));
    }
    let mut listed = BTreeSet::new();
    for file in &manifest.files {
        let name = format!("{DATA_PREFIX}{}", file.path);
        if let Some(reason) = refuse_member_name(&name) {
            return Err(AdminError::UnsafeMember { name, reason });
        }
        if sizes.get(&name) != Some(&file.bytes) {
            return Err(disagree(&format!("{name} is missing or of another size")));
        }
        if !listed.insert(name.clone()) {
            return Err(AdminError::DuplicateMember { name: Some(name) });
        }
    }
    let members = sizes.keys().filter(|n| n.starts_with(DATA_PREFIX)).count();
    if members != listed.len() {
        return Err(disagree(
            "the archive holds files the manifest does not list",
        ));
    }
    Ok(manifest)
}

/// Extracts one member to a new file, reading no more than the manifest declares, and checks
/// its size and SHA-256.
fn extract(
    zip: &mut Archive,
    name: &str,
    expected: &ManifestFile,
    out: File,
    progress: &dyn Progress,
) -> Result<(), AdminError> {
    let mut entry = zip
        .by_name(name)
        .map_err(|e| AdminError::invalid(format!("{name} is unreadable: {e}")))?;
    let mut sink = Hashing::new(BufWriter::new(out), progress);
    std::io::copy(
        &mut (&mut entry).take(expected.bytes.saturating_add(1)),
        &mut sink,
    )
    .map_err(|e| AdminError::invalid(format!("{name} is damaged: {e}")))?;
    sink.flush()
        .map_err(|e| AdminError::invalid(format!("cannot write {name}: {e}")))?;
    let (bytes, sha256) = sink.finish();
    if bytes != expected.bytes || sha256 != expected.sha256 {
        return Err(AdminError::invalid(format!(
            "{name} does not match the manifest (size or SHA-256)"
        )));
    }
    Ok(())
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
    let _lock = lock::hold_exclusive(&settings.data_dir, "the workspace")?;
    let data_dir = absolute(&settings.data_dir)?;
    refuse_symlinks(&data_dir, "workspace-restore")?;
    let database = restore_target(settings, "workspace-restore")?;
    let managed = managed_entries(&manifest);
    let mut reserved = vec![data_dir.join(LOCK_FILE), database.clone()];
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

    #[test]
    fn member_names_are_checked() {
        for (name, refused) in [
            ("data/uploads/doc_1/a.pdf", None),
            ("data/", None),
            ("shelf.sqlite", None),
            ("../x", Some("`..` path component")),
            ("data/uploads/../../x", Some("`..` path component")),
            ("/etc/x", Some("absolute path")),
            ("C:/x", Some("absolute path")),
            ("data\\x", Some("backslash in the name")),
            ("data//x", Some("empty or `.` path component")),
            ("data/./x", Some("empty or `.` path component")),
            ("data/\u{7}", Some("control character in the name")),
            ("", Some("empty name")),
        ] {
            assert_eq!(refuse_member_name(name), refused, "{name}");
        }
    }

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

    /// An archive whose member holds more than the manifest declares: the read stops one byte
    /// past the declared size, and the member is refused.
    #[test]
    fn extraction_stops_at_the_declared_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zip");
        let mut writer = zip::ZipWriter::new(File::create(&path).unwrap());
        writer
            .start_file("data/a", SimpleFileOptions::default())
            .unwrap();
        writer.write_all(&[b'a'; 100_000]).unwrap();
        writer.finish().unwrap();
        let mut zip = ZipArchive::new(BufReader::new(File::open(&path).unwrap())).unwrap();
        let declared = ManifestFile {
            path: "a".into(),
            bytes: 10,
            sha256: String::new(),
        };
        let out = dir.path().join("out");
        let err = extract(
            &mut zip,
            "data/a",
            &declared,
            File::create(&out).unwrap(),
            &super::super::Silent,
        )
        .unwrap_err();
        assert_eq!(err.code(), "invalid_backup");
        assert_eq!(std::fs::metadata(&out).unwrap().len(), 11);
    }

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
        let db = crate::db::connect(&settings.database_path, 2)
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
        backup(&settings, &archive, Arc::new(super::super::Silent))
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
        let db = crate::db::connect(&settings.database_path, 1)
            .await
            .expect("connect");
        let store = DocumentStore::new(db.clone(), data);
        let (_, total) = store.list(100, 0).await.expect("list");
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
                Arc::new(super::super::Silent),
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
            Arc::new(super::super::Silent),
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
