//! Where stages keep the texts they make: one row per run and stage, keyed `<run>:<stage>`,
//! so a replayed stage overwrites its own text and never another's.

use sea_orm::DatabaseConnection;
use shelf_documents::TextRecord;
use shelf_engine::{StageContext, StageError};

use crate::errors::from_documents;

/// A text a stage saved: its id (for the stage output) and its length in characters.
pub(crate) struct SavedText {
    pub id: String,
    pub chars: usize,
}

/// Saves `body` as this stage's text of `kind` for the document.
pub(crate) async fn save_stage_text(
    db: &DatabaseConnection,
    ctx: &StageContext,
    document_id: &str,
    kind: &str,
    body: String,
) -> Result<SavedText, StageError> {
    let id = format!("{}:{}", ctx.run_id, ctx.stage);
    let chars = body.chars().count();
    shelf_documents::put_text(
        db,
        &TextRecord {
            id: id.clone(),
            document_id: document_id.to_owned(),
            run_id: ctx.run_id.clone(),
            kind: kind.into(),
            body,
        },
    )
    .await
    .map_err(from_documents)?;
    Ok(SavedText { id, chars })
}
