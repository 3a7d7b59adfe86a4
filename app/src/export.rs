//! Exports of one document (JSON, plain text, Markdown) and the transcript citations that
//! exports and search results carry. Both front ends call [`Shelf::export`]; the bytes, the
//! content type and the file name come from here, so `shelf export` and
//! `GET /documents/{id}/export` give the same file.
//!
//! Choices Shelf makes (docs/export.md states them for users):
//! - The exported text is the cleaned text of the document's latest *succeeded* run. A document
//!   without one answers `not_found` ("has no cleaned output"), as the content page does.
//! - The export stem is `<code> <title>` (or the title alone without a code) when the
//!   classifier gave a title, otherwise the source filename's stem; characters that are unsafe
//!   in a file name (path separators, control characters, quotes, `<>:*?|`) become spaces,
//!   runs of spaces one space, and leading or trailing dots and spaces are dropped, at most
//!   [`MAX_STEM_CHARS`] characters; an empty result is `document`.

use std::collections::HashMap;

use serde::Serialize;
use shelf_documents::citations::{self, TranscriptCitation};
use shelf_documents::{
    Document, DocumentsError, SearchHit, SearchPage, SearchRequest, TEXT_KIND_CLEANED, stem_of,
};

use crate::error::AppError;
use crate::shelf::Shelf;

/// The longest export stem, in characters.
pub const MAX_STEM_CHARS: usize = 150;

/// An export format. Parsed before anything is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Json,
    Txt,
    Md,
}

impl ExportFormat {
    pub const NAMES: [&'static str; 3] = ["json", "txt", "md"];

    /// `json`, `txt` or `md`; anything else is `bad_request`.
    pub fn parse(value: &str) -> Result<Self, AppError> {
        match value {
            "json" => Ok(ExportFormat::Json),
            "txt" => Ok(ExportFormat::Txt),
            "md" => Ok(ExportFormat::Md),
            other => Err(AppError::BadRequest(format!(
                "Unsupported export format: {} (expected json, txt or md)",
                other.chars().take(40).collect::<String>()
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Json => "json",
            ExportFormat::Txt => "txt",
            ExportFormat::Md => "md",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Json => "application/json",
            ExportFormat::Txt => "text/plain; charset=utf-8",
            ExportFormat::Md => "text/markdown; charset=utf-8",
        }
    }
}

/// The JSON export (docs/export.md): the document's fields, plus `run_id` (the run whose
/// cleaned text it is), `classification_label`, and `transcript_citation` when a citation
/// quote was found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonExport {
    pub document_id: String,
    pub filename: String,
    pub classification: Option<String>,
    pub classification_label: Option<String>,
    pub title: Option<String>,
    pub summary: Option<String>,
    pub tags: Vec<String>,
    pub suggested_stem: Option<String>,
    pub run_id: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_citation: Option<TranscriptCitation>,
}

/// A finished export: the body and what to call it.
#[derive(Debug, Clone)]
pub struct Export {
    pub format: ExportFormat,
    /// The file name without extension (see the module notes); not yet made header-safe.
    pub stem: String,
    pub body: Vec<u8>,
    /// The citation, when one was asked for and found.
    pub citation: Option<TranscriptCitation>,
}

impl Export {
    /// `<stem>.<format>`.
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.stem, self.format.as_str())
    }

    /// `attachment; filename="<ASCII>"; filename*=UTF-8''<percent-encoded>` (RFC 6266 and
    /// RFC 5987): the plain value has every non-ASCII, quote, backslash or control character
    /// replaced by `_`, the extended value keeps the name exactly.
    pub fn content_disposition(&self) -> String {
        let name = self.file_name();
        format!(
            "attachment; filename=\"{}\"; filename*=UTF-8''{}",
            ascii_file_name(&name),
            percent_encode(&name)
        )
    }

    /// The stem as sent in `X-Shelf-Export-Stem`: percent-encoded UTF-8.
    pub fn encoded_stem(&self) -> String {
        percent_encode(&self.stem)
    }
}

/// The export stem of a document (see the module notes).
pub fn export_stem(document: &Document) -> String {
    let title = document
        .title
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let raw = match (title, document.classification.as_deref()) {
        (Some(title), Some(code)) => format!("{code} {title}"),
        (Some(title), None) => title.to_string(),
        (None, _) => stem_of(&document.filename),
    };
    let safe = sanitize_stem(&raw);
    if safe.is_empty() {
        "document".to_string()
    } else {
        safe
    }
}

fn sanitize_stem(raw: &str) -> String {
    let replaced: String = raw
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, '/' | '\\' | '"' | '<' | '>' | ':' | '*' | '?' | '|') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let collapsed = replaced.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = collapsed.trim_matches(|c: char| c == '.' || c == ' ');
    let cut: String = trimmed.chars().take(MAX_STEM_CHARS).collect();
    cut.trim_matches(|c: char| c == '.' || c == ' ').to_string()
}

fn ascii_file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// RFC 5987 `attr-char`s stay, every other byte of the UTF-8 becomes `%XX`.
pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'!' | b'#' | b'$' | b'&' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
            )
        {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The Markdown export: the synopsis, classification and tags, the citation block when there
/// is one, then the cleaned text.
pub fn markdown(document: &Document, text: &str, citation: Option<&TranscriptCitation>) -> String {
    let mut out = String::new();
    if let Some(summary) = document
        .summary
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        for line in summary.lines() {
            out.push_str(&format!("> {line}\n"));
        }
        out.push('\n');
    }
    let classification = match (
        document.classification.as_deref(),
        document.classification_label.as_deref(),
    ) {
        (Some(code), Some(label)) => format!("{code} ({label})"),
        (Some(code), None) => code.to_string(),
        (None, _) => "unclassified".to_string(),
    };
    out.push_str(&format!("**Classification:** {classification}\n\n"));
    let tags = if document.tags.is_empty() {
        "none".to_string()
    } else {
        document.tags.join(", ")
    };
    out.push_str(&format!("**Tags:** {tags}\n\n"));
    if let Some(c) = citation {
        out.push_str("## Citation\n\n");
        out.push_str(&format!(
            "> {}\n\n",
            c.text.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
        out.push_str(&format!(
            "{} – {} (segments {}–{}, {} match, confidence {:.2})\n\n",
            citations::clock(c.start_seconds),
            citations::clock(c.end_seconds),
            c.segment_start,
            c.segment_end,
            c.strategy.as_str(),
            c.confidence
        ));
    }
    out.push_str("---\n\n");
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    out
}

impl Shelf {
    /// Exports a document. `citation_quote` adds a transcript citation (JSON and Markdown)
    /// when the document has stored transcript segments and the quote is found in them.
    pub async fn export(
        &self,
        id: &str,
        format: ExportFormat,
        citation_quote: Option<&str>,
    ) -> Result<Export, AppError> {
        let document = self.documents.get(id).await?;
        let cleaned = shelf_documents::latest_succeeded_text(
            &self.db,
            id,
            TEXT_KIND_CLEANED,
            &shelf_engine::subject_sql::succeeded_run_ids(id),
        )
        .await?
        .ok_or_else(|| DocumentsError::NoContent { id: id.to_string() })?;
        let (run_id, text) = (cleaned.run_id, cleaned.body);
        let citation = match citation_quote.filter(|q| !q.trim().is_empty()) {
            Some(quote) if format != ExportFormat::Txt => self.cite(id, quote).await?,
            _ => None,
        };
        let stem = export_stem(&document);
        let body = match format {
            ExportFormat::Txt => text.into_bytes(),
            ExportFormat::Md => markdown(&document, &text, citation.as_ref()).into_bytes(),
            ExportFormat::Json => {
                let export = JsonExport {
                    document_id: document.id.clone(),
                    filename: document.filename.clone(),
                    classification: document.classification.clone(),
                    classification_label: document.classification_label.clone(),
                    title: document.title.clone(),
                    summary: document.summary.clone(),
                    tags: document.tags.clone(),
                    suggested_stem: document.suggested_stem.clone(),
                    run_id,
                    text,
                    transcript_citation: citation.clone(),
                };
                serde_json::to_vec(&export)
                    .map_err(|e| AppError::Internal(format!("cannot encode the export: {e}")))?
            }
        };
        Ok(Export {
            format,
            stem,
            body,
            citation,
        })
    }

    /// The document's stored transcript cues in order (none when it is not a transcript).
    pub async fn transcript(
        &self,
        document_id: &str,
    ) -> Result<Vec<shelf_documents::Segment>, AppError> {
        Ok(shelf_documents::segments(&self.db, document_id).await?)
    }

    /// The citation of `quote` in a document's stored transcript segments; `None` when the
    /// document has none (not a transcript) or the quote is not there.
    pub async fn cite(
        &self,
        document_id: &str,
        quote: &str,
    ) -> Result<Option<TranscriptCitation>, AppError> {
        let segments = shelf_documents::segments(&self.db, document_id).await?;
        Ok(citations::cite(&segments, quote))
    }

    /// Ranked search results, each transcript hit with the citation of the query text when it
    /// is found in the transcript. Only the returned page is looked at, and only documents with
    /// stored segments are loaded.
    pub async fn search_results_cited(
        &self,
        request: &SearchRequest,
    ) -> Result<CitedSearchPage, AppError> {
        let page = self.search_results(request).await?;
        let transcripts: Vec<&str> = page
            .results
            .iter()
            .filter(|h| h.has_transcript)
            .map(|h| h.document_id.as_str())
            .collect();
        let mut cited: HashMap<String, Option<TranscriptCitation>> = HashMap::new();
        for id in transcripts {
            cited.insert(id.to_string(), self.cite(id, &request.query).await?);
        }
        let SearchPage {
            results,
            total,
            limit,
            offset,
            match_mode,
        } = page;
        let results = results
            .into_iter()
            .map(|hit| CitedHit {
                transcript_citation: cited.get(&hit.document_id).cloned().flatten(),
                hit,
            })
            .collect();
        Ok(CitedSearchPage {
            results,
            total,
            limit,
            offset,
            match_mode,
        })
    }
}

/// A search hit and, for transcripts, where the query is in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CitedHit {
    #[serde(flatten)]
    pub hit: SearchHit,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_citation: Option<TranscriptCitation>,
}

/// [`SearchPage`] with [`CitedHit`]s.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CitedSearchPage {
    pub results: Vec<CitedHit>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
    pub match_mode: shelf_documents::MatchMode,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(filename: &str, code: Option<&str>, title: Option<&str>) -> Document {
        Document {
            id: "doc_0123456789abcdef".into(),
            filename: filename.into(),
            status: shelf_documents::DocumentStatus::Ready,
            byte_size: 1,
            created_at: String::new(),
            updated_at: String::new(),
            classification: code.map(str::to_string),
            classification_label: None,
            classification_confidence: None,
            title: title.map(str::to_string),
            summary: None,
            tags: vec![],
            suggested_stem: None,
            extension: "srt".into(),
            source_kind: shelf_documents::SourceKind::Upload,
            sha256: String::new(),
            storage_path: String::new(),
            pk: 1,
        }
    }

    #[test]
    fn stem_is_code_and_title_else_filename_stem() {
        assert_eq!(
            export_stem(&doc("talk.vtt", Some("520"), Some("The Night Sky"))),
            "520 The Night Sky"
        );
        assert_eq!(
            export_stem(&doc("talk.vtt", None, Some("The Night Sky"))),
            "The Night Sky"
        );
        assert_eq!(export_stem(&doc("talk.vtt", Some("520"), None)), "talk");
        assert_eq!(
            export_stem(&doc("talk.vtt", Some("520"), Some("  "))),
            "talk"
        );
    }

    #[test]
    fn hostile_titles_become_plain_names() {
        let stem = export_stem(&doc("a.txt", Some("000"), Some("../../etc/passwd\"\r\n")));
        assert_eq!(stem, "000 .. .. etc passwd");
        assert!(!stem.contains('/') && !stem.contains('"') && !stem.contains('\n'));
        assert_eq!(export_stem(&doc("a.txt", None, Some("../.."))), "document");
        let long = "x".repeat(500);
        assert_eq!(
            export_stem(&doc("a.txt", None, Some(&long)))
                .chars()
                .count(),
            MAX_STEM_CHARS
        );
    }

    #[test]
    fn content_disposition_has_ascii_and_utf8_names() {
        let export = Export {
            format: ExportFormat::Md,
            stem: "636.1 Chevaux ü \"x\"".into(),
            body: vec![],
            citation: None,
        };
        assert_eq!(
            export.content_disposition(),
            "attachment; filename=\"636.1 Chevaux _ _x_.md\"; \
             filename*=UTF-8''636.1%20Chevaux%20%C3%BC%20%22x%22.md"
        );
        assert_eq!(export.encoded_stem(), "636.1%20Chevaux%20%C3%BC%20%22x%22");
    }

    #[test]
    fn formats_parse_strictly() {
        assert_eq!(ExportFormat::parse("md").ok(), Some(ExportFormat::Md));
        for bad in ["", "JSON", "pdf", "md "] {
            let err = ExportFormat::parse(bad).expect_err(bad);
            assert_eq!(err.code(), "bad_request");
        }
    }
}
