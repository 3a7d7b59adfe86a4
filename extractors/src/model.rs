//! What an extractor produces: Markdown text, pages, transcript segments, metadata, warnings.

use serde::{Deserialize, Serialize};

/// The structured result of one extraction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    /// The document's text as Markdown (headings, lists, tables), pages joined by blank lines.
    pub markdown: String,
    /// Pages, for paged formats (PDF, images); empty otherwise.
    #[serde(default)]
    pub pages: Vec<Page>,
    /// Timed segments, for transcripts (SRT, WebVTT, SBV); empty otherwise.
    #[serde(default)]
    pub segments: Vec<Segment>,
    #[serde(default)]
    pub metadata: Metadata,
    /// Things a user should know (a sheet cut short, an unreadable part skipped). Never
    /// document text.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// One page of a paged document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Page {
    /// 1-based.
    pub number: u32,
    pub text: String,
    /// False when the page has no text layer: the `ocr` stage reads it.
    pub has_text_layer: bool,
}

/// One timed piece of a transcript.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// 0-based, in document order.
    pub index: u32,
    pub start_seconds: f64,
    pub end_seconds: f64,
    /// The voice (`<v Name>` in WebVTT, `Name:` is left in the text), if the format says.
    pub speaker: Option<String>,
    pub text: String,
}

/// What the file says about itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub title: Option<String>,
    pub author: Option<String>,
    pub language: Option<String>,
    pub page_count: Option<u32>,
    /// The text encoding a text-based format was read as.
    pub encoding: Option<String>,
}

impl Extraction {
    /// An extraction of plain Markdown with no pages, segments or metadata.
    pub fn from_markdown(markdown: String) -> Self {
        Extraction {
            markdown,
            ..Extraction::default()
        }
    }

    /// The numbers of the pages that need OCR.
    pub fn pages_needing_ocr(&self) -> Vec<u32> {
        self.pages
            .iter()
            .filter(|p| !p.has_text_layer)
            .map(|p| p.number)
            .collect()
    }

    /// Normalizes what every extractor returns: trailing spaces, runs of blank lines and
    /// surrounding whitespace are trimmed, and empty metadata strings become `None`.
    pub(crate) fn finish(&mut self) {
        self.markdown = crate::markdown::tidy(&self.markdown);
        for field in [
            &mut self.metadata.title,
            &mut self.metadata.author,
            &mut self.metadata.language,
        ] {
            if field.as_deref().is_some_and(|s| s.trim().is_empty()) {
                *field = None;
            } else if let Some(value) = field {
                *value = value.trim().to_string();
            }
        }
    }
}
