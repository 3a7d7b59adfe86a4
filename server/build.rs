//! Records the commit the binary is built from as `SHELF_GIT_SHA` (for `/version` and
//! `shelf --version`): the variable of the same name when the build sets it (container builds
//! without `.git`), else `git rev-parse`, else `unknown`. Never fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One line of `git` output, run in this crate's directory; `None` outside git or without it.
fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SHELF_GIT_SHA");
    // Rebuild when HEAD moves: the HEAD file, the branch it names and packed-refs. Asked of
    // git, because in a worktree `.git` is a file and these live elsewhere. Only files that
    // exist: cargo treats a missing one as changed and would rerun every build.
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut watched: Vec<PathBuf> = Vec::new();
    for file in ["HEAD", "packed-refs"] {
        if let Some(path) = git(&["rev-parse", "--git-path", file]) {
            watched.push(base.join(path));
        }
    }
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &reference])
    {
        watched.push(base.join(path));
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let sha = std::env::var("SHELF_GIT_SHA")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SHELF_GIT_SHA={sha}");
}
