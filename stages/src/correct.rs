//! `correct`: language-model correction of OCR text. Not built yet (it only follows `ocr`);
//! running it fails with a clear error instead of passing text through unchanged.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use shelf_engine::{Stage, StageContext, StageError};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorrectOptions {}

pub struct Correct;

#[async_trait]
impl Stage for Correct {
    const KIND: &'static str = "correct";
    type Options = CorrectOptions;

    async fn run(
        &self,
        _options: &CorrectOptions,
        _ctx: &StageContext,
    ) -> Result<Value, StageError> {
        Err(StageError::fatal(
            "stage_unavailable",
            "OCR correction is not available in this version of shelf",
        ))
    }
}
