//! Readiness: can this process serve writes right now? The data directory must be writable,
//! the database file present and intact (`PRAGMA quick_check`), and its migrations exactly the
//! ones this binary knows. Reasons are short and carry no paths or OS text (`/ready` is
//! unauthenticated); the causes are logged.

use sea_orm::{DbBackend, Statement};
use serde::Serialize;
use shelf_engine::sql::SqlExt;

use crate::db::schema_status;
use crate::shelf::Shelf;

/// A ready process: the migrations it verified.
#[derive(Debug, Clone, Serialize)]
pub struct Readiness {
    pub applied_migrations: Vec<String>,
}

/// Why the process is not ready, safe to show to anyone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct NotReady {
    pub reason: &'static str,
}

fn not_ready(reason: &'static str, cause: impl std::fmt::Display) -> NotReady {
    tracing::warn!(reason, cause = %cause, "readiness check failed");
    NotReady { reason }
}

impl Shelf {
    /// The SQLite file exists and passes `PRAGMA quick_check`.
    async fn check_sqlite_file(&self) -> Result<(), NotReady> {
        match tokio::fs::metadata(&self.settings.database_path).await {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => return Err(not_ready("database is missing", "not a regular file")),
            Err(e) => return Err(not_ready("database is missing", e)),
        }
        let rows = self
            .db
            .query_all_sql(Statement::from_string(
                DbBackend::Sqlite,
                "PRAGMA quick_check(1)",
            ))
            .await
            .map_err(|e| not_ready("database is unavailable", e))?;
        let verdict = rows
            .first()
            .and_then(|row| row.try_get_by_index::<String>(0).ok());
        if verdict.as_deref() != Some("ok") {
            return Err(not_ready(
                "database failed its integrity check",
                verdict.unwrap_or_default(),
            ));
        }
        Ok(())
    }

    pub async fn readiness(&self) -> Result<Readiness, NotReady> {
        self.check_storage_writable().await?;
        if self.settings.is_postgres() {
            // The server checks its own pages; readiness asks only that it answers.
            self.db
                .query_one_sql(Statement::from_string(DbBackend::Sqlite, "SELECT 1"))
                .await
                .map_err(|e| not_ready("database is unavailable", e))?;
        } else {
            self.check_sqlite_file().await?;
        }
        let status = schema_status(&self.db)
            .await
            .map_err(|e| not_ready("database migration metadata is unreadable", e))?;
        if !status.unknown.is_empty() {
            return Err(not_ready(
                "database was migrated by a newer shelf",
                status.unknown.join(", "),
            ));
        }
        if !status.pending.is_empty() {
            return Err(not_ready(
                "database needs migrations; run `shelf migrate`",
                status.pending.join(", "),
            ));
        }
        Ok(Readiness {
            applied_migrations: status.applied,
        })
    }

    /// Creates, writes and removes a probe file in the data directory.
    async fn check_storage_writable(&self) -> Result<(), NotReady> {
        let probe = self
            .settings
            .data_dir
            .join(format!(".ready-probe-{:016x}", random_suffix()));
        let result = async {
            let mut file = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe)
                .await?;
            tokio::io::AsyncWriteExt::write_all(&mut file, b"ok").await?;
            file.sync_all().await?;
            drop(file);
            tokio::fs::remove_file(&probe).await
        }
        .await;
        result.map_err(|e| {
            // Best effort: a probe that was created but not written must not linger.
            let _ = std::fs::remove_file(&probe);
            not_ready("data directory is not writable", e)
        })
    }
}

/// A random suffix for probe and temporary file names without a new dependency: the std
/// hasher is randomly keyed per process.
pub(crate) fn random_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    hasher.finish()
}
