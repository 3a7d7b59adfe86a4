//! Drawings of a compiled pipeline: an indented text listing, Mermaid and Graphviz dot.

use std::fmt::Write;

use super::compile::{CompiledPipeline, OnFailure};
use super::duration::format_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphFormat {
    Text,
    Mermaid,
    Dot,
}

impl GraphFormat {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "text" => Some(Self::Text),
            "mermaid" => Some(Self::Mermaid),
            "dot" => Some(Self::Dot),
            _ => None,
        }
    }
}

impl CompiledPipeline {
    pub fn render(&self, format: GraphFormat) -> String {
        match format {
            GraphFormat::Text => self.render_text(),
            GraphFormat::Mermaid => self.render_mermaid(),
            GraphFormat::Dot => self.render_dot(),
        }
    }

    fn render_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "pipeline {} ({})", self.name, self.file);
        if !self.description.is_empty() {
            let _ = writeln!(out, "  {}", self.description);
        }
        let _ = writeln!(out, "  sha256 {}", self.sha256);
        for (i, stage) in self.stages.iter().enumerate() {
            let _ = write!(out, "{:>3}. {} (uses {})", i + 1, stage.name, stage.kind);
            if !stage.needs.is_empty() {
                let _ = write!(out, " needs [{}]", stage.needs.join(", "));
            }
            if let Some(when) = &stage.when {
                let _ = write!(out, " when {when}");
            }
            if stage.retry.attempts > 1 {
                let _ = write!(
                    out,
                    " retry {}x backoff {} max {}",
                    stage.retry.attempts,
                    format_duration(stage.retry.backoff),
                    format_duration(stage.retry.max_backoff)
                );
            }
            if let Some(t) = stage.timeout {
                let _ = write!(out, " timeout {}", format_duration(t));
            }
            if stage.on_failure != OnFailure::Fail {
                let _ = write!(out, " on_failure {}", stage.on_failure.as_str());
            }
            out.push('\n');
        }
        out
    }

    fn render_mermaid(&self) -> String {
        let mut out = String::from("flowchart TD\n");
        for stage in &self.stages {
            let _ = writeln!(out, "  {}[\"{} ({})\"]", stage.name, stage.name, stage.kind);
        }
        for stage in &self.stages {
            for need in &stage.needs {
                match &stage.when {
                    Some(when) => {
                        let _ = writeln!(out, "  {need} -.->|when {when}| {}", stage.name);
                    }
                    None => {
                        let _ = writeln!(out, "  {need} --> {}", stage.name);
                    }
                }
            }
        }
        out
    }

    fn render_dot(&self) -> String {
        let mut out = format!("digraph \"{}\" {{\n  rankdir=TB;\n", self.name);
        for stage in &self.stages {
            let _ = writeln!(
                out,
                "  \"{}\" [label=\"{}\\n({})\"];",
                stage.name, stage.name, stage.kind
            );
        }
        for stage in &self.stages {
            for need in &stage.needs {
                match &stage.when {
                    Some(when) => {
                        let _ = writeln!(
                            out,
                            "  \"{need}\" -> \"{}\" [style=dashed, label=\"when {when}\"];",
                            stage.name
                        );
                    }
                    None => {
                        let _ = writeln!(out, "  \"{need}\" -> \"{}\";", stage.name);
                    }
                }
            }
        }
        out.push_str("}\n");
        out
    }
}
