//! Workspace backups: one ZIP with a consistent database snapshot (`shelf.sqlite`), the data
//! directory's files under `data/`, and `manifest.json` listing every file with its size and
//! SHA-256. Files are streamed (never held whole in memory); symlinks are skipped and listed.
//! A restore inspects the whole archive before it writes anything: member count, names (no
//! absolute, `..`, backslash or duplicate paths), no symlink members, declared expanded size,
//! manifest size and agreement with the members. Reads stop at each member's declared size,
//! so an archive that lies about its sizes cannot write more than it declared. It then swaps
//! the files and the database in, keeping everything they replace until both are in place: a
//! failure at any step puts the old workspace back as it was.
//!
//! The archive's layout, its manifest and the restore's caps are here; writing one
//! (`backup`), the checks of an archive and its member names (`inspect`), and the restore with
//! its rollback (`restore`) beside it.

mod backup;
mod inspect;
mod restore;

pub use backup::{WorkspaceBackup, backup};
pub use inspect::{inspect, refuse_member_name};
pub use restore::{WorkspaceRestore, restore};

use serde::{Deserialize, Serialize};

pub const MANIFEST_MEMBER: &str = "manifest.json";
pub const DATABASE_MEMBER: &str = "shelf.sqlite";
pub const DATA_PREFIX: &str = "data/";
pub const FORMAT: &str = "shelf-workspace-backup";
pub const FORMAT_VERSION: u32 = 1;
/// SPEC "Limits": 10 GiB unless `--max-expanded-bytes` says otherwise.
pub const DEFAULT_MAX_EXPANDED_BYTES: u64 = 10 * 1024 * 1024 * 1024;
pub const DEFAULT_MAX_FILES: usize = 100_000;
/// A manifest line is about 150 bytes: 64 MiB holds several times the default file cap.
pub const DEFAULT_MAX_MANIFEST_BYTES: u64 = 64 * 1024 * 1024;

/// `manifest.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub format_version: u32,
    pub shelf_version: String,
    pub created_at: String,
    pub database: ManifestFile,
    pub applied_migrations: Vec<String>,
    /// Paths relative to the data directory (members are `data/<path>`).
    pub files: Vec<ManifestFile>,
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestFile {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// A data-directory entry the backup left out, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// Caps a restore checks before writing anything.
#[derive(Debug, Clone, Copy)]
pub struct RestoreLimits {
    pub max_expanded_bytes: u64,
    pub max_files: usize,
    pub max_manifest_bytes: u64,
}

impl Default for RestoreLimits {
    fn default() -> Self {
        RestoreLimits {
            max_expanded_bytes: DEFAULT_MAX_EXPANDED_BYTES,
            max_files: DEFAULT_MAX_FILES,
            max_manifest_bytes: DEFAULT_MAX_MANIFEST_BYTES,
        }
    }
}
