//! How document-domain and provider failures become stage failures: user errors are fatal
//! (another attempt will not fix them), internal ones retryable.

use shelf_documents::{DocumentsError, ErrorKind};
use shelf_engine::StageError;

pub fn from_documents(error: DocumentsError) -> StageError {
    let code = error.code();
    match error.kind() {
        ErrorKind::User => StageError::fatal(code, error.to_string()),
        ErrorKind::Internal => StageError::retryable(code, error.to_string()),
    }
}

/// A required field that an upstream stage should have produced.
pub fn missing_input(field: &str) -> StageError {
    StageError::fatal(
        "missing_input",
        format!("no upstream stage produced `{field}`; check the pipeline's needs"),
    )
}
