//! The house rules: CI runs README's test command, dependencies point one way (every crate's
//! `shelf-*` edges are listed here), no crate re-exports another whole, every module says
//! what it is for, every link in the docs resolves inside the repository, and no test reads from an
//! absolute path outside it.

use shelf_tidy::{
    depends_on, files_with, internal_dependencies, members, read, root, rust_files, shown,
};

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

/// Each crate and the `shelf-*` crates it may depend on: the map of ARCHITECTURE.md. The
/// storage layer (`db`) and the parsers (`extractors`) are at the bottom; `documents` and
/// `engine` are siblings that never see each other; `stages` plugs documents into the engine;
/// `app` is the application layer; `server` and `cli` are its edges.
const ALLOWED: &[(&str, &[&str])] = &[
    ("tidy", &[]),
    ("db", &[]),
    ("migrations", &[]),
    ("extractors", &[]),
    ("embed", &[]),
    ("ocr", &["shelf-extractors"]),
    ("engine", &["shelf-db"]),
    (
        "documents",
        &["shelf-db", "shelf-extractors", "shelf-migrations"],
    ),
    (
        "stages",
        &[
            "shelf-db",
            "shelf-engine",
            "shelf-documents",
            "shelf-extractors",
            "shelf-ocr",
        ],
    ),
    (
        "app",
        &[
            "shelf-db",
            "shelf-engine",
            "shelf-documents",
            "shelf-stages",
            "shelf-migrations",
            "shelf-embed",
        ],
    ),
    (
        "server",
        &[
            "shelf-app",
            "shelf-db",
            "shelf-engine",
            "shelf-documents",
            "shelf-migrations",
        ],
    ),
    (
        "cli",
        &[
            "shelf-app",
            "shelf-server",
            "shelf-db",
            "shelf-engine",
            "shelf-documents",
        ],
    ),
];

/// Outside crates that belong to one layer only: HTTP serving to `server`, argument parsing
/// to `cli`, an HTTP client to the stages' providers, the database driver to what keeps rows.
const FOREIGN: &[(&str, &[&str])] = &[
    ("db", &["axum", "clap", "reqwest"]),
    ("engine", &["axum", "clap", "reqwest"]),
    ("documents", &["axum", "clap", "reqwest"]),
    ("stages", &["axum", "clap"]),
    ("app", &["axum", "clap"]),
    ("server", &["clap"]),
    (
        "extractors",
        &["sea-orm", "tokio", "axum", "clap", "reqwest"],
    ),
    ("ocr", &["sea-orm", "axum", "clap", "reqwest"]),
    ("migrations", &["axum", "clap", "reqwest"]),
    ("embed", &["sea-orm", "tokio", "axum", "clap", "reqwest"]),
];

#[test]
fn dependencies_point_one_way() {
    let members = members();
    let mut wrong = Vec::new();
    for member in &members {
        let Some((_, allowed)) = ALLOWED.iter().find(|(k, _)| k == member) else {
            wrong.push(format!(
                "{member}: not in ALLOWED; add its edges to this test and to ARCHITECTURE.md"
            ));
            continue;
        };
        let manifest = read(&format!("{member}/Cargo.toml"));
        for dependency in internal_dependencies(&manifest) {
            if !allowed.contains(&dependency.as_str()) {
                wrong.push(format!("{member} must not depend on {dependency}"));
            }
        }
        for (krate, foreign) in FOREIGN {
            if krate == member {
                for name in *foreign {
                    if depends_on(&manifest, name) {
                        wrong.push(format!("{member} must not depend on {name}"));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn no_crate_re_exports_another() {
    // A crate re-exported whole (`pub use shelf_engine as engine;`, `pub use shelf_db::*;`)
    // hides an edge: the crate above reaches the one below without saying so in its manifest.
    // Re-exporting one item a crate's own signatures use (`pub use shelf_ocr::OcrSettings;`)
    // is part of that crate's API and stays allowed.
    let mut found = Vec::new();
    for member in members() {
        for file in rust_files(&root().join(&member).join("src")) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for (number, line) in text.lines().enumerate() {
                let line = line.trim();
                let Some(path) = line
                    .strip_prefix("pub use ")
                    .or_else(|| line.strip_prefix("pub extern crate "))
                else {
                    continue;
                };
                let path = path.trim_end_matches(';').trim();
                let whole = !path.contains("::") || path.ends_with("::*");
                if path.starts_with("shelf_") && whole {
                    found.push(format!("{}:{}: {line}", shown(&file), number + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "crates re-exported whole: {found:#?}");
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
    let mut docs = files_with(&root, "md");
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
                broken.push(format!("{}: {target}", shown(doc)));
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
    let mut tests = rust_files(&root.join("tests"));
    for member in members() {
        tests.extend(rust_files(&root.join(&member).join("tests")));
        tests.extend(rust_files(&root.join(&member).join("benches")));
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
        .map(|f| shown(f))
        .collect();
    assert!(
        offending.is_empty(),
        "tests reading absolute paths: {offending:?}"
    );
}

#[test]
fn every_module_says_what_it_is_for() {
    let mut files = Vec::new();
    for member in members() {
        files.extend(rust_files(&root().join(member).join("src")));
    }
    assert!(files.len() > 30);
    let missing: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|f| shown(f))
        .collect();
    assert!(
        missing.is_empty(),
        "modules without a //! line: {missing:?}"
    );
}
