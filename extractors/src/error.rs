//! The one error type of the extractors: a stable `code` and a `detail` that says what is
//! wrong with the file (never its text).

/// Why a file could not be extracted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct ExtractError {
    pub code: &'static str,
    pub detail: String,
    /// True when another attempt may succeed (an I/O error, a busy machine), false when the
    /// file itself is the problem.
    pub retryable: bool,
}

impl ExtractError {
    fn new(code: &'static str, detail: impl Into<String>, retryable: bool) -> Self {
        ExtractError {
            code,
            detail: detail.into(),
            retryable,
        }
    }

    /// The file is not what its extension says, or no extractor reads it.
    pub fn unsupported(detail: impl Into<String>) -> Self {
        Self::new("unsupported_file_type", detail, false)
    }

    /// The file is damaged or truncated: it cannot be parsed.
    pub fn malformed(detail: impl Into<String>) -> Self {
        Self::new("malformed_document", detail, false)
    }

    /// The file is past a safety cap (decompressed size, entries, compression ratio, nesting).
    pub fn too_complex(detail: impl Into<String>) -> Self {
        Self::new("document_too_complex", detail, false)
    }

    /// A PDF that needs a password to open.
    pub fn encrypted(detail: impl Into<String>) -> Self {
        Self::new("pdf_encrypted", detail, false)
    }

    /// A password-protected Office document (Word, Excel, PowerPoint).
    pub fn document_encrypted(detail: impl Into<String>) -> Self {
        Self::new("document_encrypted", detail, false)
    }

    /// A file over a size limit of an extractor.
    pub fn too_large(detail: impl Into<String>) -> Self {
        Self::new("file_too_large", detail, false)
    }

    /// A tool the extractor needs is not installed; `detail` names the package.
    pub fn converter_unavailable(detail: impl Into<String>) -> Self {
        Self::new("converter_unavailable", detail, false)
    }

    /// An external converter ran and failed.
    pub fn converter_failed(detail: impl Into<String>) -> Self {
        Self::new("converter_failed", detail, false)
    }

    /// The extraction took longer than its limit.
    pub fn timed_out(detail: impl Into<String>) -> Self {
        Self::new("extraction_timeout", detail, false)
    }

    /// The extractor panicked: a bug of ours, reported without the panic text.
    pub fn crashed() -> Self {
        Self::new(
            "extractor_crashed",
            "the extractor failed on this file; it was reported in the log",
            false,
        )
    }

    pub fn canceled() -> Self {
        Self::new("canceled", "extraction was canceled", false)
    }

    /// An I/O failure of the machine (temporary files, a pipe): worth another attempt.
    pub fn io(detail: impl Into<String>) -> Self {
        Self::new("io_error", detail, true)
    }
}
