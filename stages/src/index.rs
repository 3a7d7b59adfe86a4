//! `index`: publishes a run's results: the classifier and summarizer outputs onto the document,
//! and the cleaned and raw texts into the full-text indexes (which read those stored texts
//! where they are, keeping no copy), all in the engine's transaction that records the stage's
//! success (with the run's end, when it is the last stage).

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use shelf_documents::{DocumentResults, DocumentStore};
use shelf_engine::{Stage, StageContext, StageError};

use crate::StageDeps;
use crate::errors::{from_documents, missing_input};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexOptions {}

pub struct Index {
    documents: DocumentStore,
}

impl Index {
    pub fn new(deps: &StageDeps) -> Self {
        Index {
            documents: deps.documents.clone(),
        }
    }
}

/// The stored text an input names, and its length in characters. The index reads the text
/// where it is stored; only its existence and length are checked here.
async fn text_of(
    documents: &DocumentStore,
    ctx: &StageContext,
    field: &str,
) -> Result<(String, u64), StageError> {
    let id = ctx
        .inputs
        .find_str(field)
        .ok_or_else(|| missing_input(field))?;
    let chars = shelf_documents::text_chars(&documents.db, id)
        .await
        .map_err(from_documents)?
        .ok_or_else(|| StageError::fatal("missing_input", format!("text {id} no longer exists")))?;
    Ok((id.to_string(), chars))
}

#[async_trait]
impl Stage for Index {
    const KIND: &'static str = "index";
    type Options = IndexOptions;

    async fn run(&self, _options: &IndexOptions, ctx: &StageContext) -> Result<Value, StageError> {
        let (cleaned, cleaned_chars) = text_of(&self.documents, ctx, "cleaned_text_id").await?;
        let (raw, raw_chars) = text_of(&self.documents, ctx, "raw_text_id").await?;
        // Either may be missing: a `classify` or `summarize` stage that failed and was
        // continued past (`on_failure: continue`), or skipped, leaves no output. Its fields are
        // then published as missing (NULL, replacing an earlier run's), and the document keeps
        // its text in the indexes: a bad answer never makes it unsearchable.
        let classification = ctx.inputs.find("classification");
        let synopsis = ctx.inputs.find("synopsis");
        let field = |v: Option<&Value>, k: &str| {
            v.and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let results = DocumentResults {
            classification_code: field(classification, "code"),
            classification_label: field(classification, "label"),
            classification_confidence: classification
                .and_then(|c| c.get("confidence"))
                .and_then(Value::as_f64),
            title: field(synopsis, "title"),
            summary: field(synopsis, "summary"),
            tags: synopsis
                .and_then(|s| s.get("tags"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            suggested_stem: field(synopsis, "suggested_stem"),
        };
        let db = &self.documents.db;
        // The document's key, read now: were the document deleted before the stage's success
        // commits, its runs would be gone too and the engine's fence would refuse the writes.
        let pk = shelf_documents::document_pk(db, &ctx.subject)
            .await
            .map_err(from_documents)?;
        ctx.write_on_success(
            shelf_documents::set_results_statement(&ctx.subject, &results)
                .map_err(from_documents)?,
        );
        for statement in
            shelf_documents::index_statements(pk, &ctx.subject, &ctx.run_id, &cleaned, &raw)
        {
            ctx.write_on_success(statement);
        }
        Ok(json!({ "indexed": true, "cleaned_chars": cleaned_chars, "raw_chars": raw_chars }))
    }
}
