//! The crate's one error type: user errors (bad input, refused files, unknown ids) are kept
//! apart from internal failures (I/O, database), each mapped to its code of [`crate::codes`].

use std::fmt;

use crate::codes::ErrorCode;

/// Everything that can go wrong in the document domain.
///
/// User errors carry typed context and a stable [`code`](DocumentsError::error_code); internal
/// errors ([`Io`](DocumentsError::Io), [`Db`](DocumentsError::Db),
/// [`Corrupt`](DocumentsError::Corrupt)) must be reported generically by callers.
#[derive(Debug, thiserror::Error)]
pub enum DocumentsError {
    /// No document with this id.
    #[error("Document not found: {id}")]
    NotFound { id: String },
    /// The document exists but has no cleaned output yet.
    #[error("Document {id} has no cleaned output")]
    NoContent { id: String },
    /// The extension is not one Shelf accepts (detail names it).
    #[error("Unsupported file type: {detail}")]
    UnsupportedFileType { detail: String },
    /// An archive or container file, by extension or by signature.
    #[error("Archive and container files are not supported: {detail}")]
    ArchiveNotSupported { detail: String },
    /// A text-family file whose first bytes contain NUL bytes that are not those of UTF-16 or
    /// UTF-32 text.
    #[error("Unsupported file type: binary content in a text file")]
    BinaryContent,
    /// A file of 0 bytes: there is nothing to extract, so it would only ever be an empty
    /// document. Checked by every ingest path (uploads, imports, and batches built on them).
    #[error("The file is empty (0 bytes)")]
    EmptyFile,
    /// A path that is refused: symlinked boundary, not a regular file, outside its root.
    #[error("Invalid path: {detail}")]
    InvalidPath { detail: String },
    /// The source file of a document is missing or no longer has the recorded size.
    #[error("Source of document {id} changed: {detail}")]
    SourceChanged { id: String, detail: String },
    /// A search query over 4,096 characters.
    #[error("Search query is longer than {max} characters")]
    SearchQueryTooLarge { max: usize },
    /// A search query with nothing searchable left after normalization.
    #[error("Search query has no searchable terms")]
    InvalidSearchQuery,
    /// `created_after` is later than `created_before`.
    #[error("created_after must not be later than created_before")]
    InvalidSearchWindow,
    /// A timestamp filter that is not an ISO-8601 date or date-time.
    #[error("{field} is not an ISO-8601 timestamp: {value}")]
    InvalidTimestamp { field: &'static str, value: String },
    /// Unknown `document_status` value.
    #[error("Unknown document status: {value} (expected ingested, processing, ready or failed)")]
    InvalidDocumentStatus { value: String },
    /// Unknown search `scope` value.
    #[error("Unknown search scope: {value} (expected cleaned or raw)")]
    InvalidSearchScope { value: String },
    /// Unknown search `mode` value.
    #[error("Unknown search mode: {value} (expected keyword, semantic or hybrid)")]
    InvalidSearchMode { value: String },
    /// A semantic or hybrid search without the query's vector: no embedding model is
    /// configured (or it could not embed the query).
    #[error(
        "Semantic and hybrid search need an embedding model, and none is configured \
         (SHELF_EMBEDDING_MODEL_DIR); use mode keyword"
    )]
    EmbeddingUnavailable,
    /// Internal: file-system failure.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Internal: database failure (`database_corrupt` when it says the database is damaged).
    #[error("database error: {0}")]
    Db(#[source] sea_orm::DbErr),
    /// Internal: stored data or a caller-supplied internal value that makes no sense.
    #[error("internal error: {detail}")]
    Corrupt { detail: String },
}

impl From<sea_orm::DbErr> for DocumentsError {
    /// The first corrupt error of the process latches its damage
    /// (`shelf_db::note_if_corrupt`): no more writes go into a damaged database.
    fn from(e: sea_orm::DbErr) -> Self {
        shelf_db::note_if_corrupt(&e);
        DocumentsError::Db(e)
    }
}

/// Result alias of this crate.
pub type Result<T, E = DocumentsError> = std::result::Result<T, E>;

/// Whether an error is the user's doing or the service's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Safe to show `to_string()` to the client.
    User,
    /// Log it; show the client a generic message.
    Internal,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::User => "user",
            ErrorKind::Internal => "internal",
        })
    }
}

impl DocumentsError {
    /// The code of [`ErrorCode`]'s table this error answers with. Internal errors answer
    /// `server_error` (`database_corrupt` for a damaged database, `insufficient_storage` for a
    /// full disk); ingest callers replace `server_error` with `ingest_failed`.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            DocumentsError::NotFound { .. } | DocumentsError::NoContent { .. } => {
                ErrorCode::NotFound
            }
            DocumentsError::UnsupportedFileType { .. } | DocumentsError::BinaryContent => {
                ErrorCode::UnsupportedFileType
            }
            DocumentsError::ArchiveNotSupported { .. } => ErrorCode::ArchiveNotSupported,
            DocumentsError::EmptyFile => ErrorCode::EmptyFile,
            DocumentsError::InvalidPath { .. } => ErrorCode::InvalidImportPath,
            DocumentsError::SourceChanged { .. } => ErrorCode::SourceChanged,
            DocumentsError::SearchQueryTooLarge { .. } => ErrorCode::SearchQueryTooLarge,
            DocumentsError::InvalidSearchQuery => ErrorCode::InvalidSearchQuery,
            DocumentsError::InvalidSearchWindow => ErrorCode::InvalidSearchWindow,
            DocumentsError::InvalidTimestamp { .. } => ErrorCode::ValidationError,
            DocumentsError::InvalidDocumentStatus { .. } => ErrorCode::InvalidDocumentStatus,
            DocumentsError::InvalidSearchScope { .. } => ErrorCode::InvalidSearchScope,
            DocumentsError::InvalidSearchMode { .. } => ErrorCode::InvalidSearchMode,
            DocumentsError::EmbeddingUnavailable => ErrorCode::EmbeddingUnavailable,
            DocumentsError::Db(e) if shelf_db::is_corrupt_db(e) => ErrorCode::DatabaseCorrupt,
            // A full disk is the operator's to fix, not an internal error.
            DocumentsError::Io(e) if shelf_db::is_storage_full_io(e) => {
                ErrorCode::InsufficientStorage
            }
            DocumentsError::Db(e) if shelf_db::is_storage_full(e) => ErrorCode::InsufficientStorage,
            DocumentsError::Io(_) | DocumentsError::Db(_) | DocumentsError::Corrupt { .. } => {
                ErrorCode::ServerError
            }
        }
    }

    /// [`error_code`](Self::error_code) as its string: what the CLI prints and what a failed
    /// stage records.
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }

    /// User error or internal failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            DocumentsError::Io(_) | DocumentsError::Db(_) | DocumentsError::Corrupt { .. } => {
                ErrorKind::Internal
            }
            _ => ErrorKind::User,
        }
    }

    /// Shorthand for `kind() == ErrorKind::User`.
    pub fn is_user_error(&self) -> bool {
        self.kind() == ErrorKind::User
    }

    pub(crate) fn corrupt(detail: impl Into<String>) -> Self {
        DocumentsError::Corrupt {
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_decisions_table() {
        assert_eq!(
            DocumentsError::InvalidSearchWindow.code(),
            "invalid_search_window"
        );
        assert_eq!(
            DocumentsError::BinaryContent.code(),
            "unsupported_file_type"
        );
        assert_eq!(
            DocumentsError::ArchiveNotSupported {
                detail: "zip".into()
            }
            .code(),
            "archive_not_supported"
        );
        assert_eq!(
            DocumentsError::NotFound { id: "doc_x".into() }.code(),
            "not_found"
        );
        assert!(DocumentsError::InvalidSearchQuery.is_user_error());
        assert_eq!(DocumentsError::EmptyFile.code(), "empty_file");
        assert!(DocumentsError::EmptyFile.is_user_error());
        let io = DocumentsError::Io(std::io::Error::other("disk"));
        assert_eq!(io.kind(), ErrorKind::Internal);
        assert_eq!(io.code(), "server_error");
        let malformed = DocumentsError::Db(sea_orm::DbErr::Custom(
            "error returned from database: (code: 11) database disk image is malformed".into(),
        ));
        assert_eq!(malformed.code(), "database_corrupt");
        let full = DocumentsError::Io(std::io::Error::from_raw_os_error(28));
        assert_eq!(full.code(), "insufficient_storage");
        assert_eq!(full.kind(), ErrorKind::Internal);
        let full = DocumentsError::Db(sea_orm::DbErr::Custom(
            "error returned from database: (code: 13) database or disk is full".into(),
        ));
        assert_eq!(full.code(), "insufficient_storage");
        assert_eq!(malformed.kind(), ErrorKind::Internal);
    }
}
