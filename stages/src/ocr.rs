//! `ocr`: recognizes text in page images. Not built yet: the text formats Shelf reads today
//! never set `needs_ocr`, so the default pipeline skips this stage; running it anyway fails
//! with a clear error instead of producing made-up text.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use shelf_engine::{Stage, StageContext, StageError};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OcrOptions {}

pub struct Ocr;

#[async_trait]
impl Stage for Ocr {
    const KIND: &'static str = "ocr";
    type Options = OcrOptions;

    async fn run(&self, _options: &OcrOptions, _ctx: &StageContext) -> Result<Value, StageError> {
        Err(StageError::fatal(
            "stage_unavailable",
            "OCR is not available in this version of shelf",
        ))
    }
}
