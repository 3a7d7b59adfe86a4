//! `shelf admin db-*` and `workspace-*`: database checks, statistics, maintenance, backups and
//! restores. Argument parsing and printing only; the rules live in `shelf_app::admin`.

use crate::output::{errln, outln};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use shelf_app::admin::db::StorageFigures;
use shelf_app::admin::workspace::{self, RestoreLimits};
use shelf_app::admin::{self, AdminError, Progress};
use shelf_app::{AppError, Settings};

use crate::CliResult;
use crate::output::{EXIT_FAILED, Failure, print_json};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Check the database: integrity, foreign keys, migrations (on PostgreSQL: the server
    /// answers, the tables exist, migrations). Exits 1 when it is not healthy.
    DbCheck {
        #[arg(long)]
        json: bool,
    },
    /// Database file, WAL and page sizes, and rows per table (on PostgreSQL: database and
    /// table sizes, rows per table).
    DbStats {
        #[arg(long)]
        json: bool,
    },
    /// Prune superseded runs (keeping SHELF_RUN_RETENTION per document), then PRAGMA optimize
    /// and a WAL checkpoint; --vacuum also compacts the file (SQLite only). On PostgreSQL: the
    /// pruning and ANALYZE.
    DbMaintain {
        #[arg(long)]
        vacuum: bool,
        #[arg(long)]
        json: bool,
    },
    /// Online backup of the database to DEST, verified before it replaces DEST (SQLite only;
    /// use pg_dump on PostgreSQL).
    DbBackup {
        dest: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Replace the database with a backup (API and workers must be stopped; SQLite only, use
    /// pg_restore on PostgreSQL).
    DbRestore {
        file: PathBuf,
        /// Confirm that the current database is replaced.
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// A ZIP of a database snapshot and the data directory's files (uploads, page images...);
    /// SQLite only.
    WorkspaceBackup {
        dest: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Restore a workspace backup (API and workers must be stopped); the archive is checked
    /// in full before anything is written.
    WorkspaceRestore {
        file: PathBuf,
        /// Confirm that the current database and data files are replaced.
        #[arg(long)]
        yes: bool,
        /// Refuse archives that expand to more bytes than this.
        #[arg(long, default_value_t = workspace::DEFAULT_MAX_EXPANDED_BYTES)]
        max_expanded_bytes: u64,
        /// Refuse archives with more members than this.
        #[arg(long, default_value_t = workspace::DEFAULT_MAX_FILES)]
        max_files: usize,
        #[arg(long)]
        json: bool,
    },
}

/// Settings and logging for a command that works on files, not on an opened Shelf.
fn settings(json: bool) -> Result<Settings, Failure> {
    let settings = super::super::settings(json)?;
    crate::logging::init(&settings, true, json)?;
    Ok(settings)
}

/// [`settings`], with the data directory's shared lock held until the process exits: for the
/// commands that write the database (maintenance) or read it whole alongside the data files
/// (backups), which a restore must not swap out from under them. On PostgreSQL, where Shelf
/// restores nothing (they refuse and name `pg_restore`) and backups refuse too, no lock is
/// taken, so these commands create no data directory on a host that only reaches the server.
fn settings_locked(json: bool) -> Result<Settings, Failure> {
    let settings = settings(json)?;
    if !settings.is_postgres() {
        super::super::hold_for_process(&settings, json)?;
    }
    Ok(settings)
}

fn fail(json: bool) -> impl FnOnce(AdminError) -> Failure {
    move |e| Failure::from_app(AppError::from(e), json)
}

/// Prints `report` as JSON, or the lines `human` makes of it.
fn show<T: Serialize>(report: &T, json: bool, human: impl FnOnce(&T)) {
    if json {
        print_json(report);
    } else {
        human(report);
    }
}

/// A byte progress bar on stderr (drawn only on a terminal, never with --json).
struct Bar(ProgressBar);

impl Bar {
    fn new(json: bool) -> Arc<Bar> {
        let bar = ProgressBar::no_length();
        if json {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Arc::new(Bar(bar))
    }
}

impl Progress for Bar {
    fn start(&self, phase: &str, total_bytes: u64) {
        self.0.set_message(phase.to_string());
        self.0.set_length(total_bytes);
        self.0.set_position(0);
    }

    fn advance(&self, bytes: u64) {
        self.0.inc(bytes);
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

fn confirm(yes: bool, what: &'static str, json: bool) -> Result<(), Failure> {
    if yes {
        Ok(())
    } else {
        Err(fail(json)(AdminError::ConfirmationRequired { what }))
    }
}

pub async fn run(command: Command) -> CliResult {
    match command {
        Command::DbCheck { json } => {
            let report = admin::db::check(&settings(json)?)
                .await
                .map_err(fail(json))?;
            show(&report, json, |r| {
                outln!("database {}", r.database);
                outln!("integrity: {}", r.integrity.join("; "));
                outln!("foreign key violations: {}", r.foreign_key_violation_count);
                if let Some(m) = &r.migrations {
                    outln!(
                        "migrations: {} applied, {} pending, {} unknown",
                        m.applied.len(),
                        m.pending.len(),
                        m.unknown.len()
                    );
                }
                if let Some(l) = &r.upload_leftovers {
                    outln!(
                        "upload leftovers: {} staged file(s) ({} bytes), {} empty upload \
                         director(ies), {} trash entr(ies) ({} bytes){}",
                        l.staged_files,
                        l.staged_bytes,
                        l.empty_upload_dirs,
                        l.trash_entries,
                        l.trash_bytes,
                        if l.count() > 0 {
                            "; `shelf api` removes them at start"
                        } else {
                            ""
                        }
                    );
                }
                for problem in &r.problems {
                    errln!("problem: {problem}");
                }
                outln!("{}", if r.healthy { "healthy" } else { "NOT healthy" });
            });
            // Damage (SQLite's integrity check of a file that opened found something, or a
            // read hit `SQLITE_CORRUPT`) is told apart from other problems: exit 4, restore.
            let damaged = shelf_db::known_damage().is_some()
                || (report.backend == admin::db::Backend::Sqlite
                    && report.migrations.is_some()
                    && report.integrity != ["ok"])
                || report
                    .integrity
                    .iter()
                    .any(|line| shelf_db::is_corrupt_text(line));
            Ok(if report.healthy {
                ExitCode::SUCCESS
            } else if damaged {
                ExitCode::from(crate::output::EXIT_DATABASE_CORRUPT)
            } else {
                ExitCode::from(EXIT_FAILED)
            })
        }
        Command::DbStats { json } => {
            let report = admin::db::stats(&settings(json)?)
                .await
                .map_err(fail(json))?;
            show(&report, json, |r| {
                outln!("database {}", r.database);
                match &r.storage {
                    StorageFigures::Sqlite {
                        file_bytes,
                        wal_bytes,
                        shm_bytes,
                        page_size,
                        page_count,
                        freelist_count,
                    } => {
                        outln!(
                            "file {file_bytes} bytes, WAL {wal_bytes} bytes, shm {shm_bytes} bytes"
                        );
                        outln!(
                            "page size {page_size}, pages {page_count}, free pages {freelist_count}"
                        );
                    }
                    StorageFigures::Postgres { database_bytes } => {
                        outln!("database size {database_bytes} bytes");
                    }
                }
                for t in &r.tables {
                    match t.bytes {
                        Some(bytes) => {
                            outln!("{:<40} {:>12} rows {:>14} bytes", t.table, t.rows, bytes)
                        }
                        None => outln!("{:<40} {:>12}", t.table, t.rows),
                    }
                }
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::DbMaintain { vacuum, json } => {
            let report = admin::db::maintain(&settings_locked(json)?, vacuum)
                .await
                .map_err(fail(json))?;
            show(&report, json, |r| {
                match r.pruned_runs {
                    Some(pruned) => outln!(
                        "pruned {pruned} superseded runs (keeping {} per document)",
                        r.run_retention
                    ),
                    None => outln!(
                        "runs not pruned: the schema is not this binary's (see shelf admin db-check)"
                    ),
                }
                match &r.wal {
                    Some(wal) => {
                        outln!(
                            "optimized{}; checkpoint {} of {} WAL frames{}",
                            if r.vacuumed { " and vacuumed" } else { "" },
                            wal.checkpoint_checkpointed_frames,
                            wal.checkpoint_log_frames,
                            if wal.checkpoint_busy != 0 {
                                " (readers kept it from truncating the WAL)"
                            } else {
                                ""
                            }
                        );
                        outln!(
                            "file {} -> {} bytes, WAL {} -> {} bytes",
                            r.bytes_before,
                            r.bytes_after,
                            wal.wal_bytes_before,
                            wal.wal_bytes_after
                        );
                    }
                    None => {
                        outln!("analyzed {}", r.database);
                        outln!("database {} -> {} bytes", r.bytes_before, r.bytes_after);
                    }
                }
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::DbBackup { dest, json } => {
            let report = admin::db::backup(&settings_locked(json)?, &dest)
                .await
                .map_err(fail(json))?;
            show(&report, json, |r| {
                outln!(
                    "backup written to {} ({} bytes, integrity ok)",
                    r.destination.display(),
                    r.bytes
                );
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::DbRestore { file, yes, json } => {
            let settings = settings(json)?;
            // On PostgreSQL the refusal, not a request for --yes, is the useful answer.
            if !settings.is_postgres() {
                confirm(yes, "db-restore", json)?;
            }
            let report = admin::db::restore(&settings, &file)
                .await
                .map_err(fail(json))?;
            show(&report, json, |r| {
                outln!("database {} restored", r.database.display());
                print_pending(&r.pending_migrations);
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::WorkspaceBackup { dest, json } => {
            let bar = Bar::new(json);
            let report = workspace::backup(&settings_locked(json)?, &dest, bar.clone())
                .await
                .map_err(fail(json))?;
            drop(bar);
            show(&report, json, |r| {
                outln!(
                    "workspace backup written to {} ({} bytes; {} files, {} bytes)",
                    r.destination.display(),
                    r.bytes,
                    r.files,
                    r.file_bytes
                );
                for s in &r.skipped {
                    errln!("skipped {}: {}", s.path, s.reason);
                }
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::WorkspaceRestore {
            file,
            yes,
            max_expanded_bytes,
            max_files,
            json,
        } => {
            let settings = settings(json)?;
            if !settings.is_postgres() {
                confirm(yes, "workspace-restore", json)?;
            }
            let limits = RestoreLimits {
                max_expanded_bytes,
                max_files,
                ..RestoreLimits::default()
            };
            let bar = Bar::new(json);
            let report = workspace::restore(&settings, &file, limits, bar.clone())
                .await
                .map_err(fail(json))?;
            drop(bar);
            show(&report, json, |r| {
                outln!(
                    "workspace restored: database {}, {} files ({} bytes) in {}",
                    r.database.display(),
                    r.files,
                    r.file_bytes,
                    r.data_dir.display()
                );
                print_pending(&r.pending_migrations);
            });
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_pending(pending: &[String]) {
    if !pending.is_empty() {
        outln!(
            "the backup predates {} migration(s); run `shelf migrate` before starting services",
            pending.len()
        );
    }
}
