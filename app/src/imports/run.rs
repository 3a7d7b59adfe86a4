//! The import loop: prepare (validate, check paths, load the manifest, plan and cap the files
//! before any conversion), then one file at a time ingest, process or queue, convert, record
//! and write the manifest, reporting progress to a callback and stopping between files when
//! the cancel token trips.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use shelf_documents::{ErrorCode, PageSource, now_timestamp};
use shelf_stages::extract::extract_document;
use tokio_util::sync::CancellationToken;

use super::convert::{OutputLayout, PAGES_SUFFIX, is_own_output, render};
use super::error::ImportError;
use super::manifest::{
    FileRecord, FileStatus, ImportReport, REPORT_KIND, REPORT_VERSION, RecordError, ReportOptions,
    ReportStatus, Summary, Timings, read_report, write_report,
};
use super::page_manifest::PageManifest;
use super::paths::{Boundary, PathField, create_dir_below};
use super::request::{ImportOptions, ImportRequest, OutputMode};
use crate::shelf::{ProcessingMode, Shelf};

/// Caps of an import. The API applies `SHELF_API_MAX_IMPORT_*`; the CLI caps only manifests.
#[derive(Debug, Clone, Copy)]
pub struct ImportLimits {
    pub max_files: Option<usize>,
    pub max_bytes: Option<u64>,
    pub max_manifest_bytes: u64,
}

/// What the progress callback sees after each file.
#[derive(Debug)]
pub struct Progress<'a> {
    /// Records so far (reused ones included) and files planned.
    pub done: u64,
    pub total: u64,
    pub record: &'a FileRecord,
}

/// A file found by the listing, or a symlink refused in its place.
#[derive(Debug, Clone)]
pub(crate) enum Planned {
    File { path: PathBuf, bytes: u64 },
    Refused { path: PathBuf, detail: &'static str },
}

impl Planned {
    pub(crate) fn path(&self) -> &Path {
        match self {
            Planned::File { path, .. } | Planned::Refused { path, .. } => path,
        }
    }
}

/// An import in progress.
pub struct Import {
    shelf: Shelf,
    pub options: ImportOptions,
    layout: OutputLayout,
    pub report: ImportReport,
    /// Converted records of the manifest, by source, for `resume`.
    reusable: HashMap<String, FileRecord>,
    limits: ImportLimits,
    planned: u64,
    /// Paths a listing skips: the manifest, the output directory, the data directory.
    skip: Vec<PathBuf>,
}

impl Import {
    /// Validates the request and its paths, loads the manifest (refusing a file that is not
    /// an import report), and creates the new-directory output directory: all before any file
    /// is read.
    pub fn prepare(
        shelf: &Shelf,
        request: &ImportRequest,
        boundary: &Boundary,
        limits: ImportLimits,
    ) -> Result<Import, ImportError> {
        let options = request.validate(boundary)?;
        let existing = match &options.manifest {
            Some(path) => read_report(path, limits.max_manifest_bytes)?,
            None => None,
        };
        if let OutputMode::NewDirectory(dir) = &options.output {
            let (anchor, below) = match (boundary, dir.parent()) {
                (Boundary::Root { canonical, .. }, _) => (canonical.clone(), dir.clone()),
                (Boundary::Local, Some(parent)) => (parent.to_path_buf(), dir.clone()),
                (Boundary::Local, None) => (dir.clone(), dir.clone()),
            };
            create_dir_below(&anchor, &below).map_err(ImportError::InvalidOutputDir)?;
        }
        let layout = OutputLayout::new(
            &options.output,
            options.format,
            &options.source,
            options.source_is_dir,
            &shelf.settings.storage.data_dir,
        );
        let reusable = match (&existing, options.resume) {
            (Some(report), true) => report.successes(),
            _ => HashMap::new(),
        };
        let now = now_timestamp();
        let report = ImportReport {
            kind: REPORT_KIND.into(),
            version: REPORT_VERSION,
            status: ReportStatus::Running,
            source: options.source.display().to_string(),
            options: ReportOptions {
                format: options.format.as_str().into(),
                output_mode: options.output.as_str().into(),
                output_dir: match &options.output {
                    OutputMode::NewDirectory(dir) => Some(dir.display().to_string()),
                    _ => None,
                },
                recursive: options.recursive,
                overwrite: options.overwrite,
                processing_mode: processing_name(options.processing).into(),
            },
            started_at: existing
                .as_ref()
                .filter(|_| options.resume)
                .map_or_else(|| now.clone(), |r| r.started_at.clone()),
            updated_at: now,
            summary: Summary::default(),
            files: Vec::new(),
        };
        let mut skip: Vec<PathBuf> = options.manifest.iter().cloned().collect();
        skip.extend(layout.base().map(Path::to_path_buf));
        skip.extend(std::fs::canonicalize(&shelf.settings.storage.data_dir).ok());
        Ok(Import {
            shelf: shelf.clone(),
            options,
            layout,
            report,
            reusable,
            limits,
            planned: 0,
            skip,
        })
    }

    /// The files of the import, in name order, capped (`import_too_large`) before any is
    /// converted. Hidden entries, the import's own outputs and its manifest are left out;
    /// symlinks are listed as refused.
    pub(crate) fn plan(&self) -> Result<Vec<Planned>, ImportError> {
        if !self.options.source_is_dir {
            let bytes = std::fs::metadata(&self.options.source)?.len();
            return Ok(vec![Planned::File {
                path: self.options.source.clone(),
                bytes,
            }]);
        }
        let mut planned = Vec::new();
        let mut bytes = 0u64;
        self.list(&self.options.source, &mut planned, &mut bytes)?;
        Ok(planned)
    }

    fn list(&self, dir: &Path, out: &mut Vec<Planned>, total: &mut u64) -> Result<(), ImportError> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for path in entries {
            let hidden = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_none_or(|n| n.starts_with('.'));
            if hidden || is_own_output(&path) || self.skip.contains(&path) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path)?;
            if meta.file_type().is_symlink() {
                out.push(Planned::Refused {
                    path,
                    detail: "the path is a symlink; imports do not follow symlinks",
                });
            } else if meta.is_dir() {
                if self.options.recursive {
                    self.list(&path, out, total)?;
                }
                continue;
            } else if meta.is_file() {
                *total += meta.len();
                out.push(Planned::File {
                    path,
                    bytes: meta.len(),
                });
            } else {
                continue;
            }
            if let Some(max) = self.limits.max_files
                && out.len() > max
            {
                return Err(ImportError::TooLarge(format!(
                    "the directory has more than {max} files (SHELF_API_MAX_IMPORT_FILES)"
                )));
            }
            if let Some(max) = self.limits.max_bytes
                && *total > max
            {
                return Err(ImportError::TooLarge(format!(
                    "the directory holds more than {max} bytes (SHELF_API_MAX_IMPORT_BYTES)"
                )));
            }
        }
        Ok(())
    }

    /// Runs the whole import: plans, then imports each file (resume takes over the
    /// manifest's converted records), writing the manifest after each. Returns the report;
    /// its status is `interrupted` when `cancel` tripped.
    pub async fn run(
        mut self,
        cancel: &CancellationToken,
        progress: &mut (dyn FnMut(Progress<'_>) + Send),
    ) -> Result<ImportReport, ImportError> {
        let planned = self.plan()?;
        self.planned = planned.len() as u64;
        self.save()?;
        for item in &planned {
            if cancel.is_cancelled() {
                break;
            }
            if let Some(record) = self.import_planned(item, cancel).await {
                self.push(record, progress)?;
            }
        }
        self.report.status = if cancel.is_cancelled() && self.report.files.len() < planned.len() {
            ReportStatus::Interrupted
        } else {
            ReportStatus::Completed
        };
        self.save()?;
        Ok(self.report)
    }

    /// Adds a record, writes the manifest, tells the callback.
    pub(crate) fn push(
        &mut self,
        record: FileRecord,
        progress: &mut (dyn FnMut(Progress<'_>) + Send),
    ) -> Result<(), ImportError> {
        self.report.add(record, self.planned);
        self.save()?;
        if let Some(record) = self.report.files.last() {
            progress(Progress {
                done: self.report.files.len() as u64,
                total: self.report.summary.files,
                record,
            });
        }
        Ok(())
    }

    /// Planned files so far (a hot folder adds as it finds them).
    pub(crate) fn add_planned(&mut self, count: u64) {
        self.planned += count;
    }

    /// Whether the report already has a record for `path` that should stand: converted, or
    /// failed on a file of the same size (a hot folder retries a file that changed).
    pub(crate) fn has_record(&self, path: &Path, bytes: u64) -> bool {
        let key = path.display().to_string();
        self.report
            .files
            .iter()
            .any(|r| r.path == key && (r.status != FileStatus::Failed || r.bytes == bytes))
            || self.reusable.contains_key(&key)
    }

    /// Recomputes the summary and writes the manifest, when there is one.
    pub(crate) fn save(&mut self) -> Result<(), ImportError> {
        self.report.updated_at = now_timestamp();
        self.report.summary.files = self.planned.max(self.report.summary.done);
        if let Some(path) = &self.options.manifest {
            write_report(path, &self.report)?;
        }
        Ok(())
    }

    pub(crate) fn set_status(&mut self, status: ReportStatus) -> Result<(), ImportError> {
        self.report.status = status;
        self.save()
    }

    /// The manifest's converted record of `item`, taken over (once) by `resume`.
    pub(crate) fn import_reused(&mut self, item: &Planned) -> Option<FileRecord> {
        let mut record = self.reusable.remove(&item.path().display().to_string())?;
        record.reused = true;
        Some(record)
    }

    /// The record of one planned file; `None` when `cancel` tripped while it was worked on
    /// (no record, so `resume` does it again).
    pub(crate) async fn import_planned(
        &mut self,
        item: &Planned,
        cancel: &CancellationToken,
    ) -> Option<FileRecord> {
        if let Some(record) = self.import_reused(item) {
            return Some(record);
        }
        let key = item.path().display().to_string();
        let mut record = FileRecord {
            path: key,
            status: FileStatus::Failed,
            output: None,
            pages_manifest: None,
            document_id: None,
            filename: None,
            duplicate: None,
            run_id: None,
            run_status: None,
            run_warnings: Vec::new(),
            error: None,
            bytes: 0,
            reused: false,
            finished_at: String::new(),
            timings: Timings::default(),
        };
        let started = Instant::now();
        let outcome = match item {
            Planned::Refused { detail, .. } => Err(RecordError {
                code: ErrorCode::InvalidImportPath.as_str().into(),
                detail: (*detail).into(),
            }),
            Planned::File { path, bytes } => {
                record.bytes = *bytes;
                self.import_file(path, &mut record, cancel).await
            }
        };
        // Stopped midway: no record, so `resume` does the file again (a run left queued
        // keeps its checkpoints, and ingest is content-addressed).
        if cancel.is_cancelled() && !matches!(outcome, Ok(FileStatus::Converted)) {
            return None;
        }
        match outcome {
            Ok(status) => record.status = status,
            Err(error) => {
                record.status = FileStatus::Failed;
                record.error = Some(error);
            }
        }
        record.timings.total_ms = millis(started);
        record.finished_at = now_timestamp();
        Some(record)
    }

    async fn import_file(
        &self,
        path: &Path,
        record: &mut FileRecord,
        cancel: &CancellationToken,
    ) -> Result<FileStatus, RecordError> {
        let output = self.layout.output_for(path);
        record.output = Some(output.display().to_string());
        if !self.options.overwrite && std::fs::symlink_metadata(&output).is_ok() {
            // A writer killed before its rename may have left its temporary beside it.
            super::manifest::remove_stale_temps(&output);
            record.error = Some(RecordError {
                code: "output_exists".into(),
                detail: "the output exists; set overwrite to replace it".into(),
            });
            return Ok(FileStatus::Skipped);
        }

        let step = Instant::now();
        let ingested = self.shelf.ingest_path(path).await.map_err(|e| {
            if e.is_user_error() {
                return RecordError {
                    code: e.code().into(),
                    detail: e.to_string(),
                };
            }
            tracing::error!(error = %e, "import ingest failed");
            // The internal text stays in the log; what the operator can act on is named.
            let (code, detail) = match e.error_code() {
                ErrorCode::DatabaseCorrupt => (e.code(), "Document ingest failed"),
                ErrorCode::InsufficientStorage => (e.code(), shelf_db::STORAGE_FULL_DETAIL),
                ErrorCode::ServiceUnavailable if shelf_db::is_busy_text(&e.to_string()) => {
                    (e.code(), shelf_db::BUSY_DETAIL)
                }
                _ => (ErrorCode::IngestFailed.as_str(), "Document ingest failed"),
            };
            RecordError {
                code: code.into(),
                detail: detail.into(),
            }
        })?;
        record.timings.ingest_ms = millis(step);
        let document = ingested.document;
        record.document_id = Some(document.id.clone());
        record.filename = Some(document.filename.clone());
        record.duplicate = Some(ingested.duplicate);

        let step = Instant::now();
        let pipeline = self.options.pipeline.as_deref();
        let processing = self.options.processing;
        let run = if self.options.resume && ingested.duplicate {
            self.shelf
                .resume_or_process_until(&document.id, pipeline, processing, cancel.clone())
                .await
        } else {
            self.shelf
                .process_until(&document.id, pipeline, processing, cancel.clone())
                .await
        };
        let run = run.map_err(|e| RecordError {
            code: e.code().into(),
            detail: if e.is_user_error() {
                e.to_string()
            } else {
                "Run could not be submitted".into()
            },
        })?;
        record.timings.process_ms = millis(step);
        if let Some(run) = &run {
            record.run_id = Some(run.id.clone());
            record.run_status = Some(run.status.as_str().to_string());
            if run.status == shelf_engine::RunStatus::Succeeded {
                // One read of its failed stages: what a succeeded run went on without.
                record.run_warnings = self
                    .shelf
                    .engine
                    .store()
                    .warnings(std::slice::from_ref(run))
                    .await
                    .map(|mut found| found.remove(&run.id).unwrap_or_default())
                    .unwrap_or_else(|error| {
                        tracing::warn!(run_id = %run.id, %error, "reading the run's warnings failed");
                        Vec::new()
                    });
            }
            let processed = self.options.processing == ProcessingMode::Process;
            if processed && run.status.as_str() != "succeeded" {
                // The stage's own stable code when a stage failed the run; `run_failed`
                // for a run that ended otherwise (canceled, reclaims spent).
                return Err(RecordError {
                    code: run.error_code().unwrap_or("run_failed").into(),
                    detail: run
                        .error
                        .clone()
                        .unwrap_or_else(|| format!("the run ended {}", run.status.as_str())),
                });
            }
        }

        let step = Instant::now();
        let extracted = extract_document(
            &self.shelf.documents,
            &self.shelf.extraction,
            &document,
            cancel,
        )
        .await
        .map_err(|e| RecordError {
            code: e.code,
            detail: e.message,
        })?;
        // After a run, paged documents take the run's page records: OCR and corrections
        // included. Otherwise the extraction's (OCR pages pending).
        let mut pages = extracted.pages;
        let mut pages_run = None;
        if let (Some(run), ProcessingMode::Process) = (&run, self.options.processing)
            && !pages.is_empty()
        {
            let from_run = shelf_documents::pages::run_pages(&self.shelf.db, &document.id, &run.id)
                .await
                .map_err(|e| RecordError {
                    code: ErrorCode::ServerError.as_str().into(),
                    detail: {
                        tracing::error!(error = %e, "import could not read page records");
                        "Page records could not be read".into()
                    },
                })?;
            if !from_run.is_empty() {
                pages = from_run;
                pages_run = Some(run.id.clone());
            }
        }
        let markdown = if pages.iter().any(|p| p.source == PageSource::Ocr) {
            pages
                .iter()
                .map(|p| p.text.trim())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join("\n\n")
        } else {
            extracted.extraction.markdown
        };
        let waiting = pages.iter().any(|p| p.source == PageSource::Pending);
        if markdown.trim().is_empty() && !waiting {
            return Err(RecordError {
                code: "no_text_found".into(),
                detail: "the document holds no text to convert".into(),
            });
        }
        let write_error = |detail: String| RecordError {
            code: "invalid_output_dir".into(),
            detail,
        };
        self.layout
            .write(&output, render(&markdown, self.options.format).as_bytes())
            .map_err(write_error)?;
        if !pages.is_empty() {
            let manifest =
                PageManifest::from_records(path, &document.id, pages_run.as_deref(), &pages);
            let sidecar = PathBuf::from(format!("{}{PAGES_SUFFIX}", output.display()));
            let bytes = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
            self.layout.write(&sidecar, &bytes).map_err(write_error)?;
            record.pages_manifest = Some(sidecar.display().to_string());
        }
        record.timings.convert_ms = millis(step);
        Ok(FileStatus::Converted)
    }
}

/// The request name of a processing mode.
fn processing_name(mode: ProcessingMode) -> &'static str {
    match mode {
        ProcessingMode::Process => "process",
        ProcessingMode::Queue => "queue",
        ProcessingMode::None => "none",
    }
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl Shelf {
    /// Imports what `request` names (see docs/imports.md), within `boundary` and `limits`.
    pub async fn import(
        &self,
        request: &ImportRequest,
        boundary: &Boundary,
        limits: ImportLimits,
        cancel: &CancellationToken,
        progress: &mut (dyn FnMut(Progress<'_>) + Send),
    ) -> Result<ImportReport, ImportError> {
        // Refused while a volume is below `SHELF_MIN_FREE_BYTES`, before anything is written.
        self.admit_new_work().map_err(crate::AppError::from)?;
        Import::prepare(self, request, boundary, limits)?
            .run(cancel, progress)
            .await
    }

    /// A page of an import report's records (`GET /imports/status`).
    pub fn import_status(
        &self,
        boundary: &Boundary,
        manifest_path: &str,
        limit: u64,
        offset: u64,
    ) -> Result<super::manifest::StatusPage, ImportError> {
        let path = boundary.resolve(manifest_path, PathField::Manifest)?;
        super::manifest::status_page(
            &path,
            self.settings.api.max_import_manifest_bytes,
            limit,
            offset,
        )
    }

    /// The page-level progress of an import (`GET /imports/page-manifest`).
    pub fn import_page_progress(
        &self,
        boundary: &Boundary,
        manifest_path: &str,
        failures_only: bool,
    ) -> Result<super::page_manifest::PageProgress, ImportError> {
        let path = boundary.resolve(manifest_path, PathField::Manifest)?;
        super::page_manifest::page_progress(
            &path,
            self.settings.api.max_import_manifest_bytes,
            failures_only,
        )
    }

    /// The API's limits: `SHELF_API_MAX_IMPORT_*`.
    pub fn api_import_limits(&self) -> ImportLimits {
        ImportLimits {
            max_files: Some(self.settings.api.max_import_files),
            max_bytes: Some(self.settings.api.max_import_bytes),
            max_manifest_bytes: self.settings.api.max_import_manifest_bytes,
        }
    }
}
