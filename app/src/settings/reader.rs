//! The shared variable reader every settings section parses through: it records which
//! `SHELF_*` names were read (the rest are flagged as likely typos) and collects every bad
//! variable instead of stopping at the first, so one start reports them all.

use std::collections::HashMap;
use std::str::FromStr;

pub(super) const BYTES: &str = "a whole number of bytes";
pub(super) const COUNT: &str = "a whole number";

pub(super) struct Reader<'a> {
    pub(super) vars: &'a HashMap<String, String>,
    pub(super) used: Vec<&'static str>,
    /// Variables that did not parse, in reading order.
    pub(super) problems: Vec<String>,
    /// Values that parsed but break a rule (a bound, a relation between two settings); they
    /// are reported after the parse problems, as they always were.
    pub(super) checks: Vec<String>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(vars: &'a HashMap<String, String>) -> Self {
        Reader {
            vars,
            used: Vec::new(),
            problems: Vec::new(),
            checks: Vec::new(),
        }
    }

    /// A variable's trimmed value; empty counts as unset.
    pub(super) fn raw(&mut self, key: &'static str) -> Option<&'a str> {
        self.used.push(key);
        self.vars
            .get(key)
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
    }

    pub(super) fn string(&mut self, key: &'static str, default: &str) -> String {
        self.raw(key).unwrap_or(default).to_string()
    }

    pub(super) fn optional(&mut self, key: &'static str) -> Option<String> {
        self.raw(key).map(str::to_string)
    }

    /// A number (`_` separators allowed), or `default` with a problem recorded.
    pub(super) fn parse<T: FromStr>(&mut self, key: &'static str, default: T, expected: &str) -> T {
        match self.raw(key) {
            None => default,
            Some(text) => match text.replace('_', "").parse() {
                Ok(v) => v,
                Err(_) => {
                    self.problems
                        .push(format!("{key}={text}: expected {expected}"));
                    default
                }
            },
        }
    }

    pub(super) fn bool(&mut self, key: &'static str, default: bool) -> bool {
        match self.raw(key).map(|s| s.to_ascii_lowercase()) {
            None => default,
            Some(v) => match v.as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => {
                    self.problems
                        .push(format!("{key}={v}: expected true or false"));
                    default
                }
            },
        }
    }

    /// One of `options` by its exact name, parsed here once into its enum; anything else is
    /// a problem naming every accepted value (in the order given).
    pub(super) fn choice<T: Copy>(
        &mut self,
        key: &'static str,
        default: T,
        options: &[(&'static str, T)],
    ) -> T {
        let Some(value) = self.raw(key) else {
            return default;
        };
        match options.iter().find(|(name, _)| *name == value) {
            Some((_, choice)) => *choice,
            None => {
                let names: Vec<&str> = options.iter().map(|(name, _)| *name).collect();
                self.problems.push(format!(
                    "{key}={value}: expected one of {}",
                    names.join(", ")
                ));
                default
            }
        }
    }

    /// Records a broken rule when `ok` is false.
    pub(super) fn check(&mut self, ok: bool, problem: impl Into<String>) {
        if !ok {
            self.checks.push(problem.into());
        }
    }
}
