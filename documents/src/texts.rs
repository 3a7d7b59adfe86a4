//! Texts produced for a document by its runs (raw extraction, OCR, cleaned output, ...):
//! idempotent writes, lookups and the bounded content page of the latest cleaned text.

use sea_orm::{ConnectionTrait, QueryResult, Statement};
use serde::{Deserialize, Serialize};
use shelf_db::SqlFragment;
use shelf_db::sql::SqlExt;

use crate::error::{DocumentsError, Result};
use crate::sql::{get_u64, now_timestamp, stmt, to_i64};
use crate::store::find_document;

/// Kind of the cleaned output (the content page and search read it).
pub const TEXT_KIND_CLEANED: &str = "cleaned";
/// Kind of the raw extracted source text.
pub const TEXT_KIND_RAW: &str = "raw";
/// Kinds of the texts the index keeps of its own: bodies handed to
/// [`crate::index_document`] rather than named stored texts, and, in a database converted by
/// the migration that made the index read stored texts, bodies no stored text held. Readers of
/// a document's content never see them (they ask for `cleaned` or `raw`).
pub const TEXT_KIND_INDEXED_CLEANED: &str = "indexed_cleaned";
/// See [`TEXT_KIND_INDEXED_CLEANED`].
pub const TEXT_KIND_INDEXED_RAW: &str = "indexed_raw";

/// One stored text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextRecord {
    /// Caller-chosen stable id (e.g. `<run_id>:<stage>`), so replays overwrite.
    pub id: String,
    pub document_id: String,
    pub run_id: String,
    /// `raw`, `cleaned`, or another stage-defined kind.
    pub kind: String,
    pub body: String,
}

// A bounded page of the latest cleaned output; offsets count characters. The API serves it
// as it is, as the `ContentPageOut` schema, so its doc comments are that schema's text: this
// one is a plain comment because the published schema has no description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = ContentPageOut)]
pub struct ContentPage {
    pub document_id: String,
    pub text: String,
    /// Characters in the whole cleaned output.
    pub total_chars: u64,
    pub offset: u64,
    pub limit: u64,
    /// True when characters follow this page.
    pub truncated: bool,
}

/// Writes a text; writing the same id again replaces its body, run and kind but keeps its
/// first `created_at`, so replays are idempotent. Composable into a caller's transaction.
pub async fn put_text(conn: &impl ConnectionTrait, text: &TextRecord) -> Result<()> {
    conn.execute_sql(put_text_statement(text)).await?;
    Ok(())
}

/// The statement [`put_text`] runs, for a caller that commits it elsewhere (a stage hands it
/// to the engine to commit with its success).
pub fn put_text_statement(text: &TextRecord) -> Statement {
    let chars = text.body.chars().count() as u64;
    stmt(
        "INSERT INTO document_texts (id, document_id, run_id, kind, body, chars, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET document_id = excluded.document_id, \
         run_id = excluded.run_id, kind = excluded.kind, body = excluded.body, \
         chars = excluded.chars",
        [
            text.id.clone().into(),
            text.document_id.clone().into(),
            text.run_id.clone().into(),
            text.kind.clone().into(),
            text.body.clone().into(),
            to_i64(chars).into(),
            now_timestamp().into(),
        ],
    )
}

const TEXT_COLUMNS: &str = "id, document_id, run_id, kind, body";

/// One text by id.
pub async fn get_text(conn: &impl ConnectionTrait, id: &str) -> Result<Option<TextRecord>> {
    let sql = format!("SELECT {TEXT_COLUMNS} FROM document_texts WHERE id = ?");
    let row = conn
        .query_one_sql(stmt(&sql, [id.to_string().into()]))
        .await?;
    row.as_ref().map(text_from_row).transpose()
}

/// A stored text's length in characters, without reading its body; `None` when there is no
/// text with that id.
pub async fn text_chars(conn: &impl ConnectionTrait, id: &str) -> Result<Option<u64>> {
    let row = conn
        .query_one_sql(stmt(
            "SELECT chars FROM document_texts WHERE id = ?",
            [id.to_string().into()],
        ))
        .await?;
    Ok(row.map(|row| get_u64(&row, "chars")).transpose()?)
}

/// The newest text of a kind for a document, whatever became of the run that wrote it.
pub async fn latest_text(
    conn: &impl ConnectionTrait,
    document_id: &str,
    kind: &str,
) -> Result<Option<TextRecord>> {
    newest_text(conn, document_id, kind, None).await
}

/// The newest text of a kind written by a succeeded run of the document: what readers of the
/// document (its content, export, OKF) see, so a canceled or failed run's texts never show.
/// `succeeded_runs` selects the ids of the runs whose texts count (the engine's
/// `subject_sql::succeeded_run_ids(document_id)`: runs that succeeded and the runs their
/// retries replayed); it runs inside the same query.
pub async fn latest_succeeded_text(
    conn: &impl ConnectionTrait,
    document_id: &str,
    kind: &str,
    succeeded_runs: &SqlFragment,
) -> Result<Option<TextRecord>> {
    newest_text(conn, document_id, kind, Some(succeeded_runs)).await
}

/// ` AND t.run_id IN (…)`: keeps only texts of the runs `succeeded_runs` selects.
fn of_runs(succeeded_runs: &SqlFragment) -> SqlFragment {
    let mut filter = SqlFragment::new(" AND t.run_id IN (", []);
    filter.push_fragment(succeeded_runs).push(")", []);
    filter
}

async fn newest_text(
    conn: &impl ConnectionTrait,
    document_id: &str,
    kind: &str,
    succeeded_runs: Option<&SqlFragment>,
) -> Result<Option<TextRecord>> {
    let mut query = SqlFragment::new(
        "SELECT t.id AS id, t.document_id AS document_id, t.run_id AS run_id, t.kind AS kind, \
         t.body AS body FROM document_texts t WHERE t.document_id = ? AND t.kind = ?",
        [document_id.to_string().into(), kind.to_string().into()],
    );
    if let Some(runs) = succeeded_runs {
        query.push_fragment(&of_runs(runs));
    }
    query.push(" ORDER BY t.created_at DESC, t.rowid DESC LIMIT 1", []);
    let row = conn.query_one_sql(query.into_statement()).await?;
    row.as_ref().map(text_from_row).transpose()
}

/// A page of the cleaned output of the latest succeeded run: `limit` characters from `offset` (characters).
/// `NotFound` for an unknown document, `NoContent` when it has no cleaned output yet.
/// Only the page is read from the database, never the whole body. `succeeded_runs` as for
/// [`latest_succeeded_text`].
pub async fn content_page(
    conn: &impl ConnectionTrait,
    document_id: &str,
    offset: u64,
    limit: u64,
    succeeded_runs: &SqlFragment,
) -> Result<ContentPage> {
    let mut query = SqlFragment::new(
        "SELECT substr(t.body, ?, ?) AS page, t.chars AS chars FROM document_texts t \
         WHERE t.document_id = ? AND t.kind = ?",
        [
            // INTEGER arguments: PostgreSQL has no substr(text, bigint, bigint). No body
            // is near 2^31 characters (both databases cap a value at about 1 GB).
            clamp_i32(offset.saturating_add(1)).into(),
            clamp_i32(limit).into(),
            document_id.to_string().into(),
            TEXT_KIND_CLEANED.into(),
        ],
    );
    query
        .push_fragment(&of_runs(succeeded_runs))
        .push(" ORDER BY t.created_at DESC, t.rowid DESC LIMIT 1", []);
    let row = conn.query_one_sql(query.into_statement()).await?;
    let Some(row) = row else {
        return Err(if find_document(conn, document_id).await?.is_some() {
            DocumentsError::NoContent {
                id: document_id.to_string(),
            }
        } else {
            DocumentsError::NotFound {
                id: document_id.to_string(),
            }
        });
    };
    let text: String = row.try_get("", "page")?;
    let total_chars = get_u64(&row, "chars")?;
    let returned = text.chars().count() as u64;
    Ok(ContentPage {
        document_id: document_id.to_string(),
        text,
        total_chars,
        offset,
        limit,
        truncated: offset.saturating_add(returned) < total_chars,
    })
}

fn clamp_i32(value: u64) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

fn text_from_row(row: &QueryResult) -> Result<TextRecord> {
    Ok(TextRecord {
        id: row.try_get("", "id")?,
        document_id: row.try_get("", "document_id")?,
        run_id: row.try_get("", "run_id")?,
        kind: row.try_get("", "kind")?,
        body: row.try_get("", "body")?,
    })
}
