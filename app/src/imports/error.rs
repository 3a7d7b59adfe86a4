//! The imports' error: which request field was refused and why, caps, and the failures of the
//! import itself, each with its code of the one table (`shelf_documents::codes`).

use shelf_documents::ErrorCode;

use crate::error::AppError;

/// Everything that stops an import before or while it runs. Failures of one file are not
/// errors: they are records of the report.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// `POST /imports` without `SHELF_API_IMPORT_ROOT`: server-side imports are off.
    #[error("Server-side imports are disabled: set SHELF_API_IMPORT_ROOT to a directory")]
    NoImportRoot,
    /// A field of the request with a bad value (`format`, `output_mode`, ...).
    #[error("{field}: {detail}")]
    Invalid { field: &'static str, detail: String },
    /// The source path is outside the root, has `..`, is or crosses a symlink, or is missing.
    #[error("Invalid import path: {0}")]
    InvalidImportPath(String),
    /// The manifest path breaks the path rules, or names a file that is not an import report.
    #[error("Invalid manifest path: {0}")]
    InvalidManifestPath(String),
    /// The `new-directory` output directory breaks the path rules.
    #[error("Invalid output directory: {0}")]
    InvalidOutputDir(String),
    /// A directory import over `SHELF_API_MAX_IMPORT_FILES` or `SHELF_API_MAX_IMPORT_BYTES`.
    #[error("Import too large: {0}")]
    TooLarge(String),
    /// A manifest over `SHELF_API_MAX_IMPORT_MANIFEST_BYTES`.
    #[error("Import manifest is larger than {max} bytes (SHELF_API_MAX_IMPORT_MANIFEST_BYTES)")]
    ManifestTooLarge { max: u64 },
    /// Internal: file-system failure on the manifest or an output directory.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    App(#[from] AppError),
}

impl ImportError {
    /// The code of the table (`shelf_documents::codes`) this error answers with. Exhaustive.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ImportError::NoImportRoot | ImportError::InvalidImportPath(_) => {
                ErrorCode::InvalidImportPath
            }
            ImportError::Invalid { .. } => ErrorCode::ValidationError,
            ImportError::InvalidManifestPath(_) => ErrorCode::InvalidManifestPath,
            ImportError::InvalidOutputDir(_) => ErrorCode::InvalidOutputDir,
            ImportError::TooLarge(_) => ErrorCode::ImportTooLarge,
            ImportError::ManifestTooLarge { .. } => ErrorCode::ImportManifestTooLarge,
            ImportError::Io(e) if shelf_db::is_storage_full_io(e) => ErrorCode::InsufficientStorage,
            ImportError::Io(_) => ErrorCode::ServerError,
            ImportError::App(e) => e.error_code(),
        }
    }

    /// The code the CLI prints and exits by (an [`AppError`]'s command-line codes included).
    pub fn code(&self) -> &'static str {
        match self {
            ImportError::App(e) => e.code(),
            other => other.error_code().as_str(),
        }
    }

    /// Whether the message may be shown as is (internal failures are logged instead).
    pub fn is_user_error(&self) -> bool {
        match self {
            ImportError::Io(_) => false,
            ImportError::App(e) => e.is_user_error(),
            ImportError::NoImportRoot
            | ImportError::Invalid { .. }
            | ImportError::InvalidImportPath(_)
            | ImportError::InvalidManifestPath(_)
            | ImportError::InvalidOutputDir(_)
            | ImportError::TooLarge(_)
            | ImportError::ManifestTooLarge { .. } => true,
        }
    }

    pub(crate) fn invalid(field: &'static str, detail: impl Into<String>) -> Self {
        ImportError::Invalid {
            field,
            detail: detail.into(),
        }
    }
}
