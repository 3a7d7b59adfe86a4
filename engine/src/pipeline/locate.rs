//! Positions of the nodes of a YAML document, keyed by their path (`stages.clean.with`), so
//! that semantic errors found after parsing still point at a line and column.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Where a node starts. `key` is the position of the mapping key naming it, `value` the
/// position of the value itself.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Position {
    pub key: (usize, usize),
    pub value: (usize, usize),
}

#[derive(Debug, Default)]
pub(crate) struct Positions {
    map: HashMap<String, Position>,
    duplicates: Vec<(String, String, (usize, usize))>,
}

impl Positions {
    pub fn of(source: &str) -> Positions {
        let mut collector = Collector::default();
        let mut parser = Parser::new_from_str(source);
        // A document the event parser refuses was already refused by the serde parser with its
        // own location; positions are best effort on top of that.
        let _ = parser.load(&mut collector, false);
        Positions {
            map: collector.map,
            duplicates: collector.duplicates,
        }
    }

    /// Keys that appear twice in one mapping: (mapping path, key, position of the repeat). The
    /// serde parser keeps the last one silently, so they are found here.
    pub fn duplicate_keys(&self) -> impl Iterator<Item = (&str, &str, (usize, usize))> {
        self.duplicates
            .iter()
            .map(|(path, key, at)| (path.as_str(), key.as_str(), *at))
    }

    /// The position of the value at `path`, falling back to the nearest ancestor that exists.
    pub fn value(&self, path: &[&str]) -> (usize, usize) {
        self.find(path).map(|p| p.value).unwrap_or((1, 1))
    }

    /// The position of the key at `path`, falling back like [`Positions::value`].
    pub fn key(&self, path: &[&str]) -> (usize, usize) {
        self.find(path).map(|p| p.key).unwrap_or((1, 1))
    }

    fn find(&self, path: &[&str]) -> Option<Position> {
        (0..=path.len())
            .rev()
            .find_map(|n| self.map.get(&path[..n].join(".")).copied())
    }
}

enum Frame {
    Mapping {
        path: Vec<String>,
        pending_key: Option<(String, (usize, usize))>,
        keys: std::collections::HashSet<String>,
    },
    Sequence {
        path: Vec<String>,
        index: usize,
    },
}

#[derive(Default)]
struct Collector {
    stack: Vec<Frame>,
    map: HashMap<String, Position>,
    duplicates: Vec<(String, String, (usize, usize))>,
}

fn line_col(mark: Marker) -> (usize, usize) {
    // yaml-rust2 reports 1-based lines and 0-based columns; diagnostics are 1-based in both.
    (mark.line(), mark.col() + 1)
}

impl Collector {
    /// Called when a node starts; returns the node's path so containers can remember it.
    fn node(&mut self, at: (usize, usize), scalar: Option<&str>) -> Option<Vec<String>> {
        match self.stack.last_mut() {
            None => {
                self.map
                    .insert(String::new(), Position { key: at, value: at });
                Some(Vec::new())
            }
            Some(Frame::Mapping {
                path,
                pending_key,
                keys,
            }) => match pending_key.take() {
                None => {
                    let key = scalar.unwrap_or_default().to_string();
                    if !keys.insert(key.clone()) {
                        self.duplicates.push((path.join("."), key.clone(), at));
                    }
                    *pending_key = Some((key, at));
                    None
                }
                Some((key, key_at)) => {
                    let mut child = path.clone();
                    child.push(key);
                    self.map.insert(
                        child.join("."),
                        Position {
                            key: key_at,
                            value: at,
                        },
                    );
                    Some(child)
                }
            },
            Some(Frame::Sequence { path, index }) => {
                let mut child = path.clone();
                child.push(index.to_string());
                *index += 1;
                self.map
                    .insert(child.join("."), Position { key: at, value: at });
                Some(child)
            }
        }
    }
}

impl MarkedEventReceiver for Collector {
    fn on_event(&mut self, event: Event, mark: Marker) {
        let at = line_col(mark);
        match event {
            Event::Scalar(text, ..) => {
                self.node(at, Some(&text));
            }
            Event::Alias(_) => {
                self.node(at, None);
            }
            Event::MappingStart(..) => {
                let path = self.node(at, None).unwrap_or_default();
                self.stack.push(Frame::Mapping {
                    path,
                    pending_key: None,
                    keys: Default::default(),
                });
            }
            Event::SequenceStart(..) => {
                let path = self.node(at, None).unwrap_or_default();
                self.stack.push(Frame::Sequence { path, index: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_keys_and_values() {
        let src = "version: 1\nstages:\n  clean:\n    uses: clean\n    needs: [extract, ocr]\n";
        let p = Positions::of(src);
        assert_eq!(p.key(&["stages", "clean"]), (3, 3));
        assert_eq!(p.value(&["stages", "clean", "uses"]), (4, 11));
        assert_eq!(p.value(&["stages", "clean", "needs", "1"]), (5, 22));
        assert_eq!(
            p.value(&["stages", "clean", "missing"]),
            p.value(&["stages", "clean"])
        );
    }
}
