//! Comma-, semicolon-, tab- and pipe-separated values as one Markdown table: the text is
//! decoded (BOM, UTF-16, legacy encodings), the delimiter is the one whose field counts agree
//! best over the first lines, and quoted fields may hold delimiters and newlines.

use crate::markdown::table;
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

/// Lines sampled to pick the delimiter.
const SAMPLE_LINES: usize = 50;
const CHECK_EVERY: usize = 1024;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let decoded = crate::plain::decode(input.bytes)?;
    let delimiter = detect_delimiter(&decoded.text, input.extension == "tsv");
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(decoded.text.as_bytes());
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut warnings = Vec::new();
    let mut columns_cut = false;
    for (i, record) in reader.records().enumerate() {
        if i % CHECK_EVERY == 0 {
            control.check()?;
        }
        let record = record.map_err(|e| {
            ExtractError::malformed(format!(
                "the {} file cannot be parsed: {e}",
                input.extension
            ))
        })?;
        if record.iter().all(|f| f.trim().is_empty()) {
            continue;
        }
        if rows.len() >= limits.max_table_rows {
            warnings.push(format!(
                "the table was cut short at {} rows",
                limits.max_table_rows
            ));
            break;
        }
        if record.len() > limits.max_table_columns {
            columns_cut = true;
        }
        rows.push(
            record
                .iter()
                .take(limits.max_table_columns)
                .map(str::to_string)
                .collect(),
        );
    }
    if columns_cut {
        warnings.push(format!(
            "rows wider than {} columns were cut",
            limits.max_table_columns
        ));
    }
    Ok(Extraction {
        markdown: table(&rows),
        metadata: Metadata {
            encoding: Some(decoded.encoding.to_string()),
            ..Metadata::default()
        },
        warnings,
        ..Extraction::default()
    })
}

/// The delimiter whose per-line field count is most consistent (and above one) over the
/// first lines; quotes are honoured so that quoted delimiters do not count.
fn detect_delimiter(text: &str, prefer_tab: bool) -> u8 {
    let candidates: &[u8] = if prefer_tab { b"\t,;|" } else { b",;\t|" };
    let mut best = (candidates.first().copied().unwrap_or(b','), 0usize);
    for &delimiter in candidates {
        let score = consistency(text, delimiter);
        if score > best.1 {
            best = (delimiter, score);
        }
    }
    if prefer_tab && best.1 == 0 {
        return b'\t';
    }
    best.0
}

/// How many sampled lines share the most common field count, when that count is above one;
/// weighted by the count so that a richer split wins ties.
fn consistency(text: &str, delimiter: u8) -> usize {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut counts: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for record in reader.records().take(SAMPLE_LINES) {
        let Ok(record) = record else { break };
        *counts.entry(record.len()).or_default() += 1;
    }
    counts
        .into_iter()
        .filter(|(fields, _)| *fields > 1)
        .map(|(fields, lines)| lines * 1000 + fields.min(999))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run_with(
        bytes: &[u8],
        extension: &str,
        limits: &Limits,
    ) -> Result<Extraction, ExtractError> {
        extract(
            Input {
                path: std::path::Path::new("data"),
                bytes,
                extension,
            },
            limits,
            &Control::default(),
        )
    }

    fn md(bytes: &[u8], extension: &str) -> String {
        run_with(bytes, extension, &Limits::default())
            .unwrap()
            .markdown
    }

    #[test]
    fn delimiters_are_detected() {
        let expected = "| a | b |\n|---|---|\n| 1 | 2 |\n";
        assert_eq!(md(b"a,b\n1,2\n", "csv"), expected);
        assert_eq!(md(b"a;b\n1;2\n", "csv"), expected);
        assert_eq!(md(b"a\tb\n1\t2\n", "csv"), expected);
        assert_eq!(
            md(b"a|b\n1|2\n", "csv"),
            "| a | b |\n|---|---|\n| 1 | 2 |\n"
        );
        assert_eq!(
            md(b"a\tb,c\n1\t2,3\n", "tsv"),
            "| a | b,c |\n|---|---|\n| 1 | 2,3 |\n"
        );
        // Commas inside the text of semicolon-separated values.
        assert_eq!(
            md(b"name;note\nx;one, two, three\ny;four, five\n", "csv"),
            "| name | note |\n|---|---|\n| x | one, two, three |\n| y | four, five |\n"
        );
    }

    #[test]
    fn quoted_fields_keep_delimiters_and_newlines() {
        assert_eq!(
            md(b"a,b\n\"x, y\",\"line1\nline2\"\n", "csv"),
            "| a | b |\n|---|---|\n| x, y | line1 line2 |\n"
        );
    }

    #[test]
    fn encodings_and_bounds() {
        let latin1 = b"nom,ville\nJos\xe9,Besan\xe7on\n";
        let extraction = run_with(latin1, "csv", &Limits::default()).unwrap();
        assert!(extraction.markdown.contains("| José | Besançon |"));
        let limits = Limits {
            max_table_rows: 2,
            max_table_columns: 1,
            ..Limits::default()
        };
        let cut = run_with(b"a,b\n1,2\n3,4\n", "csv", &limits).unwrap();
        assert_eq!(cut.markdown, "| a |\n|---|\n| 1 |\n");
        assert_eq!(cut.warnings.len(), 2);
        assert_eq!(
            run_with(b"\x00\x01\x02binary\x00", "csv", &Limits::default())
                .unwrap_err()
                .code,
            "unsupported_file_type"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = run_with(&bytes, "csv", &Limits::default());
        }
    }
}
