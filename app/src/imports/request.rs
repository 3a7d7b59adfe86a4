//! An import request as given (`POST /imports` body, `shelf import` flags) and its validated
//! form: every field checked, defaults of docs/imports.md ("Fields") applied, paths resolved by the
//! [`Boundary`] before anything is read or written.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::error::ImportError;
use super::paths::{Boundary, PathField};
use crate::shelf::ProcessingMode;

/// The request as given; `None` takes the default.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    /// A file or a directory (the name is kept for compatibility).
    pub source_dir: String,
    pub format: Option<String>,
    pub output_mode: Option<String>,
    pub output_dir: Option<String>,
    pub recursive: Option<bool>,
    pub overwrite: Option<bool>,
    pub processing_mode: Option<String>,
    pub manifest_path: Option<String>,
    pub resume: Option<bool>,
    /// Pipeline of the runs (the CLI's `--pipeline`; default `SHELF_PIPELINE`).
    #[serde(skip)]
    pub pipeline: Option<String>,
}

/// What a converted file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Markdown,
    Text,
}

impl OutputFormat {
    /// The request value and the extension added to output names.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputFormat::Markdown => "md",
            OutputFormat::Text => "txt",
        }
    }
}

/// Where converted files go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputMode {
    /// `<data_dir>/converted`, a subdirectory per directory import.
    Workspace,
    /// Under a directory the caller names (created when missing).
    NewDirectory(PathBuf),
    /// Beside each source.
    Original,
    /// In `shelf-converted/` beside each source.
    Subdirectory,
}

impl OutputMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            OutputMode::Workspace => "workspace",
            OutputMode::NewDirectory(_) => "new-directory",
            OutputMode::Original => "original",
            OutputMode::Subdirectory => "subdirectory",
        }
    }
}

/// A validated import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The file or directory, resolved.
    pub source: PathBuf,
    pub source_is_dir: bool,
    pub format: OutputFormat,
    pub output: OutputMode,
    pub recursive: bool,
    pub overwrite: bool,
    pub processing: ProcessingMode,
    pub manifest: Option<PathBuf>,
    pub resume: bool,
    pub pipeline: Option<String>,
}

impl ImportRequest {
    /// Checks every field (a bad value names its field), then resolves the paths.
    pub fn validate(&self, boundary: &Boundary) -> Result<ImportOptions, ImportError> {
        let format = match self.format.as_deref().unwrap_or("md") {
            "md" | "markdown" => OutputFormat::Markdown,
            "txt" | "text" => OutputFormat::Text,
            other => {
                return Err(ImportError::invalid(
                    "format",
                    format!("unknown format {:?} (expected md or txt)", short(other)),
                ));
            }
        };
        let processing = match self.processing_mode.as_deref() {
            None => ProcessingMode::Process,
            Some(value) => ProcessingMode::parse(value).ok_or_else(|| {
                ImportError::invalid(
                    "processing_mode",
                    format!(
                        "unknown processing mode {:?} (expected none, process or queue)",
                        short(value)
                    ),
                )
            })?,
        };
        let mode = self.output_mode.as_deref().unwrap_or("workspace");
        if !matches!(
            mode,
            "workspace" | "new-directory" | "original" | "subdirectory"
        ) {
            return Err(ImportError::invalid(
                "output_mode",
                format!(
                    "unknown output mode {:?} (expected workspace, new-directory, original or subdirectory)",
                    short(mode)
                ),
            ));
        }
        let resume = self.resume.unwrap_or(false);
        if resume && self.manifest_path.is_none() {
            return Err(ImportError::invalid(
                "resume",
                "resume needs a manifest_path to resume from",
            ));
        }
        let output = match (mode, &self.output_dir) {
            ("new-directory", Some(dir)) => {
                OutputMode::NewDirectory(boundary.resolve(dir, PathField::OutputDir)?)
            }
            ("new-directory", None) => {
                return Err(ImportError::invalid(
                    "output_dir",
                    "output_dir is required with output_mode new-directory",
                ));
            }
            (_, Some(_)) => {
                return Err(ImportError::invalid(
                    "output_dir",
                    "output_dir is only allowed with output_mode new-directory",
                ));
            }
            ("original", None) => OutputMode::Original,
            ("subdirectory", None) => OutputMode::Subdirectory,
            _ => OutputMode::Workspace,
        };
        let source = boundary.resolve(&self.source_dir, PathField::Source)?;
        let manifest = self
            .manifest_path
            .as_deref()
            .map(|m| boundary.resolve(m, PathField::Manifest))
            .transpose()?;
        Ok(ImportOptions {
            source_is_dir: source.is_dir(),
            source,
            format,
            output,
            recursive: self.recursive.unwrap_or(false),
            overwrite: self.overwrite.unwrap_or(false),
            processing,
            manifest,
            resume,
            pipeline: self.pipeline.clone(),
        })
    }
}

/// A caller's value, shortened for an error message.
fn short(value: &str) -> String {
    value.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(source: &str) -> ImportRequest {
        ImportRequest {
            source_dir: source.into(),
            ..ImportRequest::default()
        }
    }

    #[test]
    fn defaults_follow_the_decisions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().display().to_string();
        let options = request(&src).validate(&Boundary::Local).expect("valid");
        assert_eq!(options.format, OutputFormat::Markdown);
        assert_eq!(options.output, OutputMode::Workspace);
        assert_eq!(options.processing, ProcessingMode::Process);
        assert!(options.source_is_dir && !options.recursive && !options.overwrite);
        assert!(!options.resume && options.manifest.is_none());
    }

    #[test]
    fn bad_fields_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().display().to_string();
        let field = |r: ImportRequest| match r.validate(&Boundary::Local) {
            Err(ImportError::Invalid { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let out = dir.path().join("out").display().to_string();
        assert_eq!(
            field(ImportRequest {
                format: Some("pdf".into()),
                ..request(&src)
            }),
            "format"
        );
        assert_eq!(
            field(ImportRequest {
                output_mode: Some("elsewhere".into()),
                ..request(&src)
            }),
            "output_mode"
        );
        assert_eq!(
            field(ImportRequest {
                output_mode: Some("new-directory".into()),
                ..request(&src)
            }),
            "output_dir"
        );
        assert_eq!(
            field(ImportRequest {
                output_dir: Some(out.clone()),
                ..request(&src)
            }),
            "output_dir"
        );
        assert_eq!(
            field(ImportRequest {
                processing_mode: Some("later".into()),
                ..request(&src)
            }),
            "processing_mode"
        );
        assert_eq!(
            field(ImportRequest {
                resume: Some(true),
                ..request(&src)
            }),
            "resume"
        );
        let ok = ImportRequest {
            output_mode: Some("new-directory".into()),
            output_dir: Some(out),
            format: Some("txt".into()),
            processing_mode: Some("none".into()),
            ..request(&src)
        }
        .validate(&Boundary::Local)
        .expect("valid");
        assert!(matches!(ok.output, OutputMode::NewDirectory(_)));
        assert_eq!(ok.format, OutputFormat::Text);
    }
}
