//! The import report (a manifest of the import: summary counts plus one record per file), its
//! atomic same-directory writes, the capped reads that validation, resume and status use, and
//! status paging.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use super::error::ImportError;

/// The marker that makes a JSON file an import report: any other file is never overwritten.
pub const REPORT_KIND: &str = "shelf_import_report";
/// Version of the report's shape.
pub const REPORT_VERSION: u32 = 1;
/// `GET /imports/status` page size: default and maximum.
pub const DEFAULT_STATUS_LIMIT: u64 = 500;
pub const MAX_STATUS_LIMIT: u64 = 1000;

/// Where an import stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportStatus {
    /// Files are being imported (or the process died: the report is the last good one).
    Running,
    /// Every planned file has a record.
    Completed,
    /// Stopped on request (Ctrl-C, shutdown): `resume` continues it.
    Interrupted,
    /// A hot folder being watched.
    Watching,
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    /// Ingested (processed or queued as asked) and its output written.
    Converted,
    /// Left alone: its output exists and `overwrite` is false.
    Skipped,
    Failed,
}

/// A file's failure, as `{code, detail}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordError {
    pub code: String,
    pub detail: String,
}

/// Milliseconds spent on a file, by step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    pub ingest_ms: u64,
    pub process_ms: u64,
    pub convert_ms: u64,
    pub total_ms: u64,
}

/// One file of the import.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRecord {
    /// The source file.
    pub path: String,
    pub status: FileStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The page manifest sidecar (PDFs and images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_manifest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The bytes were already a document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_status: Option<String>,
    /// A succeeded run's warnings: the stages it went on without (`on_failure: continue`);
    /// absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_warnings: Vec<shelf_engine::RunWarning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordError>,
    /// Size of the source when it was imported.
    #[serde(default)]
    pub bytes: u64,
    /// Taken over from the manifest by `resume` (or a hot folder's restart), not redone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
    #[serde(default)]
    pub finished_at: String,
    #[serde(default)]
    pub timings: Timings,
}

/// Counts over the records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Files planned (a hot folder: files seen so far).
    pub files: u64,
    /// Records so far (`files - done` are still to do).
    pub done: u64,
    pub converted: u64,
    pub skipped: u64,
    pub failed: u64,
    /// Converted records taken over from the manifest.
    pub reused: u64,
    pub ingested: u64,
    pub duplicates: u64,
    pub runs_succeeded: u64,
    pub runs_failed: u64,
    pub runs_queued: u64,
}

impl Summary {
    /// The counts of `records` out of `files` planned.
    pub fn of(files: u64, records: &[FileRecord]) -> Summary {
        let mut s = Summary::default();
        for r in records {
            s.count(r);
        }
        s.files = files.max(s.done);
        s
    }

    /// Adds one record to the counts (`files` is left to the caller).
    pub fn count(&mut self, r: &FileRecord) {
        self.done += 1;
        match r.status {
            FileStatus::Converted => self.converted += 1,
            FileStatus::Skipped => self.skipped += 1,
            FileStatus::Failed => self.failed += 1,
        }
        self.reused += u64::from(r.reused);
        self.ingested += u64::from(r.document_id.is_some());
        self.duplicates += u64::from(r.duplicate == Some(true));
        match r.run_status.as_deref() {
            Some("succeeded") => self.runs_succeeded += 1,
            Some("queued") => self.runs_queued += 1,
            Some(_) => self.runs_failed += 1,
            None => {}
        }
    }
}

/// The options an import ran with, as the report shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportOptions {
    pub format: String,
    pub output_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_dir: Option<String>,
    pub recursive: bool,
    pub overwrite: bool,
    pub processing_mode: String,
}

/// The import report: what `POST /imports` answers and the manifest file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportReport {
    /// Always [`REPORT_KIND`].
    pub kind: String,
    pub version: u32,
    pub status: ReportStatus,
    /// The file or directory imported.
    pub source: String,
    pub options: ReportOptions,
    pub started_at: String,
    pub updated_at: String,
    pub summary: Summary,
    pub files: Vec<FileRecord>,
}

impl ImportReport {
    /// Recomputes the summary for `planned` files.
    pub fn tally(&mut self, planned: u64) {
        self.summary = Summary::of(planned, &self.files);
    }

    /// Adds a record and counts it, without recounting the others: an import of n files
    /// stays O(n).
    pub fn add(&mut self, record: FileRecord, planned: u64) {
        self.summary.count(&record);
        self.summary.files = planned.max(self.summary.done);
        self.files.push(record);
    }

    /// The converted records by source path: what `resume` takes over.
    pub fn successes(&self) -> HashMap<String, FileRecord> {
        self.files
            .iter()
            .filter(|r| r.status == FileStatus::Converted)
            .map(|r| (r.path.clone(), r.clone()))
            .collect()
    }
}

/// A page of a report's records (`GET /imports/status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusPage {
    pub manifest_path: String,
    pub status: ReportStatus,
    pub source: String,
    pub started_at: String,
    pub updated_at: String,
    pub summary: Summary,
    /// Records in the manifest.
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub files: Vec<FileRecord>,
}

/// Reads the file at `path` whole, refusing one over `max_bytes` before reading it (and a
/// file that grew past it while being read).
pub(crate) fn read_capped(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ImportError> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    if file.metadata()?.len() > max_bytes {
        return Err(ImportError::ManifestTooLarge { max: max_bytes });
    }
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ImportError::ManifestTooLarge { max: max_bytes });
    }
    Ok(bytes)
}

/// The default manifest of a hot folder (`shelf import --watch` without `--manifest`): in
/// `dir` (the data directory's `hot-folders`), created if missing, named after the folder and
/// a 32-bit FNV-1a hash of its absolute path, so two watched folders of one name keep apart
/// manifests and the same folder always finds its own again.
pub fn hot_folder_manifest(dir: &Path, folder: &Path) -> std::io::Result<PathBuf> {
    let absolute = std::path::absolute(folder).unwrap_or_else(|_| folder.to_path_buf());
    let name = absolute
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in absolute.as_os_str().as_encoded_bytes() {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    std::fs::create_dir_all(dir)?;
    Ok(dir.join(format!("{name}-{:08x}.json", hash as u32)))
}

/// The report at `path`: `None` when no file is there; `InvalidManifestPath` when the file
/// is not an import report (so it is never overwritten), `ManifestTooLarge` over the cap.
pub fn read_report(path: &Path, max_bytes: u64) -> Result<Option<ImportReport>, ImportError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
        Ok(meta) if !meta.is_file() => {
            return Err(ImportError::InvalidManifestPath(
                "the manifest path is not a regular file".into(),
            ));
        }
        Ok(_) => {}
    }
    let bytes = read_capped(path, max_bytes)?;
    let not_a_report = || {
        ImportError::InvalidManifestPath(
            "the file exists and is not a Shelf import report; it is left untouched".into(),
        )
    };
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| not_a_report())?;
    if value.get("kind").and_then(|k| k.as_str()) != Some(REPORT_KIND) {
        return Err(not_a_report());
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| ImportError::InvalidManifestPath(format!("unreadable import report: {e}")))
}

/// One page of the report's records.
pub fn status_page(
    manifest_path: &Path,
    max_bytes: u64,
    limit: u64,
    offset: u64,
) -> Result<StatusPage, ImportError> {
    let report = read_report(manifest_path, max_bytes)?
        .ok_or_else(|| ImportError::InvalidManifestPath("no import report at this path".into()))?;
    let limit = limit.clamp(1, MAX_STATUS_LIMIT);
    let total = report.files.len() as u64;
    let files = report
        .files
        .into_iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .collect();
    Ok(StatusPage {
        manifest_path: manifest_path.display().to_string(),
        status: report.status,
        source: report.source,
        started_at: report.started_at,
        updated_at: report.updated_at,
        summary: report.summary,
        total,
        limit,
        offset,
        files,
    })
}

/// Replaces `path` with `bytes` atomically: a temporary file in the same directory, written
/// and fsynced, renamed over the target, then the directory fsynced. A crash leaves either
/// the old file or the new one, never a half-written one.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    remove_stale_temps(path);
    let temp = dir.join(format!(
        ".{name}.{:016x}.tmp",
        crate::readiness::random_suffix()
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    // The rename is durable once the directory entry is.
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes the temporary files a writer of `path` killed before its rename left behind
/// (`.NAME.<16 hex digits>.tmp` beside it), so an interrupted import leaves no litter once it
/// is resumed. Only names of exactly that shape are touched.
///
/// A directory is listed once per process: the first write into it notes every stale
/// temporary by the name it was for, and each later write removes only its own name's. Listing
/// it for every file made a directory import O(n) per file (docs/PERFORMANCE.md).
pub(crate) fn remove_stale_temps(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    static STALE: OnceLock<Mutex<HashMap<PathBuf, StaleTemps>>> = OnceLock::new();
    let mut stale = STALE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let found = stale
        .entry(dir.to_path_buf())
        .or_insert_with(|| stale_temps_in(dir));
    for file in found.remove(&*name.to_string_lossy()).unwrap_or_default() {
        let _ = std::fs::remove_file(file);
    }
}

/// Stale temporaries of one directory, by the name they were written for.
type StaleTemps = HashMap<String, Vec<PathBuf>>;

/// The temporaries of `.NAME.<16 hex digits>.tmp` shape in `dir`, by NAME.
fn stale_temps_in(dir: &Path) -> StaleTemps {
    let mut found = StaleTemps::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let Some(rest) = file_name
            .strip_prefix('.')
            .and_then(|rest| rest.strip_suffix(".tmp"))
        else {
            continue;
        };
        let Some((name, hex)) = rest.rsplit_once('.') else {
            continue;
        };
        let shaped = hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        if shaped && !name.is_empty() && entry.file_type().is_ok_and(|t| t.is_file()) {
            found
                .entry(name.to_string())
                .or_default()
                .push(entry.path());
        }
    }
    found
}

/// Writes the report to `path` atomically.
pub(crate) fn write_report(path: &Path, report: &ImportReport) -> Result<(), ImportError> {
    let bytes =
        serde_json::to_vec_pretty(report).map_err(|e| ImportError::Io(std::io::Error::other(e)))?;
    Ok(write_atomic(path, &bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_writers_temporary_file_is_removed_by_the_next_write() {
        let dir = tempfile::tempdir().expect("dir");
        let target = dir.path().join("a.md");
        let stale = dir.path().join(".a.md.0123456789abcdef.tmp");
        let other = dir.path().join(".b.md.0123456789abcdef.tmp");
        std::fs::write(&stale, b"half").expect("stale");
        std::fs::write(&other, b"half").expect("other");
        write_atomic(&target, b"whole").expect("write");
        assert_eq!(std::fs::read(&target).expect("read"), b"whole");
        assert!(!stale.exists(), "the stale temporary of a.md is gone");
        assert!(other.exists(), "another file's temporary is not touched");
    }

    fn record(path: &str, status: FileStatus) -> FileRecord {
        FileRecord {
            path: path.into(),
            status,
            output: None,
            pages_manifest: None,
            document_id: Some("doc_0123456789abcdef".into()),
            filename: None,
            duplicate: Some(false),
            run_id: None,
            run_status: Some("succeeded".into()),
            run_warnings: Vec::new(),
            error: None,
            bytes: 1,
            reused: false,
            finished_at: String::new(),
            timings: Timings::default(),
        }
    }

    fn report(files: Vec<FileRecord>) -> ImportReport {
        let mut r = ImportReport {
            kind: REPORT_KIND.into(),
            version: REPORT_VERSION,
            status: ReportStatus::Running,
            source: "/src".into(),
            options: ReportOptions {
                format: "md".into(),
                output_mode: "workspace".into(),
                output_dir: None,
                recursive: false,
                overwrite: false,
                processing_mode: "none".into(),
            },
            started_at: String::new(),
            updated_at: String::new(),
            summary: Summary::default(),
            files,
        };
        r.tally(5);
        r
    }

    #[test]
    fn counting_records_as_they_come_gives_the_recount() {
        let mut added = report(vec![]);
        let mut records = vec![
            record("a", FileStatus::Converted),
            record("b", FileStatus::Failed),
            record("c", FileStatus::Skipped),
        ];
        records[0].reused = true;
        records[0].run_status = Some("succeeded".into());
        records[1].duplicate = Some(true);
        for r in records.clone() {
            added.add(r, 5);
        }
        assert_eq!(added.summary, report(records).summary);
        assert_eq!(added.summary.files, 5);
    }

    #[test]
    fn summary_counts_each_status() {
        let r = report(vec![
            record("a", FileStatus::Converted),
            record("b", FileStatus::Failed),
            record("c", FileStatus::Skipped),
        ]);
        assert_eq!(r.summary.files, 5);
        assert_eq!(r.summary.done, 3);
        assert_eq!(
            (r.summary.converted, r.summary.failed, r.summary.skipped),
            (1, 1, 1)
        );
        assert_eq!(r.summary.runs_succeeded, 3);
        assert_eq!(r.successes().len(), 1);
    }

    #[test]
    fn reports_round_trip_and_other_files_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.json");
        assert!(read_report(&path, 1 << 20).expect("read").is_none());
        let r = report(vec![record("a", FileStatus::Converted)]);
        write_report(&path, &r).expect("write");
        assert_eq!(read_report(&path, 1 << 20).expect("read"), Some(r));
        // No temporary file is left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 1);
        assert!(matches!(
            read_report(&path, 10),
            Err(ImportError::ManifestTooLarge { max: 10 })
        ));

        let other = dir.path().join("other.json");
        std::fs::write(&other, br#"{"kind": "something else"}"#).expect("write");
        assert!(matches!(
            read_report(&other, 1 << 20),
            Err(ImportError::InvalidManifestPath(_))
        ));
        std::fs::write(&other, b"not json").expect("write");
        assert!(matches!(
            read_report(&other, 1 << 20),
            Err(ImportError::InvalidManifestPath(_))
        ));
    }

    #[test]
    fn status_pages_through_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.json");
        let files = (0..7)
            .map(|i| record(&format!("f{i}"), FileStatus::Converted))
            .collect();
        write_report(&path, &report(files)).expect("write");
        let page = status_page(&path, 1 << 20, 3, 5).expect("page");
        assert_eq!(page.total, 7);
        assert_eq!(
            page.files
                .iter()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>(),
            ["f5", "f6"]
        );
        assert_eq!(
            status_page(&path, 1 << 20, 5000, 0).expect("page").limit,
            1000
        );
    }

    #[test]
    fn a_hot_folder_keeps_one_manifest_named_after_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifests = dir.path().join("hot-folders");
        let inbox = dir.path().join("a").join("inbox");
        let other = dir.path().join("b").join("inbox");
        let first = hot_folder_manifest(&manifests, &inbox).expect("manifest");
        assert!(manifests.is_dir());
        assert_eq!(
            first,
            hot_folder_manifest(&manifests, &inbox).expect("again")
        );
        let second = hot_folder_manifest(&manifests, &other).expect("other");
        assert_ne!(
            first, second,
            "two folders of one name keep apart manifests"
        );
        let name = first
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with("inbox-") && name.ends_with(".json"),
            "{name}"
        );
        assert_eq!(name.len(), "inbox-".len() + 8 + ".json".len());
    }
}
