//! `shelf export --okf DIR` end to end: documents imported and processed by the real binary
//! (the offline `local` provider, so horse texts land under 636), the bundle streamed to
//! disk, then the tree checked: the root index's `okf_version`, an `index.md` in every
//! folder, front matter that parses, `## Related` links that resolve, refusals of a non-empty
//! DIR and of a symbolic link.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::Env;

const HORSES: &str = "# Horse care\n\nA healthy horse needs good pasture, clean hay and fresh water. \
    Horses live in herds; a horse kept alone in a stable is unhappy. A veterinarian checks \
    every horse, mare and foal twice a year.\n";
const PONIES: &str = "# Ponies: small \"horses\" # really\n\nPonies are small horses. A pony \
    needs hay, pasture and a stable; a foal stays beside the mare. Ponies and horses breed \
    the same way.\n";
const FOALS: &str = "# Horse care\n\nFoals and colts need the mare's milk. Breeding horses takes \
    patience: a mare carries her foal for eleven months, and the stallion is kept in another \
    stable with fresh hay.\n";
const MATH: &str = "# Algebra\n\nAlgebra studies equations, polynomials and the theorems of \
    mathematics; a proof shows why an equation holds for every number.\n";

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).expect("metadata");
        assert!(!meta.file_type().is_symlink(), "{}", path.display());
        if meta.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The front matter of a Markdown file, parsed.
fn front_matter(path: &Path) -> (yaml_rust2::Yaml, String) {
    let text = std::fs::read_to_string(path).expect("read");
    let fm = text
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map(|(fm, _)| fm.to_string())
        .unwrap_or_else(|| panic!("{} has no front matter:\n{text}", path.display()));
    let mut docs = yaml_rust2::YamlLoader::load_from_str(&fm)
        .unwrap_or_else(|e| panic!("{}: invalid YAML ({e}):\n{fm}", path.display()));
    assert_eq!(docs.len(), 1);
    (docs.remove(0), text)
}

/// Relative Markdown link targets of a section of `text` (from `start` to the end).
fn link_targets(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|s| s.split(')').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_processed_library_exports_as_a_valid_okf_tree() {
    let env = Env::new().with("SHELF_LLM_PROVIDER", "local");
    let library = env.path().join("library");
    for (name, text) in [
        ("horses.md", HORSES),
        ("ponies.md", PONIES),
        ("foals.md", FOALS),
        ("algebra.md", MATH),
    ] {
        env.write(&format!("library/{name}"), text);
    }
    let report = env.json(&["import", library.to_str().expect("utf-8"), "--json"]);
    assert_eq!(report["summary"]["runs_succeeded"], 4, "{report:#}");
    let pending = env.write("pending.txt", "Not processed: no cleaned output yet.\n");
    env.json(&[
        "import",
        pending.to_str().expect("utf-8"),
        "--mode",
        "none",
        "--json",
    ]);

    let out = env.path().join("bundle");
    let summary = env.json(&["export", "--okf", out.to_str().expect("utf-8"), "--json"]);
    assert_eq!(summary["written"], 4, "{summary}");
    assert_eq!(summary["skipped"], 1, "{summary}");
    assert_eq!(summary["truncated"], false, "{summary}");

    let all = files(&out);
    let (root, _) = front_matter(&out.join("index.md"));
    assert_eq!(root["okf_version"].as_str(), Some("0.1"));
    assert_eq!(root["concepts"].as_i64(), Some(4));
    assert_eq!(root["skipped"].as_i64(), Some(1));
    assert!(root["generated"].as_str().is_some());

    let mut concepts = 0;
    let mut related_links = 0;
    let mut resources = BTreeSet::new();
    for file in &all {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        assert!(
            !name.starts_with('.'),
            "temporary file left: {}",
            file.display()
        );
        let dir = file.parent().expect("parent");
        // Every folder of the tree has an index.
        assert!(dir.join("index.md").is_file(), "{}", dir.display());
        let (fm, text) = front_matter(file);
        // Every link of every file resolves to a file of the bundle, inside it.
        for target in link_targets(&text) {
            let resolved = dir.join(&target);
            assert!(
                resolved.is_file(),
                "{} links to missing {target}",
                file.display()
            );
            let canonical = resolved.canonicalize().expect("canonical");
            assert!(canonical.starts_with(out.canonicalize().expect("out")));
        }
        if name == "index.md" {
            continue;
        }
        concepts += 1;
        assert_eq!(fm["type"].as_str(), Some("concept"), "{}", file.display());
        for field in [
            "title",
            "description",
            "resource",
            "timestamp",
            "dewey_code",
            "dewey_label",
            "source_filename",
        ] {
            assert!(
                fm[field].as_str().is_some(),
                "{field} in {}",
                file.display()
            );
        }
        assert!(fm["tags"].as_vec().is_some());
        assert!(fm["classification_confidence"].as_f64().is_some());
        resources.insert(fm["resource"].as_str().unwrap_or_default().to_string());
        let related = text.split("\n## Related\n").nth(1).expect("## Related");
        related_links += link_targets(related).len();
        if fm["title"].as_str() == Some("Ponies: small \"horses\" # really") {
            let relative = file.strip_prefix(&out).expect("inside");
            assert!(
                relative.starts_with("600-technology/630-agriculture/636-animal-husbandry"),
                "{}",
                relative.display()
            );
        }
    }
    assert_eq!(concepts, 4);
    assert_eq!(resources.len(), 4);
    // Three horse texts share 636: each links the two others.
    assert_eq!(related_links, 6);
    // Two concepts titled "Horse care" in one folder get distinct names.
    let horse_care: Vec<&PathBuf> = all
        .iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("horse-care-"))
        })
        .collect();
    assert_eq!(horse_care.len(), 2, "{all:?}");

    // A second export into the same, now non-empty, directory is refused without --force.
    let again = env.run(&["export", "--okf", out.to_str().expect("utf-8"), "--json"]);
    assert_eq!(again.status.code(), Some(2));
    let body: serde_json::Value = serde_json::from_slice(&again.stdout).expect("json error");
    assert_eq!(body["code"], "invalid_output_dir");
    let forced = env.json(&[
        "export",
        "--okf",
        out.to_str().expect("utf-8"),
        "--force",
        "--limit",
        "1",
        "--classification-prefix",
        "636",
        "--json",
    ]);
    assert_eq!(forced["written"], 1);
    assert_eq!(forced["truncated"], true);
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_dir_is_refused() {
    let env = Env::new();
    let target = env.path().join("elsewhere");
    std::fs::create_dir(&target).expect("mkdir");
    let link = env.path().join("link");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let out = env.run(&["export", "--okf", link.to_str().expect("utf-8"), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read_dir(&target).expect("read").next().is_none());
    // Neither DOC_ID nor --okf is a usage error.
    assert_eq!(env.run(&["export"]).status.code(), Some(2));
}
