//! Spreadsheets (xlsx, xlsm, xlsb, xls, ods) through calamine: each sheet in workbook order as
//! a `## name` heading and its tables. A sheet's cells are split into tables at fully empty
//! rows and, within those, at fully empty columns, the way people lay out several tables on
//! one sheet. Numbers print as users see them; dates print as ISO dates.
//!
//! XLSX and XLSB cells are streamed and kept sparse, so a sheet that declares a huge range
//! (or places one cell at the far corner) costs what its cells cost, not its area.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;

use calamine::{Data, DataRef, Reader, SheetType, Sheets, open_workbook_auto_from_rs};

use crate::markdown::{heading, push_block, table};
use crate::zipsafe::SafeZip;
use crate::{Control, ExtractError, Extraction, Input, Limits};

/// Cells of one sheet: row → column → text; only non-empty cells.
type Grid = BTreeMap<u32, BTreeMap<u32, String>>;

const CHECK_EVERY: usize = 4096;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    if input.bytes.starts_with(b"PK\x03\x04") {
        guard_zip(input.bytes, limits)?;
    }
    let mut workbook = open_workbook_auto_from_rs(Cursor::new(input.bytes))
        .map_err(|e| ExtractError::malformed(format!("the spreadsheet cannot be read: {e}")))?;
    let sheets: Vec<(String, SheetType)> = workbook
        .sheets_metadata()
        .iter()
        .map(|s| (s.name.clone(), s.typ))
        .collect();
    let mut markdown = String::new();
    let mut warnings = Vec::new();
    for (name, typ) in sheets {
        control.check()?;
        if !matches!(typ, SheetType::WorkSheet) {
            warnings.push(format!(
                "the sheet \"{name}\" is a chart or dialog sheet; skipped"
            ));
            continue;
        }
        let grid = match read_sheet(&mut workbook, &name, limits, control, &mut warnings) {
            Ok(grid) => grid,
            Err(SheetError::Fatal(e)) => return Err(e),
            Err(SheetError::Unreadable(detail)) => {
                warnings.push(format!("the sheet \"{name}\" could not be read: {detail}"));
                continue;
            }
        };
        push_block(&mut markdown, &heading(2, &name));
        for block in tables_of(&grid, &name, limits, &mut warnings) {
            push_block(&mut markdown, &block);
        }
        if markdown.len() > limits.max_output_chars {
            warnings.push(format!(
                "the workbook was cut short at {} characters of Markdown",
                limits.max_output_chars
            ));
            break;
        }
    }
    Ok(Extraction::from_markdown(markdown).with_warnings(warnings))
}

trait WithWarnings {
    fn with_warnings(self, warnings: Vec<String>) -> Self;
}

impl WithWarnings for Extraction {
    fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }
}

/// Decompresses the parts calamine will read through [`SafeZip`] first, so that a zip bomb
/// is refused before calamine inflates it without caps.
fn guard_zip(bytes: &[u8], limits: &Limits) -> Result<(), ExtractError> {
    let mut zip = SafeZip::open(bytes, "spreadsheet", limits)?;
    for name in zip.names() {
        let lower = name.to_ascii_lowercase();
        let read_by_calamine = lower.starts_with("xl/worksheets/")
            || lower.starts_with("xl/sharedstrings")
            || lower == "xl/workbook.xml"
            || lower == "xl/workbook.bin"
            || lower == "content.xml"
            || lower == "styles.xml"
            || lower == "xl/styles.xml";
        if read_by_calamine {
            zip.read(&name)?;
        }
    }
    Ok(())
}

enum SheetError {
    /// Cancellation or time-out: the whole extraction stops.
    Fatal(ExtractError),
    /// This sheet is damaged: the others are still read.
    Unreadable(String),
}

fn read_sheet(
    workbook: &mut Sheets<Cursor<&[u8]>>,
    name: &str,
    limits: &Limits,
    control: &Control,
    warnings: &mut Vec<String>,
) -> Result<Grid, SheetError> {
    let mut grid = Grid::new();
    let mut cut = false;
    let mut add = |row: u32, col: u32, text: String, grid: &mut Grid| -> bool {
        if text.trim().is_empty() {
            return true;
        }
        if !grid.contains_key(&row) && grid.len() >= limits.max_table_rows {
            cut = true;
            return false;
        }
        grid.entry(row).or_default().insert(col, text);
        true
    };
    let mut seen = 0usize;
    let mut tick = || -> Result<(), SheetError> {
        seen += 1;
        if seen.is_multiple_of(CHECK_EVERY) {
            control.check().map_err(SheetError::Fatal)?;
        }
        Ok(())
    };
    match workbook {
        Sheets::Xlsx(xlsx) => {
            let mut reader = xlsx
                .worksheet_cells_reader(name)
                .map_err(|e| SheetError::Unreadable(e.to_string()))?;
            while let Some(cell) = reader
                .next_cell()
                .map_err(|e| SheetError::Unreadable(e.to_string()))?
            {
                tick()?;
                let (row, col) = cell.get_position();
                if !add(row, col, data_ref_text(cell.get_value()), &mut grid) {
                    break;
                }
            }
            drop(reader);
            if let Ok(merges) = xlsx.merge_cells_by_sheet_name(name) {
                fill_merged(&mut grid, &merges, limits);
            }
        }
        Sheets::Xlsb(xlsb) => {
            let mut reader = xlsb
                .worksheet_cells_reader(name)
                .map_err(|e| SheetError::Unreadable(e.to_string()))?;
            while let Some(cell) = reader
                .next_cell()
                .map_err(|e| SheetError::Unreadable(e.to_string()))?
            {
                tick()?;
                let (row, col) = cell.get_position();
                if !add(row, col, data_ref_text(cell.get_value()), &mut grid) {
                    break;
                }
            }
        }
        other => {
            let range = other
                .worksheet_range(name)
                .map_err(|e| SheetError::Unreadable(e.to_string()))?;
            let (row0, col0) = range.start().unwrap_or((0, 0));
            for (row, col, value) in range.used_cells() {
                tick()?;
                let (row, col) = (row0 + row as u32, col0 + col as u32);
                if !add(row, col, data_text(value), &mut grid) {
                    break;
                }
            }
        }
    }
    if cut {
        warnings.push(format!(
            "the sheet \"{name}\" was cut short at {} rows",
            limits.max_table_rows
        ));
    }
    Ok(grid)
}

/// Merged cells show their value across the whole region, as a reader sees it; the cells
/// filled are bounded so that a sheet of huge merges costs little.
fn fill_merged(grid: &mut Grid, merges: &[calamine::Dimensions], limits: &Limits) {
    const MAX_FILLED: u64 = 200_000;
    let mut filled = 0u64;
    for merge in merges {
        let (top, left) = merge.start;
        let (bottom, right) = merge.end;
        let rows = u64::from(bottom.saturating_sub(top)) + 1;
        let cols = u64::from(right.saturating_sub(left)) + 1;
        if rows.saturating_mul(cols) > MAX_FILLED.saturating_sub(filled) {
            continue;
        }
        let Some(value) = grid.get(&top).and_then(|r| r.get(&left)).cloned() else {
            continue;
        };
        filled += rows * cols;
        for row in top..=bottom {
            if !grid.contains_key(&row) && grid.len() >= limits.max_table_rows {
                break;
            }
            let cells = grid.entry(row).or_default();
            for col in left..=right {
                cells.entry(col).or_insert_with(|| value.clone());
            }
        }
    }
}

/// The sheet's tables: runs of non-empty rows, each split at columns empty over the run.
fn tables_of(grid: &Grid, sheet: &str, limits: &Limits, warnings: &mut Vec<String>) -> Vec<String> {
    let mut tables = Vec::new();
    let mut columns_cut = false;
    for rows in row_runs(grid) {
        let occupied: BTreeSet<u32> = rows
            .iter()
            .flat_map(|r| {
                grid.get(r)
                    .into_iter()
                    .flat_map(|cells| cells.keys().copied())
            })
            .collect();
        for columns in consecutive_runs(occupied.into_iter()) {
            let (Some(&first), Some(&last)) = (columns.first(), columns.last()) else {
                continue;
            };
            let width = (last - first) as usize + 1;
            let width = if width > limits.max_table_columns {
                columns_cut = true;
                limits.max_table_columns
            } else {
                width
            };
            let dense: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let cells = grid.get(r);
                    (0..width as u32)
                        .map(|c| {
                            cells
                                .and_then(|cells| cells.get(&(first + c)))
                                .cloned()
                                .unwrap_or_default()
                        })
                        .collect()
                })
                .filter(|row: &Vec<String>| row.iter().any(|c| !c.trim().is_empty()))
                .collect();
            let (label, dense) = split_section_label(dense);
            if let Some(label) = label {
                tables.push(label);
            }
            if !dense.is_empty() {
                tables.push(table(&dense));
            }
        }
    }
    if columns_cut {
        warnings.push(format!(
            "the sheet \"{sheet}\" has tables wider than {} columns; they were cut",
            limits.max_table_columns
        ));
    }
    tables
}

/// A first row that is one merged cell across the whole table is a section label above it,
/// not a header: it becomes a paragraph.
fn split_section_label(mut rows: Vec<Vec<String>>) -> (Option<String>, Vec<Vec<String>>) {
    let is_label = rows.len() > 1
        && rows
            .first()
            .is_some_and(|first| first.len() > 1 && first.iter().all(|c| Some(c) == first.first()));
    if !is_label {
        return (None, rows);
    }
    let label = rows
        .remove(0)
        .into_iter()
        .next()
        .map(|l| crate::markdown::cell(&l));
    (label, rows)
}

/// Rows grouped into runs of consecutive row numbers.
fn row_runs(grid: &Grid) -> Vec<Vec<u32>> {
    consecutive_runs(grid.keys().copied())
}

fn consecutive_runs(values: impl Iterator<Item = u32>) -> Vec<Vec<u32>> {
    let mut runs: Vec<Vec<u32>> = Vec::new();
    for value in values {
        match runs.last_mut() {
            Some(run)
                if run
                    .last()
                    .is_some_and(|&last| last.checked_add(1) == Some(value)) =>
            {
                run.push(value);
            }
            _ => runs.push(vec![value]),
        }
    }
    runs
}

fn data_ref_text(value: &DataRef<'_>) -> String {
    match value {
        DataRef::Int(i) => i.to_string(),
        DataRef::Float(f) => number_text(*f),
        DataRef::String(s) => s.clone(),
        DataRef::SharedString(s) => s.to_string(),
        DataRef::Bool(b) => bool_text(*b),
        DataRef::DateTime(d) => date_text(d),
        DataRef::DateTimeIso(s) | DataRef::DurationIso(s) => s.clone(),
        DataRef::Error(e) => e.to_string(),
        DataRef::Empty => String::new(),
    }
}

fn data_text(value: &Data) -> String {
    match value {
        Data::Int(i) => i.to_string(),
        Data::Float(f) => number_text(*f),
        Data::String(s) => s.clone(),
        Data::Bool(b) => bool_text(*b),
        Data::DateTime(d) => date_text(d),
        Data::DateTimeIso(s) | Data::DurationIso(s) => s.clone(),
        Data::Error(e) => e.to_string(),
        Data::Empty => String::new(),
    }
}

fn bool_text(value: bool) -> String {
    if value { "TRUE" } else { "FALSE" }.to_string()
}

/// Integers without `.0`; other numbers in their shortest exact form.
fn number_text(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

fn date_text(value: &calamine::ExcelDateTime) -> String {
    if value.is_duration() {
        return number_text(value.as_f64());
    }
    let (y, mo, d, h, mi, s, _) = value.to_ymd_hms_milli();
    if (h, mi, s) == (0, 0, 0) {
        format!("{y:04}-{mo:02}-{d:02}")
    } else {
        format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
    }
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
                path: std::path::Path::new("book"),
                bytes,
                extension,
            },
            limits,
            &Control::default(),
        )
    }

    fn corpus(path: &str) -> Option<Vec<u8>> {
        crate::testing::corpus(&format!("office/{path}"))
    }

    #[test]
    fn numbers_and_dates_print_as_users_see_them() {
        assert_eq!(number_text(3.0), "3");
        assert_eq!(number_text(-3.0), "-3");
        assert_eq!(number_text(2.5), "2.5");
        assert_eq!(number_text(1e20), "100000000000000000000");
    }

    #[test]
    fn sheets_split_into_tables_at_empty_rows_and_columns() {
        let mut grid = Grid::new();
        for (r, c, t) in [
            (0, 0, "a"),
            (0, 1, "b"),
            (1, 0, "1"),
            (1, 1, "2"),
            (0, 3, "x"),
            (1, 3, "9"),
            (4, 0, "later"),
        ] {
            grid.entry(r).or_default().insert(c, t.to_string());
        }
        let mut warnings = Vec::new();
        let tables = tables_of(&grid, "S", &Limits::default(), &mut warnings);
        assert_eq!(
            tables,
            vec![
                "| a | b |\n|---|---|\n| 1 | 2 |\n",
                "| x |\n|---|\n| 9 |\n",
                "| later |\n|---|\n"
            ]
        );
        let narrow = Limits {
            max_table_columns: 1,
            ..Limits::default()
        };
        tables_of(&grid, "S", &narrow, &mut warnings);
        assert!(warnings[0].contains("\"S\""));
    }

    #[test]
    fn corpus_workbooks() {
        let Some(bytes) = corpus("xlsx/sources/xlsx_01.xlsx") else {
            return;
        };
        let out = run_with(&bytes, "xlsx", &Limits::default())
            .unwrap()
            .markdown;
        let sheet1 = out.find("## Sheet1").unwrap();
        let sheet2 = out.find("## Sheet2").unwrap();
        assert!(sheet1 < sheet2);
        assert!(out.contains("| first | second | third |"));
        assert!(out.contains("| 5 | 1 | -3 |"));
        let rows = Limits {
            max_table_rows: 3,
            ..Limits::default()
        };
        let cut = run_with(&bytes, "xlsx", &rows).unwrap();
        assert!(cut.warnings.iter().any(|w| w.contains("\"Sheet1\"")));
        if let Some(bytes) = corpus("odf/sources/odf_table_with_title_01.ods") {
            let out = run_with(&bytes, "ods", &Limits::default())
                .unwrap()
                .markdown;
            assert!(out.starts_with("## "), "{out}");
            assert!(out.contains("|---|"));
        }
        if let Some(bytes) = corpus("xlsx/sources/xlsx_04_inflated.xlsx") {
            let out = run_with(&bytes, "xlsx", &Limits::default())
                .unwrap()
                .markdown;
            assert!(out.contains("| first | second | third |"));
        }
    }

    #[test]
    fn garbage_and_bombs_are_refused() {
        assert_eq!(
            run_with(b"not a workbook", "xlsx", &Limits::default())
                .unwrap_err()
                .code,
            "malformed_document"
        );
        use std::io::Write;
        let mut out = Cursor::new(Vec::new());
        {
            let mut writer = zip::ZipWriter::new(&mut out);
            let options = zip::write::SimpleFileOptions::default();
            writer.start_file("xl/workbook.xml", options).unwrap();
            writer.write_all(b"<workbook/>").unwrap();
            writer
                .start_file("xl/worksheets/sheet1.xml", options)
                .unwrap();
            writer.write_all(&vec![b' '; 20 * 1024 * 1024]).unwrap();
            writer.finish().unwrap();
        }
        assert_eq!(
            run_with(&out.into_inner(), "xlsx", &Limits::default())
                .unwrap_err()
                .code,
            "document_too_complex"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn mutated_workbooks_never_panic(cut in 0usize..40_000, flips in proptest::collection::vec((0usize..40_000, any::<u8>()), 0..16)) {
            let mut bytes = corpus("xlsx/sources/xlsx_01.xlsx").unwrap_or_else(|| b"PK\x03\x04".to_vec());
            crate::testing::mutate(&mut bytes, &flips, cut);
            let result = crate::extract(
                crate::Kind::Spreadsheet,
                Input { path: std::path::Path::new("book.xlsx"), bytes: &bytes, extension: "xlsx" },
                &Limits::default(),
                &Control::default(),
            );
            prop_assert!(result.err().is_none_or(|e| e.code != "extractor_crashed"));
        }
    }
}
