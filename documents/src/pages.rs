//! Page records: what happened to each page of a paged document (PDF, image) in a run: where
//! its text came from (text layer, OCR), confidence, rotation, attempts, correction, warnings,
//! error and the kept page image. The `extract` stage writes them, `ocr` and `correct` update
//! them, and `GET /documents/{id}/pages` and `shelf pages` read the latest run's.
//!
//! SKELETON: the interface the stages are written against.

use sea_orm::ConnectionTrait;
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// Where a page's text came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageSource {
    /// The file's own text layer.
    TextLayer,
    /// Recognized by OCR.
    Ocr,
    /// OCR failed on the page (see `error`).
    Failed,
    /// Needs OCR, not read yet (the run is before or in its `ocr` stage, or skipped it).
    Pending,
}

/// One page of a document in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageRecord {
    /// 1-based.
    pub number: u32,
    pub source: PageSource,
    /// The page's current text (corrected, once corrected).
    pub text: String,
    /// Mean OCR word confidence, 0 to 100; `None` for text-layer and pending pages.
    pub confidence: Option<f64>,
    /// Clockwise rotation OCR applied to make the page upright.
    pub rotation_degrees: Option<u32>,
    /// Recognition passes made on the page.
    pub attempts: u32,
    /// The language model's correction was kept.
    pub corrected: bool,
    pub warnings: Vec<String>,
    pub error: Option<String>,
    /// The kept page image, relative to the data directory (`SHELF_OCR_PRESERVE_PAGE_IMAGES`).
    pub image_path: Option<String>,
}

/// Counts over all of a run's pages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PageSummary {
    pub pages: u64,
    pub text_layer: u64,
    pub ocr: u64,
    pub failed: u64,
    pub pending: u64,
    pub corrected: u64,
    /// Pages with warnings.
    pub with_warnings: u64,
    /// Mean confidence of OCR pages; `None` without any.
    pub average_confidence: Option<f64>,
    pub attempts: u64,
}

/// A page of page records (without their text), for the API and the CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageListing {
    pub document_id: String,
    /// The run the records are from (the document's latest run that recorded pages).
    pub run_id: Option<String>,
    pub summary: PageSummary,
    /// Records matching the filter (all, or failures only).
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub pages: Vec<PageRecord>,
}

/// Replaces the page records of `run_id` for the document (idempotent on replay). Written in
/// small batches.
pub async fn put_pages(
    _conn: &impl ConnectionTrait,
    _document_id: &str,
    _run_id: &str,
    _pages: &[PageRecord],
) -> Result<()> {
    todo!()
}

/// Writes one page record of a run (insert or replace).
pub async fn put_page(
    _conn: &impl ConnectionTrait,
    _document_id: &str,
    _run_id: &str,
    _page: &PageRecord,
) -> Result<()> {
    todo!()
}

/// Every page record of one run of the document, text included, in page order.
pub async fn run_pages(
    _conn: &impl ConnectionTrait,
    _document_id: &str,
    _run_id: &str,
) -> Result<Vec<PageRecord>> {
    todo!()
}

/// The page records of the document's latest run that has any, without text; `failures_only`
/// keeps failed pages and pages with an error or warnings. `not_found` for an unknown document.
pub async fn page_listing(
    _conn: &impl ConnectionTrait,
    _document_id: &str,
    _limit: u64,
    _offset: u64,
    _failures_only: bool,
) -> Result<PageListing> {
    todo!()
}
