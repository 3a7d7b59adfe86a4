//! JSON, JSON Lines (`.jsonl`, `.ndjson`), YAML (`.yaml`, `.yml`) and TOML (`.toml`): the keys
//! and values as readable Markdown.
//!
//! Objects become nested lists (`- key: value`, nested objects and arrays indented under
//! their key), arrays of scalars are joined with commas, and arrays of two or more flat
//! objects with the same keys become Markdown tables. Keys keep the file's order. JSON Lines
//! files give one block per record; a bad line is skipped with a warning naming it. Nesting
//! is bounded by serde_json's own recursion limit (128) and by `limits.max_nesting_depth`.
//!
//! YAML and TOML are parsed into the same tree and rendered the same way. YAML is read with
//! `yaml_serde` (the YAML organization's maintained fork of `serde_yaml`, already the
//! workspace's YAML crate); each document of a multi-document stream is one block, in order.
//! Tags (`!Thing value`) are dropped and the value kept. Aliases are expanded, so a
//! "billion laughs" stream is bounded twice: by `yaml_serde`'s own repetition limit and by a
//! budget on the size of the tree built ([`Budget`]), either of which answers
//! `document_too_complex`. TOML is read with the `toml` crate (its parser has a recursion
//! limit of its own); dates and times are written as the file writes them.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess,
    Visitor,
};

use crate::markdown;
use crate::{Control, ExtractError, Extraction, Input, Limits, Metadata};

/// Elements rendered between two checks of the deadline.
const CHECK_EVERY: usize = 256;

pub fn extract(
    input: Input<'_>,
    limits: &Limits,
    control: &Control,
) -> Result<Extraction, ExtractError> {
    let decoded = crate::plain::decode_without_bom(input.bytes)?;
    let text = decoded.text.as_str();
    let mut warnings = Vec::new();
    let records = match input.extension {
        "jsonl" | "ndjson" => parse_lines(text, &mut warnings, control)?,
        "yaml" | "yml" => parse_yaml(text, limits, control)?,
        "toml" => parse_toml(text, limits, control)?,
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
        // JSON cannot repeat a value by reference, so its tree is as large as the file.
        let budget = Budget::new(usize::MAX, None);
        NodeSeed { budget: &budget }.deserialize(deserializer)
    }
}

/// What building one tree may still cost, and why it stopped: a format whose values can
/// repeat others (YAML aliases) can describe a tree far larger than its file.
struct Budget<'a> {
    /// Roughly bytes: each node costs [`NODE_COST`] plus the length of its text.
    left: Cell<usize>,
    control: Option<&'a Control>,
    built: Cell<usize>,
    /// The error that stopped the build, reported instead of the parser's wrapping of it.
    stopped: RefCell<Option<ExtractError>>,
}

/// What one node of the tree costs against a [`Budget`], beyond its text.
const NODE_COST: usize = 32;

impl<'a> Budget<'a> {
    fn new(limit: usize, control: Option<&'a Control>) -> Self {
        Budget {
            left: Cell::new(limit),
            control,
            built: Cell::new(0),
            stopped: RefCell::new(None),
        }
    }

    fn spend<E: serde::de::Error>(&self, text_len: usize) -> Result<(), E> {
        let cost = NODE_COST.saturating_add(text_len);
        match self.left.get().checked_sub(cost) {
            Some(left) => self.left.set(left),
            None => {
                self.stop(ExtractError::too_complex(
                    "the document expands to a tree larger than the limit (aliases repeat too much)",
                ));
                return Err(E::custom("size budget exceeded"));
            }
        }
        let built = self.built.get().wrapping_add(1);
        self.built.set(built);
        if built.is_multiple_of(CHECK_EVERY)
            && let Some(control) = self.control
            && let Err(e) = control.check()
        {
            self.stop(e);
            return Err(E::custom("stopped"));
        }
        Ok(())
    }

    fn stop(&self, error: ExtractError) {
        self.stopped.borrow_mut().get_or_insert(error);
    }

    fn take_stop(&self) -> Option<ExtractError> {
        self.stopped.borrow_mut().take()
    }
}

#[derive(Clone, Copy)]
struct NodeSeed<'b, 'a> {
    budget: &'b Budget<'a>,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_, '_> {
    type Value = Node;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl NodeSeed<'_, '_> {
    fn scalar<E: serde::de::Error>(self, text: String) -> Result<Node, E> {
        self.budget.spend(text.len())?;
        Ok(Node::Scalar(text))
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_, '_> {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Node, E> {
        self.budget.spend(0)?;
        Ok(Node::Null)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Node, E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        self.deserialize(deserializer)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        self.deserialize(deserializer)
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Node, E> {
        self.scalar(v.to_string())
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Node, E> {
        self.scalar(v.to_string())
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Node, E> {
        self.scalar(v.to_string())
    }
    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Node, E> {
        self.scalar(v.to_string())
    }
    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Node, E> {
        self.scalar(v.to_string())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Node, E> {
        self.scalar(v.to_string())
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Node, E> {
        self.scalar(v.to_string())
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Node, E> {
        self.scalar(v)
    }
    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Node, E> {
        self.scalar(String::from_utf8_lossy(v).into_owned())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        self.budget.spend(0)?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        self.budget.spend(0)?;
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry_seed(self, self)? {
            entries.push((key.key_text(), value));
        }
        Ok(Node::Object(entries))
    }
    /// A YAML tag (`!Thing value`): the tag is dropped, the value kept.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Node, A::Error> {
        let (_tag, variant) = data.variant_seed(self)?;
        variant.newtype_variant_seed(self)
    }
}

/// YAML: every document of the stream, in order, with aliases bounded by a [`Budget`].
fn parse_yaml(text: &str, limits: &Limits, control: &Control) -> Result<Vec<Node>, ExtractError> {
    if flow_depth(text) > MAX_YAML_FLOW_DEPTH {
        return Err(ExtractError::too_complex(format!(
            "YAML flow collections ([ and {{) nest deeper than {MAX_YAML_FLOW_DEPTH} levels"
        )));
    }
    let budget = Budget::new(tree_budget(text, limits), Some(control));
    let mut records = Vec::new();
    for document in yaml_serde::Deserializer::from_str(text) {
        control.check()?;
        match (NodeSeed { budget: &budget }).deserialize(document) {
            Ok(node) => records.push(node),
            Err(e) => {
                if let Some(stopped) = budget.take_stop() {
                    return Err(stopped);
                }
                return Err(yaml_error(&e));
            }
        }
    }
    Ok(records)
}

/// Deeper flow nesting is refused before parsing. The YAML parser (libyaml's scanner) keeps
/// one "simple key" per open flow collection and walks them all at every token, so a file of
/// nothing but `{a: {a: ...` costs time quadratic in its depth (200 KB took a minute); and
/// `yaml_serde` refuses anything deeper than 128 levels anyway.
const MAX_YAML_FLOW_DEPTH: usize = 256;

/// The deepest nesting of YAML flow collections, approximately: brackets in comments and in
/// quoted strings inside flow collections do not count, and outside a flow collection a
/// bracket counts only where a value may start (after a line start, `:`, `-`, `?` or `,`), not
/// inside a word. Close enough to stop the pathological files above, and no real file nests
/// anywhere near the limit.
fn flow_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut previous = '\n';
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '#' if previous.is_whitespace() => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                previous = '\n';
                continue;
            }
            '"' | '\'' if depth > 0 => {
                let mut escaped = false;
                for inner in chars.by_ref() {
                    if c == '"' && inner == '\\' && !escaped {
                        escaped = true;
                        continue;
                    }
                    if inner == c && !escaped {
                        break;
                    }
                    escaped = false;
                }
            }
            '[' | '{' if depth > 0 || matches!(previous, '\n' | ':' | '-' | '?' | ',') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if !c.is_whitespace() || c == '\n' {
            previous = c;
        }
    }
    deepest
}

/// The most a YAML tree may cost: what the output may hold, and never less than a generous
/// multiple of the file (a file without aliases always fits).
fn tree_budget(text: &str, limits: &Limits) -> usize {
    limits
        .max_output_chars
        .max(text.len().saturating_mul(NODE_COST).saturating_add(1 << 20))
}

fn yaml_error(e: &yaml_serde::Error) -> ExtractError {
    let message = e.to_string();
    if message.contains("recursion limit") || message.contains("repetition limit") {
        return ExtractError::too_complex(format!(
            "YAML nests or repeats (aliases) too much: {message}"
        ));
    }
    ExtractError::malformed(format!("invalid YAML: {message}"))
}

/// TOML: one document, its tables and arrays in the file's order.
fn parse_toml(text: &str, limits: &Limits, control: &Control) -> Result<Vec<Node>, ExtractError> {
    let table = toml::from_str::<toml::Table>(text).map_err(|e| {
        let message = e.message().to_string();
        if message.contains("recursion limit") || message.contains("recurse") {
            return ExtractError::too_complex("TOML nests too deeply");
        }
        let at = e
            .span()
            .map(|span| {
                let before = text.get(..span.start).unwrap_or(text);
                let line = before.matches('\n').count() + 1;
                let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                format!(" at line {line}, column {column}")
            })
            .unwrap_or_default();
        ExtractError::malformed(format!("invalid TOML{at}: {message}"))
    })?;
    let mut converted = 0usize;
    let node = toml_table(table, 0, limits, control, &mut converted)?;
    Ok(vec![node])
}

fn toml_table(
    table: toml::Table,
    depth: usize,
    limits: &Limits,
    control: &Control,
    converted: &mut usize,
) -> Result<Node, ExtractError> {
    let mut entries = Vec::with_capacity(table.len());
    for (key, value) in table {
        entries.push((
            key,
            toml_value(value, depth + 1, limits, control, converted)?,
        ));
    }
    Ok(Node::Object(entries))
}

fn toml_value(
    value: toml::Value,
    depth: usize,
    limits: &Limits,
    control: &Control,
    converted: &mut usize,
) -> Result<Node, ExtractError> {
    *converted += 1;
    if converted.is_multiple_of(CHECK_EVERY) {
        control.check()?;
    }
    if depth > limits.max_nesting_depth {
        return Err(ExtractError::too_complex(format!(
            "TOML nests deeper than {} levels",
            limits.max_nesting_depth
        )));
    }
    Ok(match value {
        toml::Value::String(s) => Node::Scalar(s),
        toml::Value::Integer(i) => Node::Scalar(i.to_string()),
        toml::Value::Float(f) => Node::Scalar(f.to_string()),
        toml::Value::Boolean(b) => Node::Scalar(b.to_string()),
        toml::Value::Datetime(d) => Node::Scalar(d.to_string()),
        toml::Value::Array(items) => Node::Array(
            items
                .into_iter()
                .map(|item| toml_value(item, depth + 1, limits, control, converted))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(table) => toml_table(table, depth, limits, control, converted)?,
    })
}

impl Node {
    /// A mapping key as text: YAML keys may be numbers, `null` or even collections.
    fn key_text(&self) -> String {
        match self {
            Node::Null => "null".to_string(),
            Node::Scalar(text) => text.clone(),
            Node::Array(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(Node::key_text)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Node::Object(entries) => format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", v.key_text()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

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

    const YAML: &str = "# a comment\ntitle: Shelf  manual\nversion: 2\ndraft: false\nnote: ~\ntags: [search, ingest, 3]\nowner: &owner\n  name: Ana\n  address: {city: Lisbon}\npeople:\n  - {name: Ana, age: 30}\n  - name: Bob\n    age: 41\nreviewer: *owner\nwhen: !date 2024-05-01\n1: a number key\n? [x, y]\n: a list key\nbody: |\n  Two lines\n  of text.\n";

    #[test]
    fn yaml_renders_like_json() {
        let md = run(YAML.as_bytes(), "yaml").unwrap().markdown;
        let expected = "- title: Shelf manual\n- version: 2\n- draft: false\n- note:\n- tags: search, ingest, 3\n- owner:\n  - name: Ana\n  - address:\n    - city: Lisbon\n- people:\n\n  | name | age |\n  |---|---|\n  | Ana | 30 |\n  | Bob | 41 |\n\n- reviewer:\n  - name: Ana\n  - address:\n    - city: Lisbon\n- when: 2024-05-01\n- 1: a number key\n- [x, y]: a list key\n- body: Two lines of text.";
        assert_eq!(md, expected);
        assert_eq!(run(YAML.as_bytes(), "yml").unwrap().markdown, expected);
    }

    #[test]
    fn yaml_streams_render_each_document_in_order() {
        let stream =
            "---\nname: first\n---\n- a\n- b\n--- plain text document\n...\n---\nname: last\n";
        let md = run(stream.as_bytes(), "yaml").unwrap().markdown;
        assert_eq!(
            md,
            "- name: first\n\n- a\n- b\n\nplain text document\n\n- name: last"
        );
        assert_eq!(run(b"", "yaml").unwrap().markdown, "");
    }

    #[test]
    fn yaml_errors() {
        let err = run(b"a: [1, 2\nb: 3\n", "yaml").unwrap_err();
        assert_eq!(err.code, "malformed_document");
        assert!(err.detail.starts_with("invalid YAML"), "{}", err.detail);
        assert!(err.detail.contains("line"), "{}", err.detail);
        let err = run(b"a: *nowhere\n", "yaml").unwrap_err();
        assert_eq!(err.code, "malformed_document", "{}", err.detail);
        // A bad second document fails the stream: its text cannot be trusted to be read.
        let err = run(b"ok: 1\n---\n: : [\n", "yaml").unwrap_err();
        assert_eq!(err.code, "malformed_document", "{}", err.detail);
    }

    /// The "billion laughs" of YAML: nine levels of nine aliases is 9^9 strings.
    #[test]
    fn yaml_alias_bomb_is_bounded() {
        let mut bomb = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        for pair in names.windows(2) {
            let alias = format!("*{}", pair[0]);
            bomb.push_str(&format!(
                "{}: &{} [{}]\n",
                pair[1],
                pair[1],
                vec![alias; 9].join(",")
            ));
        }
        let err = run(bomb.as_bytes(), "yaml").unwrap_err();
        assert_eq!(err.code, "document_too_complex", "{}", err.detail);
    }

    /// Few aliases, each of a large anchored list: under yaml_serde's repetition limit (which
    /// counts alias jumps), but quadratic in size; the tree budget stops it.
    #[test]
    fn yaml_wide_alias_repetition_is_bounded() {
        let mut doc = String::from("big: &big [");
        doc.push_str(&vec!["word"; 20_000].join(","));
        doc.push_str("]\ncopies: [");
        doc.push_str(&vec!["*big"; 20_000].join(","));
        doc.push_str("]\n");
        let err = run(doc.as_bytes(), "yaml").unwrap_err();
        assert_eq!(err.code, "document_too_complex", "{}", err.detail);
        // A little repetition is fine.
        let md = run(b"base: &b {x: 1}\nother: *b\n", "yaml")
            .unwrap()
            .markdown;
        assert_eq!(md, "- base:\n  - x: 1\n- other:\n  - x: 1");
    }

    #[test]
    fn deep_yaml_and_toml_are_refused() {
        for deep in [
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
            "{a: ".repeat(50_000) + "1" + &"}".repeat(50_000),
            (0..300)
                .map(|i| format!("{}-\n", "  ".repeat(i)))
                .collect::<String>(),
        ] {
            let err = run(deep.as_bytes(), "yaml").unwrap_err();
            assert!(
                err.code == "document_too_complex" || err.code == "malformed_document",
                "{}: {}",
                err.code,
                err.detail
            );
        }
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let err = run(deep.as_bytes(), "yaml").unwrap_err();
        assert_eq!(err.code, "document_too_complex", "{}", err.detail);
        for deep in [
            format!("a = {}1{}", "[".repeat(100_000), "]".repeat(100_000)),
            format!("a = {}1{}", "{b = ".repeat(10_000), "}".repeat(10_000)),
            format!("{} = 1", vec!["k"; 5_000].join(".")),
            format!("[{}]\nv = 1", vec!["k"; 5_000].join(".")),
        ] {
            let err = run(deep.as_bytes(), "toml").unwrap_err();
            assert_eq!(err.code, "document_too_complex", "{}", err.detail);
        }
        let limits = Limits {
            max_nesting_depth: 3,
            ..Limits::default()
        };
        let err = run_with(
            b"a:\n  b:\n    c:\n      d:\n        e: 1\n",
            "yaml",
            &limits,
        )
        .unwrap_err();
        assert_eq!(err.code, "document_too_complex");
        let err = run_with(b"[a.b.c.d.e]\nf = 1\n", "toml", &limits).unwrap_err();
        assert_eq!(err.code, "document_too_complex");
    }

    #[test]
    fn yaml_flow_depth_is_counted_where_flow_starts() {
        assert_eq!(flow_depth("a: [1, [2, {b: 3}]]\n"), 3);
        assert_eq!(flow_depth("- [x]\n- {y: [z]}\n"), 2);
        assert_eq!(flow_depth("text: a[[[[b # [[[[\nq: \"[[[[\"\n"), 0);
        assert_eq!(flow_depth("a: ['[[[[', \"[[\\\"[[\"]\n"), 1);
        // Under the limit, deep flow nesting still reaches the parser's own limit quickly.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let err = run(deep.as_bytes(), "yaml").unwrap_err();
        assert_eq!(err.code, "document_too_complex", "{}", err.detail);
    }

    const TOML: &str = "# config\ntitle = \"Shelf  manual\"\nversion = 2\nratio = 0.5\nenabled = true\nreleased = 2024-05-01T10:30:00Z\ntags = [\"search\", \"ingest\"]\n\n[owner]\nname = \"Ana\"\naddress = { city = \"Lisbon\" }\n\n[[people]]\nname = \"Ana\"\nage = 30\n\n[[people]]\nname = \"Bob\"\nage = 41\n";

    #[test]
    fn toml_renders_like_json() {
        let md = run(TOML.as_bytes(), "toml").unwrap().markdown;
        let expected = "- title: Shelf manual\n- version: 2\n- ratio: 0.5\n- enabled: true\n- released: 2024-05-01T10:30:00Z\n- tags: search, ingest\n- owner:\n  - name: Ana\n  - address:\n    - city: Lisbon\n- people:\n\n  | name | age |\n  |---|---|\n  | Ana | 30 |\n  | Bob | 41 |";
        assert_eq!(md, expected);
        let err = run(b"a = 1\nb = \n", "toml").unwrap_err();
        assert_eq!(err.code, "malformed_document");
        assert!(err.detail.contains("line 2"), "{}", err.detail);
        let err = run(b"a = 1\na = 2\n", "toml").unwrap_err();
        assert_eq!(err.code, "malformed_document", "{}", err.detail);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn yaml_and_toml_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1024), ext in prop_oneof!["yaml", "toml"]) {
            let _ = run(&bytes, &ext);
        }

        #[test]
        fn mutated_yaml_and_toml_never_panic(cut in 0usize..600, flips in proptest::collection::vec((0usize..600, any::<u8>()), 0..6)) {
            for (sample, ext) in [(YAML, "yaml"), (TOML, "toml")] {
                let mut bytes = sample.as_bytes().to_vec();
                crate::testing::mutate(&mut bytes, &flips, cut);
                let _ = run(&bytes, ext);
            }
        }

        #[test]
        fn yaml_structure_never_panics(text in "[-:\\[\\]{}&*!|>'\"#?,a-c0-9 \n]{0,200}") {
            let _ = run(text.as_bytes(), "yaml");
        }
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
