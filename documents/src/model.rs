//! The document object and its small companions: statuses, source kinds, ingest and delete
//! outcomes, and the classifier results written back to a document.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::error::{DocumentsError, Result};

/// Document states (docs/api.md, "Documents").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DocumentStatus {
    /// Stored, never processed (or its only run was canceled before any cleaned output).
    Ingested,
    /// A run is working on it.
    Processing,
    /// A run of it succeeded: its cleaned output, results and index are what readers see
    /// (a later run that fails or is canceled leaves it `ready`).
    Ready,
    /// Its runs failed and none ever succeeded.
    Failed,
}

impl DocumentStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [DocumentStatus; 4] = [
        DocumentStatus::Ingested,
        DocumentStatus::Processing,
        DocumentStatus::Ready,
        DocumentStatus::Failed,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            DocumentStatus::Ingested => "ingested",
            DocumentStatus::Processing => "processing",
            DocumentStatus::Ready => "ready",
            DocumentStatus::Failed => "failed",
        }
    }

    /// Parses a status name; unknown values are `InvalidDocumentStatus`.
    pub fn parse(value: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == value)
            .ok_or_else(|| DocumentsError::InvalidDocumentStatus {
                value: value.chars().take(64).collect(),
            })
    }
}

impl fmt::Display for DocumentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DocumentStatus {
    type Err = DocumentsError;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Where a document's bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// Uploaded: Shelf owns the file under `<data_dir>/uploads/<id>/`.
    Upload,
    /// Imported in place: Shelf references the file and never deletes it.
    Import,
}

impl SourceKind {
    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Upload => "upload",
            SourceKind::Import => "import",
        }
    }

    /// Parses a stored name.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "upload" => Some(SourceKind::Upload),
            "import" => Some(SourceKind::Import),
            _ => None,
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The document object (docs/api.md, "Documents").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Document {
    pub id: String,
    /// Normalized filename (see [`crate::normalize_filename`]).
    pub filename: String,
    pub status: DocumentStatus,
    pub byte_size: u64,
    /// RFC 3339 UTC with milliseconds.
    pub created_at: String,
    pub updated_at: String,
    /// Dewey code, or null.
    pub classification: Option<String>,
    pub classification_label: Option<String>,
    pub classification_confidence: Option<f64>,
    pub title: Option<String>,
    pub summary: Option<String>,
    pub tags: Vec<String>,
    pub suggested_stem: Option<String>,
    /// Lowercase extension.
    pub extension: String,
    pub source_kind: SourceKind,
    /// Lowercase hex SHA-256 of the bytes.
    pub sha256: String,
    /// Upload: relative to the data directory; import: canonical absolute path. Never shown
    /// to API clients.
    #[serde(skip)]
    pub storage_path: String,
    /// Row key, also the rowid of the document in the search tables.
    #[serde(skip)]
    pub pk: i64,
}

/// Result of an ingest: the stored document and whether it already existed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ingested {
    #[serde(flatten)]
    pub document: Document,
    pub duplicate: bool,
}

/// Result of a delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Deleted {
    pub id: String,
    /// True when owned upload files were removed (false for imports, or when removal failed
    /// after the rows were gone; that failure is logged).
    pub removed_files: bool,
}

/// Classifier and summarizer outputs written back to a document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DocumentResults {
    pub classification_code: Option<String>,
    /// Defaults to the built-in Dewey label of the code when absent.
    pub classification_label: Option<String>,
    pub classification_confidence: Option<f64>,
    pub title: Option<String>,
    pub summary: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    pub suggested_stem: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        for status in DocumentStatus::ALL {
            assert_eq!(DocumentStatus::parse(status.as_str()).ok(), Some(status));
            assert_eq!(
                serde_json::to_value(status).ok(),
                Some(serde_json::json!(status.as_str()))
            );
        }
        assert!(matches!(
            "READY".parse::<DocumentStatus>(),
            Err(DocumentsError::InvalidDocumentStatus { .. })
        ));
        assert_eq!(SourceKind::parse("upload"), Some(SourceKind::Upload));
        assert_eq!(SourceKind::parse("x"), None);
    }
}
