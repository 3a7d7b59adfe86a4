//! Where stages keep the texts they make: one row per run and stage, keyed `<run>:<stage>`,
//! so a replayed stage overwrites its own text and never another's. The row commits with the
//! stage's success, in the engine's fenced transaction.

use shelf_documents::TextRecord;
use shelf_engine::StageContext;

/// A text a stage saved: its id (for the stage output) and its length in characters.
pub(crate) struct SavedText {
    pub id: String,
    pub chars: usize,
}

/// Hands `body` to the engine as this stage's text of `kind` for the document, to be written
/// when the attempt succeeds (dependent stages start only after that).
pub(crate) fn save_stage_text(
    ctx: &StageContext,
    document_id: &str,
    kind: &str,
    body: String,
) -> SavedText {
    let id = stage_text_id(ctx);
    let chars = body.chars().count();
    ctx.write_on_success(shelf_documents::put_text_statement(&TextRecord {
        id: id.clone(),
        document_id: document_id.to_owned(),
        run_id: ctx.run_id.clone(),
        kind: kind.into(),
        body,
    }));
    SavedText { id, chars }
}

/// The id of the text this stage attempt saves with [`save_stage_text`].
pub(crate) fn stage_text_id(ctx: &StageContext) -> String {
    format!("{}:{}", ctx.run_id, ctx.stage)
}
