//! Reading the repository for the house-rule tests in `tests/`: where the workspace is, its
//! crates, its files. The rules themselves are the tests; nothing here builds or runs Shelf, so
//! `cargo test -p shelf-tidy` answers in seconds.

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// A file of the repository as text, by its path relative to the root.
pub fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The workspace's member crates (their directories), as the root manifest lists them.
pub fn members() -> Vec<String> {
    let manifest = read("Cargo.toml");
    let list = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("the root manifest lists its members");
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// Every file below `dir` whose extension is `extension`, skipping build output and hidden
/// directories, in a stable order.
pub fn files_with(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(dir, extension, &mut out);
    out.sort();
    out
}

fn collect(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                collect(&path, extension, out);
            }
        } else if path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
}

/// Every Rust file below `dir`.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    files_with(dir, "rs")
}

/// `path` relative to the root, for messages.
pub fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The `shelf-*` crates a manifest's `[dependencies]` (not dev-dependencies) names.
pub fn internal_dependencies(manifest: &str) -> Vec<String> {
    section(manifest, "[dependencies]")
        .lines()
        .filter_map(|line| {
            let name = line.trim_start().split(['.', ' ', '=']).next()?;
            name.starts_with("shelf-").then(|| name.to_string())
        })
        .collect()
}

/// Whether a manifest's `[dependencies]` names the crate `name`.
pub fn depends_on(manifest: &str, name: &str) -> bool {
    section(manifest, "[dependencies]").lines().any(|l| {
        let l = l.trim_start();
        l.starts_with(&format!("{name} "))
            || l.starts_with(&format!("{name}."))
            || l.starts_with(&format!("{name}="))
    })
}

fn section<'a>(manifest: &'a str, header: &str) -> &'a str {
    manifest
        .split(header)
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .unwrap_or("")
}
