//! Why an administration command (check, backup, restore) refused or failed, each with a stable
//! code for `--json` output and docs/errors.md.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("no database at {}", .path.display())]
    DatabaseMissing { path: PathBuf },
    #[error(
        "{what} is in use by another shelf process (`shelf api`, `worker`, `import`, `process`, \
         `delete`, `migrate` or an admin command holds the lock {}); stop them first",
        .lock.display()
    )]
    DatabaseInUse { what: &'static str, lock: PathBuf },
    #[error("a restore holds the data directory (lock {}); run the command again after it ends", .lock.display())]
    RestoreInProgress { lock: PathBuf },
    #[error("{what} replaces the current data; run it again with --yes to confirm")]
    ConfirmationRequired { what: &'static str },
    #[error("{} is a symlink; {what} refuses paths that are symlinks or cross symlinked directories", .path.display())]
    SymlinkedPath { what: &'static str, path: PathBuf },
    #[error("{detail}")]
    InvalidDestination { detail: String },
    #[error("the backup is not usable: {detail}")]
    InvalidBackup { detail: String },
    #[error("the backup was made by a newer shelf (unknown migrations: {}); upgrade shelf first", .unknown.join(", "))]
    BackupTooNew { unknown: Vec<String> },
    #[error("the archive member {name:?} is refused: {reason}")]
    UnsafeMember { name: String, reason: &'static str },
    #[error("the archive member {name:?} is a symbolic link; links are never restored")]
    SymlinkMember { name: String },
    #[error("the archive lists a member name more than once{}", .name.as_ref().map(|n| format!(" ({n:?})")).unwrap_or_default())]
    DuplicateMember { name: Option<String> },
    #[error("the archive expands to {total} bytes, over the limit of {max} (--max-expanded-bytes)")]
    ExpandedTooLarge { total: u64, max: u64 },
    #[error("the archive holds {count} members, over the limit of {max} (--max-files)")]
    TooManyMembers { count: usize, max: usize },
    #[error("the archive's manifest is {size} bytes, over the limit of {max}")]
    ManifestTooLarge { size: u64, max: u64 },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("database: {0}")]
    Db(String),
    /// A command that works on the SQLite file, asked of a shelf on PostgreSQL.
    #[error(
        "{command} works on the SQLite file only; this shelf uses PostgreSQL ({database}): {instead}"
    )]
    PostgresUnsupported {
        command: &'static str,
        database: String,
        /// What to do instead (PostgreSQL's own tools).
        instead: &'static str,
    },
}

impl AdminError {
    /// The stable machine-readable code. Exhaustive, so a new variant cannot ship without one.
    pub fn code(&self) -> &'static str {
        match self {
            AdminError::DatabaseMissing { .. } => "database_missing",
            AdminError::DatabaseInUse { .. } => "database_in_use",
            AdminError::RestoreInProgress { .. } => "restore_in_progress",
            AdminError::ConfirmationRequired { .. } => "confirmation_required",
            AdminError::SymlinkedPath { .. } => "symlinked_path",
            AdminError::InvalidDestination { .. } => "invalid_destination",
            AdminError::InvalidBackup { .. } => "invalid_backup",
            AdminError::BackupTooNew { .. } => "backup_too_new",
            AdminError::UnsafeMember { .. } => "unsafe_archive_member",
            AdminError::SymlinkMember { .. } => "archive_symlink_member",
            AdminError::DuplicateMember { .. } => "duplicate_archive_member",
            AdminError::ExpandedTooLarge { .. } => "archive_too_large",
            AdminError::TooManyMembers { .. } => "archive_too_many_files",
            AdminError::ManifestTooLarge { .. } => "archive_manifest_too_large",
            AdminError::Io { .. } => "io_error",
            AdminError::Db(_) => "database_error",
            AdminError::PostgresUnsupported { .. } => "postgres_unsupported",
        }
    }

    pub(crate) fn io(
        what: impl std::fmt::Display,
        path: &Path,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let what = format!("{what} {}", path.display());
        move |source| AdminError::Io { what, source }
    }

    /// The same failure, saying that what it interrupted was undone (`note` says what).
    pub(crate) fn undone(self, note: &str) -> Self {
        match self {
            AdminError::Io { what, source } => AdminError::Io {
                what: format!("{what} ({note})"),
                source,
            },
            other => other,
        }
    }

    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        AdminError::InvalidBackup {
            detail: detail.into(),
        }
    }
}

impl From<sea_orm::DbErr> for AdminError {
    fn from(e: sea_orm::DbErr) -> Self {
        AdminError::Db(e.to_string())
    }
}
