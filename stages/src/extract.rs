//! `extract`: reads the document's bytes and produces its raw text. Text and Markdown files are
//! decoded here; formats without a text layer set `needs_ocr` so the `ocr` stage runs.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use shelf_documents::{DocumentStore, FormatFamily, TEXT_KIND_RAW, TextRecord, format_for};
use shelf_engine::{Stage, StageContext, StageError};

use crate::StageDeps;
use crate::errors::from_documents;
use crate::text::{DecodeError, decode_text};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtractOptions {}

pub struct Extract {
    documents: DocumentStore,
    max_bytes: u64,
}

impl Extract {
    pub fn new(deps: &StageDeps) -> Self {
        Extract {
            documents: deps.documents.clone(),
            max_bytes: deps.max_extract_bytes,
        }
    }
}

#[async_trait]
impl Stage for Extract {
    const KIND: &'static str = "extract";
    type Options = ExtractOptions;

    async fn run(
        &self,
        _options: &ExtractOptions,
        ctx: &StageContext,
    ) -> Result<Value, StageError> {
        let document = self
            .documents
            .get(&ctx.subject)
            .await
            .map_err(from_documents)?;
        let path = self
            .documents
            .open_source(&document)
            .await
            .map_err(from_documents)?;
        let format = format_for(&document.extension).ok_or_else(|| {
            StageError::fatal(
                "unsupported_file_type",
                format!("no extractor for .{} files", document.extension),
            )
        })?;
        if format.family != FormatFamily::Text {
            return Err(StageError::fatal(
                "unsupported_file_type",
                format!("no extractor for .{} files yet", document.extension),
            ));
        }
        if document.byte_size > self.max_bytes {
            return Err(StageError::fatal(
                "file_too_large",
                format!(
                    "the file has {} bytes; the extractor reads at most {} (SHELF_EXTRACT_MAX_BYTES)",
                    document.byte_size, self.max_bytes
                ),
            ));
        }
        let bytes = tokio::fs::read(&path).await.map_err(|e| {
            StageError::retryable("io_error", format!("cannot read the source: {e}"))
        })?;
        // Content-addressed: the bytes must still be the ones the id names.
        if hex::encode(Sha256::digest(&bytes)) != document.sha256 {
            return Err(StageError::fatal(
                "source_changed",
                "the source file changed since it was ingested; ingest it again",
            ));
        }
        let decoded = decode_text(&bytes).map_err(|e| match e {
            DecodeError::Binary => {
                StageError::fatal("unsupported_file_type", "binary content in a text file")
            }
        })?;
        let text_id = format!("{}:{}", ctx.run_id, ctx.stage);
        let chars = decoded.text.chars().count();
        shelf_documents::put_text(
            &self.documents.db,
            &TextRecord {
                id: text_id.clone(),
                document_id: document.id.clone(),
                run_id: ctx.run_id.clone(),
                kind: TEXT_KIND_RAW.into(),
                body: decoded.text,
            },
        )
        .await
        .map_err(from_documents)?;
        Ok(json!({
            "document_id": document.id,
            "raw_text_id": text_id,
            "text_id": text_id,
            "chars": chars,
            "encoding": decoded.encoding,
            "media_type": format.media_type,
            "needs_ocr": false,
        }))
    }
}
