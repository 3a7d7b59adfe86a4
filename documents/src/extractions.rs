//! What extraction leaves with a document: the extraction cache (a result per file SHA-256 and
//! extractor version, so reprocessing does not extract again; its Markdown, when the `extract`
//! stage wrote it, is read from the run's stored raw text rather than kept twice) and
//! transcript segments.

use sea_orm::{ConnectionTrait, Statement};
use shelf_db::sql::SqlExt;
use shelf_extractors::{Extraction, Segment};

use crate::error::{DocumentsError, Result};
use crate::sql::{now_timestamp, stmt};

/// The cached extraction of a file by its SHA-256 and the extractor's version, if any. A row
/// that no longer parses (written by another version of the types), or whose Markdown lived in
/// a stored text that is gone (its run pruned), counts as a miss.
pub async fn cached_extraction(
    conn: &impl ConnectionTrait,
    sha256: &str,
    extractor_version: &str,
) -> Result<Option<Extraction>> {
    let row = conn
        .query_one_sql(stmt(
            "SELECT c.result AS result, c.text_id AS text_id, t.body AS body \
             FROM extraction_cache c LEFT JOIN document_texts t ON t.id = c.text_id \
             WHERE c.sha256 = ? AND c.extractor_version = ?",
            [
                sha256.to_string().into(),
                extractor_version.to_string().into(),
            ],
        ))
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let text: String = row.try_get("", "result")?;
    let text_id: Option<String> = row.try_get("", "text_id")?;
    let body: Option<String> = row.try_get("", "body")?;
    let Ok(mut extraction) = serde_json::from_str::<Extraction>(&text) else {
        return Ok(None);
    };
    if text_id.is_some() {
        let Some(body) = body else {
            return Ok(None);
        };
        extraction.markdown = body;
    }
    Ok(Some(extraction))
}

/// Stores an extraction in the cache (replacing an older entry of the same key), its Markdown
/// inline.
pub async fn cache_extraction(
    conn: &impl ConnectionTrait,
    sha256: &str,
    extractor_version: &str,
    extraction: &Extraction,
) -> Result<()> {
    conn.execute_sql(cache_extraction_statement(
        sha256,
        extractor_version,
        extraction,
        None,
    )?)
    .await?;
    Ok(())
}

/// The statement [`cache_extraction`] runs, for a caller that commits it elsewhere. With
/// `text_id`, the stored text of that id holds the extraction's Markdown (the `extract` stage
/// stores it as the run's raw text in the same transaction): the row keeps no copy of it, and
/// reads as a miss once that text is gone.
pub fn cache_extraction_statement(
    sha256: &str,
    extractor_version: &str,
    extraction: &Extraction,
    text_id: Option<&str>,
) -> Result<Statement> {
    let encode = |e: serde_json::Error| {
        DocumentsError::corrupt(format!("cannot encode the extraction: {e}"))
    };
    let text = match text_id {
        None => serde_json::to_string(extraction).map_err(encode)?,
        Some(_) => {
            let mut value = serde_json::to_value(extraction).map_err(encode)?;
            if let Some(markdown) = value.get_mut("markdown") {
                *markdown = serde_json::Value::String(String::new());
            }
            serde_json::to_string(&value).map_err(encode)?
        }
    };
    Ok(stmt(
        "INSERT INTO extraction_cache (sha256, extractor_version, result, created_at, text_id) \
         VALUES (?, ?, ?, ?, ?) \
         ON CONFLICT (sha256, extractor_version) DO UPDATE SET result = excluded.result, \
         text_id = excluded.text_id",
        [
            sha256.to_string().into(),
            extractor_version.to_string().into(),
            text.into(),
            now_timestamp().into(),
            text_id.map(str::to_string).into(),
        ],
    ))
}

/// The statements that replace a document's transcript segments, to run in one transaction
/// (the `extract` stage hands them to the engine, to commit with its success).
pub fn put_segments_statements(document_id: &str, segments: &[Segment]) -> Vec<Statement> {
    let mut statements = vec![stmt(
        "DELETE FROM document_segments WHERE document_id = ?",
        [document_id.to_string().into()],
    )];
    // Batches keep the statement count low for long transcripts without passing SQLite's
    // limit on bound values.
    for batch in segments.chunks(100) {
        let placeholders = vec!["(?, ?, ?, ?, ?, ?)"; batch.len()].join(", ");
        let mut values = Vec::with_capacity(batch.len() * 6);
        for segment in batch {
            values.push(document_id.to_string().into());
            values.push(i64::from(segment.index).into());
            values.push(segment.start_seconds.into());
            values.push(segment.end_seconds.into());
            values.push(segment.speaker.clone().into());
            values.push(segment.text.clone().into());
        }
        statements.push(stmt(
            &format!(
                "INSERT INTO document_segments \
                 (document_id, seq, start_seconds, end_seconds, speaker, text) VALUES {placeholders}"
            ),
            values,
        ));
    }
    statements
}

/// A document's transcript segments, in order.
pub async fn segments(conn: &impl ConnectionTrait, document_id: &str) -> Result<Vec<Segment>> {
    let rows = conn
        .query_all_sql(stmt(
            "SELECT seq, start_seconds, end_seconds, speaker, text FROM document_segments \
             WHERE document_id = ? ORDER BY seq",
            [document_id.to_string().into()],
        ))
        .await?;
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get("", "seq")?;
            Ok(Segment {
                index: u32::try_from(seq).unwrap_or(u32::MAX),
                start_seconds: row.try_get("", "start_seconds")?,
                end_seconds: row.try_get("", "end_seconds")?,
                speaker: row.try_get("", "speaker")?,
                text: row.try_get("", "text")?,
            })
        })
        .collect()
}
