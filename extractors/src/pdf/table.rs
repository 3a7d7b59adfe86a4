//! Grids in a page's word boxes: runs of at least three lines whose words fall into the same
//! two or more columns are written as Markdown tables; every other line stays as it was.

use super::boxes::Word;

/// A gap between two words of a line wider than this many line heights (a line's height is
/// about 1.2 times the font size) separates cells: a space is a fifth to a quarter of it,
/// and justified prose rarely passes half.
const CELL_GAP: f64 = 0.6;
/// The fewest rows and columns a grid needs to be a table.
const MIN_ROWS: usize = 3;
const MIN_COLUMNS: usize = 2;
/// Rows further apart than this many line heights are not one table.
const MAX_ROW_GAP: f64 = 2.5;
/// A cell of this many words or more reads as prose; a grid whose cells are mostly prose is
/// a page in two columns, not a table.
const PROSE_WORDS: usize = 6;
/// Lines whose bottoms are this close (in line heights) are one row; stacked header lines
/// a fifth of a line apart are not.
const SAME_BASELINE: f64 = 0.1;
/// Widths per character within this ratio of each other are one monospaced font.
const MONOSPACE_SPREAD: f64 = 1.05;

/// Words of one row separated by less than a cell gap.
#[derive(Debug)]
struct Cell {
    x_min: f64,
    x_max: f64,
    text: String,
    words: usize,
}

/// Consecutive lines on one baseline: the content stream may draw a row's cells out of order
/// (a checkbox after its label), which breaks it into lines that still share a baseline.
#[derive(Debug)]
struct Row<'a> {
    /// The lines (indexes into the page's lines) the row is made of.
    lines: std::ops::Range<usize>,
    /// Its words left to right.
    words: Vec<&'a Word>,
    y_min: f64,
    y_max: f64,
    cells: Vec<Cell>,
}

impl Row<'_> {
    fn height(&self) -> f64 {
        (self.y_max - self.y_min).max(1.0)
    }
}

/// The page's lines (each a run of words left to right on one baseline), joined by newlines,
/// with each grid among them written as a Markdown table between blank lines.
pub(super) fn render(lines: &[&[Word]]) -> String {
    let rows = rows(lines);
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut start = 0;
    while let Some(row) = rows.get(start) {
        if let Some((end, columns)) = grid_at(&rows, start) {
            out.push(String::new());
            out.push(table(rows.get(start..end).unwrap_or_default(), &columns));
            out.push(String::new());
            start = end;
        } else {
            out.extend(
                lines
                    .get(row.lines.clone())
                    .unwrap_or_default()
                    .iter()
                    .map(|line| plain(line)),
            );
            start += 1;
        }
    }
    // Lines are never empty: only a table's blank lines can sit at either end.
    out.join("\n").trim_matches('\n').to_string()
}

fn plain(line: &[Word]) -> String {
    line.iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn rows<'a>(lines: &[&'a [Word]]) -> Vec<Row<'a>> {
    let mut rows: Vec<Row<'a>> = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let (y_min, y_max) = line.iter().fold((f64::MAX, f64::MIN), |(lo, hi), w| {
            (lo.min(w.bounds.y_min), hi.max(w.bounds.y_max))
        });
        let same_baseline = rows.last().is_some_and(|row| {
            (row.y_max - y_max).abs() <= SAME_BASELINE * row.height().min((y_max - y_min).max(1.0))
        });
        match rows.last_mut() {
            Some(row) if same_baseline => {
                row.lines.end = index + 1;
                row.words.extend(line.iter());
                row.y_min = row.y_min.min(y_min);
                row.y_max = row.y_max.max(y_max);
            }
            _ => rows.push(Row {
                lines: index..index + 1,
                words: line.iter().collect(),
                y_min,
                y_max,
                cells: Vec::new(),
            }),
        }
    }
    for row in &mut rows {
        row.words
            .sort_by(|a, b| a.bounds.x_min.total_cmp(&b.bounds.x_min));
        row.cells = cells(&row.words);
    }
    rows
}

fn cells(words: &[&Word]) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::new();
    let mut previous: Option<&Word> = None;
    for &word in words {
        let joins = previous.is_some_and(|prev| {
            let height = prev.bounds.height().max(word.bounds.height());
            word.bounds.x_min - prev.bounds.x_max <= CELL_GAP * height
        });
        match cells.last_mut() {
            Some(cell) if joins => {
                cell.x_max = cell.x_max.max(word.bounds.x_max);
                cell.text.push(' ');
                cell.text.push_str(&word.text);
                cell.words += 1;
            }
            _ => cells.push(Cell {
                x_min: word.bounds.x_min,
                x_max: word.bounds.x_max,
                text: word.text.clone(),
                words: 1,
            }),
        }
        previous = Some(word);
    }
    cells
}

/// The end (exclusive) and the columns of the grid that starts at row `start`, if one does.
fn grid_at(rows: &[Row<'_>], start: usize) -> Option<(usize, Vec<Column>)> {
    let first = rows.get(start)?;
    if first.cells.len() < MIN_COLUMNS {
        return None;
    }
    let mut columns = add_row(&[], &first.cells)?;
    let mut end = start + 1;
    while let (Some(row), Some(above)) = (rows.get(end), rows.get(end - 1)) {
        if row.cells.len() < MIN_COLUMNS || !follows(above, row) {
            break;
        }
        match add_row(&columns, &row.cells) {
            Some(wider) => columns = wider,
            None => break,
        }
        end += 1;
    }
    let grid = rows.get(start..end)?;
    let table = grid.len() >= MIN_ROWS
        && !is_numbered_lines(grid)
        && !is_list(grid)
        && !is_contents(grid)
        && !is_prose(grid)
        && !is_monospaced(grid);
    table.then_some((end, columns))
}

/// A column: the span the cells in it cover.
#[derive(Debug, Clone, Copy)]
struct Column {
    x_min: f64,
    x_max: f64,
}

impl Column {
    fn overlaps(&self, cell: &Cell) -> bool {
        cell.x_min <= self.x_max && cell.x_max >= self.x_min
    }
}

/// The columns once `row` is added: each of its cells lies under one column (widening it) or
/// between columns (a new one); `None` when a cell spans two columns, two cells share one, or
/// widened columns would touch.
fn add_row(columns: &[Column], row: &[Cell]) -> Option<Vec<Column>> {
    let mut out = columns.to_vec();
    let mut used = vec![false; columns.len()];
    for cell in row {
        let mut hits = columns
            .iter()
            .enumerate()
            .filter(|(_, column)| column.overlaps(cell));
        match (hits.next(), hits.next()) {
            (Some((index, _)), None) => {
                let taken = used.get_mut(index)?;
                if *taken {
                    return None;
                }
                *taken = true;
                let column = out.get_mut(index)?;
                column.x_min = column.x_min.min(cell.x_min);
                column.x_max = column.x_max.max(cell.x_max);
            }
            (None, _) => out.push(Column {
                x_min: cell.x_min,
                x_max: cell.x_max,
            }),
            (Some(_), Some(_)) => return None,
        }
    }
    out.sort_by(|a, b| a.x_min.total_cmp(&b.x_min));
    let apart = out.windows(2).all(|pair| match pair {
        [left, right] => left.x_max < right.x_min,
        _ => true,
    });
    apart.then_some(out)
}

/// `row` is the next row below `above`: lower on the page, and not far below.
fn follows(above: &Row<'_>, row: &Row<'_>) -> bool {
    row.y_min > above.y_min && row.y_min - above.y_max <= MAX_ROW_GAP * above.height()
}

/// Code with line numbers in the margin (1, 2, 3 ...) looks like a grid and is not a table.
fn is_numbered_lines(grid: &[Row<'_>]) -> bool {
    let numbers: Vec<Option<u64>> = grid
        .iter()
        .map(|row| row.cells.first().and_then(|cell| cell.text.parse().ok()))
        .collect();
    numbers.windows(2).all(|pair| match pair {
        [Some(a), Some(b)] => a.checked_add(1) == Some(*b),
        _ => false,
    })
}

/// Every row starts with a bullet or an item number: a list.
fn is_list(grid: &[Row<'_>]) -> bool {
    grid.iter().all(|row| {
        row.cells.first().is_some_and(|cell| {
            let text = cell.text.as_str();
            let mut chars = text.chars();
            let single_symbol =
                matches!((chars.next(), chars.next()), (Some(c), None) if !c.is_alphanumeric());
            let numbered = text.strip_suffix(['.', ')']).is_some_and(|n| {
                !n.is_empty() && n.len() <= 3 && n.chars().all(char::is_alphanumeric)
            });
            single_symbol || numbered
        })
    })
}

/// Half the rows or more run dot leaders to a page number: a table of contents or an index.
fn is_contents(grid: &[Row<'_>]) -> bool {
    let leaders = grid
        .iter()
        .filter(|row| {
            row.words.windows(3).any(|three| {
                three
                    .iter()
                    .all(|w| w.text == "." || w.text.starts_with("..."))
            }) || row
                .words
                .iter()
                .any(|w| w.text.contains("....") || w.text.contains(". . ."))
        })
        .count();
    leaders * 2 >= grid.len()
}

/// Most rows whose words are as wide per character as each other: code in a monospaced font,
/// aligned by spaces, not a table. Only rows of three words with letters or more count (digits
/// alone are as wide as each other in most fonts, and two words can match by chance), so a
/// caption in a text font above the code does not hide it.
fn is_monospaced(grid: &[Row<'_>]) -> bool {
    let (mut counted, mut monospaced) = (0usize, 0usize);
    for row in grid {
        let widths: Vec<f64> = row
            .words
            .iter()
            .filter(|word| word.text.chars().any(char::is_alphabetic))
            .filter_map(|word| {
                let chars = word.text.chars().count();
                (chars >= 2).then(|| (word.bounds.x_max - word.bounds.x_min) / chars as f64)
            })
            .collect();
        if widths.len() < 3 {
            continue;
        }
        let (min, max) = widths
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), w| (lo.min(*w), hi.max(*w)));
        counted += 1;
        monospaced += usize::from(min > 0.0 && max / min < MONOSPACE_SPREAD);
    }
    monospaced >= 2 && monospaced * 2 >= counted
}

/// Mostly long cells: prose in columns laid side by side on the same baselines.
fn is_prose(grid: &[Row<'_>]) -> bool {
    let cells = grid.iter().flat_map(|row| row.cells.iter());
    let (long, all) = cells.fold((0usize, 0usize), |(long, all), cell| {
        (long + usize::from(cell.words >= PROSE_WORDS), all + 1)
    });
    long * 2 > all
}

fn table(rows: &[Row<'_>], columns: &[Column]) -> String {
    let grid: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let mut out = vec![String::new(); columns.len()];
            for cell in &row.cells {
                let slot = columns
                    .iter()
                    .position(|column| column.overlaps(cell))
                    .and_then(|index| out.get_mut(index));
                if let Some(slot) = slot {
                    if !slot.is_empty() {
                        slot.push(' ');
                    }
                    slot.push_str(&cell.text);
                }
            }
            out
        })
        .collect();
    crate::markdown::table(&grid).trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::super::boxes::WordBox;
    use super::*;

    /// A proportional font, 10 points high: narrow, wide and ordinary letters.
    fn width(text: &str) -> f64 {
        text.chars()
            .map(|c| match c {
                'i' | 'l' | 'j' | '.' | ',' | '1' => 3.0,
                'm' | 'w' | 'M' | 'W' => 9.0,
                c if c.is_uppercase() => 7.0,
                _ => 6.0,
            })
            .sum()
    }

    /// The words of each `(x, y, phrase)`, a 3-point space apart, in the order given.
    fn words(spec: &[(f64, f64, &str)]) -> Vec<Word> {
        let mut out = Vec::new();
        for &(x, y, phrase) in spec {
            let mut x = x;
            for text in phrase.split(' ') {
                let w = width(text);
                out.push(Word {
                    bounds: WordBox {
                        x_min: x,
                        y_min: y,
                        x_max: x + w,
                        y_max: y + 10.0,
                    },
                    text: text.to_string(),
                });
                x += w + 3.0;
            }
        }
        out
    }

    /// Splits words into lines the way the extractor does: a new line on another baseline
    /// or where the next word starts left of the previous one.
    fn render_words(words: &[Word]) -> String {
        let mut lines: Vec<&[Word]> = Vec::new();
        let mut start = 0;
        for i in 1..=words.len() {
            let breaks = match (words.get(i - 1), words.get(i)) {
                (Some(a), Some(b)) => {
                    b.bounds.y_min != a.bounds.y_min || b.bounds.x_min < a.bounds.x_min
                }
                _ => true,
            };
            if breaks {
                lines.push(&words[start..i]);
                start = i;
            }
        }
        render(&lines)
    }

    #[test]
    fn a_three_by_three_grid_is_a_table() {
        let page = words(&[
            (72.0, 90.0, "Staff list"),
            (72.0, 120.0, "Name"),
            (200.0, 120.0, "Age"),
            (300.0, 120.0, "City"),
            (72.0, 134.0, "Ann Lee"),
            (204.0, 134.0, "31"),
            (300.0, 134.0, "Oslo"),
            (72.0, 148.0, "Bob"),
            (206.0, 148.0, "4"),
            (300.0, 148.0, "Rome"),
            (72.0, 180.0, "After the table."),
        ]);
        assert_eq!(
            render_words(&page),
            "Staff list\n\n| Name | Age | City |\n|---|---|---|\n| Ann Lee | 31 | Oslo |\n| Bob | 4 | Rome |\n\nAfter the table."
        );
    }

    #[test]
    fn a_form_with_labels_and_values_is_a_table() {
        // Values start at the same x whatever the label's length; a row has a third cell;
        // the content stream draws the last row's value before its label.
        let page = words(&[
            (72.0, 100.0, "Invoice no."),
            (250.0, 100.0, "2024-17"),
            (72.0, 114.0, "Date"),
            (250.0, 114.0, "3 May"),
            (250.0, 128.0, "12.50"),
            (400.0, 128.0, "EUR"),
            (72.0, 128.0, "Total"),
        ]);
        assert_eq!(
            render_words(&page),
            "| Invoice no. | 2024-17 |  |\n|---|---|---|\n| Date | 3 May |  |\n| Total | 12.50 | EUR |"
        );
    }

    #[test]
    fn prose_is_not_a_table() {
        let spec: Vec<(f64, f64, &str)> = (0..5)
            .map(|line| {
                (
                    72.0,
                    100.0 + 14.0 * f64::from(line),
                    "It was the best of times it was the worst of times it was the age",
                )
            })
            .collect();
        let out = render_words(&words(&spec));
        assert!(!out.contains('|'), "{out}");
        assert_eq!(out.lines().count(), 5);
    }

    #[test]
    fn two_columns_of_prose_are_not_a_table() {
        // Lines of both columns on shared baselines, drawn row by row.
        let mut spec = Vec::new();
        for line in 0..6 {
            let y = 100.0 + 14.0 * f64::from(line);
            spec.push((72.0, y, "the quick brown fox jumps over the"));
            spec.push((320.0, y, "lazy dog that sleeps in the sun"));
        }
        let out = render_words(&words(&spec));
        assert!(!out.contains('|'), "{out}");
        // Drawn column by column: every line holds one run of prose.
        let mut spec = Vec::new();
        for (x, text) in [
            (72.0, "left column words go here"),
            (320.0, "right column words"),
        ] {
            for line in 0..6 {
                spec.push((x, 100.0 + 14.0 * f64::from(line), text));
            }
        }
        let out = render_words(&words(&spec));
        assert!(!out.contains('|'), "{out}");
        assert_eq!(out.lines().count(), 12);
    }

    #[test]
    fn numbered_code_lists_and_contents_are_not_tables() {
        let code = words(&[
            (72.0, 100.0, "8577"),
            (120.0, 100.0, "\\cs_new:Npn \\foo:n"),
            (72.0, 114.0, "8578"),
            (120.0, 114.0, "{"),
            (72.0, 128.0, "8579"),
            (120.0, 128.0, "\\use:c"),
        ]);
        assert!(!render_words(&code).contains('|'));
        let list = words(&[
            (72.0, 100.0, "•"),
            (90.0, 100.0, "Security fundamentals"),
            (72.0, 114.0, "•"),
            (90.0, 114.0, "Current state"),
            (72.0, 128.0, "•"),
            (90.0, 128.0, "Controls"),
        ]);
        assert!(!render_words(&list).contains('|'));
        let contents = words(&[
            (72.0, 100.0, "1.1"),
            (100.0, 100.0, "Basics . . . . . . 2"),
            (72.0, 114.0, "1.2"),
            (100.0, 114.0, "Usage . . . . . . . 5"),
            (72.0, 128.0, "1.3"),
            (100.0, 128.0, "Limits . . . . . . 9"),
        ]);
        assert!(!render_words(&contents).contains('|'));
    }

    #[test]
    fn monospaced_code_is_not_a_table() {
        let mono = |spec: &[(f64, f64, &str)]| -> Vec<Word> {
            let mut out = words(spec);
            for word in &mut out {
                word.bounds.x_max = word.bounds.x_min + 6.0 * word.text.chars().count() as f64;
            }
            out
        };
        let code = mono(&[
            (72.0, 100.0, "CREATE MASK"),
            (200.0, 100.0, "HR.MASK_TAX_ID"),
            (72.0, 114.0, "ON"),
            (200.0, 114.0, "HR.EMPLOYEES AS EMPLOYEES"),
            (72.0, 128.0, "FOR COLUMN"),
            (200.0, 128.0, "TAX_ID"),
        ]);
        assert!(!render_words(&code).contains('|'));
    }

    #[test]
    fn short_grids_and_spanning_cells_end_tables() {
        let two_rows = words(&[
            (72.0, 100.0, "a"),
            (200.0, 100.0, "b"),
            (72.0, 114.0, "c"),
            (200.0, 114.0, "d"),
        ]);
        assert_eq!(render_words(&two_rows), "a b\nc d");
        let page = words(&[
            (72.0, 100.0, "a"),
            (200.0, 100.0, "b"),
            (72.0, 114.0, "c"),
            (200.0, 114.0, "d"),
            (72.0, 128.0, "e"),
            (200.0, 128.0, "f"),
            (72.0, 142.0, "a-very-long-cell-running-across"),
            (300.0, 142.0, "g"),
        ]);
        let out = render_words(&page);
        assert!(out.starts_with("| a | b |"), "{out}");
        assert!(
            out.ends_with("| e | f |\n\na-very-long-cell-running-across g"),
            "{out}"
        );
    }

    #[test]
    fn pipes_in_cells_are_escaped() {
        let page = words(&[
            (72.0, 100.0, "a|b"),
            (200.0, 100.0, "1"),
            (72.0, 114.0, "c"),
            (200.0, 114.0, "2"),
            (72.0, 128.0, "d"),
            (200.0, 128.0, "3"),
        ]);
        assert!(render_words(&page).starts_with("| a\\|b | 1 |"));
    }
}
