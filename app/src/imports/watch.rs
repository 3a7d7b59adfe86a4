//! The hot folder: a directory polled for new files. A file is imported once it has stopped
//! growing (the same size and modification time on two polls in a row); the manifest records
//! it, and a restart takes over the manifest's converted records, so no file is ingested twice.
//! Polling needs no platform notification API and works on network mounts.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::error::ImportError;
use super::manifest::{ImportReport, ReportStatus};
use super::paths::Boundary;
use super::request::ImportRequest;
use super::run::{Import, ImportLimits, Planned, Progress};
use crate::shelf::Shelf;

impl Shelf {
    /// Watches `request.source_dir` (a directory) until `cancel` trips, polling every
    /// `interval`. The manifest is required: it is what makes a restart skip what was done.
    pub async fn watch_folder(
        &self,
        request: &ImportRequest,
        boundary: &Boundary,
        limits: ImportLimits,
        interval: Duration,
        cancel: &CancellationToken,
        progress: &mut (dyn FnMut(Progress<'_>) + Send),
    ) -> Result<ImportReport, ImportError> {
        let request = ImportRequest {
            resume: Some(true),
            ..request.clone()
        };
        if request.manifest_path.is_none() {
            return Err(ImportError::invalid(
                "manifest_path",
                "a hot folder needs a manifest",
            ));
        }
        let mut import = Import::prepare(self, &request, boundary, limits)?;
        if !import.options.source_is_dir {
            return Err(ImportError::InvalidImportPath(
                "a hot folder must be a directory".into(),
            ));
        }
        // Refused while a volume is below `SHELF_MIN_FREE_BYTES`, like any import.
        self.admit_new_work().map_err(crate::AppError::from)?;
        import.set_status(ReportStatus::Watching)?;
        let mut low_on_space = false;
        // Size and modification time of each file seen growing on the last poll.
        let mut seen: HashMap<PathBuf, (u64, Option<SystemTime>)> = HashMap::new();
        loop {
            // While a volume is below the floor nothing new is taken in: the files wait in the
            // folder and are imported once space returns.
            let items = match (self.disk_space().check(), low_on_space) {
                (Ok(()), paused) => {
                    if paused {
                        tracing::info!("free space is back; the hot folder imports again");
                    }
                    low_on_space = false;
                    import.plan()?
                }
                (Err(low), false) => {
                    tracing::warn!("hot folder paused: {low}");
                    low_on_space = true;
                    Vec::new()
                }
                (Err(_), true) => Vec::new(),
            };
            for item in items {
                if cancel.is_cancelled() {
                    break;
                }
                let (path, bytes) = match &item {
                    Planned::File { path, bytes } => (path.clone(), *bytes),
                    Planned::Refused { path, .. } => (path.clone(), 0),
                };
                if import.has_record(&path, bytes) {
                    // Converted before (this session or, reused, an earlier one).
                    if let Some(record) = import.import_reused(&item) {
                        import.add_planned(1);
                        import.push(record, progress)?;
                    }
                    continue;
                }
                let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
                let stable = seen.get(&path) == Some(&(bytes, modified));
                if !stable {
                    seen.insert(path, (bytes, modified));
                    continue;
                }
                seen.remove(&path);
                import.add_planned(1);
                if let Some(record) = import.import_planned(&item, cancel).await {
                    import.push(record, progress)?;
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
        }
        import.set_status(ReportStatus::Interrupted)?;
        Ok(import.report)
    }
}
