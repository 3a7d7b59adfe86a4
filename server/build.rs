//! Records the commit the binary is built from as `SHELF_GIT_SHA` (for `/version`): the
//! variable of the same name when the build sets it (container builds without `.git`), else
//! `git rev-parse`, else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SHELF_GIT_SHA");
    let git_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.git");
    let head = git_dir.join("HEAD");
    // Only files that exist: cargo treats a missing one as changed and would rerun every build.
    let mut watched = vec![head.clone(), git_dir.join("packed-refs")];
    if let Ok(text) = std::fs::read_to_string(&head)
        && let Some(reference) = text.trim().strip_prefix("ref: ")
    {
        watched.push(git_dir.join(reference));
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let sha = std::env::var("SHELF_GIT_SHA")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SHELF_GIT_SHA={sha}");
}
