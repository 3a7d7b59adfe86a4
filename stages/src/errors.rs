//! How document-domain and provider failures become stage failures: user errors are fatal
//! (another attempt will not fix them), internal ones retryable.

use shelf_documents::{DocumentsError, ErrorKind};
use shelf_engine::StageError;

use crate::provider::ProviderError;

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

pub fn from_provider(error: ProviderError) -> StageError {
    if error.retryable {
        StageError::retryable(error.code, error.message)
    } else {
        StageError::fatal(error.code, error.message)
    }
}

/// The prompt version a stage uses: its `with:` option, else the setting's default; refused
/// unless it is one of `allowed`.
pub fn prompt_version<'a>(
    option: &'a str,
    default: &'a str,
    allowed: &[&str],
) -> Result<&'a str, StageError> {
    let version = if option.is_empty() { default } else { option };
    if allowed.contains(&version) {
        Ok(version)
    } else {
        Err(StageError::fatal(
            "bad_option",
            format!(
                "unknown prompt version {version}; use one of {}",
                allowed.join(", ")
            ),
        ))
    }
}
