//! Retention of superseded runs on real databases: which runs a pass prunes (the newest `keep`,
//! the latest succeeded run, unfinished runs and the retry chains they stand on stay), that
//! their stages, parts and events go with them, with the caller's rows, in batches.

use std::sync::{Arc, Mutex};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde_json::json;
use shelf_db::sql::SqlExt;
use shelf_engine::retention::{PrunedRun, RetentionPass};
use shelf_engine::{Engine, RunStatus};
use tokio_util::sync::CancellationToken;

use crate::common::{Backend, Probe, compile, database, engine, fast_config, on_both_backends};

const OK: &str = "version: 1\nstages:\n  ok: { uses: step, with: { hand_write: true } }\n";
const BAD: &str =
    "version: 1\nstages:\n  bad: { uses: step, with: { fail_times: 1000, fatal: true } }\n";

/// Submits a run of `yaml` for `subject` and runs it to its end in this process.
async fn finished(e: &Engine, subject: &str, yaml: &str) -> String {
    let run = e
        .submit(subject, &compile(e, yaml), json!({}))
        .await
        .unwrap();
    e.run_in_process(&run.id, "test", CancellationToken::new())
        .await
        .unwrap();
    run.id
}

async fn queued(e: &Engine, subject: &str) -> String {
    e.submit(subject, &compile(e, OK), json!({}))
        .await
        .unwrap()
        .id
}

async fn count(db: &DatabaseConnection, table: &str, run_id: &str) -> i64 {
    let column = if table == "runs" { "id" } else { "run_id" };
    let row = db
        .query_one_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            format!("SELECT COUNT(*) AS n FROM {table} WHERE {column} = ?"),
            [run_id.into()],
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get("", "n").unwrap()
}

/// A table of the caller's own (as Shelf's texts are), one row per run.
async fn side_table(db: &DatabaseConnection, runs: &[&String]) {
    db.execute_unprepared("CREATE TABLE side (run_id TEXT NOT NULL)")
        .await
        .unwrap();
    for id in runs {
        db.execute_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "INSERT INTO side (run_id) VALUES (?)",
            [(*id).clone().into()],
        ))
        .await
        .unwrap();
    }
}

/// Runs a whole pass; returns what each transaction pruned and every run the caller was
/// handed, deleting the caller's rows of them as Shelf does.
async fn prune_all(e: &Engine, keep: u32, batch: usize) -> (Vec<usize>, Vec<PrunedRun>) {
    let handed = Arc::new(Mutex::new(Vec::new()));
    let mut pass = RetentionPass::new(keep, batch);
    let mut batches = Vec::new();
    loop {
        let seen = handed.clone();
        let pruned = e
            .store()
            .prune_superseded(&mut pass, move |runs: &[PrunedRun]| {
                seen.lock().unwrap().extend(runs.iter().cloned());
                runs.iter()
                    .map(|r| {
                        Statement::from_sql_and_values(
                            DbBackend::Sqlite,
                            "DELETE FROM side WHERE run_id = ?",
                            [r.id.clone().into()],
                        )
                    })
                    .collect()
            })
            .await
            .unwrap();
        if pruned == 0 {
            break;
        }
        batches.push(pruned);
    }
    assert!(pass.is_done());
    let handed = handed.lock().unwrap().clone();
    (batches, handed)
}

async fn superseded_runs_go_with_their_stages_parts_events_and_rows(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    // doc: succeeded, succeeded, then three failures.
    let mut doc = Vec::new();
    for yaml in [OK, OK, BAD, BAD, BAD] {
        doc.push(finished(&e, "doc", yaml).await);
    }
    let statuses: Vec<RunStatus> = {
        let mut out = Vec::new();
        for id in &doc {
            out.push(e.store().get_run(id).await.unwrap().unwrap().status);
        }
        out
    };
    assert_eq!(
        statuses,
        [
            RunStatus::Succeeded,
            RunStatus::Succeeded,
            RunStatus::Failed,
            RunStatus::Failed,
            RunStatus::Failed
        ]
    );
    assert_eq!(count(&db, "run_stage_parts", &doc[0]).await, 1);
    // busy: two failures, then three runs still queued: the oldest of them is past `keep`.
    let mut busy = vec![
        finished(&e, "busy", BAD).await,
        finished(&e, "busy", BAD).await,
    ];
    for _ in 0..3 {
        busy.push(queued(&e, "busy").await);
    }
    // retried: a failure whose retry waits in the queue, then a canceled run. The retry
    // reads what the failed run made, so the failed run stays while the retry does.
    let failed = finished(&e, "retried", BAD).await;
    let retry = e.retry(&failed).await.unwrap().id;
    let canceled = queued(&e, "retried").await;
    e.cancel(&canceled).await.unwrap();
    // other: two runs, nothing past `keep`.
    let other = [
        finished(&e, "other", OK).await,
        finished(&e, "other", BAD).await,
    ];
    let all: Vec<&String> = doc
        .iter()
        .chain(&busy)
        .chain([&failed, &retry, &canceled])
        .chain(&other)
        .collect();
    side_table(&db, &all).await;

    let (batches, handed) = prune_all(&e, 2, 2).await;

    let mut handed_ids: Vec<String> = handed.iter().map(|r| r.id.clone()).collect();
    handed_ids.sort();
    let mut expected = vec![
        doc[0].clone(),
        doc[2].clone(),
        busy[0].clone(),
        busy[1].clone(),
    ];
    expected.sort();
    assert_eq!(handed_ids, expected, "the runs handed to the caller");
    assert!(batches.iter().all(|&n| n <= 2), "{batches:?}");
    assert_eq!(batches.iter().sum::<usize>(), 4);
    for run in &handed {
        assert_eq!(
            run.subject,
            if busy.contains(&run.id) {
                "busy"
            } else {
                "doc"
            }
        );
    }
    for id in &all {
        let gone = expected.contains(id);
        assert_eq!(
            e.store().get_run(id).await.unwrap().is_none(),
            gone,
            "run {id}"
        );
        for table in ["run_stages", "run_events", "side"] {
            let n = count(&db, table, id).await;
            assert_eq!(n == 0, gone, "{table} of {id}: {n}");
        }
        if gone {
            assert_eq!(count(&db, "run_stage_parts", id).await, 0);
        }
    }
    assert_eq!(count(&db, "run_stage_parts", &doc[1]).await, 1);
    for id in &busy[2..] {
        let run = e.store().get_run(id).await.unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Queued);
    }
    // A second pass finds nothing more.
    let (batches, handed) = prune_all(&e, 2, 2).await;
    assert!(batches.is_empty() && handed.is_empty(), "{batches:?}");
    // The retry's chain goes once nothing stands on it: with the retry failed and newer runs
    // made, the failed run, its retry and the canceled run all go.
    e.run_in_process(&retry, "test", CancellationToken::new())
        .await
        .unwrap();
    for _ in 0..2 {
        finished(&e, "retried", OK).await;
    }
    let (_, handed) = prune_all(&e, 2, 50).await;
    let mut handed_ids: Vec<String> = handed.into_iter().map(|r| r.id).collect();
    handed_ids.sort();
    let mut chain = vec![failed, retry, canceled];
    chain.sort();
    assert_eq!(handed_ids, chain);
}

async fn a_pass_prunes_many_subjects_in_batches(backend: Backend) {
    let (_dir, db) = database(backend).await;
    let probe = Arc::new(Probe::default());
    let e = engine(&db, &probe, fast_config());
    // Seven subjects of three runs, and one of six: more prunable runs than one batch holds.
    let mut runs = Vec::new();
    for s in 0..7 {
        for _ in 0..3 {
            runs.push(finished(&e, &format!("s{s}"), OK).await);
        }
    }
    for _ in 0..6 {
        runs.push(finished(&e, "big", OK).await);
    }
    let all: Vec<&String> = runs.iter().collect();
    side_table(&db, &all).await;
    let (batches, handed) = prune_all(&e, 1, 3).await;
    assert!(batches.iter().all(|&n| (1..=3).contains(&n)), "{batches:?}");
    assert_eq!(handed.len(), 7 * 2 + 5);
    // Each subject keeps only its newest run (also its latest succeeded).
    let left = db
        .query_all_sql(Statement::from_string(
            DbBackend::Sqlite,
            "SELECT subject, COUNT(*) AS n FROM runs GROUP BY subject",
        ))
        .await
        .unwrap();
    assert_eq!(left.len(), 8);
    for row in left {
        assert_eq!(row.try_get::<i64>("", "n").unwrap(), 1);
    }
    let side = db
        .query_one_sql(Statement::from_string(
            DbBackend::Sqlite,
            "SELECT COUNT(*) AS n FROM side",
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(side.try_get::<i64>("", "n").unwrap(), 8);
}

on_both_backends!(
    superseded_runs_go_with_their_stages_parts_events_and_rows,
    a_pass_prunes_many_subjects_in_batches,
);
