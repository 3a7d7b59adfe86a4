//! Finding pipeline files: an operator's `SHELF_PIPELINES_DIR/<name>.yaml` first, then the
//! pipelines built into the binary (`pipelines/*.yaml` of the source tree).

use std::path::{Path, PathBuf};

use shelf_engine::{PipelineError, PipelineSource};

/// Pipelines shipped inside the binary.
pub const BUILTIN: &[(&str, &str)] = &[("default", include_str!("../../pipelines/default.yaml"))];

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub fn find(name: &str, dir: Option<&Path>) -> Result<PipelineSource, PipelineError> {
    let mut searched = Vec::new();
    if valid_name(name) {
        if let Some(dir) = dir {
            for ext in ["yaml", "yml"] {
                let path = dir.join(format!("{name}.{ext}"));
                searched.push(path.display().to_string());
                if path.is_file() {
                    return read_file(&path, name);
                }
            }
        }
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name) {
            return Ok(PipelineSource {
                name: name.to_string(),
                file: format!("builtin:{name}"),
                text: text.to_string(),
            });
        }
    }
    searched.push("builtin pipelines".into());
    Err(PipelineError::NotFound {
        name: name.to_string(),
        searched: searched.join(", "),
    })
}

pub fn read_file(path: &Path, name: &str) -> Result<PipelineSource, PipelineError> {
    let file = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| PipelineError::Unreadable {
        file: file.clone(),
        message: e.to_string(),
    })?;
    // Pipelines are small; a huge file is a mistake, not a pipeline.
    if meta.len() > 1024 * 1024 {
        return Err(PipelineError::Unreadable {
            file,
            message: "larger than 1 MiB".into(),
        });
    }
    let text = std::fs::read_to_string(path).map_err(|e| PipelineError::Unreadable {
        file: file.clone(),
        message: e.to_string(),
    })?;
    Ok(PipelineSource {
        name: name.to_string(),
        file,
        text,
    })
}

/// Names of every pipeline available: the operator's directory and the built-in ones.
pub fn names(dir: Option<&Path>) -> Vec<String> {
    let mut names: Vec<String> = BUILTIN.iter().map(|(n, _)| n.to_string()).collect();
    if let Some(dir) = dir
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        for entry in entries.flatten() {
            let path: PathBuf = entry.path();
            let ext = path.extension().and_then(|e| e.to_str());
            if matches!(ext, Some("yaml" | "yml"))
                && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
                && valid_name(stem)
            {
                names.push(stem.to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}
