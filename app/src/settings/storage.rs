//! The storage section: the data directory, the database (SQLite file or PostgreSQL URL, pool
//! size, start check), the queue backend, run retention, the free-space floor and the
//! readiness check interval.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;
use shelf_documents::DataDir;

use super::auth::Secret;
use super::reader::{BYTES, COUNT, Reader};

/// `SHELF_JOB_BACKEND`: the durable queue always lives in the database, so the one accepted
/// value is the database's own backend. SPEC.md lists the setting; it is validated, shown in
/// `/config`, and selects nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobBackend {
    Sqlite,
    Postgres,
}

impl JobBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            JobBackend::Sqlite => "sqlite",
            JobBackend::Postgres => "postgres",
        }
    }
}

#[derive(Debug, Clone)]
pub struct StorageSettings {
    pub data_dir: PathBuf,
    pub database_path: PathBuf,
    /// `SHELF_DATABASE_URL`: a `postgres://` URL selects PostgreSQL instead of the SQLite file
    /// at `database_path` (it may hold a password, so it is a secret).
    pub database_url: Option<Secret>,
    /// The passwords `database_url` holds, in every form (`shelf_db::secrets`): the log
    /// writer removes them wherever they appear.
    pub database_passwords: Vec<Secret>,
    /// The pool size on either backend (`SHELF_DATABASE_MAX_CONNECTIONS`).
    pub database_max_connections: u32,
    /// `SHELF_DATABASE_START_CHECK_MAX_BYTES`: `shelf api`, `shelf worker` and `shelf import`
    /// run `PRAGMA quick_check` at start on a SQLite file up to this size (0: never).
    pub database_start_check_max_bytes: u64,
    pub job_backend: JobBackend,
    /// Runs kept per document (`SHELF_RUN_RETENTION`, at least 1): older finished runs are
    /// pruned with their texts, page records and events, except the latest succeeded run and
    /// the retry chains of runs that stay (`crate::retention`).
    pub run_retention: u32,
    /// `SHELF_MIN_FREE_BYTES`: below this many free bytes on a volume Shelf writes to, uploads
    /// and imports are refused and workers claim no new run. `None` (unset): 1 GiB or 5% of
    /// the volume, whichever is smaller (`crate::disk::floor`); `Some(0)` turns the check off.
    pub min_free_bytes: Option<u64>,
    /// `SHELF_READY_FULL_CHECK_SECONDS`: `/ready` runs the full `PRAGMA quick_check` at most
    /// this often and reuses its verdict in between; 0 runs it on every call.
    pub ready_full_check_seconds: u64,
}

impl StorageSettings {
    /// The layout of the data directory (uploads, page images, the lock file…).
    pub fn layout(&self) -> DataDir {
        DataDir::new(&self.data_dir)
    }
}

fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

fn default_data_dir(vars: &HashMap<String, String>) -> PathBuf {
    if let Some(xdg) = vars.get("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("shelf");
    }
    match vars.get("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/share/shelf"),
        None => PathBuf::from("shelf-data"),
    }
}

pub(super) fn parse(r: &mut Reader) -> StorageSettings {
    let data_dir = r
        .optional("SHELF_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| default_data_dir(r.vars));
    let database_path = r
        .optional("SHELF_DATABASE_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| DataDir::new(&data_dir).database_file());
    let database_url = r
        .optional("SHELF_DATABASE_URL")
        .map(|v| Secret::new(v.trim()));
    if let Some(url) = &database_url
        && !is_postgres_url(url.expose())
    {
        r.problems.push(
            "SHELF_DATABASE_URL: expected a postgres:// or postgresql:// URL (leave it unset \
             for the SQLite file at SHELF_DATABASE_PATH)"
                .into(),
        );
    }
    // The queue is a table of the database, so only the database's own backend is accepted.
    let own_backend = if database_url.is_some() {
        JobBackend::Postgres
    } else {
        JobBackend::Sqlite
    };
    let storage = StorageSettings {
        database_max_connections: r.parse("SHELF_DATABASE_MAX_CONNECTIONS", 8, COUNT),
        database_start_check_max_bytes: r.parse(
            "SHELF_DATABASE_START_CHECK_MAX_BYTES",
            64 * 1024 * 1024,
            BYTES,
        ),
        job_backend: r.choice(
            "SHELF_JOB_BACKEND",
            own_backend,
            &[(own_backend.as_str(), own_backend)],
        ),
        run_retention: r.parse("SHELF_RUN_RETENTION", 3, COUNT),
        // Unset means the default floor, which depends on the volume (`crate::disk::floor`).
        min_free_bytes: r
            .raw("SHELF_MIN_FREE_BYTES")
            .is_some()
            .then(|| r.parse("SHELF_MIN_FREE_BYTES", 0, BYTES)),
        ready_full_check_seconds: r.parse("SHELF_READY_FULL_CHECK_SECONDS", 600, COUNT),
        data_dir,
        database_path,
        database_passwords: database_url
            .as_ref()
            .map(|url| shelf_db::secrets::passwords_in(url.expose()))
            .unwrap_or_default()
            .into_iter()
            .map(Secret::new)
            .collect(),
        database_url,
    };
    r.check(
        storage.run_retention != 0,
        "SHELF_RUN_RETENTION must be at least 1 (the latest run of a document stays)",
    );
    storage
}
