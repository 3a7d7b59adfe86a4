//! The caps every extraction runs under, so that a hostile file costs bounded time and memory.

use std::time::Duration;

/// Caps on one extraction. The defaults suit a service; tests shrink them.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Wall-clock limit of one extraction (in-process parsers and subprocesses alike).
    pub timeout: Duration,
    /// ZIP-based formats: the most bytes all read entries may decompress to.
    pub max_decompressed_bytes: u64,
    /// ZIP-based formats: the most entries the archive may list.
    pub max_zip_entries: usize,
    /// ZIP-based formats: the highest decompressed/compressed ratio of an entry.
    pub max_compression_ratio: u64,
    /// XML, HTML and JSON: the deepest element nesting read.
    pub max_nesting_depth: usize,
    /// Spreadsheets and CSV: rows and columns written per table before it is cut short.
    pub max_table_rows: usize,
    pub max_table_columns: usize,
    /// The most Markdown characters an extraction produces before it is cut short.
    pub max_output_chars: usize,
    /// The universal converter (LibreOffice): the largest input it is given.
    pub universal_max_input_bytes: u64,
    /// The universal converter's own time limit.
    pub universal_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(300),
            max_decompressed_bytes: 512 * 1024 * 1024,
            max_zip_entries: 10_000,
            max_compression_ratio: 200,
            max_nesting_depth: 256,
            max_table_rows: 10_000,
            max_table_columns: 200,
            max_output_chars: 64 * 1024 * 1024,
            universal_max_input_bytes: 52_428_800,
            universal_timeout: Duration::from_secs(120),
        }
    }
}
