//! Compiles a pipeline file into a checked DAG: every problem an operator can make (unknown
//! stage kind, unknown dependency, cycle, bad `when`, bad options, bad retry, timeout or
//! `on_failure`) is refused here with a position, before any run uses the pipeline.

use std::any::Any;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use petgraph::algo::{tarjan_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};
use sha2::{Digest, Sha256};

use super::duration::parse_duration;
use super::locate::Positions;
use super::spec::{PipelineFile, StageSpec};
use super::{Diagnostic, PipelineError};
use crate::registry::Registry;

/// The text of a pipeline and where it came from (a path, or `builtin:NAME`).
#[derive(Debug, Clone)]
pub struct PipelineSource {
    pub name: String,
    pub file: String,
    pub text: String,
}

/// `when: stage.flag`: the stage runs only if `stage` succeeded and its output set `flag` true.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhenFlag {
    pub stage: String,
    pub flag: String,
}

impl fmt::Display for WhenFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.stage, self.flag)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first included; 1 means no retry.
    pub attempts: u32,
    pub backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 1,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
        }
    }
}

impl RetryPolicy {
    /// Exponential backoff after the `failures`-th failure, with jitter in [50 %, 100 %] so
    /// runs that failed together do not come back together.
    pub fn delay_after(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(30);
        let base = self
            .backoff
            .saturating_mul(1u32 << exponent)
            .min(self.max_backoff);
        base.mul_f64(0.5 + fastrand::f64() * 0.5)
    }
}

/// What a stage's failure for good (a fatal error, or its last attempt) does to its run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// The run fails and running siblings are stopped.
    #[default]
    Fail,
    /// The stage ends `failed`, and the run goes on as if it had been skipped: its dependents
    /// run where their inputs exist, and the run can still succeed (with a warning).
    Continue,
}

impl OnFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Fail => "fail",
            OnFailure::Continue => "continue",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [OnFailure::Fail, OnFailure::Continue]
            .into_iter()
            .find(|p| p.as_str() == text)
    }
}

#[derive(Clone)]
pub struct CompiledStage {
    pub name: String,
    pub kind: String,
    pub needs: Vec<String>,
    /// Every stage upstream of this one, nearest first: where a stage looks up the fields its
    /// inputs carry.
    pub upstream: Vec<String>,
    pub when: Option<WhenFlag>,
    pub retry: RetryPolicy,
    pub timeout: Option<Duration>,
    pub on_failure: OnFailure,
    pub options: Arc<dyn Any + Send + Sync>,
}

impl fmt::Debug for CompiledStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledStage")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("needs", &self.needs)
            .field("when", &self.when)
            .field("retry", &self.retry)
            .field("timeout", &self.timeout)
            .field("on_failure", &self.on_failure)
            .finish_non_exhaustive()
    }
}

/// A pipeline that passed every check. Stages are in a topological order (file order among
/// independent stages).
#[derive(Debug, Clone)]
pub struct CompiledPipeline {
    pub name: String,
    pub file: String,
    pub description: String,
    pub source: String,
    pub sha256: String,
    pub stages: Vec<CompiledStage>,
}

impl CompiledPipeline {
    pub fn stage(&self, name: &str) -> Option<&CompiledStage> {
        self.stages.iter().find(|s| s.name == name)
    }
}

fn is_valid_stage_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Removes the " at line L column C" suffix that the YAML parser appends, since every
/// diagnostic carries its own position.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

pub(crate) fn compile(
    source: &PipelineSource,
    registry: &Registry,
) -> Result<CompiledPipeline, PipelineError> {
    let invalid = |diagnostics: Vec<Diagnostic>| PipelineError::Invalid {
        file: source.file.clone(),
        diagnostics,
    };
    let file: PipelineFile = yaml_serde::from_str(&source.text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((1, 1));
        invalid(vec![Diagnostic {
            line,
            column,
            message: strip_location(&e.to_string()),
        }])
    })?;
    let positions = Positions::of(&source.text);
    let mut problems: Vec<Diagnostic> = Vec::new();
    let mut report = |(line, column): (usize, usize), message: String| {
        problems.push(Diagnostic {
            line,
            column,
            message,
        })
    };

    for (path, key, at) in positions.duplicate_keys() {
        report(
            at,
            format!(
                "duplicate key `{key}` in {}",
                if path.is_empty() { "the file" } else { path }
            ),
        );
    }
    if file.version != 1 {
        report(
            positions.value(&["version"]),
            format!(
                "unsupported pipeline version {}; this shelf reads version 1",
                file.version
            ),
        );
    }
    if file.stages.is_empty() {
        report(
            positions.value(&["stages"]),
            "a pipeline needs at least one stage".into(),
        );
    }

    let mut graph: DiGraph<String, ()> = DiGraph::new();
    let nodes: HashMap<&str, NodeIndex> = file
        .stages
        .keys()
        .map(|name| (name.as_str(), graph.add_node(name.clone())))
        .collect();
    let mut compiled: HashMap<String, CompiledStage> = HashMap::new();

    for (name, spec) in &file.stages {
        fn at<'a>(name: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
            let mut path = vec!["stages", name];
            path.extend_from_slice(rest);
            path
        }
        if !is_valid_stage_name(name) {
            report(
                positions.key(&at(name, &[])),
                format!(
                    "stage name `{name}` must be 1-64 characters of letters, digits, `_` or `-`"
                ),
            );
        }
        let mut seen = BTreeSet::new();
        for (i, need) in spec.needs.iter().enumerate() {
            let index = i.to_string();
            let pos = positions.value(&at(name, &["needs", &index]));
            if need == name {
                report(pos, format!("stage `{name}` cannot need itself"));
            } else if !seen.insert(need.as_str()) {
                report(pos, format!("stage `{name}` lists `{need}` twice in needs"));
            } else if let Some(&from) = nodes.get(need.as_str()) {
                graph.add_edge(from, nodes[name.as_str()], ());
            } else {
                report(
                    pos,
                    format!("stage `{name}` needs `{need}`, which is not a stage of this pipeline"),
                );
            }
        }
        match compile_stage(name, spec, registry) {
            Ok(stage) => {
                compiled.insert(name.clone(), stage);
            }
            Err(errors) => {
                for (field, message) in errors {
                    let pos = match field {
                        Field::Uses => positions.value(&at(name, &["uses"])),
                        Field::When => positions.value(&at(name, &["when"])),
                        Field::Retry(sub) => positions.value(&at(name, &["retry", sub])),
                        Field::Timeout => positions.value(&at(name, &["timeout"])),
                        Field::OnFailure => positions.value(&at(name, &["on_failure"])),
                        Field::Option(Some(key)) => positions.key(&at(name, &["with", &key])),
                        Field::Option(None) => positions.value(&at(name, &["with"])),
                    };
                    report(pos, message);
                }
            }
        }
    }

    // Cycles: name the path so the operator sees which `needs` to break.
    for component in tarjan_scc(&graph) {
        let has_self_loop = component.len() == 1 && graph.contains_edge(component[0], component[0]);
        if component.len() > 1 || has_self_loop {
            let path = cycle_path(&graph, &component);
            let first = &graph[path[0]];
            let names: Vec<&str> = path.iter().map(|n| graph[*n].as_str()).collect();
            report(
                positions.key(&["stages", first]),
                format!("cycle in needs: {} -> {}", names.join(" -> "), first),
            );
        }
    }

    // `when` must name a flag of a stage that is upstream, or its output would not exist yet.
    let needs: HashMap<&str, &Vec<String>> = file
        .stages
        .iter()
        .map(|(name, spec)| (name.as_str(), &spec.needs))
        .collect();
    let ancestors = |name: &str| -> Vec<String> { upstream_of(&needs, name) };
    for (name, spec) in &file.stages {
        if let (Some(stage), Some(when)) = (compiled.get(name), &spec.when)
            && let Some(flag) = &stage.when
            && !ancestors(name).contains(&flag.stage)
        {
            report(
                positions.value(&["stages", name, "when"]),
                format!("`when: {when}` must name a stage upstream of `{name}` (list it in needs)"),
            );
        }
    }

    if !problems.is_empty() {
        problems.sort_by_key(|d| (d.line, d.column));
        return Err(invalid(problems));
    }

    let order = toposort(&graph, None).map_err(|cycle| {
        invalid(vec![Diagnostic {
            line: 1,
            column: 1,
            message: format!("cycle through `{}`", graph[cycle.node_id()]),
        }])
    })?;
    let file_order: HashMap<&str, usize> = file
        .stages
        .keys()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut stages = Vec::with_capacity(order.len());
    for node in stable_topological_order(&graph, &order, &file_order) {
        let name = graph[node].clone();
        let Some(mut stage) = compiled.remove(&name) else {
            continue;
        };
        stage.needs = file.stages[&name].needs.clone();
        stage.upstream = upstream_of(&needs, &name);
        stages.push(stage);
    }

    let sha256 = hex::encode(Sha256::digest(source.text.as_bytes()));
    Ok(CompiledPipeline {
        name: source.name.clone(),
        file: source.file.clone(),
        description: file.description,
        source: source.text.clone(),
        sha256,
        stages,
    })
}

enum Field {
    Uses,
    When,
    Retry(&'static str),
    Timeout,
    OnFailure,
    Option(Option<String>),
}

fn compile_stage(
    name: &str,
    spec: &StageSpec,
    registry: &Registry,
) -> Result<CompiledStage, Vec<(Field, String)>> {
    let mut errors = Vec::new();
    let options = match registry.get(&spec.uses) {
        None => {
            errors.push((
                Field::Uses,
                format!(
                    "unknown stage kind `{}`; known kinds: {}",
                    spec.uses,
                    registry.kinds().join(", ")
                ),
            ));
            None
        }
        Some(kind) => {
            let value = spec
                .options
                .clone()
                .unwrap_or(yaml_serde::Value::Mapping(Default::default()));
            match kind.parse_options(value) {
                Ok(options) => Some(options),
                Err(message) => {
                    let key = unknown_field(&message);
                    errors.push((
                        Field::Option(key),
                        format!("bad option for stage `{name}` ({}): {message}", spec.uses),
                    ));
                    None
                }
            }
        }
    };
    let when = match &spec.when {
        None => None,
        Some(text) => match text.split_once('.') {
            Some((stage, flag))
                if is_valid_stage_name(stage) && !flag.is_empty() && !flag.contains('.') =>
            {
                Some(WhenFlag {
                    stage: stage.to_string(),
                    flag: flag.to_string(),
                })
            }
            _ => {
                errors.push((
                    Field::When,
                    format!(
                        "`when: {text}` must have the form stage.flag (e.g. extract.needs_ocr)"
                    ),
                ));
                None
            }
        },
    };
    let mut retry = RetryPolicy::default();
    if let Some(spec_retry) = &spec.retry {
        if !(1..=100).contains(&spec_retry.attempts) {
            errors.push((
                Field::Retry("attempts"),
                "retry.attempts must be between 1 and 100".into(),
            ));
        }
        retry.attempts = spec_retry.attempts;
        for (sub, text, slot) in [
            ("backoff", &spec_retry.backoff, &mut retry.backoff),
            (
                "max_backoff",
                &spec_retry.max_backoff,
                &mut retry.max_backoff,
            ),
        ] {
            if let Some(text) = text {
                match parse_duration(text) {
                    Ok(d) => *slot = d,
                    Err(e) => errors.push((Field::Retry(sub), format!("retry.{sub}: {e}"))),
                }
            }
        }
        if retry.max_backoff < retry.backoff {
            retry.max_backoff = retry.backoff;
        }
    }
    let timeout = match &spec.timeout {
        None => None,
        Some(text) => match parse_duration(text) {
            Ok(d) if d > Duration::ZERO => Some(d),
            Ok(_) => {
                errors.push((Field::Timeout, "timeout must be greater than zero".into()));
                None
            }
            Err(e) => {
                errors.push((Field::Timeout, format!("timeout: {e}")));
                None
            }
        },
    };
    let on_failure = match spec.on_failure.as_deref() {
        None => OnFailure::default(),
        Some(text) => OnFailure::parse(text).unwrap_or_else(|| {
            errors.push((
                Field::OnFailure,
                format!("`on_failure: {text}` must be `fail` or `continue`"),
            ));
            OnFailure::default()
        }),
    };
    match (errors.is_empty(), options) {
        (true, Some(options)) => Ok(CompiledStage {
            name: name.to_string(),
            kind: spec.uses.clone(),
            needs: Vec::new(),
            upstream: Vec::new(),
            when,
            retry,
            timeout,
            on_failure,
            options,
        }),
        _ => Err(errors),
    }
}

/// serde reports unknown fields as "unknown field `x`, expected ..."; point at that key.
fn unknown_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    Some(rest[..rest.find('`')?].to_string())
}

/// Every stage upstream of `name`, nearest first; among stages at the same distance, in the
/// order the `needs` lists name them.
fn upstream_of(needs: &HashMap<&str, &Vec<String>>, name: &str) -> Vec<String> {
    let mut seen = BTreeSet::from([name.to_string()]);
    let mut order = Vec::new();
    let mut queue = VecDeque::from([name.to_string()]);
    while let Some(current) = queue.pop_front() {
        for parent in needs.get(current.as_str()).copied().into_iter().flatten() {
            if needs.contains_key(parent.as_str()) && seen.insert(parent.clone()) {
                order.push(parent.clone());
                queue.push_back(parent.clone());
            }
        }
    }
    order
}

/// A topological order that keeps file order among stages that are free to go in any order,
/// so the listing an operator sees matches the file they wrote.
fn stable_topological_order(
    graph: &DiGraph<String, ()>,
    order: &[NodeIndex],
    file_order: &HashMap<&str, usize>,
) -> Vec<NodeIndex> {
    let mut indegree: HashMap<NodeIndex, usize> = order
        .iter()
        .map(|n| {
            (
                *n,
                graph
                    .neighbors_directed(*n, petgraph::Direction::Incoming)
                    .count(),
            )
        })
        .collect();
    let mut result = Vec::with_capacity(order.len());
    let rank = |n: &NodeIndex| file_order.get(graph[*n].as_str()).copied().unwrap_or(0);
    let mut ready: Vec<NodeIndex> = order.iter().copied().filter(|n| indegree[n] == 0).collect();
    while !ready.is_empty() {
        ready.sort_by_key(|n| std::cmp::Reverse(rank(n)));
        let Some(next) = ready.pop() else { break };
        result.push(next);
        for child in graph.neighbors_directed(next, petgraph::Direction::Outgoing) {
            if let Some(d) = indegree.get_mut(&child) {
                *d -= 1;
                if *d == 0 {
                    ready.push(child);
                }
            }
        }
    }
    result
}

/// The shortest cycle through the component's first node, as a path of nodes (breadth-first,
/// so the operator sees the smallest loop to break).
fn cycle_path(graph: &DiGraph<String, ()>, component: &[NodeIndex]) -> Vec<NodeIndex> {
    let members: BTreeSet<NodeIndex> = component.iter().copied().collect();
    let Some(&start) = members.iter().next() else {
        return Vec::new();
    };
    let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(current) = queue.pop_front() {
        let mut next_nodes: Vec<NodeIndex> = graph
            .neighbors_directed(current, petgraph::Direction::Outgoing)
            .filter(|n| members.contains(n))
            .collect();
        next_nodes.sort();
        for next in next_nodes {
            if next == start {
                let mut path = vec![current];
                let mut at = current;
                while let Some(&p) = parent.get(&at) {
                    path.push(p);
                    at = p;
                }
                if path.last() != Some(&start) {
                    path.push(start);
                }
                path.reverse();
                path.dedup();
                return path;
            }
            if next != start && !parent.contains_key(&next) {
                parent.insert(next, current);
                queue.push_back(next);
            }
        }
    }
    vec![start]
}
