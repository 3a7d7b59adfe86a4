//! Pipeline compilation: every refusal names file, line and column.

use std::sync::Arc;

use shelf_engine::pipeline::{GraphFormat, OnFailure};
use shelf_engine::{PipelineError, PipelineSource};

use crate::common::{Probe, registry};

fn check(yaml: &str) -> Result<shelf_engine::CompiledPipeline, PipelineError> {
    registry(&Arc::new(Probe::default())).compile(&PipelineSource {
        name: "broken".into(),
        file: "pipelines/broken.yaml".into(),
        text: yaml.into(),
    })
}

fn error(yaml: &str) -> String {
    match check(yaml) {
        Ok(_) => panic!("pipeline should be refused:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn unknown_stage_kind_points_at_uses() {
    let e = error(
        "version: 1\nstages:\n  a: { uses: step }\n  b:\n    uses: frobnicate\n    needs: [a]\n",
    );
    assert!(
        e.starts_with("pipelines/broken.yaml:5:11: unknown stage kind `frobnicate`"),
        "{e}"
    );
    assert!(e.contains("known kinds: spawn, step"), "{e}");
}

#[test]
fn unknown_dependency_points_at_the_need() {
    let e =
        error("version: 1\nstages:\n  a: { uses: step }\n  b: { uses: step, needs: [a, nope] }\n");
    assert_eq!(
        e,
        "pipelines/broken.yaml:4:31: stage `b` needs `nope`, which is not a stage of this pipeline"
    );
}

#[test]
fn cycle_is_named_with_its_path() {
    let e = error(
        "version: 1\nstages:\n  a: { uses: step, needs: [c] }\n  b: { uses: step, needs: [a] }\n  c: { uses: step, needs: [b] }\n  d: { uses: step }\n",
    );
    assert_eq!(
        e,
        "pipelines/broken.yaml:3:3: cycle in needs: a -> b -> c -> a"
    );
}

#[test]
fn self_dependency_is_refused() {
    let e = error("version: 1\nstages:\n  a: { uses: step, needs: [a] }\n");
    assert!(e.contains("3:28: stage `a` cannot need itself"), "{e}");
}

#[test]
fn duplicate_stage_is_refused_by_position() {
    let e = error("version: 1\nstages:\n  a: { uses: step }\n  a: { uses: step }\n");
    assert!(e.starts_with("pipelines/broken.yaml:4:3:"), "{e}");
    assert!(e.contains("duplicate"), "{e}");
}

#[test]
fn bad_option_is_refused_at_load_with_its_key() {
    let e = error(
        "version: 1\nstages:\n  a:\n    uses: step\n    with:\n      sleep_ms: 5\n      colour: red\n",
    );
    assert!(
        e.starts_with(
            "pipelines/broken.yaml:7:7: bad option for stage `a` (step): unknown field `colour`"
        ),
        "{e}"
    );
    let e = error("version: 1\nstages:\n  a:\n    uses: step\n    with: { sleep_ms: soon }\n");
    assert!(
        e.starts_with("pipelines/broken.yaml:5:11: bad option for stage `a` (step)"),
        "{e}"
    );
}

#[test]
fn unknown_fields_and_syntax_errors_have_positions() {
    let e = error("version: 1\nstages:\n  a: { uses: step, retries: 3 }\n");
    assert!(e.starts_with("pipelines/broken.yaml:3:"), "{e}");
    assert!(e.contains("unknown field `retries`"), "{e}");
    let e = error("version: 1\nsteps: {}\n");
    assert!(e.starts_with("pipelines/broken.yaml:2:1:"), "{e}");
    let e = error("version: 1\nstages:\n  a: { uses: step\n");
    assert!(e.starts_with("pipelines/broken.yaml:"), "{e}");
    let e = error("version: 2\nstages:\n  a: { uses: step }\n");
    assert!(
        e.starts_with("pipelines/broken.yaml:1:10: unsupported pipeline version 2"),
        "{e}"
    );
}

#[test]
fn when_must_be_an_upstream_flag() {
    let e = error("version: 1\nstages:\n  a: { uses: step }\n  b: { uses: step, when: a.flag }\n");
    assert!(
        e.contains("4:26: `when: a.flag` must name a stage upstream of `b`"),
        "{e}"
    );
    let e = error(
        "version: 1\nstages:\n  a: { uses: step }\n  b: { uses: step, needs: [a], when: flag }\n",
    );
    assert!(e.contains("must have the form stage.flag"), "{e}");
}

#[test]
fn bad_retry_and_timeout_are_refused() {
    let e = error("version: 1\nstages:\n  a: { uses: step, retry: { attempts: 0 } }\n");
    assert!(
        e.contains("retry.attempts must be between 1 and 100"),
        "{e}"
    );
    let e =
        error("version: 1\nstages:\n  a: { uses: step, retry: { attempts: 3, backoff: soon } }\n");
    assert!(e.contains("retry.backoff: `soon` is not a duration"), "{e}");
    let e = error("version: 1\nstages:\n  a: { uses: step, timeout: 10 }\n");
    assert!(e.contains("3:29: timeout: `10` is not a duration"), "{e}");
}

#[test]
fn on_failure_takes_fail_or_continue_and_defaults_to_fail() {
    let e = error("version: 1\nstages:\n  a: { uses: step, on_failure: skip }\n");
    assert_eq!(
        e,
        "pipelines/broken.yaml:3:32: `on_failure: skip` must be `fail` or `continue`"
    );
    let p = check(
        "version: 1\nstages:\n  a: { uses: step }\n  b: { uses: step, needs: [a], on_failure: continue }\n  c: { uses: step, on_failure: fail }\n",
    )
    .expect("compiles");
    let policy = |name: &str| p.stage(name).map(|s| s.on_failure);
    assert_eq!(policy("a"), Some(OnFailure::Fail));
    assert_eq!(policy("b"), Some(OnFailure::Continue));
    assert_eq!(policy("c"), Some(OnFailure::Fail));
    assert!(
        p.render(GraphFormat::Text)
            .contains("b (uses step) needs [a] on_failure continue\n"),
        "{}",
        p.render(GraphFormat::Text)
    );
}

#[test]
fn several_problems_are_all_reported_in_order() {
    let e = error("version: 1\nstages:\n  a: { uses: nope }\n  b: { uses: step, needs: [zzz] }\n");
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(lines[0].contains(":3:"), "{e}");
    assert!(lines[1].contains(":4:"), "{e}");
}

#[test]
fn order_is_topological_and_keeps_file_order() {
    let p = check(
        "version: 1\nstages:\n  index: { uses: step, needs: [left, right] }\n  right: { uses: step, needs: [root] }\n  left: { uses: step, needs: [root] }\n  root: { uses: step }\n",
    )
    .expect("compiles");
    let names: Vec<&str> = p.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["root", "right", "left", "index"]);
    let index = p.stage("index").expect("index");
    assert_eq!(index.upstream, ["left", "right", "root"]);
    assert_eq!(p.sha256.len(), 64);
}

#[test]
fn graphs_render_in_every_format() {
    let p = check(
        "version: 1\nstages:\n  a: { uses: step }\n  b: { uses: step, needs: [a], when: a.go }\n",
    )
    .expect("compiles");
    let text = p.render(GraphFormat::Text);
    assert!(
        text.contains("2. b (uses step) needs [a] when a.go"),
        "{text}"
    );
    let mermaid = p.render(GraphFormat::Mermaid);
    assert!(mermaid.starts_with("flowchart TD"), "{mermaid}");
    assert!(mermaid.contains("a -.->|when a.go| b"), "{mermaid}");
    let dot = p.render(GraphFormat::Dot);
    assert!(dot.contains("\"a\" -> \"b\" [style=dashed"), "{dot}");
}

mod fuzz {
    use proptest::prelude::*;

    use super::check;

    const DEFAULT: &str = include_str!("../../../pipelines/default.yaml");

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Arbitrary text never panics the compiler; refusals always carry a position.
        #[test]
        fn arbitrary_text_is_refused_cleanly(text in "\\PC{0,400}") {
            if let Err(e) = check(&text) {
                let message = e.to_string();
                prop_assert!(message.starts_with("pipelines/broken.yaml:"), "{}", message);
            }
        }

        /// Mutations of a real pipeline (a byte replaced, a line dropped or duplicated) are
        /// either valid or refused with file:line:col, never a panic.
        #[test]
        fn mutated_pipelines_are_refused_cleanly(
            at in 0usize..2000,
            byte in proptest::sample::select(vec![b'{', b'}', b'[', b']', b':', b',', b' ', b'\n', b'-', b'x', b'#', b'"', b'&', b'*']),
            line in 0usize..20,
            op in 0u8..3,
        ) {
            let mut text = DEFAULT.replace("uses: extract", "uses: step")
                .replace("uses: ocr", "uses: step")
                .replace("uses: correct", "uses: step")
                .replace("uses: clean", "uses: step")
                .replace("uses: classify", "uses: step")
                .replace("uses: summarize", "uses: step")
                .replace("uses: index", "uses: step")
                .replace(", with: { prompt_version: cmos_v4 }", "");
            match op {
                0 => {
                    let mut bytes = text.into_bytes();
                    let i = at % bytes.len();
                    bytes[i] = byte;
                    text = String::from_utf8_lossy(&bytes).into_owned();
                }
                1 => {
                    let mut lines: Vec<&str> = text.lines().collect();
                    let i = line % lines.len();
                    lines.remove(i);
                    text = lines.join("\n");
                }
                _ => {
                    let mut lines: Vec<&str> = text.lines().collect();
                    let i = line % lines.len();
                    lines.insert(i, lines[i]);
                    text = lines.join("\n");
                }
            }
            if let Err(e) = check(&text) {
                let message = e.to_string();
                prop_assert!(message.starts_with("pipelines/broken.yaml:"), "{}", message);
                for l in message.lines() {
                    let mut parts = l.splitn(4, ':');
                    parts.next();
                    let line: usize = parts.next().unwrap_or("").parse().unwrap_or(0);
                    let col: usize = parts.next().unwrap_or("").parse().unwrap_or(0);
                    prop_assert!(line >= 1 && col >= 1, "{}", l);
                }
            }
        }
    }
}
