//! The facts about a subject's runs that other crates need inside their own SQL, written here
//! as fragments so that only the engine names its tables: a crate above the engine (the app)
//! hands them to a sibling (documents), which splices them into its queries and statements.
//! A statement that checks runs keeps doing so inside the one statement or transaction it
//! always did. The engine knows subjects, never what a subject is.

use sea_orm::{DbBackend, Statement};
use shelf_db::SqlFragment;

use crate::state::RunStatus;

/// A subquery selecting the ids of `subject`'s succeeded runs and of every run they replayed,
/// up the chain of retries (a retry reuses its original's checkpoints, and so whatever rows
/// they name): `… IN (<this>)` keeps rows written by runs whose work stands.
pub fn succeeded_run_ids(subject: &str) -> SqlFragment {
    SqlFragment::new(
        format!(
            "WITH RECURSIVE good (id, retry_of) AS (\
             SELECT id, retry_of FROM runs WHERE subject = ? AND status = '{succeeded}' \
             UNION SELECT r.id, r.retry_of FROM runs r JOIN good g ON r.id = g.retry_of) \
             SELECT id FROM good",
            succeeded = RunStatus::Succeeded.as_str()
        ),
        [subject.to_string().into()],
    )
}

/// A condition: `subject` has a succeeded run.
pub fn has_succeeded_run(subject: &str) -> SqlFragment {
    SqlFragment::new(
        format!(
            "EXISTS (SELECT 1 FROM runs WHERE subject = ? AND status = '{}')",
            RunStatus::Succeeded.as_str()
        ),
        [subject.to_string().into()],
    )
}

/// A condition on the run whose id is the SQL expression `run_id` (a column of the caller's
/// query): it succeeded, or a succeeded retry replayed it (one step; a reader that needs the
/// exact row follows whole chains with [`succeeded_run_ids`]). False for a run whose row is
/// gone.
pub fn run_succeeded_or_replayed(run_id: &str) -> SqlFragment {
    SqlFragment::new(
        format!(
            "EXISTS (SELECT 1 FROM runs engine_run WHERE engine_run.id = {run_id} \
             AND (engine_run.status = '{succeeded}' OR EXISTS (SELECT 1 FROM runs engine_retry \
             WHERE engine_retry.retry_of = engine_run.id AND engine_retry.status = '{succeeded}')))",
            succeeded = RunStatus::Succeeded.as_str()
        ),
        [],
    )
}

/// `ORDER BY` keys putting the runs whose ids the SQL expression `run_id` holds newest first
/// by creation, then by insertion order, and ids whose run row is gone last (the caller adds
/// its own final tie-break). Each key is a lookup by primary key.
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

/// The statements deleting every run of `subject` (their stages, parts and events cascade).
/// Whoever deletes a subject runs them first in its own transaction: run retention locks a
/// subject's runs before the rows that hang on them, and taking the locks in that same order
/// makes the two wait for each other instead of deadlocking on PostgreSQL.
pub fn delete_runs_of(subject: &str) -> Vec<Statement> {
    vec![Statement::from_sql_and_values(
        DbBackend::Sqlite,
        "DELETE FROM runs WHERE subject = ?",
        [subject.to_string().into()],
    )]
}
