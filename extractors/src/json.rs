//! JSON and JSON Lines (`.jsonl`, `.ndjson`): the keys and values as readable Markdown.
//!
//! Objects become nested lists (`- key: value`, nested objects and arrays indented under
//! their key), arrays of scalars are joined with commas, and arrays of two or more flat
//! objects with the same keys become Markdown tables. Keys keep the file's order. JSON Lines
//! files give one block per record; a bad line is skipped with a warning naming it. Nesting
//! is bounded by serde_json's own recursion limit (128) and by `limits.max_nesting_depth`.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::markdown;
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

/// Elements rendered between two checks of the deadline.
const CHECK_EVERY: usize = 256;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let decoded = crate::plain::decode(input.bytes)?;
    let text = decoded.text.trim_start_matches('\u{feff}');
    let mut warnings = Vec::new();
    let records = match input.extension {
        "jsonl" | "ndjson" => parse_lines(text, &mut warnings, control)?,
        _ => match serde_json::from_str::<Node>(text) {
            Ok(node) => vec![node],
            Err(e) if e.to_string().starts_with("trailing characters") => {
                let records =
                    parse_lines(text, &mut Vec::new(), control).map_err(|_| json_error(&e))?;
                warnings.push("the file holds several JSON values; read as JSON Lines".into());
                records
            }
            Err(e) => return Err(json_error(&e)),
        },
    };
    let mut renderer = Renderer {
        limits,
        control,
        out: String::new(),
        warnings,
        rendered: 0,
        full: false,
    };
    for record in &records {
        let mut block = String::new();
        renderer.render_top(record, &mut block)?;
        renderer.push_block(&block);
        if renderer.full {
            break;
        }
    }
    Ok(Extraction {
        markdown: renderer.out,
        warnings: renderer.warnings,
        metadata: Metadata {
            encoding: Some(decoded.encoding.to_string()),
            ..Metadata::default()
        },
        ..Extraction::default()
    })
}

fn json_error(e: &serde_json::Error) -> ExtractError {
    if e.to_string().contains("recursion limit") {
        return ExtractError::too_complex(format!(
            "JSON nests too deeply (line {}, column {})",
            e.line(),
            e.column()
        ));
    }
    ExtractError::malformed(format!("invalid JSON: {e}"))
}

fn parse_lines(
    text: &str,
    warnings: &mut Vec<String>,
    control: &Control,
) -> Result<Vec<Node>, ExtractError> {
    let mut records = Vec::new();
    let mut bad = 0usize;
    let mut first_error = None;
    for (index, line) in text.lines().enumerate() {
        if index.is_multiple_of(CHECK_EVERY) {
            control.check()?;
        }
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Node>(line) {
            Ok(node) => records.push(node),
            Err(e) => {
                bad += 1;
                let error = json_error(&e);
                warnings.push(format!("line {}: skipped, {}", index + 1, error.detail));
                first_error.get_or_insert((index + 1, error));
            }
        }
    }
    if records.is_empty() {
        return Err(match first_error {
            Some((line, error)) => ExtractError {
                detail: format!(
                    "no line of the JSON Lines file is valid JSON (line {line}: {})",
                    error.detail
                ),
                ..error
            },
            None => ExtractError::malformed("the JSON Lines file has no records"),
        });
    }
    if bad > 50 {
        warnings.truncate(50);
        warnings.push(format!("{bad} lines skipped in all"));
    }
    Ok(records)
}

/// A JSON value that keeps the order of object keys (serde_json's `Value` sorts them unless
/// a workspace-wide feature is turned on).
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Null,
    Scalar(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Scalar(v.to_string()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Scalar(v.to_string()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Scalar(v.to_string()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Scalar(v.to_string()))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Scalar(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Scalar(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Node>()? {
            entries.push((key, value));
        }
        Ok(Node::Object(entries))
    }
}

impl Node {
    fn is_scalar(&self) -> bool {
        matches!(self, Node::Null | Node::Scalar(_))
    }

    fn scalar_text(&self) -> String {
        match self {
            Node::Scalar(text) => markdown::collapse_whitespace(text),
            _ => String::new(),
        }
    }

    /// The keys of an object whose values are all scalars.
    fn flat_keys(&self) -> Option<Vec<&str>> {
        match self {
            Node::Object(entries) if entries.iter().all(|(_, v)| v.is_scalar()) => {
                Some(entries.iter().map(|(k, _)| k.as_str()).collect())
            }
            _ => None,
        }
    }
}

/// The rows of a table when `items` are two or more flat objects with the same keys.
fn as_table(items: &[Node]) -> Option<Vec<Vec<String>>> {
    if items.len() < 2 {
        return None;
    }
    let keys = items.first()?.flat_keys()?;
    if keys.is_empty()
        || items
            .iter()
            .any(|item| item.flat_keys().as_ref() != Some(&keys))
    {
        return None;
    }
    let mut rows = vec![keys.iter().map(|k| k.to_string()).collect::<Vec<_>>()];
    for item in items {
        if let Node::Object(entries) = item {
            rows.push(entries.iter().map(|(_, v)| v.scalar_text()).collect());
        }
    }
    Some(rows)
}

struct Renderer<'a> {
    limits: &'a Limits,
    control: &'a Control,
    out: String,
    warnings: Vec<String>,
    rendered: usize,
    full: bool,
}

impl Renderer<'_> {
    fn push_block(&mut self, block: &str) {
        if self.full {
            return;
        }
        if self.out.len() + block.len() > self.limits.max_output_chars {
            self.full = true;
            self.warnings
                .push("the document was cut short at the output limit".to_string());
            return;
        }
        markdown::push_block(&mut self.out, block);
    }

    fn tick(&mut self, depth: usize) -> Result<(), ExtractError> {
        self.rendered += 1;
        if self.rendered.is_multiple_of(CHECK_EVERY) {
            self.control.check()?;
        }
        if depth > self.limits.max_nesting_depth {
            return Err(ExtractError::too_complex(format!(
                "JSON nests deeper than {} levels",
                self.limits.max_nesting_depth
            )));
        }
        Ok(())
    }

    fn render_top(&mut self, node: &Node, out: &mut String) -> Result<(), ExtractError> {
        match node {
            Node::Null => {}
            Node::Scalar(_) => out.push_str(&node.scalar_text()),
            Node::Array(items) => self.render_array_items(items, 0, out)?,
            Node::Object(entries) => self.render_entries(entries, 0, out)?,
        }
        Ok(())
    }

    fn render_entries(
        &mut self,
        entries: &[(String, Node)],
        depth: usize,
        out: &mut String,
    ) -> Result<(), ExtractError> {
        self.tick(depth)?;
        let indent = "  ".repeat(depth);
        for (key, value) in entries {
            let key = markdown::collapse_whitespace(key);
            match value {
                Node::Null => out.push_str(&format!("{indent}- {key}:\n")),
                Node::Scalar(_) => {
                    out.push_str(&format!("{indent}- {key}: {}\n", value.scalar_text()))
                }
                Node::Array(items) if items.iter().all(Node::is_scalar) => {
                    out.push_str(&format!("{indent}- {key}: {}\n", join_scalars(items)))
                }
                Node::Array(items) => {
                    out.push_str(&format!("{indent}- {key}:\n"));
                    self.render_array_items(items, depth + 1, out)?;
                }
                Node::Object(children) => {
                    out.push_str(&format!("{indent}- {key}:\n"));
                    self.render_entries(children, depth + 1, out)?;
                }
            }
        }
        Ok(())
    }

    fn render_array_items(
        &mut self,
        items: &[Node],
        depth: usize,
        out: &mut String,
    ) -> Result<(), ExtractError> {
        self.tick(depth)?;
        let indent = "  ".repeat(depth);
        if let Some(rows) = as_table(items) {
            let table = markdown::table(&self.capped(rows));
            if !out.is_empty() && !out.ends_with("\n\n") {
                out.push('\n');
            }
            for line in table.lines() {
                out.push_str(&format!("{indent}{line}\n"));
            }
            out.push('\n');
            return Ok(());
        }
        if items.iter().all(Node::is_scalar) {
            if depth == 0 {
                for item in items.iter().filter(|i| **i != Node::Null) {
                    out.push_str(&format!("- {}\n", item.scalar_text()));
                }
            } else {
                out.push_str(&format!("{indent}- {}\n", join_scalars(items)));
            }
            return Ok(());
        }
        for item in items {
            match item {
                Node::Null => {}
                Node::Scalar(_) => out.push_str(&format!("{indent}- {}\n", item.scalar_text())),
                Node::Array(inner) => {
                    out.push_str(&format!("{indent}-\n"));
                    self.render_array_items(inner, depth + 1, out)?;
                }
                Node::Object(entries) if depth == 0 => {
                    self.render_entries(entries, 0, out)?;
                    out.push('\n');
                }
                Node::Object(entries) => {
                    out.push_str(&format!("{indent}-\n"));
                    self.render_entries(entries, depth + 1, out)?;
                }
            }
        }
        Ok(())
    }

    fn capped(&mut self, mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
        // The header row does not count against the cap.
        if rows.len() > self.limits.max_table_rows + 1 {
            rows.truncate(self.limits.max_table_rows + 1);
            self.warnings.push(format!(
                "a table was cut at {} rows",
                self.limits.max_table_rows
            ));
        }
        if rows
            .first()
            .is_some_and(|r| r.len() > self.limits.max_table_columns)
        {
            for row in rows.iter_mut() {
                row.truncate(self.limits.max_table_columns);
            }
            self.warnings.push(format!(
                "a table was cut at {} columns",
                self.limits.max_table_columns
            ));
        }
        rows
    }
}

fn join_scalars(items: &[Node]) -> String {
    items
        .iter()
        .filter(|i| **i != Node::Null)
        .map(Node::scalar_text)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::Path;

    fn run_with(bytes: &[u8], ext: &str, limits: &Limits) -> Result<Extraction, ExtractError> {
        let input = Input {
            path: Path::new("test"),
            bytes,
            extension: ext,
        };
        crate::extract(crate::Kind::Json, input, limits, &Control::default())
    }

    fn run(bytes: &[u8], ext: &str) -> Result<Extraction, ExtractError> {
        run_with(bytes, ext, &Limits::default())
    }

    const SAMPLE: &str = r#"{"title": "Shelf  manual", "version": 2, "draft": false, "note": null,
        "tags": ["search", "ingest", 3],
        "owner": {"name": "Ana", "address": {"city": "Lisbon"}},
        "people": [{"name": "Ana", "age": 30}, {"name": "Bo|b", "age": 41}],
        "mixed": [{"a": 1}, {"b": {"c": "deep"}}, [1, 2], "x"]}"#;

    #[test]
    fn objects_lists_and_tables() {
        let md = run(SAMPLE.as_bytes(), "json").unwrap().markdown;
        let expected = "- title: Shelf manual\n- version: 2\n- draft: false\n- note:\n- tags: search, ingest, 3\n- owner:\n  - name: Ana\n  - address:\n    - city: Lisbon\n- people:\n\n  | name | age |\n  |---|---|\n  | Ana | 30 |\n  | Bo\\|b | 41 |\n\n- mixed:\n  -\n    - a: 1\n  -\n    - b:\n      - c: deep\n  -\n    - 1, 2\n  - x";
        assert_eq!(md, expected);
    }

    #[test]
    fn top_level_table_and_scalars() {
        let md = run(br#"[{"id":1,"v":"a"},{"id":2,"v":"b"}]"#, "json")
            .unwrap()
            .markdown;
        assert_eq!(md, "| id | v |\n|---|---|\n| 1 | a |\n| 2 | b |");
        assert_eq!(
            run(br#""just text""#, "json").unwrap().markdown,
            "just text"
        );
        assert_eq!(
            run(b"[1, 2.5, true]", "json").unwrap().markdown,
            "- 1\n- 2.5\n- true"
        );
    }

    #[test]
    fn table_caps_warn() {
        let rows: Vec<String> = (0..10)
            .map(|i| format!(r#"{{"a":{i},"b":2,"c":3}}"#))
            .collect();
        let json = format!("[{}]", rows.join(","));
        let limits = Limits {
            max_table_rows: 3,
            max_table_columns: 2,
            ..Limits::default()
        };
        let e = run_with(json.as_bytes(), "json", &limits).unwrap();
        assert_eq!(
            e.markdown,
            "| a | b |\n|---|---|\n| 0 | 2 |\n| 1 | 2 |\n| 2 | 2 |"
        );
        assert_eq!(e.warnings.len(), 2);
    }

    #[test]
    fn json_lines_with_bad_lines() {
        let jsonl = "{\"q\": \"first\"}\n\nnot json\n{\"q\": \"second\"}\n";
        let e = run(jsonl.as_bytes(), "jsonl").unwrap();
        assert_eq!(e.markdown, "- q: first\n\n- q: second");
        assert_eq!(e.warnings.len(), 1);
        assert!(e.warnings[0].starts_with("line 3:"), "{:?}", e.warnings);
        let err = run(b"nope\n{bad\n", "ndjson").unwrap_err();
        assert_eq!(err.code, "malformed_document");
        assert!(err.detail.contains("line 1"), "{}", err.detail);
        let e = run(b"{\"a\":1}\n{\"a\":2}\n", "json").unwrap();
        assert_eq!(e.markdown, "- a: 1\n\n- a: 2");
    }

    #[test]
    fn malformed_and_deep() {
        let err = run(b"{\"a\": [1, 2,}", "json").unwrap_err();
        assert_eq!(err.code, "malformed_document");
        assert!(err.detail.contains("line 1 column"), "{}", err.detail);
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(
            run(deep.as_bytes(), "json").unwrap_err().code,
            "document_too_complex"
        );
        let deep_obj = "{\"a\":".repeat(5000) + "1" + &"}".repeat(5000);
        assert_eq!(
            run(deep_obj.as_bytes(), "json").unwrap_err().code,
            "document_too_complex"
        );
        let limits = Limits {
            max_nesting_depth: 3,
            ..Limits::default()
        };
        let err = run_with(br#"{"a":{"b":{"c":{"d":{"e":1}}}}}"#, "json", &limits).unwrap_err();
        assert_eq!(err.code, "document_too_complex");
        assert_eq!(
            run(b"\x00\x01\x02\x03binary", "json").unwrap_err().code,
            "unsupported_file_type"
        );
    }

    #[test]
    fn utf16_json() {
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend(
            "{\"naïve\": \"café\"}"
                .encode_utf16()
                .flat_map(|u| u.to_le_bytes()),
        );
        assert_eq!(run(&bytes, "json").unwrap().markdown, "- naïve: café");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1024), ext in prop_oneof!["json", "jsonl"]) {
            let _ = run(&bytes, &ext);
        }

        #[test]
        fn mutated_sample_never_panics(cut in 0usize..600, flips in proptest::collection::vec((0usize..600, any::<u8>()), 0..6)) {
            let mut bytes = SAMPLE.as_bytes().to_vec();
            crate::testing::mutate(&mut bytes, &flips, cut);
            let _ = run(&bytes, "json");
            let _ = run(&bytes, "jsonl");
        }
    }
}
