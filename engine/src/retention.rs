//! Retention of superseded runs: which finished runs of a subject may go, and their removal
//! (stages, parts, events, and the rows the application keeps per run) in short write
//! transactions, so reprocessing a subject again and again does not grow the database forever.
//!
//! A run stays while it is among the newest `keep` runs of its subject, while it is the
//! subject's latest succeeded run (what readers of the subject read), while it is queued or
//! running, and while it is a retry ancestor (`retry_of`, transitively) of a run that stays:
//! a retry reuses the checkpoints of the run it retries, and those outputs name that run's
//! rows (its texts by id, its page records by `pages_run_id`), so the chain goes only as a
//! whole. Everything else of the subject that is finished is pruned.

use std::collections::{HashMap, HashSet};

use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Statement, Value as SqlValue};

use crate::error::EngineError;
use crate::state::RunStatus;
use crate::store::RunStore;
use shelf_db::begin_write;
use shelf_db::sql::{SqlExt, is_postgres};

/// A run [`RunStore::prune_superseded`] removes, handed to the caller's statements so the
/// caller's rows of that run go in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedRun {
    pub id: String,
    pub subject: String,
}

/// One walk over every subject, in subject order, remembering where it is between
/// transactions: each subject's runs are read once per pass however many batches the pass
/// takes, and a pass that finds nothing to prune costs one read of the runs, a chunk of
/// subjects at a time.
#[derive(Debug, Clone)]
pub struct RetentionPass {
    keep: usize,
    batch: usize,
    /// The last subject whose prunable runs are all gone (or that had none).
    after: Option<String>,
    done: bool,
}

impl RetentionPass {
    /// A pass keeping `keep` runs per subject (at least 1) and pruning at most `batch` runs
    /// (at least 1) per transaction.
    pub fn new(keep: u32, batch: usize) -> Self {
        RetentionPass {
            keep: usize::try_from(keep).unwrap_or(usize::MAX).max(1),
            batch: batch.max(1),
            after: None,
            done: false,
        }
    }

    /// Whether the pass has looked at every subject.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// What retention reads of a run.
#[derive(Debug, Clone)]
struct RunRow {
    seq: i64,
    id: String,
    subject: String,
    status: String,
    retry_of: Option<String>,
}

fn run_row(row: &QueryResult) -> Result<RunRow, EngineError> {
    Ok(RunRow {
        seq: row.try_get("", "seq")?,
        id: row.try_get("", "id")?,
        subject: row.try_get("", "subject")?,
        status: row.try_get("", "status")?,
        retry_of: row.try_get("", "retry_of")?,
    })
}

/// The runs of one subject (any order) that retention removes, oldest first. A status this
/// binary does not know counts as unfinished: such a run stays.
fn prunable(runs: &[RunRow], keep: usize) -> Vec<&RunRow> {
    let mut newest: Vec<&RunRow> = runs.iter().collect();
    newest.sort_by_key(|r| std::cmp::Reverse(r.seq));
    let mut stays: HashSet<&str> = HashSet::new();
    let mut seen_succeeded = false;
    for (rank, run) in newest.iter().enumerate() {
        let status = RunStatus::parse(&run.status);
        let finished = status.is_some_and(RunStatus::is_terminal);
        let succeeded = status == Some(RunStatus::Succeeded);
        if rank < keep || !finished || (succeeded && !seen_succeeded) {
            stays.insert(run.id.as_str());
        }
        seen_succeeded |= succeeded;
    }
    let known: HashSet<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    let parent_of: HashMap<&str, &str> = runs
        .iter()
        .filter_map(|r| Some((r.id.as_str(), r.retry_of.as_deref()?)))
        .collect();
    let mut pending: Vec<&str> = stays.iter().copied().collect();
    while let Some(id) = pending.pop() {
        if let Some(&parent) = parent_of.get(id)
            && known.contains(parent)
            && stays.insert(parent)
        {
            pending.push(parent);
        }
    }
    let mut out: Vec<&RunRow> = newest
        .into_iter()
        .filter(|r| !stays.contains(r.id.as_str()))
        .collect();
    out.reverse();
    out
}

/// `?, ?, …` for `n` values.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

fn stmt(sql: &str, values: Vec<SqlValue>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

/// The runs of `subjects`, grouped by subject in the order of `subjects`.
async fn runs_of(
    conn: &impl ConnectionTrait,
    subjects: &[String],
) -> Result<Vec<Vec<RunRow>>, EngineError> {
    if subjects.is_empty() {
        return Ok(Vec::new());
    }
    let rows = conn
        .query_all_sql(stmt(
            &format!(
                "SELECT rowid AS seq, id, subject, status, retry_of FROM runs \
                 WHERE subject IN ({}) ORDER BY subject, rowid",
                placeholders(subjects.len())
            ),
            subjects.iter().map(|s| s.clone().into()).collect(),
        ))
        .await?;
    group(&rows)
}

/// Rows ordered by subject, as one group per subject.
fn group(rows: &[QueryResult]) -> Result<Vec<Vec<RunRow>>, EngineError> {
    let mut groups: Vec<Vec<RunRow>> = Vec::new();
    for row in rows {
        let run = run_row(row)?;
        match groups.last_mut() {
            Some(last) if last.first().is_some_and(|r| r.subject == run.subject) => last.push(run),
            _ => groups.push(vec![run]),
        }
    }
    Ok(groups)
}

impl RunStore {
    /// Prunes up to one batch of superseded runs of the pass (see the module docs), with the
    /// caller's statements for its own rows of those runs (`extra`, given the runs that go),
    /// in one write transaction; returns how many runs went. 0 means the pass is done: call it
    /// again until then, pausing between calls so other writers get their turns.
    ///
    /// Candidates are chosen by reads outside the transaction; inside it they are locked
    /// (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so a retry being created from one, which locks
    /// it too, is either seen or waits and then finds it gone) and their subjects re-read, and
    /// only the candidates that are still prunable go.
    pub async fn prune_superseded(
        &self,
        pass: &mut RetentionPass,
        extra: impl Fn(&[PrunedRun]) -> Vec<Statement>,
    ) -> Result<usize, EngineError> {
        while !pass.done {
            let (candidates, partial) = self.candidates(pass).await?;
            if candidates.is_empty() {
                continue;
            }
            let pruned = self.remove(pass.keep, &candidates, &extra).await?;
            if pruned > 0 {
                return Ok(pruned);
            }
            // Nothing could go (another pruner took them, or a retry is being made from
            // one): a subject taken in part is left for the next pass rather than asked again.
            if let Some(subject) = partial {
                pass.after = Some(subject);
            }
        }
        Ok(0)
    }

    /// The next batch of candidates from the pass's position (none when a chunk of subjects
    /// had nothing: the position moved on), and the subject taken in part, if any: the pass's
    /// position stays before it.
    async fn candidates(
        &self,
        pass: &mut RetentionPass,
    ) -> Result<(Vec<PrunedRun>, Option<String>), EngineError> {
        let (filter, mut values): (&str, Vec<SqlValue>) = match &pass.after {
            Some(after) => ("WHERE subject > ? ", vec![after.clone().into()]),
            None => ("", Vec::new()),
        };
        let chunk = pass.batch;
        values.push(i64::try_from(chunk).unwrap_or(i64::MAX).into());
        let rows = self
            .db()
            .query_all_sql(stmt(
                &format!(
                    "SELECT rowid AS seq, id, subject, status, retry_of FROM runs \
                     WHERE subject IN (SELECT DISTINCT subject FROM runs {filter}\
                     ORDER BY subject LIMIT ?) ORDER BY subject, rowid"
                ),
                values,
            ))
            .await?;
        let groups = group(&rows)?;
        if groups.len() < chunk {
            // The last chunk: once its candidates are gone, the pass is over.
            pass.done = true;
        }
        let mut candidates: Vec<PrunedRun> = Vec::new();
        let mut partial = None;
        for runs in &groups {
            let Some(subject) = runs.first().map(|r| r.subject.clone()) else {
                continue;
            };
            let prunable = prunable(runs, pass.keep);
            if prunable.is_empty() {
                // Every subject before this one is done: a subject left half done ends the loop.
                pass.after = Some(subject);
                continue;
            }
            let room = pass.batch - candidates.len();
            if room == 0 || (prunable.len() > room && !candidates.is_empty()) {
                // This subject waits for the next batch, which starts with it.
                pass.done = false;
                break;
            }
            let whole = prunable.len() <= room;
            candidates.extend(prunable.into_iter().take(room).map(|r| PrunedRun {
                id: r.id.clone(),
                subject: r.subject.clone(),
            }));
            if whole {
                pass.after = Some(subject);
            } else {
                // More of this subject than one batch: the next batch starts with it again.
                partial = Some(subject);
                pass.done = false;
                break;
            }
        }
        Ok((candidates, partial))
    }

    /// Removes the `candidates` that are still prunable, with `extra`'s statements, in one
    /// write transaction.
    async fn remove(
        &self,
        keep: usize,
        candidates: &[PrunedRun],
        extra: &impl Fn(&[PrunedRun]) -> Vec<Statement>,
    ) -> Result<usize, EngineError> {
        let txn = begin_write(self.db()).await?;
        let ids: Vec<SqlValue> = candidates.iter().map(|c| c.id.clone().into()).collect();
        let lock = if is_postgres(&txn) {
            " FOR UPDATE SKIP LOCKED"
        } else {
            ""
        };
        let locked: HashSet<String> = txn
            .query_all_sql(stmt(
                &format!(
                    "SELECT id FROM runs WHERE id IN ({}) \
                     AND status IN ('succeeded', 'failed', 'canceled'){lock}",
                    placeholders(ids.len())
                ),
                ids,
            ))
            .await?
            .iter()
            .map(|row| row.try_get::<String>("", "id"))
            .collect::<Result<_, _>>()?;
        // Read after the lock (on PostgreSQL a later statement sees what committed before
        // it): a retry made from a candidate meanwhile is in this read.
        let mut subjects: Vec<String> = candidates.iter().map(|c| c.subject.clone()).collect();
        subjects.sort();
        subjects.dedup();
        let still: HashSet<String> = runs_of(&txn, &subjects)
            .await?
            .iter()
            .flat_map(|runs| prunable(runs, keep))
            .map(|r| r.id.clone())
            .collect();
        let going: Vec<PrunedRun> = candidates
            .iter()
            .filter(|c| locked.contains(&c.id) && still.contains(&c.id))
            .cloned()
            .collect();
        if going.is_empty() {
            txn.rollback().await?;
            return Ok(0);
        }
        let list = placeholders(going.len());
        let ids = || -> Vec<SqlValue> { going.iter().map(|c| c.id.clone().into()).collect() };
        // Children first and by name, not by the foreign keys' cascade: a connection without
        // `PRAGMA foreign_keys` (the admin commands' own) removes them all the same.
        let mut statements = vec![
            stmt(
                &format!("DELETE FROM run_events WHERE run_id IN ({list})"),
                ids(),
            ),
            stmt(
                &format!("DELETE FROM run_stage_parts WHERE run_id IN ({list})"),
                ids(),
            ),
            stmt(
                &format!("DELETE FROM run_stages WHERE run_id IN ({list})"),
                ids(),
            ),
        ];
        statements.extend(extra(&going));
        statements.push(stmt(
            &format!("DELETE FROM runs WHERE id IN ({list})"),
            ids(),
        ));
        txn.execute_all_sql(statements).await?;
        txn.commit().await?;
        Ok(going.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seq: i64, status: &str, retry_of: Option<i64>) -> RunRow {
        RunRow {
            seq,
            id: format!("r{seq}"),
            subject: "doc".into(),
            status: status.into(),
            retry_of: retry_of.map(|p| format!("r{p}")),
        }
    }

    fn ids(runs: &[RunRow], keep: usize) -> Vec<String> {
        prunable(runs, keep).iter().map(|r| r.id.clone()).collect()
    }

    #[test]
    fn keeps_the_newest_the_latest_succeeded_and_unfinished_runs() {
        let runs = [
            run(1, "succeeded", None),
            run(2, "succeeded", None),
            run(3, "failed", None),
            run(4, "failed", None),
            run(5, "failed", None),
        ];
        assert_eq!(ids(&runs, 2), ["r1", "r3"]);
        assert_eq!(ids(&runs, 5), Vec::<String>::new());
        let runs = [
            run(1, "failed", None),
            run(2, "running", None),
            run(3, "queued", None),
            run(4, "canceled", None),
            run(5, "mystery", None),
        ];
        assert_eq!(ids(&runs, 1), ["r1", "r4"]);
    }

    #[test]
    fn a_retry_chain_goes_only_as_a_whole() {
        // r2 failed, r4 retried it and failed, r6 retried r4 and is queued: r6 reads the
        // outputs r2 and r4 made.
        let runs = [
            run(1, "succeeded", None),
            run(2, "failed", None),
            run(3, "canceled", None),
            run(4, "failed", Some(2)),
            run(5, "canceled", None),
            run(6, "queued", Some(4)),
            run(7, "canceled", None),
        ];
        assert_eq!(ids(&runs, 1), ["r3", "r5"]);
        // Once the chain's last run is prunable, all of it is.
        let mut runs = runs.to_vec();
        runs[5].status = "failed".into();
        runs.push(run(8, "canceled", None));
        runs.push(run(9, "canceled", None));
        assert_eq!(ids(&runs, 2), ["r2", "r3", "r4", "r5", "r6", "r7"]);
    }
}
