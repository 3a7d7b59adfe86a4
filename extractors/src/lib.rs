//! Shelf's extractors: one per document format, pure functions from a file to its text as
//! Markdown, its pages, transcript segments, metadata and warnings. They know nothing of the
//! database, the engine or HTTP, so each is tested, fuzzed and benchmarked on its own.
//!
//! [`extract`] is the one entry point: it picks the extractor for a [`Kind`], runs it behind
//! `catch_unwind` and a time limit ([`guard`]), and turns every failure into an
//! [`ExtractError`] with a stable code.

pub mod detect;
pub mod error;
pub mod formats;
pub mod guard;
pub mod limits;
pub mod markdown;
pub mod model;
pub mod ooxml;
pub mod sniff;
pub mod subprocess;
#[cfg(test)]
pub(crate) mod testing;
pub mod text;
pub mod zipsafe;

pub mod csv;
pub mod docx;
pub mod email;
pub mod epub;
pub mod html;
pub mod image;
pub mod json;
pub mod lzfu;
pub mod markup;
pub mod msg;
pub mod notebook;
pub mod odf;
pub mod pdf;
pub mod plain;
pub mod pptx;
pub mod rtf;
pub mod spreadsheet;
pub mod transcript;
pub mod universal;
pub mod xml;

pub use error::ExtractError;
pub use formats::{ACCEPTED_FORMATS, Container, Format, Kind, format_for};
pub use guard::Control;
pub use limits::Limits;
pub use model::{Extraction, Metadata, Page, Segment};

use std::path::Path;

/// What an extractor reads: the file's path (for tools that need one) and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub path: &'a Path,
    pub bytes: &'a [u8],
    /// The lowercase extension without the dot (`docx`, `srt`, ...).
    pub extension: &'a str,
}

/// Extracts a file with the extractor of `kind`, behind `catch_unwind` and `limits.timeout`.
/// `control` lets the caller cancel; extractors check it between pieces of work.
pub fn extract(
    kind: Kind,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    guard::run_guarded(control, limits.timeout, |control| {
        let mut extraction = dispatch(kind, input, limits, control)?;
        extraction.finish();
        Ok(extraction)
    })
}

fn dispatch(
    kind: Kind,
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    if matches!(kind, Kind::Docx | Kind::Pptx | Kind::Spreadsheet)
        && sniff::is_encrypted_office(input.bytes)
    {
        return Err(ExtractError::document_encrypted(format!(
            "the .{} file is password-protected: save it without a password and upload it again",
            input.extension
        )));
    }
    match kind {
        Kind::Text => plain::extract(input, limits, control),
        Kind::Pdf => pdf::extract(input, limits, control),
        Kind::Docx => docx::extract(input, limits, control),
        Kind::Pptx => pptx::extract(input, limits, control),
        Kind::Spreadsheet => spreadsheet::extract(input, limits, control),
        Kind::Odt | Kind::Odp => odf::extract(input, limits, control),
        Kind::Epub => epub::extract(input, limits, control),
        Kind::Html => html::extract(input, limits, control),
        Kind::Csv => csv::extract(input, limits, control),
        Kind::Json => json::extract(input, limits, control),
        Kind::Xml => xml::extract(input, limits, control),
        Kind::Rtf => rtf::extract(input, limits, control),
        Kind::Email => email::extract(input, limits, control),
        Kind::Outlook => msg::extract(input, limits, control),
        Kind::Notebook => notebook::extract(input, limits, control),
        Kind::Markup => markup::extract(input, limits, control),
        Kind::Transcript => transcript::extract(input, limits, control),
        Kind::Image => image::extract(input, limits, control),
        Kind::Universal => universal::extract(input, limits, control),
    }
}

/// The version of the extractor of `kind`. The extraction cache is keyed by it: bump it when
/// an extractor's output changes, and documents are extracted again.
pub fn extractor_version(kind: Kind) -> &'static str {
    match kind {
        Kind::Text => "text-2",
        Kind::Pdf => "pdf-2",
        Kind::Docx => "docx-2",
        Kind::Pptx => "pptx-2",
        Kind::Spreadsheet => "spreadsheet-1",
        Kind::Odt | Kind::Odp => "odf-2",
        Kind::Epub => "epub-2",
        Kind::Html => "html-2",
        Kind::Csv => "csv-1",
        Kind::Json => "json-1",
        Kind::Xml => "xml-2",
        Kind::Rtf => "rtf-2",
        Kind::Email => "email-1",
        Kind::Outlook => "msg-2",
        Kind::Notebook => "notebook-1",
        Kind::Markup => "markup-1",
        Kind::Transcript => "transcript-1",
        Kind::Image => "image-1",
        Kind::Universal => "universal-2",
    }
}
