//! Where the tests find the embedding model `scripts/fetch-embedding-model` fetched:
//! `SHELF_EMBEDDING_MODEL_DIR`, else the script's cache directory. Without it a test skips with
//! a notice, unless `SHELF_REQUIRE_EMBEDDING_MODEL=1` (CI), where it fails.

use std::path::PathBuf;

/// The model directory the fetch script writes (or the one the environment names).
pub fn model_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SHELF_EMBEDDING_MODEL_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let root = std::env::var_os("SHELF_EMBEDDING_CACHE")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|d| !d.is_empty())
                .map(|d| PathBuf::from(d).join("shelf"))
        })
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/shelf")))
        .unwrap_or_else(|| PathBuf::from(".cache/shelf"));
    root.join("all-MiniLM-L6-v2")
}

/// The model directory, or `None` (after a notice) when it is absent and not required.
pub fn model_or_skip() -> Option<PathBuf> {
    let dir = model_dir();
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    if std::env::var("SHELF_REQUIRE_EMBEDDING_MODEL").as_deref() == Ok("1") {
        panic!(
            "no embedding model in {} (SHELF_REQUIRE_EMBEDDING_MODEL=1): run scripts/fetch-embedding-model",
            dir.display()
        );
    }
    eprintln!(
        "SKIPPED: no embedding model in {}; run scripts/fetch-embedding-model (or set SHELF_EMBEDDING_MODEL_DIR)",
        dir.display()
    );
    None
}
