//! Tidy checks that keep the repository's rules true: CI runs README's test command,
//! dependencies point one way, every module says what it is for, every link in the docs
//! resolves inside the repository, and no test reads from an absolute path outside it.

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
    (
        "ocr",
        &[
            "shelf-engine",
            "shelf-documents",
            "shelf-stages",
            "shelf-app",
            "shelf-server",
            "sea-orm",
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
    files_with(dir, "rs", out);
}

/// Every file below `dir` whose extension is `extension`, skipping build output and hidden
/// directories.
fn files_with(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                files_with(&path, extension, out);
            }
        } else if path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
}

/// The targets of the Markdown links (`[text](target)`) in `text`, outside fenced code blocks
/// (which show examples, not links of the docs).
fn link_targets(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut targets = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            if let Some(end) = rest.find(')') {
                targets.push(rest[..end].trim().to_string());
            }
        }
    }
    targets
}

#[test]
fn every_link_in_the_docs_resolves_inside_the_repository() {
    let root = root();
    let mut docs = Vec::new();
    files_with(&root, "md", &mut docs);
    // The corpus holds documents and their expected extractions, whose links are data.
    let corpus = root.join("tests").join("corpus");
    docs.retain(|doc| !doc.starts_with(&corpus));
    assert!(docs.len() > 10, "{} Markdown files", docs.len());
    let mut broken = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap_or_else(|e| panic!("{doc:?}: {e}"));
        for target in link_targets(&text) {
            let path = target.split('#').next().unwrap_or("");
            // Web addresses, in-page anchors and mail are not files of the repository.
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            let resolved = doc.parent().unwrap_or(&root).join(path);
            let inside = resolved
                .canonicalize()
                .is_ok_and(|p| p.starts_with(root.canonicalize().expect("root")));
            if !inside {
                broken.push(format!("{}: {target}", doc.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links that resolve to nothing in the repository: {broken:#?}"
    );
}

#[test]
fn no_test_reads_an_absolute_path_outside_the_repository() {
    let root = root();
    let mut tests = Vec::new();
    for dir in [
        "tests",
        "engine/tests",
        "documents/tests",
        "stages/tests",
        "ocr/tests",
        "extractors/tests",
        "server/tests",
        "app/tests",
        "migrations/tests",
    ] {
        rust_files(&root.join(dir), &mut tests);
    }
    assert!(tests.len() > 20, "{} test files", tests.len());
    let offending: Vec<String> = tests
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            // Data comes from the repository (CARGO_MANIFEST_DIR) or `../shared`, never from
            // where one machine happens to keep it; scratch files go in temporary directories.
            // (The needles are put together here so this file does not match itself.)
            ["work", "home", "tmp"]
                .iter()
                .any(|dir| text.contains(&format!("\"/{dir}/")))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        offending.is_empty(),
        "tests reading absolute paths: {offending:?}"
    );
}

#[test]
fn every_module_says_what_it_is_for() {
    let mut files = Vec::new();
    for krate in [
        "engine",
        "migrations",
        "extractors",
        "ocr",
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
