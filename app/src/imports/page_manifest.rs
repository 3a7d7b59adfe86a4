//! The page manifest: a sidecar `<output>.pages.json` beside the output of a PDF or an image,
//! written from its page records (the run's with `process`, the extraction's otherwise), and
//! the page-level progress of an import that `GET /imports/page-manifest` reads back.

use std::path::Path;

use serde::{Deserialize, Serialize};
use shelf_documents::{ListedPage, PageRecord, PageSource};

use super::error::ImportError;
use super::manifest::{ImportReport, read_capped, read_report};

/// The marker of a page manifest.
pub const PAGE_MANIFEST_KIND: &str = "shelf_page_manifest";
/// Pages listed at most; the counts cover every page.
pub const MAX_LISTED_PAGES: usize = 1000;

/// Where a document's pages stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PagesStatus {
    /// Every page has its text.
    Complete,
    /// Some pages wait for OCR (`none` and `queue` imports, or a run that has not read them).
    Pending,
    /// Some pages failed.
    Failed,
}

/// Pages by where their text came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCounts {
    pub text_layer: u64,
    pub ocr: u64,
    pub failed: u64,
    pub pending: u64,
}

/// The sidecar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageManifest {
    /// Always [`PAGE_MANIFEST_KIND`].
    pub kind: String,
    pub source: String,
    pub document_id: String,
    /// The run the records come from; `None` when they come from the extraction alone.
    pub run_id: Option<String>,
    pub status: PagesStatus,
    pub pages: u64,
    pub sources: SourceCounts,
    /// Pages with warnings, and warnings in all.
    pub pages_with_warnings: u64,
    pub warnings: u64,
    pub attempts: u64,
    /// Mean confidence of OCR pages, rounded to 0.1.
    pub average_confidence: Option<f64>,
    pub corrected_pages: u64,
    /// The first [`MAX_LISTED_PAGES`] pages.
    pub page_list: Vec<ListedPage>,
    pub page_list_truncated: bool,
}

impl PageManifest {
    /// The manifest of `records` (in page order).
    pub fn from_records(
        source: &Path,
        document_id: &str,
        run_id: Option<&str>,
        records: &[PageRecord],
    ) -> PageManifest {
        let mut sources = SourceCounts::default();
        let (mut confidence_sum, mut confident) = (0.0, 0u64);
        for r in records {
            match r.source {
                PageSource::TextLayer => sources.text_layer += 1,
                PageSource::Ocr => sources.ocr += 1,
                PageSource::Failed => sources.failed += 1,
                PageSource::Pending => sources.pending += 1,
            }
            if let (PageSource::Ocr, Some(c)) = (r.source, r.confidence) {
                confidence_sum += c;
                confident += 1;
            }
        }
        let status = if sources.failed > 0 {
            PagesStatus::Failed
        } else if sources.pending > 0 {
            PagesStatus::Pending
        } else {
            PagesStatus::Complete
        };
        PageManifest {
            kind: PAGE_MANIFEST_KIND.into(),
            source: source.display().to_string(),
            document_id: document_id.into(),
            run_id: run_id.map(str::to_owned),
            status,
            pages: records.len() as u64,
            sources,
            pages_with_warnings: records.iter().filter(|r| !r.warnings.is_empty()).count() as u64,
            warnings: records.iter().map(|r| r.warnings.len() as u64).sum(),
            attempts: records.iter().map(|r| u64::from(r.attempts)).sum(),
            average_confidence: (confident > 0)
                .then(|| (confidence_sum / confident as f64 * 10.0).round() / 10.0),
            corrected_pages: records.iter().filter(|r| r.corrected).count() as u64,
            page_list: records
                .iter()
                .take(MAX_LISTED_PAGES)
                .map(ListedPage::from)
                .collect(),
            page_list_truncated: records.len() > MAX_LISTED_PAGES,
        }
    }
}

/// One file's page progress in [`PageProgress`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilePages {
    pub path: String,
    pub pages_manifest: String,
    #[serde(flatten)]
    pub manifest: PageManifest,
}

/// Page counts over every file of an import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PagesTotals {
    /// Files with a page manifest.
    pub files: u64,
    pub pages: u64,
    pub sources: SourceCounts,
    pub pages_with_warnings: u64,
    pub corrected_pages: u64,
    pub attempts: u64,
}

/// The page-level progress of an import (`GET /imports/page-manifest`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageProgress {
    pub manifest_path: String,
    pub failures_only: bool,
    pub totals: PagesTotals,
    pub files: Vec<FilePages>,
}

/// Reads the report at `manifest_path` and each page manifest it names, every read under
/// `max_bytes` and all of them together too. `failures_only` keeps failed pages and pages with
/// an error or warnings, and the files that have any.
pub fn page_progress(
    manifest_path: &Path,
    max_bytes: u64,
    failures_only: bool,
) -> Result<PageProgress, ImportError> {
    let report: ImportReport = read_report(manifest_path, max_bytes)?
        .ok_or_else(|| ImportError::InvalidManifestPath("no import report at this path".into()))?;
    let mut budget = max_bytes;
    let mut progress = PageProgress {
        manifest_path: manifest_path.display().to_string(),
        failures_only,
        totals: PagesTotals::default(),
        files: Vec::new(),
    };
    for record in &report.files {
        let Some(sidecar) = &record.pages_manifest else {
            continue;
        };
        let path = Path::new(sidecar);
        // The sidecar sits beside an output the import wrote; a symlink there is not ours.
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_file() => {}
            _ => continue,
        }
        let bytes = read_capped(path, budget)?;
        budget -= bytes.len() as u64;
        let Ok(mut manifest) = serde_json::from_slice::<PageManifest>(&bytes) else {
            continue;
        };
        if manifest.kind != PAGE_MANIFEST_KIND {
            continue;
        }
        let totals = &mut progress.totals;
        totals.files += 1;
        totals.pages += manifest.pages;
        totals.sources.text_layer += manifest.sources.text_layer;
        totals.sources.ocr += manifest.sources.ocr;
        totals.sources.failed += manifest.sources.failed;
        totals.sources.pending += manifest.sources.pending;
        totals.pages_with_warnings += manifest.pages_with_warnings;
        totals.corrected_pages += manifest.corrected_pages;
        totals.attempts += manifest.attempts;
        if failures_only {
            manifest.page_list.retain(ListedPage::is_failure);
            if manifest.page_list.is_empty() {
                continue;
            }
        }
        progress.files.push(FilePages {
            path: record.path.clone(),
            pages_manifest: sidecar.clone(),
            manifest,
        });
    }
    Ok(progress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_status_come_from_the_records() {
        let mut ocr = PageRecord::pending(2);
        ocr.source = PageSource::Ocr;
        ocr.confidence = Some(90.04);
        ocr.attempts = 2;
        ocr.rotation_degrees = Some(180);
        ocr.corrected = true;
        ocr.text = "abc".into();
        let mut failed = PageRecord::pending(3);
        failed.source = PageSource::Failed;
        failed.error = Some("timeout".into());
        let records = vec![PageRecord::text_layer(1, "typed"), ocr, failed];
        let m = PageManifest::from_records(Path::new("/a.pdf"), "doc_x", Some("run_1"), &records);
        assert_eq!(m.status, PagesStatus::Failed);
        assert_eq!(m.pages, 3);
        assert_eq!(
            (m.sources.text_layer, m.sources.ocr, m.sources.failed),
            (1, 1, 1)
        );
        assert_eq!(m.average_confidence, Some(90.0));
        assert_eq!((m.attempts, m.corrected_pages), (2, 1));
        assert_eq!(m.page_list[1].rotation_degrees, Some(180));
        assert_eq!(m.page_list[1].chars, 3);
        assert_eq!(m.page_list.iter().filter(|p| p.is_failure()).count(), 1);
        let pending = PageManifest::from_records(
            Path::new("/b.tif"),
            "doc_y",
            None,
            &[PageRecord::pending(1)],
        );
        assert_eq!(pending.status, PagesStatus::Pending);
        assert_eq!(pending.average_confidence, None);
    }
}
