//! Jupyter notebooks (`.ipynb`, nbformat 4, and 3's `worksheets`): markdown cells as they
//! are, code cells as fenced code in the kernel's language, and the text of their outputs
//! (streams, `text/markdown`, `text/plain`, HTML through the HTML extractor when there is
//! nothing else, errors by name and message) as `output` blocks. Images and other binary
//! outputs are skipped and counted in a warning. The title is `metadata.title` or the first
//! `# ` heading of a markdown cell; authors come from `metadata.authors`.

use serde_json::Value;

use crate::markup::{Doc, fence, tick};
use crate::{Control, ExtractError, Extraction, Input, Limits};

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let decoded = crate::plain::decode_without_bom(input.bytes)?;
    let text = decoded.text.as_str();
    if text.trim().is_empty() {
        return Ok(Extraction::default());
    }
    let notebook: Value = serde_json::from_str(text).map_err(|e| {
        if e.to_string().contains("recursion limit") {
            ExtractError::too_complex("the notebook's JSON nests too deeply")
        } else {
            ExtractError::malformed(format!("invalid notebook JSON: {e}"))
        }
    })?;
    let metadata = notebook.get("metadata");
    let language = metadata
        .and_then(|m| {
            m.pointer("/kernelspec/language")
                .or_else(|| m.pointer("/language_info/name"))
                .or_else(|| m.get("language"))
        })
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let cells: Vec<&Value> = match (notebook.get("cells"), notebook.get("worksheets")) {
        (Some(Value::Array(cells)), _) => cells.iter().collect(),
        (_, Some(Value::Array(sheets))) => sheets
            .iter()
            .filter_map(|s| s.get("cells").and_then(Value::as_array))
            .flatten()
            .collect(),
        _ => {
            return Err(ExtractError::malformed(
                "not a Jupyter notebook: no cells or worksheets",
            ));
        }
    };
    let mut doc = Doc::new(limits.max_output_chars);
    let mut skipped = 0usize;
    for (n, cell) in cells.iter().enumerate() {
        tick(control, n)?;
        if doc.full {
            break;
        }
        let kind = cell.get("cell_type").and_then(Value::as_str).unwrap_or("");
        // nbformat 3 keeps code in `input`.
        let source = joined(cell.get("source").or_else(|| cell.get("input")));
        match kind {
            "markdown" => {
                if doc.title.is_none() {
                    doc.title = first_h1(&source);
                }
                doc.block(source.trim_matches('\n'));
            }
            "heading" => {
                let level = cell.get("level").and_then(Value::as_u64).unwrap_or(1);
                doc.heading(level as usize, &source);
            }
            "code" => {
                let cell_language = cell
                    .get("language")
                    .and_then(Value::as_str)
                    .unwrap_or(&language);
                doc.code(cell_language, &source);
                if let Some(Value::Array(outputs)) = cell.get("outputs") {
                    for output in outputs {
                        write_output(&mut doc, output, limits, control, &mut skipped)?;
                    }
                }
            }
            // Raw cells are text for other tools (LaTeX, reST): kept as text.
            _ => doc.block(source.trim_matches('\n')),
        }
    }
    if skipped > 0 {
        doc.warnings
            .push(format!("{skipped} image or binary outputs were skipped"));
    }
    if let Some(title) = metadata
        .and_then(|m| m.get("title"))
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
    {
        doc.set_title(title);
    }
    if let Some(Value::Array(authors)) = metadata.and_then(|m| m.get("authors")) {
        let names: Vec<&str> = authors
            .iter()
            .filter_map(|a| a.get("name").and_then(Value::as_str).or_else(|| a.as_str()))
            .collect();
        doc.set_author(&names.join(", "));
    }
    Ok(doc.finish(decoded.encoding))
}

/// One output of a code cell.
fn write_output(
    doc: &mut Doc,
    output: &Value,
    limits: &Limits,
    control: &Control,
    skipped: &mut usize,
) -> Result<(), ExtractError> {
    let kind = output
        .get("output_type")
        .and_then(Value::as_str)
        .unwrap_or("");
    match kind {
        "stream" => write_text(doc, &joined(output.get("text"))),
        "error" | "pyerr" => {
            let name = output
                .get("ename")
                .and_then(Value::as_str)
                .unwrap_or("Error");
            let value = output.get("evalue").and_then(Value::as_str).unwrap_or("");
            write_text(doc, &strip_ansi(&format!("{name}: {value}")));
        }
        _ => {
            // `display_data` and `execute_result` (`pyout` in nbformat 3, which keeps the
            // representations on the output itself).
            let data = output.get("data").unwrap_or(output);
            let has_image = data.as_object().is_some_and(|d| {
                d.keys().any(|k| {
                    k.starts_with("image/")
                        || matches!(k.as_str(), "png" | "jpeg" | "svg" | "application/pdf")
                })
            });
            if has_image {
                // Its text is the figure's repr (`<Figure size 640x480 ...>`), not content.
                *skipped += 1;
                return Ok(());
            }
            if let Some(markdown) = data.get("text/markdown") {
                doc.block(joined(Some(markdown)).trim_matches('\n'));
            } else if let Some(plain) = data.get("text/plain").or_else(|| data.get("text")) {
                write_text(doc, &joined(Some(plain)));
            } else if let Some(html) = data.get("text/html").or_else(|| data.get("html")) {
                let html = joined(Some(html));
                if let Ok(converted) = crate::html::to_markdown(&html, limits, control) {
                    doc.block(&converted.markdown);
                }
            } else if data.as_object().is_some_and(|d| !d.is_empty()) {
                *skipped += 1;
            }
        }
    }
    Ok(())
}

fn write_text(doc: &mut Doc, text: &str) {
    let text = strip_ansi(text);
    if !text.trim().is_empty() {
        doc.block(&fence("output", text.trim_end()));
    }
}

/// A `source` or `text` field: a string or an array of strings.
fn joined(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// The first `# ` heading of Markdown outside code fences.
fn first_h1(markdown: &str) -> Option<String> {
    let mut in_fence = false;
    for line in markdown.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence && let Some(title) = t.strip_prefix("# ") {
            let title = title.trim().trim_end_matches('#').trim();
            if !title.is_empty() {
                return Some(title.to_string());
            }
        }
    }
    None
}

/// Removes ANSI escape sequences (colored tracebacks and progress bars).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for next in chars.by_ref() {
                    if next.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use proptest::prelude::*;

    const NOTEBOOK: &str = r##"{
 "cells": [
  {"cell_type": "markdown", "metadata": {}, "source": ["# Sales Analysis\n", "\n", "We look at **sales**."]},
  {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "import pandas as pd\nprint('loaded')",
   "outputs": [
     {"output_type": "stream", "name": "stdout", "text": ["loaded\n"]},
     {"output_type": "execute_result", "data": {"text/plain": ["   a  b\n", "0  1  2"], "text/html": "<table>SECRETHTML</table>"}, "metadata": {}, "execution_count": 1}
   ]},
  {"cell_type": "code", "metadata": {}, "source": ["plot()"],
   "outputs": [
     {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgoSECRETBASE64", "text/plain": ["<Figure size 640x480 with 1 Axes>"]}, "metadata": {}},
     {"output_type": "display_data", "data": {"text/markdown": "Total: **42**"}, "metadata": {}},
     {"output_type": "error", "ename": "ValueError", "evalue": "bad value", "traceback": ["\u001b[0;31mSECRETTRACE\u001b[0m"]}
   ]},
  {"cell_type": "code", "metadata": {}, "source": [], "outputs": []},
  {"cell_type": "raw", "metadata": {}, "source": "raw text cell"}
 ],
 "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
              "authors": [{"name": "Ana Lima"}]},
 "nbformat": 4, "nbformat_minor": 5
}"##;

    fn run(json: &str) -> Result<Extraction, ExtractError> {
        testing::run(extract, json.as_bytes(), "ipynb").map(|mut e| {
            e.finish();
            e
        })
    }

    #[test]
    fn cells_and_outputs() {
        let e = run(NOTEBOOK).unwrap();
        assert_eq!(e.metadata.title.as_deref(), Some("Sales Analysis"));
        assert_eq!(e.metadata.author.as_deref(), Some("Ana Lima"));
        assert_eq!(
            e.warnings,
            vec!["1 image or binary outputs were skipped".to_string()]
        );
        assert_eq!(
            e.markdown,
            "# Sales Analysis\n\nWe look at **sales**.\n\n```python\nimport pandas as pd\nprint('loaded')\n```\n\n```output\nloaded\n```\n\n```output\n   a  b\n0  1  2\n```\n\n```python\nplot()\n```\n\nTotal: **42**\n\n```output\nValueError: bad value\n```\n\nraw text cell"
        );
    }

    #[test]
    fn nbformat_3_worksheets() {
        let v3 = r#"{"metadata": {"name": "old"}, "nbformat": 3, "worksheets": [{"cells": [
            {"cell_type": "heading", "level": 1, "source": ["Old Notebook"]},
            {"cell_type": "code", "language": "python", "input": ["x = 1\n", "x"],
             "outputs": [{"output_type": "pyout", "text": ["1"]}, {"output_type": "display_data", "png": "AAAA"}]}
        ]}]}"#;
        let e = run(v3).unwrap();
        assert_eq!(e.metadata.title.as_deref(), Some("Old Notebook"));
        assert_eq!(
            e.markdown,
            "# Old Notebook\n\n```python\nx = 1\nx\n```\n\n```output\n1\n```"
        );
        assert_eq!(e.warnings.len(), 1);
    }

    #[test]
    fn metadata_title_and_html_only_output() {
        let nb = r#"{"metadata": {"title": "Given Title", "language_info": {"name": "julia"}}, "nbformat": 4,
            "cells": [{"cell_type": "code", "source": "df", "outputs": [
              {"output_type": "execute_result", "data": {"text/html": ["<table><tr><th>a</th></tr><tr><td>1</td></tr></table>"]}}]}]}"#;
        let e = run(nb).unwrap();
        assert_eq!(e.metadata.title.as_deref(), Some("Given Title"));
        assert!(
            e.markdown.starts_with("```julia\ndf\n```"),
            "{}",
            e.markdown
        );
        assert!(e.markdown.contains("| a |"), "{}", e.markdown);
    }

    #[test]
    fn empty_and_invalid() {
        assert_eq!(run("").unwrap().markdown, "");
        assert_eq!(run("  \n ").unwrap().markdown, "");
        assert_eq!(
            run(r#"{"cells": [], "metadata": {}}"#).unwrap().markdown,
            ""
        );
        assert_eq!(run("{\"cells\": [").unwrap_err().code, "malformed_document");
        assert_eq!(run(r#"{"a": 1}"#).unwrap_err().code, "malformed_document");
        assert_eq!(run("[1, 2]").unwrap_err().code, "malformed_document");
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(run(&deep).unwrap_err().code, "document_too_complex");
        // A code block holding a fence gets a longer one.
        let nb = r#"{"cells": [{"cell_type": "code", "source": "s = '```'", "outputs": []}]}"#;
        assert_eq!(run(nb).unwrap().markdown, "````\ns = '```'\n````");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
            let _ = testing::run(extract, &bytes, "ipynb");
        }

        #[test]
        fn mutated_notebook_never_panics(cut in 0usize..2000, flips in proptest::collection::vec((0usize..2000, any::<u8>()), 0..6)) {
            let mut bytes = NOTEBOOK.as_bytes().to_vec();
            testing::mutate(&mut bytes, &flips, cut);
            let _ = testing::run(extract, &bytes, "ipynb");
        }
    }
}
