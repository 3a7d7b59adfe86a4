//! Page records: what happened to each page of a paged document (PDF, image) in a run: where
//! its text came from (text layer, OCR), confidence, rotation, attempts, correction, warnings,
//! error and the kept page image. The `extract` stage writes them, `ocr` and `correct` update
//! them, and `GET /documents/{id}/pages` and `shelf pages` read the latest run's.
//!
//! A run writes and replaces only its own records, never another run's: the listing picks the
//! newest run's, and a pruned run's records go with it (retention). During a run every write of
//! them is fenced by the stage's lease (the statement builders here, handed to the engine).

use shelf_db::SqlFragment;
use shelf_db::sql::SqlExt;

use sea_orm::{ConnectionTrait, DatabaseConnection, QueryResult, Statement, Value};
use serde::{Deserialize, Serialize};

use crate::error::{DocumentsError, Result};
use crate::sql::{begin_immediate, get_u64, stmt, to_i64};
use crate::store::find_document;

/// Rows per statement: far under SQLite's bound-value limit (12 values a row), and a long
/// document's records are a few statements rather than one per page.
const BATCH_ROWS: usize = 200;

/// Columns of `document_pages` read into a [`PageRecord`].
const PAGE_COLUMNS: &str = "number, source, text, confidence, rotation_degrees, attempts, \
     corrected, warnings, error, image_path";

/// A listing's condition for `failures_only`.
const FAILURE_CONDITION: &str = "(source = 'failed' OR error IS NOT NULL OR warnings <> '[]')";

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

impl PageSource {
    /// The persisted (and serialized) name.
    pub fn as_str(self) -> &'static str {
        match self {
            PageSource::TextLayer => "text_layer",
            PageSource::Ocr => "ocr",
            PageSource::Failed => "failed",
            PageSource::Pending => "pending",
        }
    }

    /// The source of a persisted name.
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "text_layer" => PageSource::TextLayer,
            "ocr" => PageSource::Ocr,
            "failed" => PageSource::Failed,
            "pending" => PageSource::Pending,
            _ => return None,
        })
    }
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

impl PageRecord {
    /// A page the file's text layer covers.
    pub fn text_layer(number: u32, text: impl Into<String>) -> Self {
        PageRecord {
            source: PageSource::TextLayer,
            text: text.into(),
            ..PageRecord::pending(number)
        }
    }

    /// A page waiting for OCR.
    pub fn pending(number: u32) -> Self {
        PageRecord {
            number,
            source: PageSource::Pending,
            text: String::new(),
            confidence: None,
            rotation_degrees: None,
            attempts: 0,
            corrected: false,
            warnings: Vec::new(),
            error: None,
            image_path: None,
        }
    }
}

/// A page record as listed: every field of [`PageRecord`] but its text, which the listing
/// replaces by its length (`chars`), so a listing of a thousand pages stays small.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedPage {
    /// 1-based.
    pub number: u32,
    pub source: PageSource,
    /// Mean OCR word confidence, 0 to 100; `None` for text-layer and pending pages.
    pub confidence: Option<f64>,
    /// Clockwise rotation OCR applied to make the page upright.
    pub rotation_degrees: Option<u32>,
    /// Characters of the page's current text.
    pub chars: u64,
    /// Recognition passes made on the page.
    pub attempts: u32,
    /// The language model's correction was kept.
    pub corrected: bool,
    pub warnings: Vec<String>,
    pub error: Option<String>,
    /// The kept page image, relative to the data directory.
    pub image_path: Option<String>,
}

impl ListedPage {
    /// A failed page, or one with an error or warnings (what `failures_only` keeps).
    pub fn is_failure(&self) -> bool {
        self.source == PageSource::Failed || self.error.is_some() || !self.warnings.is_empty()
    }
}

impl From<&PageRecord> for ListedPage {
    fn from(r: &PageRecord) -> Self {
        ListedPage {
            number: r.number,
            source: r.source,
            confidence: r.confidence,
            rotation_degrees: r.rotation_degrees,
            chars: r.text.chars().count() as u64,
            attempts: r.attempts,
            corrected: r.corrected,
            warnings: r.warnings.clone(),
            error: r.error.clone(),
            image_path: r.image_path.clone(),
        }
    }
}

/// Counts over every page record of the run, whatever the filter and the page.
// The API serves it as it is, as the `PageSummaryOut` schema: these doc comments are its text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = PageSummaryOut)]
pub struct PageSummary {
    pub pages: u64,
    pub text_layer: u64,
    pub ocr: u64,
    pub failed: u64,
    pub pending: u64,
    /// Pages whose language-model correction was kept.
    pub corrected: u64,
    /// Pages with warnings.
    pub with_warnings: u64,
    /// Mean confidence of OCR pages (0 to 100, rounded to 0.1); null without any.
    pub average_confidence: Option<f64>,
    /// Recognition passes over all pages.
    pub attempts: u64,
}

/// A page of page records (without their text), for the API and the CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageListing {
    pub document_id: String,
    /// The run the records are from (the document's latest run that recorded pages); `None`
    /// when no run recorded pages.
    pub run_id: Option<String>,
    /// Over every page of the run, whatever the filter and the page.
    pub summary: PageSummary,
    /// Records matching the filter (all, or failures only).
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub pages: Vec<ListedPage>,
}

/// Replaces the page records of `run_id` for the document (idempotent on replay), in one
/// transaction, so a reader never sees the run without records. Other runs' records are left
/// alone. Outside a run (tests, tools); a stage hands [`put_pages_statements`] to the engine.
pub async fn put_pages(
    db: &DatabaseConnection,
    document_id: &str,
    run_id: &str,
    pages: &[PageRecord],
) -> Result<()> {
    let statements = put_pages_statements(document_id, run_id, pages)?;
    let txn = begin_immediate(db).await?;
    txn.execute_all_sql(statements).await?;
    txn.commit().await?;
    Ok(())
}

/// Writes one page record of a run (insert or replace). Outside a run; a stage hands
/// [`upsert_pages_statements`] to the engine.
pub async fn put_page(
    conn: &impl ConnectionTrait,
    document_id: &str,
    run_id: &str,
    page: &PageRecord,
) -> Result<()> {
    conn.execute_all_sql(upsert_pages_statements(
        document_id,
        run_id,
        std::slice::from_ref(page),
    )?)
    .await?;
    Ok(())
}

/// The statements that replace the page records of `run_id` for the document, to run in one
/// transaction: this run's records are deleted (page numbers it no longer has included), then
/// `pages` inserted. Only this run's rows are touched.
pub fn put_pages_statements(
    document_id: &str,
    run_id: &str,
    pages: &[PageRecord],
) -> Result<Vec<Statement>> {
    let mut statements = vec![stmt(
        "DELETE FROM document_pages WHERE document_id = ? AND run_id = ?",
        [document_id.to_string().into(), run_id.to_string().into()],
    )];
    statements.extend(upsert_pages_statements(document_id, run_id, pages)?);
    Ok(statements)
}

/// The statements that insert or replace `pages` among the records of `run_id` (its other
/// pages stay as they are), at most 200 rows a statement.
pub fn upsert_pages_statements(
    document_id: &str,
    run_id: &str,
    pages: &[PageRecord],
) -> Result<Vec<Statement>> {
    pages
        .chunks(BATCH_ROWS)
        .map(|batch| upsert_statement(document_id, run_id, batch))
        .collect()
}

/// Every page record of one run of the document, text included, in page order.
pub async fn run_pages(
    conn: &impl ConnectionTrait,
    document_id: &str,
    run_id: &str,
) -> Result<Vec<PageRecord>> {
    let rows = conn
        .query_all_sql(stmt(
            &format!(
                "SELECT {PAGE_COLUMNS} FROM document_pages WHERE document_id = ? AND run_id = ? \
                 ORDER BY number"
            ),
            [document_id.to_string().into(), run_id.to_string().into()],
        ))
        .await?;
    rows.iter().map(record_from_row).collect()
}

/// The page records of the document's latest run that has any, without text; `failures_only`
/// keeps failed pages and pages with an error or warnings. `not_found` for an unknown document.
/// `run_order` gives the `ORDER BY` keys putting the runs whose ids a column holds newest
/// first (the engine's `subject_sql::run_created_order`).
pub async fn page_listing(
    conn: &impl ConnectionTrait,
    document_id: &str,
    limit: u64,
    offset: u64,
    failures_only: bool,
    run_order: impl Fn(&str) -> SqlFragment,
) -> Result<PageListing> {
    if find_document(conn, document_id).await?.is_none() {
        return Err(DocumentsError::NotFound {
            id: document_id.to_string(),
        });
    }
    let mut listing = PageListing {
        document_id: document_id.to_string(),
        run_id: None,
        summary: PageSummary::default(),
        total: 0,
        limit,
        offset,
        pages: Vec::new(),
    };
    // Latest by the run's creation (then its insertion order); records of a run whose row is
    // gone count as oldest.
    let mut latest = SqlFragment::new(
        "SELECT p.run_id FROM (SELECT DISTINCT run_id FROM document_pages \
         WHERE document_id = ?) p ORDER BY ",
        [document_id.to_string().into()],
    );
    latest
        .push_fragment(&run_order("p.run_id"))
        .push(", p.run_id DESC LIMIT 1", []);
    let latest = conn.query_one_sql(latest.into_statement()).await?;
    let Some(latest) = latest else {
        return Ok(listing);
    };
    let run_id: String = latest.try_get("", "run_id")?;
    let keys = || -> Vec<Value> { vec![document_id.to_string().into(), run_id.clone().into()] };

    let summary = conn
        .query_one_sql(stmt(
            &format!(
                "SELECT count(*) AS pages, \
                 {text_layer} AS text_layer, {ocr} AS ocr, {failed} AS failed, \
                 {pending} AS pending, {corrected} AS corrected, \
                 {with_warnings} AS with_warnings, \
                 CAST(avg(CASE WHEN source = 'ocr' THEN confidence END) AS DOUBLE PRECISION) \
                 AS average_confidence, \
                 CAST(coalesce(sum(attempts), 0) AS BIGINT) AS attempts, \
                 {failures} AS failures \
                 FROM document_pages WHERE document_id = ? AND run_id = ?",
                text_layer = count_where("source = 'text_layer'"),
                ocr = count_where("source = 'ocr'"),
                failed = count_where("source = 'failed'"),
                pending = count_where("source = 'pending'"),
                corrected = count_where("corrected <> 0"),
                with_warnings = count_where("warnings <> '[]'"),
                failures = count_where(FAILURE_CONDITION),
            ),
            keys(),
        ))
        .await?
        .ok_or_else(|| DocumentsError::corrupt("page summary returned no row"))?;
    listing.summary = PageSummary {
        pages: get_u64(&summary, "pages")?,
        text_layer: get_u64(&summary, "text_layer")?,
        ocr: get_u64(&summary, "ocr")?,
        failed: get_u64(&summary, "failed")?,
        pending: get_u64(&summary, "pending")?,
        corrected: get_u64(&summary, "corrected")?,
        with_warnings: get_u64(&summary, "with_warnings")?,
        average_confidence: summary
            .try_get::<Option<f64>>("", "average_confidence")?
            .map(|mean| (mean * 10.0).round() / 10.0),
        attempts: get_u64(&summary, "attempts")?,
    };
    listing.total = if failures_only {
        get_u64(&summary, "failures")?
    } else {
        listing.summary.pages
    };

    let filter = if failures_only {
        format!(" AND {FAILURE_CONDITION}")
    } else {
        String::new()
    };
    let mut values = keys();
    values.push(to_i64(limit).into());
    values.push(to_i64(offset).into());
    let rows = conn
        .query_all_sql(stmt(
            &format!(
                "SELECT number, source, CAST(length(text) AS BIGINT) AS chars, confidence, rotation_degrees, \
                 attempts, corrected, warnings, error, image_path FROM document_pages \
                 WHERE document_id = ? AND run_id = ?{filter} ORDER BY number LIMIT ? OFFSET ?"
            ),
            values,
        ))
        .await?;
    listing.pages = rows.iter().map(listed_from_row).collect::<Result<_>>()?;
    listing.run_id = Some(run_id);
    Ok(listing)
}

/// The rows matching `condition`, as an integer on both backends: PostgreSQL has no
/// `sum(boolean)`, and its `sum(bigint)` is a NUMERIC.
fn count_where(condition: &str) -> String {
    format!("CAST(coalesce(sum(CASE WHEN {condition} THEN 1 ELSE 0 END), 0) AS BIGINT)")
}

/// `INSERT … ON CONFLICT DO UPDATE` of a batch of one run's records.
fn upsert_statement(document_id: &str, run_id: &str, pages: &[PageRecord]) -> Result<Statement> {
    let placeholders = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"; pages.len()].join(", ");
    let mut values: Vec<Value> = Vec::with_capacity(pages.len() * 12);
    for page in pages {
        let warnings = serde_json::to_string(&page.warnings)
            .map_err(|e| DocumentsError::corrupt(format!("cannot encode page warnings: {e}")))?;
        values.push(document_id.to_string().into());
        values.push(run_id.to_string().into());
        values.push(i64::from(page.number).into());
        values.push(page.source.as_str().into());
        values.push(page.text.clone().into());
        values.push(page.confidence.filter(|c| c.is_finite()).into());
        values.push(page.rotation_degrees.map(i64::from).into());
        values.push(i64::from(page.attempts).into());
        // An integer flag: the column is BIGINT on PostgreSQL, which takes no boolean.
        values.push(i64::from(page.corrected).into());
        values.push(warnings.into());
        values.push(page.error.clone().into());
        values.push(page.image_path.clone().into());
    }
    Ok(stmt(
        &format!(
            "INSERT INTO document_pages (document_id, run_id, number, source, text, confidence, \
             rotation_degrees, attempts, corrected, warnings, error, image_path) \
             VALUES {placeholders} \
             ON CONFLICT (document_id, run_id, number) DO UPDATE SET source = excluded.source, \
             text = excluded.text, confidence = excluded.confidence, \
             rotation_degrees = excluded.rotation_degrees, attempts = excluded.attempts, \
             corrected = excluded.corrected, warnings = excluded.warnings, \
             error = excluded.error, image_path = excluded.image_path"
        ),
        values,
    ))
}

/// The fields every row shape shares.
struct Common {
    number: u32,
    source: PageSource,
    confidence: Option<f64>,
    rotation_degrees: Option<u32>,
    attempts: u32,
    corrected: bool,
    warnings: Vec<String>,
    error: Option<String>,
    image_path: Option<String>,
}

fn common_from_row(row: &QueryResult) -> Result<Common> {
    let number: i64 = row.try_get("", "number")?;
    let number = u32::try_from(number)
        .map_err(|_| DocumentsError::corrupt(format!("page number {number} out of range")))?;
    let source_text: String = row.try_get("", "source")?;
    let source = PageSource::parse(&source_text).ok_or_else(|| {
        DocumentsError::corrupt(format!("page {number} has source {source_text}"))
    })?;
    let warnings_text: String = row.try_get("", "warnings")?;
    let warnings: Vec<String> = serde_json::from_str(&warnings_text)
        .map_err(|e| DocumentsError::corrupt(format!("page {number} warnings: {e}")))?;
    let small = |value: Option<i64>| value.map(|v| u32::try_from(v).unwrap_or(0));
    Ok(Common {
        number,
        source,
        confidence: row.try_get("", "confidence")?,
        rotation_degrees: small(row.try_get("", "rotation_degrees")?),
        attempts: small(Some(row.try_get("", "attempts")?)).unwrap_or(0),
        corrected: row.try_get::<i64>("", "corrected")? != 0,
        warnings,
        error: row.try_get("", "error")?,
        image_path: row.try_get("", "image_path")?,
    })
}

fn record_from_row(row: &QueryResult) -> Result<PageRecord> {
    let c = common_from_row(row)?;
    Ok(PageRecord {
        number: c.number,
        source: c.source,
        text: row.try_get("", "text")?,
        confidence: c.confidence,
        rotation_degrees: c.rotation_degrees,
        attempts: c.attempts,
        corrected: c.corrected,
        warnings: c.warnings,
        error: c.error,
        image_path: c.image_path,
    })
}

fn listed_from_row(row: &QueryResult) -> Result<ListedPage> {
    let c = common_from_row(row)?;
    Ok(ListedPage {
        number: c.number,
        source: c.source,
        confidence: c.confidence,
        rotation_degrees: c.rotation_degrees,
        chars: get_u64(row, "chars")?,
        attempts: c.attempts,
        corrected: c.corrected,
        warnings: c.warnings,
        error: c.error,
        image_path: c.image_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_round_trip_their_names() {
        for source in [
            PageSource::TextLayer,
            PageSource::Ocr,
            PageSource::Failed,
            PageSource::Pending,
        ] {
            assert_eq!(PageSource::parse(source.as_str()), Some(source));
            assert_eq!(
                serde_json::to_value(source).ok(),
                Some(serde_json::Value::String(source.as_str().into()))
            );
        }
        assert_eq!(PageSource::parse("scanned"), None);
    }
}
