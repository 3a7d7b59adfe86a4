//! Tidy checks that keep the repository's rules true: CI runs README's test command,
//! dependencies point one way, every module says what it is for.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

#[test]
fn ci_runs_exactly_the_readme_test_command() {
    let readme = read("README.md");
    let section = readme
        .split("## Tests")
        .nth(1)
        .expect("README has a Tests section");
    let command = section
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .nth(1)
        .expect("a command in the Tests section")
        .trim();
    let ci = read(".ci/run");
    let last = ci
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('#'))
        .expect(".ci/run runs something");
    assert_eq!(last, command, ".ci/run must end with README's test command");
}

/// (crate directory, crates it must never depend on)
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "engine",
        &[
            "shelf-documents",
            "shelf-stages",
            "shelf-app",
            "shelf-server",
            "axum",
            "clap",
            "reqwest",
        ],
    ),
    (
        "documents",
        &["shelf-stages", "shelf-app", "shelf-server", "axum", "clap"],
    ),
    ("stages", &["shelf-app", "shelf-server", "axum", "clap"]),
    ("app", &["shelf-server", "axum", "clap"]),
    ("server", &["clap"]),
    (
        "extractors",
        &[
            "shelf-engine",
            "shelf-documents",
            "shelf-stages",
            "shelf-app",
            "shelf-server",
            "sea-orm",
            "tokio",
            "axum",
            "clap",
            "reqwest",
        ],
    ),
];

#[test]
fn dependencies_point_one_way() {
    for (krate, forbidden) in FORBIDDEN {
        let manifest = read(&format!("{krate}/Cargo.toml"));
        let deps = manifest.split("[dependencies]").nth(1).unwrap_or("");
        let deps = deps.split("\n[").next().unwrap_or("");
        for name in *forbidden {
            let used = deps.lines().any(|l| {
                l.trim_start().starts_with(&format!("{name} "))
                    || l.trim_start().starts_with(&format!("{name}."))
            });
            assert!(!used, "{krate} must not depend on {name}");
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_says_what_it_is_for() {
    let mut files = Vec::new();
    for krate in [
        "engine",
        "migrations",
        "extractors",
        "documents",
        "stages",
        "app",
        "server",
        "cli",
    ] {
        rust_files(&root().join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 30);
    let missing: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "modules without a //! line: {missing:?}"
    );
}
