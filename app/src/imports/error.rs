//! The imports' error: which request field was refused and why, caps, and the failures of the
//! import itself, each with the stable code both front ends show.

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
    /// The stable machine-readable code (docs/errors.md). Exhaustive.
    pub fn code(&self) -> &'static str {
        match self {
            ImportError::NoImportRoot | ImportError::InvalidImportPath(_) => "invalid_import_path",
            ImportError::Invalid { .. } => "validation_error",
            ImportError::InvalidManifestPath(_) => "invalid_manifest_path",
            ImportError::InvalidOutputDir(_) => "invalid_output_dir",
            ImportError::TooLarge(_) => "import_too_large",
            ImportError::ManifestTooLarge { .. } => "import_manifest_too_large",
            ImportError::Io(e) if shelf_engine::db::is_storage_full_io(e) => "insufficient_storage",
            ImportError::Io(_) => "server_error",
            ImportError::App(e) => e.code(),
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
