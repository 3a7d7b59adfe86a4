//! `ocr`: recognizes text in page images. Recognition itself is not built yet (the OCR issue),
//! so this stage says so instead of producing made-up or silently empty text: a document
//! whose text is all in images fails with `ocr_unavailable`; a document that also has text
//! pages keeps them, with a warning naming the pages left unread.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use shelf_engine::{Stage, StageContext, StageError};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OcrOptions {}

pub struct Ocr;

#[async_trait]
impl Stage for Ocr {
    const KIND: &'static str = "ocr";
    type Options = OcrOptions;

    async fn run(&self, _options: &OcrOptions, ctx: &StageContext) -> Result<Value, StageError> {
        let pages: Vec<u64> = ctx
            .inputs
            .find("ocr_pages")
            .and_then(Value::as_array)
            .map(|pages| pages.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let chars = ctx
            .inputs
            .find("chars")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if chars == 0 {
            return Err(StageError::fatal(
                "ocr_unavailable",
                "this document's text is in images, and OCR is not available in this version \
                 of shelf",
            ));
        }
        ctx.event(
            "stage_warning",
            format!(
                "{} page(s) without a text layer were not read: OCR is not available in this \
                 version of shelf (pages {})",
                pages.len(),
                page_list(&pages)
            ),
        )
        .await?;
        Ok(json!({ "ran": false, "unread_pages": pages }))
    }
}

/// `1, 2, 5` or `1, 2, 3, … (40 pages)` for long lists.
fn page_list(pages: &[u64]) -> String {
    let shown: Vec<String> = pages.iter().take(10).map(u64::to_string).collect();
    if pages.len() > 10 {
        format!("{}, … ({} pages)", shown.join(", "), pages.len())
    } else {
        shown.join(", ")
    }
}
