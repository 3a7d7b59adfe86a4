//! Pipeline graphs for the Pipelines page: a compiled pipeline's stage DAG drawn as an inline,
//! accessible SVG (layered top to bottom by dependency depth), rendered on the server so the
//! page needs no script and no network.

use std::collections::HashMap;
use std::fmt::Write;

use maud::{Markup, html};
use shelf_engine::CompiledPipeline;
use shelf_engine::pipeline::{CompiledStage, OnFailure};

/// Node box size and spacing, in viewBox units. Top to bottom reads best on a 360 px phone:
/// the default pipeline is six layers deep but at most two wide, so the drawing stays about
/// as wide as the screen instead of shrinking to unreadable text.
const NODE_W: i64 = 150;
const NODE_H: i64 = 42;
/// Extra height of every node when the pipeline has a conditional stage (room for its `when`).
const WHEN_H: i64 = 14;
const GAP_X: i64 = 20;
const GAP_Y: i64 = 34;
const MARGIN: i64 = 8;
/// Characters that fit in a node at the stylesheet's font sizes; longer text is cut with an
/// ellipsis and the full text is in the node's `<title>`.
const MAX_LABEL: usize = 18;
const MAX_SMALL: usize = 22;

/// Where one stage is drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placed {
    /// Index into `pipeline.stages`.
    stage: usize,
    layer: usize,
    x: i64,
    y: i64,
}

#[derive(Debug)]
struct Layout {
    nodes: Vec<Placed>,
    /// (from, to) as indices into `pipeline.stages`: `to` needs `from`.
    edges: Vec<(usize, usize)>,
    node_h: i64,
    width: i64,
    height: i64,
}

/// Layer of every stage: 0 for a stage without needs, else 1 + the deepest of its needs. The
/// engine only hands over checked DAGs, but this must not trust that: the relaxation runs at
/// most once per stage, and a stage whose needs never resolve (unknown name, cycle) is put in
/// layer 0 instead of looping or panicking.
fn layers(stages: &[CompiledStage]) -> Vec<usize> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, stage) in stages.iter().enumerate() {
        index.entry(stage.name.as_str()).or_insert(i);
    }
    let mut depth: Vec<Option<usize>> = vec![None; stages.len()];
    for _ in 0..=stages.len() {
        let mut progressed = false;
        for (i, stage) in stages.iter().enumerate() {
            if depth[i].is_some() {
                continue;
            }
            let mut deepest: Option<usize> = None;
            let mut resolved = true;
            for need in &stage.needs {
                match index.get(need.as_str()).and_then(|&j| depth[j]) {
                    Some(d) => deepest = Some(deepest.map_or(d, |m| m.max(d))),
                    None => {
                        resolved = false;
                        break;
                    }
                }
            }
            if resolved {
                depth[i] = Some(deepest.map_or(0, |d| d + 1));
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    depth.into_iter().map(|d| d.unwrap_or(0)).collect()
}

fn layout(pipeline: &CompiledPipeline) -> Layout {
    let stages = &pipeline.stages;
    let layer_of = layers(stages);
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, stage) in stages.iter().enumerate() {
        index.entry(stage.name.as_str()).or_insert(i);
    }
    let mut edges = Vec::new();
    for (to, stage) in stages.iter().enumerate() {
        for need in &stage.needs {
            if let Some(&from) = index.get(need.as_str())
                && from != to
                && !edges.contains(&(from, to))
            {
                edges.push((from, to));
            }
        }
    }

    let layer_count = layer_of.iter().copied().max().map_or(0, |m| m + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layer_count];
    for (i, &layer) in layer_of.iter().enumerate() {
        rows[layer].push(i);
    }
    let widest = rows.iter().map(Vec::len).max().unwrap_or(0) as i64;
    let width = (MARGIN * 2 + widest * NODE_W + (widest - 1).max(0) * GAP_X).max(NODE_W);
    let conditional = stages.iter().any(|s| s.when.is_some());
    let node_h = NODE_H + if conditional { WHEN_H } else { 0 };

    // Order each layer by the mean x of the stages it needs (fewer crossings), file order on
    // ties, then centre the layer.
    let mut x_of: Vec<i64> = vec![0; stages.len()];
    let mut nodes = Vec::with_capacity(stages.len());
    for (layer, row) in rows.iter_mut().enumerate() {
        let key = |i: usize| -> i64 {
            let parents: Vec<i64> = edges
                .iter()
                .filter(|&&(from, to)| to == i && layer_of[from] < layer)
                .map(|&(from, _)| x_of[from])
                .collect();
            if parents.is_empty() {
                i64::MAX
            } else {
                parents.iter().sum::<i64>() / parents.len() as i64
            }
        };
        row.sort_by_key(|&i| (key(i), i));
        let n = row.len() as i64;
        let row_w = n * NODE_W + (n - 1).max(0) * GAP_X;
        let left = (width - row_w) / 2;
        let y = MARGIN + layer as i64 * (node_h + GAP_Y);
        for (k, &i) in row.iter().enumerate() {
            let x = left + k as i64 * (NODE_W + GAP_X);
            x_of[i] = x;
            nodes.push(Placed {
                stage: i,
                layer,
                x,
                y,
            });
        }
    }
    let height =
        (MARGIN * 2 + layer_count as i64 * node_h + (layer_count as i64 - 1).max(0) * GAP_Y)
            .max(node_h);
    Layout {
        nodes,
        edges,
        node_h,
        width,
        height,
    }
}

/// `text` cut to `max` characters, the last one an ellipsis when anything was cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// An id fragment unique to this pipeline, so several graphs on one page keep their own
/// arrowhead markers: the name reduced to id-safe characters plus a hash of the whole name
/// (two names that reduce alike still differ).
fn id_suffix(name: &str) -> String {
    let safe: String = name
        .chars()
        .take(40)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // FNV-1a: stable across builds and platforms, enough to tell names apart on one page.
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{safe}-{hash:08x}")
}

/// Stage names in layer order, for the accessible name.
fn reading_order(pipeline: &CompiledPipeline, layout: &Layout) -> String {
    layout
        .nodes
        .iter()
        .filter_map(|n| pipeline.stages.get(n.stage))
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(" → ")
}

/// What the picture shows, in words: every stage with its kind, needs and condition.
fn description(pipeline: &CompiledPipeline) -> String {
    let mut out = String::new();
    for stage in &pipeline.stages {
        let _ = write!(out, "{} uses {}", stage.name, stage.kind);
        if !stage.needs.is_empty() {
            let _ = write!(out, ", needs {}", stage.needs.join(", "));
        }
        if let Some(when) = &stage.when {
            let _ = write!(out, ", when {when}");
        }
        if stage.on_failure == OnFailure::Continue {
            out.push_str(", on failure continue");
        }
        out.push_str(". ");
    }
    out.trim_end().to_string()
}

/// The stage DAG of `pipeline` as an inline SVG, top to bottom. Every value is escaped by
/// maud; there are no `style` attributes (the page CSP allows stylesheets only): the classes
/// `pipeline-graph`, `node`, `node-label`, `node-kind`, `node-when`, `edge`, `arrow` and
/// `conditional` are styled by shelf.css. The SVG is drawn at its natural size and shrinks
/// with its container (`max-width: 100%` in the stylesheet).
pub fn pipeline_svg(pipeline: &CompiledPipeline) -> Markup {
    let layout = layout(pipeline);
    let suffix = id_suffix(&pipeline.name);
    let marker_id = format!("arrow-{suffix}");
    let marker_url = format!("url(#{marker_id})");
    let label = format!(
        "Pipeline {}: {}",
        pipeline.name,
        reading_order(pipeline, &layout)
    );
    let view_box = format!("0 0 {} {}", layout.width, layout.height);
    let position: HashMap<usize, &Placed> = layout.nodes.iter().map(|n| (n.stage, n)).collect();
    let node_h = layout.node_h;

    html! {
        svg xmlns="http://www.w3.org/2000/svg" class="pipeline-graph" role="img"
            aria-label=(label) viewBox=(view_box) width=(layout.width) height=(layout.height)
            preserveAspectRatio="xMidYMin meet" {
            title { (label) }
            desc { (description(pipeline)) }
            defs {
                marker id=(marker_id) class="arrow" viewBox="0 0 10 10" refX="9" refY="5"
                    markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path d="M0,0 L10,5 L0,10 z" {}
                }
            }
            g class="edges" {
                @for &(from, to) in &layout.edges {
                    @if let (Some(a), Some(b), Some(target)) =
                        (position.get(&from), position.get(&to), pipeline.stages.get(to)) {
                        @let x1 = a.x + NODE_W / 2;
                        @let y1 = a.y + node_h;
                        @let x2 = b.x + NODE_W / 2;
                        @let y2 = b.y - 2;
                        @let bend = if y2 > y1 { (y2 - y1) / 2 } else { GAP_Y };
                        @let d = format!("M{x1},{y1} C{x1},{} {x2},{} {x2},{y2}", y1 + bend, y2 - bend);
                        path class=(if target.when.is_some() { "edge conditional" } else { "edge" })
                            d=(d) marker-end=(marker_url) {}
                    }
                }
            }
            @for node in &layout.nodes {
                @if let Some(stage) = pipeline.stages.get(node.stage) {
                    @let cx = node.x + NODE_W / 2;
                    g class=(if stage.when.is_some() { "node conditional" } else { "node" })
                        data-stage=(stage.name) data-layer=(node.layer) {
                        title {
                            (stage.name) " (" (stage.kind) ")"
                            @if !stage.needs.is_empty() { ", needs " (stage.needs.join(", ")) }
                            @if let Some(when) = &stage.when { ", when " (when.to_string()) }
                            @if stage.on_failure == OnFailure::Continue { ", on failure continue" }
                        }
                        rect x=(node.x) y=(node.y) width=(NODE_W) height=(node_h) rx="6" ry="6" {}
                        text class="node-label" x=(cx) y=(node.y + 18) text-anchor="middle" {
                            (truncate(&stage.name, MAX_LABEL))
                        }
                        text class="node-kind" x=(cx) y=(node.y + 34) text-anchor="middle" {
                            (truncate(&format!("uses {}", stage.kind), MAX_SMALL))
                        }
                        @if let Some(when) = &stage.when {
                            text class="node-when" x=(cx) y=(node.y + 49) text-anchor="middle" {
                                (truncate(&format!("when {when}"), MAX_SMALL))
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use shelf_app::{Settings, Shelf};
    use shelf_engine::RetryPolicy;
    use shelf_engine::pipeline::WhenFlag;

    use super::*;

    fn stage(name: &str, kind: &str, needs: &[&str]) -> CompiledStage {
        CompiledStage {
            name: name.into(),
            kind: kind.into(),
            needs: needs.iter().map(|s| s.to_string()).collect(),
            upstream: Vec::new(),
            when: None,
            retry: RetryPolicy::default(),
            timeout: None,
            on_failure: Default::default(),
            options: Arc::new(()),
        }
    }

    fn pipeline(name: &str, stages: Vec<CompiledStage>) -> CompiledPipeline {
        CompiledPipeline {
            name: name.into(),
            file: format!("builtin:{name}"),
            description: String::new(),
            source: String::new(),
            sha256: String::new(),
            stages,
        }
    }

    /// A Shelf on a fresh data directory, to compile YAML with the real stage registry the
    /// way `shelf pipeline check` does.
    async fn shelf(dir: &tempfile::TempDir) -> Shelf {
        let mut vars: HashMap<String, String> = HashMap::new();
        vars.insert(
            "SHELF_DATA_DIR".into(),
            dir.path().join("data").display().to_string(),
        );
        vars.insert("SHELF_LLM_PROVIDER".into(), "mock".into());
        vars.insert("HOME".into(), dir.path().display().to_string());
        let settings = Settings::from_vars(&vars).expect("settings");
        Shelf::open(settings).await.expect("open shelf")
    }

    fn compile(shelf: &Shelf, dir: &tempfile::TempDir, name: &str, yaml: &str) -> CompiledPipeline {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).expect("write pipeline");
        shelf.check_pipeline_file(&path).expect("pipeline compiles")
    }

    fn layer_of(layout: &Layout, pipeline: &CompiledPipeline, name: &str) -> usize {
        layout
            .nodes
            .iter()
            .find(|n| pipeline.stages[n.stage].name == name)
            .map(|n| n.layer)
            .expect("stage placed")
    }

    fn edge_names(layout: &Layout, pipeline: &CompiledPipeline) -> Vec<(String, String)> {
        let mut edges: Vec<(String, String)> = layout
            .edges
            .iter()
            .map(|&(a, b)| {
                (
                    pipeline.stages[a].name.clone(),
                    pipeline.stages[b].name.clone(),
                )
            })
            .collect();
        edges.sort();
        edges
    }

    #[tokio::test]
    async fn compiled_yaml_linear_and_diamond_pipelines_are_layered_by_depth() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shelf = shelf(&dir).await;

        let linear = compile(
            &shelf,
            &dir,
            "linear",
            "version: 1\nstages:\n  extract: { uses: extract }\n  clean: { uses: clean, needs: [extract] }\n  index: { uses: index, needs: [clean] }\n",
        );
        let l = layout(&linear);
        assert_eq!(
            ["extract", "clean", "index"].map(|n| layer_of(&l, &linear, n)),
            [0, 1, 2]
        );
        assert_eq!(
            edge_names(&l, &linear),
            [("clean", "index"), ("extract", "clean")].map(|(a, b)| (a.to_string(), b.to_string()))
        );
        let svg = pipeline_svg(&linear).into_string();
        assert!(svg.contains(r#"aria-label="Pipeline linear: extract → clean → index""#));
        assert_eq!(svg.matches(r#"<path class="edge""#).count(), 2);
        assert_eq!(svg.matches(r#"<g class="node""#).count(), 3);

        // Two stages need one, one needs both: three layers, four edges.
        let diamond = compile(
            &shelf,
            &dir,
            "diamond",
            "version: 1\nstages:\n  clean: { uses: clean }\n  classify: { uses: classify, needs: [clean] }\n  summarize: { uses: summarize, needs: [clean] }\n  index: { uses: index, needs: [classify, summarize] }\n",
        );
        let d = layout(&diamond);
        assert_eq!(
            ["clean", "classify", "summarize", "index"].map(|n| layer_of(&d, &diamond, n)),
            [0, 1, 1, 2]
        );
        assert_eq!(
            edge_names(&d, &diamond),
            [
                ("classify", "index"),
                ("clean", "classify"),
                ("clean", "summarize"),
                ("summarize", "index"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        // The middle layer sits side by side, the others centred above and below it.
        let x = |name: &str| {
            d.nodes
                .iter()
                .find(|n| diamond.stages[n.stage].name == name)
                .map(|n| n.x)
                .expect("placed")
        };
        assert!(x("classify") < x("summarize"));
        assert_eq!(x("clean"), x("index"));
        assert_eq!(
            x("clean") + NODE_W / 2,
            (x("classify") + x("summarize") + NODE_W) / 2
        );
        let svg = pipeline_svg(&diamond).into_string();
        assert_eq!(svg.matches(r#"<path class="edge""#).count(), 4);
        assert!(svg.contains(&format!(r#"viewBox="0 0 {} {}""#, d.width, d.height)));
    }

    #[tokio::test]
    async fn every_builtin_pipeline_renders() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shelf = shelf(&dir).await;
        assert!(!shelf_app::pipelines::BUILTIN.is_empty());
        for (name, _) in shelf_app::pipelines::BUILTIN {
            let pipeline = shelf
                .load_pipeline(name)
                .expect("builtin pipeline compiles");
            let l = layout(&pipeline);
            let svg = pipeline_svg(&pipeline).into_string();
            assert_eq!(
                svg.matches(r#"<g class="node"#).count(),
                pipeline.stages.len()
            );
            let needs: usize = pipeline.stages.iter().map(|s| s.needs.len()).sum();
            assert_eq!(svg.matches(r#"<path class="edge"#).count(), needs);
            assert_eq!(l.edges.len(), needs);
            // Every edge goes down the page.
            for &(from, to) in &l.edges {
                assert!(
                    layer_of(&l, &pipeline, &pipeline.stages[from].name)
                        < layer_of(&l, &pipeline, &pipeline.stages[to].name)
                );
            }
            assert!(!svg.contains("style="));
            assert!(svg.contains(&format!("Pipeline {name}: ")));
        }
        // The default pipeline: conditional OCR and correction, a fan-out of three after clean.
        let default = shelf.load_pipeline("default").expect("default");
        let l = layout(&default);
        assert_eq!(
            [
                "extract",
                "ocr",
                "correct",
                "clean",
                "classify",
                "summarize",
                "embed",
                "index"
            ]
            .map(|n| layer_of(&l, &default, n)),
            [0, 1, 2, 3, 4, 4, 4, 5]
        );
        let svg = pipeline_svg(&default).into_string();
        assert_eq!(svg.matches(r#"<g class="node conditional""#).count(), 2);
        assert!(svg.contains("when extract.needs_ocr"));
        assert_eq!(svg.matches(r#"<path class="edge conditional""#).count(), 2);
        // The stages a run goes on without, said in the title and the description.
        assert_eq!(svg.matches(", on failure continue").count(), 2 * 3, "{svg}");
        // Wide enough for the three stages after clean side by side, no wider.
        assert_eq!(l.width, 2 * MARGIN + 3 * NODE_W + 2 * GAP_X);
    }

    #[test]
    fn names_are_escaped_and_long_names_cut_with_the_full_name_in_a_title() {
        let mut evil = stage(
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            &[],
        );
        evil.when = Some(WhenFlag {
            stage: "\"a&b".into(),
            flag: "<f>".into(),
        });
        let long = "a_very_long_stage_name_that_does_not_fit";
        let p = pipeline(
            "<b>\"x\"</b>",
            vec![evil, stage(long, "extract", &["<script>alert(1)</script>"])],
        );
        let svg = pipeline_svg(&p).into_string();
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(!svg.contains("<img"), "{svg}");
        assert!(!svg.contains("<b>"), "{svg}");
        assert!(!svg.contains("<f>"), "{svg}");
        assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(svg.contains("&quot;x&quot;"));
        // The marker id carries only id-safe characters.
        let marker = svg
            .split(r#"<marker id=""#)
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("marker id");
        assert!(marker.starts_with("arrow-_b__x___b_-"), "{marker}");
        assert!(
            marker
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert!(svg.contains(&format!("url(#{marker})")));
        // The visible label is cut, the title keeps the whole name.
        assert!(svg.contains(&format!("<title>{long} (extract)")));
        assert!(svg.contains(&format!(">{}</text>", truncate(long, MAX_LABEL))));
        assert!(truncate(long, MAX_LABEL).ends_with('…'));
        assert_eq!(truncate(long, MAX_LABEL).chars().count(), MAX_LABEL);
    }

    #[test]
    fn graphs_on_one_page_have_distinct_marker_ids() {
        let a = pipeline_svg(&pipeline("a.b", vec![stage("x", "extract", &[])])).into_string();
        let b = pipeline_svg(&pipeline("a_b", vec![stage("x", "extract", &[])])).into_string();
        let id = |svg: &str| {
            svg.split(r#"<marker id=""#)
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .map(str::to_string)
                .expect("marker")
        };
        assert_ne!(id(&a), id(&b));
    }

    #[test]
    fn cycles_unknown_needs_and_empty_pipelines_do_not_panic() {
        let cyclic = pipeline(
            "cyclic",
            vec![
                stage("a", "extract", &["c"]),
                stage("b", "clean", &["a"]),
                stage("c", "index", &["b"]),
                stage("self", "index", &["self"]),
                stage("orphan", "clean", &["missing"]),
                stage("after", "clean", &["orphan"]),
                stage("root", "extract", &[]),
                stage("child", "clean", &["root"]),
            ],
        );
        let l = layout(&cyclic);
        for name in ["a", "b", "c", "self", "orphan", "after", "root"] {
            assert_eq!(layer_of(&l, &cyclic, name), 0, "{name}");
        }
        assert_eq!(layer_of(&l, &cyclic, "child"), 1);
        // Edges between known, distinct stages are still drawn; the self-loop is not.
        assert_eq!(l.edges.len(), 5);
        let svg = pipeline_svg(&cyclic).into_string();
        assert_eq!(svg.matches(r#"<g class="node""#).count(), 8);

        // Stages listed out of order are still layered by depth.
        let reversed = pipeline(
            "reversed",
            vec![
                stage("c", "index", &["b"]),
                stage("b", "clean", &["a"]),
                stage("a", "extract", &[]),
            ],
        );
        let l = layout(&reversed);
        assert_eq!(
            ["a", "b", "c"].map(|n| layer_of(&l, &reversed, n)),
            [0, 1, 2]
        );
        assert!(
            pipeline_svg(&reversed)
                .into_string()
                .contains("Pipeline reversed: a → b → c")
        );

        let empty = pipeline_svg(&pipeline("empty", Vec::new())).into_string();
        assert!(empty.contains("viewBox="));

        // Duplicate names: the first wins as a dependency target; nothing panics.
        let dup = pipeline(
            "dup",
            vec![
                stage("a", "extract", &[]),
                stage("a", "clean", &[]),
                stage("b", "index", &["a", "a"]),
            ],
        );
        let l = layout(&dup);
        assert_eq!(l.edges, vec![(0, 2)]);
        pipeline_svg(&dup);
    }
}
