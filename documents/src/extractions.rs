//! What extraction leaves with a document: the extraction cache (a result per file SHA-256 and
//! extractor version, so reprocessing does not extract again) and transcript segments.

use sea_orm::{ConnectionTrait, Statement};
use shelf_engine::sql::SqlExt;
use shelf_extractors::{Extraction, Segment};

use crate::error::{DocumentsError, Result};
use crate::sql::{now_timestamp, stmt};

/// The cached extraction of a file by its SHA-256 and the extractor's version, if any. A row
/// that no longer parses (written by another version of the types) counts as a miss.
pub async fn cached_extraction(
    conn: &impl ConnectionTrait,
    sha256: &str,
    extractor_version: &str,
) -> Result<Option<Extraction>> {
    let row = conn
        .query_one_sql(stmt(
            "SELECT result FROM extraction_cache WHERE sha256 = ? AND extractor_version = ?",
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
    Ok(serde_json::from_str(&text).ok())
}

/// Stores an extraction in the cache (replacing an older entry of the same key).
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
    )?)
    .await?;
    Ok(())
}

/// The statement [`cache_extraction`] runs, for a caller that commits it elsewhere.
pub fn cache_extraction_statement(
    sha256: &str,
    extractor_version: &str,
    extraction: &Extraction,
) -> Result<Statement> {
    let text = serde_json::to_string(extraction)
        .map_err(|e| DocumentsError::corrupt(format!("cannot encode the extraction: {e}")))?;
    Ok(stmt(
        "INSERT INTO extraction_cache (sha256, extractor_version, result, created_at) \
         VALUES (?, ?, ?, ?) \
         ON CONFLICT (sha256, extractor_version) DO UPDATE SET result = excluded.result",
        [
            sha256.to_string().into(),
            extractor_version.to_string().into(),
            text.into(),
            now_timestamp().into(),
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
