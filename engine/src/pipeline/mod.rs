//! Pipeline files: the YAML shape operators edit, its compilation into a checked stage DAG, and
//! drawings of that DAG.

pub(crate) mod compile;
mod duration;
mod locate;
mod render;
mod spec;

pub use compile::{
    CompiledPipeline, CompiledStage, OnFailure, PipelineSource, RetryPolicy, WhenFlag,
};
pub use duration::{format_duration, parse_duration};
pub use render::GraphFormat;

/// One problem found in a pipeline file, at a 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// A pipeline that could not be used. Every diagnostic names the file, line and column so an
/// operator can jump to it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PipelineError {
    #[error("{}", render_diagnostics(.file, .diagnostics))]
    Invalid {
        file: String,
        diagnostics: Vec<Diagnostic>,
    },
    #[error("pipeline `{name}` not found (looked in: {searched})")]
    NotFound { name: String, searched: String },
    #[error("{file}: {message}")]
    Unreadable { file: String, message: String },
}

fn render_diagnostics(file: &str, diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| format!("{file}:{}:{}: {}", d.line, d.column, d.message))
        .collect::<Vec<_>>()
        .join("\n")
}
