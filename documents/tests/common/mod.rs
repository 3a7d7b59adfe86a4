//! Shared setup for the integration tests: a data directory in a temporary directory and a
//! migrated database, a SQLite file in it or a fresh database of the test process's
//! PostgreSQL cluster; `on_both_backends!` runs one test body on each.

#![allow(dead_code)]

#[path = "../../../tests/support/pg_cluster.rs"]
mod pg_cluster;

use std::path::{Path, PathBuf};

use sea_orm::{ConnectOptions, Database, DatabaseConnection};
use shelf_documents::{DocumentStore, Ingested, sha256_hex};
use shelf_migrations::{Migrator, MigratorTrait};
use tempfile::TempDir;

/// Runs `async fn name(env: Env)` twice: `name::sqlite` on a SQLite file and `name::postgres`
/// on a fresh PostgreSQL database (a skip with a message when PostgreSQL is absent, a failure
/// when `SHELF_REQUIRE_POSTGRES=1`). Two worker threads, so concurrent tasks really race.
macro_rules! on_both_backends {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(crate::common::env().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(env) = crate::common::pg_env().await {
                    super::$name(env).await;
                }
            }
        }
    };
}

pub struct Env {
    pub dir: TempDir,
    pub store: DocumentStore,
}

impl Env {
    pub fn data_dir(&self) -> &Path {
        &self.store.data_dir
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.store.db
    }

    pub fn is_postgres(&self) -> bool {
        shelf_db::sql::is_postgres(self.db())
    }

    /// Stages `bytes` like the upload handler does and ingests them.
    pub async fn upload(&self, filename: &str, bytes: &[u8]) -> shelf_documents::Result<Ingested> {
        let staged = self.stage(bytes).await;
        self.store
            .ingest_upload(&staged, filename, &sha256_hex(bytes), bytes.len() as u64)
            .await
    }

    pub async fn stage(&self, bytes: &[u8]) -> PathBuf {
        let staged = self.store.new_staging_path().await.expect("staging path");
        tokio::fs::write(&staged, bytes)
            .await
            .expect("write staged");
        staged
    }
}

pub async fn connect(path: &Path) -> DatabaseConnection {
    connect_migrated(path, None).await
}

/// [`connect`], applying only the first `steps` migrations when given.
pub async fn connect_migrated(path: &Path, steps: Option<u32>) -> DatabaseConnection {
    let mut options = ConnectOptions::new(format!("sqlite://{}?mode=rwc", path.display()));
    options.max_connections(4).sqlx_logging(false);
    let db = Database::connect(options).await.expect("connect");
    Migrator::up(&db, steps).await.expect("migrate");
    db
}

/// A data directory with a migrated SQLite file in it.
pub async fn env() -> Env {
    env_migrated(None).await
}

/// [`env`] with only the first `steps` migrations applied when given (a database written by
/// an older Shelf, to convert).
pub async fn env_migrated(steps: Option<u32>) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().join("data");
    std::fs::create_dir_all(&data_dir).expect("data dir");
    let db = connect_migrated(&data_dir.join("shelf.sqlite"), steps).await;
    Env {
        store: DocumentStore::new(db, data_dir),
        dir,
    }
}

/// A data directory and a fresh, migrated PostgreSQL database; `None` when the test cluster
/// cannot be had (PostgreSQL not installed and not required).
pub async fn pg_env() -> Option<Env> {
    pg_env_migrated(None).await
}

/// [`pg_env`] with only the first `steps` migrations applied when given.
pub async fn pg_env_migrated(steps: Option<u32>) -> Option<Env> {
    let Some(cluster) = pg_cluster::PgCluster::shared() else {
        eprintln!("skipped on PostgreSQL: no PostgreSQL binaries");
        return None;
    };
    let url = cluster.create_database("documents");
    let mut options = ConnectOptions::new(url);
    options.max_connections(4).sqlx_logging(false);
    let db = Database::connect(options).await.expect("connect");
    Migrator::up(&db, steps).await.expect("migrate");
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().join("data");
    std::fs::create_dir_all(&data_dir).expect("data dir");
    Some(Env {
        store: DocumentStore::new(db, data_dir),
        dir,
    })
}

/// Files left in a directory tree (relative paths), for "nothing left behind" checks.
pub fn files_under(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if is_dir {
                walk(root, &path, out);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// The engine's run fragments (`shelf_engine::subject_sql`) as the app hands them to this
/// crate: documents may not depend on the engine, not even in tests, so these tests write the
/// same SQL here. The engine's tests check its own fragments against real runs, and the app's
/// and the black-box tests run the real pair.
pub mod engine_sql {
    use sea_orm::{DbBackend, Statement};
    use shelf_db::SqlFragment;

    pub fn succeeded_run_ids(subject: &str) -> SqlFragment {
        SqlFragment::new(
            "WITH RECURSIVE good (id, retry_of) AS (\
             SELECT id, retry_of FROM runs WHERE subject = ? AND status = 'succeeded' \
             UNION SELECT r.id, r.retry_of FROM runs r JOIN good g ON r.id = g.retry_of) \
             SELECT id FROM good",
            [subject.to_string().into()],
        )
    }

    pub fn has_succeeded_run(subject: &str) -> SqlFragment {
        SqlFragment::new(
            "EXISTS (SELECT 1 FROM runs WHERE subject = ? AND status = 'succeeded')",
            [subject.to_string().into()],
        )
    }

    pub fn run_created_order(run_id: &str) -> SqlFragment {
        SqlFragment::new(
            format!(
                "(SELECT engine_run.created_at FROM runs engine_run WHERE engine_run.id = {run_id}) \
                 DESC NULLS LAST, \
                 (SELECT engine_run.rowid FROM runs engine_run WHERE engine_run.id = {run_id}) DESC"
            ),
            [],
        )
    }

    pub fn delete_runs_of(subject: &str) -> Vec<Statement> {
        vec![Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "DELETE FROM runs WHERE subject = ?",
            [subject.to_string().into()],
        )]
    }
}

/// The ids a search finds, in rank order.
pub async fn ids(env: &Env, request: &shelf_documents::SearchRequest) -> Vec<String> {
    shelf_documents::search_ids(env.db(), request)
        .await
        .expect("search")
        .document_ids
}
