//! The run fragments other crates splice into their SQL (`subject_sql`), on real runs: which
//! run ids count as succeeded up retry chains, the "has a succeeded run" condition, the
//! one-step "succeeded or replayed" condition, the newest-first order and the delete.

use sea_orm::{DatabaseConnection, DbBackend, Statement, Value};
use shelf_db::SqlFragment;
use shelf_db::sql::SqlExt;
use shelf_engine::subject_sql::{
    delete_runs_of, has_succeeded_run, run_created_order, run_succeeded_or_replayed,
    succeeded_run_ids,
};

use crate::common::{Backend, database, on_both_backends};

/// A `runs` row with only what the fragments read.
async fn run(
    db: &DatabaseConnection,
    id: &str,
    subject: &str,
    status: &str,
    retry_of: Option<&str>,
    created_at: &str,
) {
    db.execute_sql(Statement::from_sql_and_values(
        DbBackend::Sqlite,
        "INSERT INTO runs (id, subject, pipeline, pipeline_yaml, pipeline_sha256, status, \
         retry_of, due_at, enqueued_at, created_at) \
         VALUES (?, ?, 'default', '', '', ?, ?, 0, 0, ?)",
        [
            id.into(),
            subject.into(),
            status.into(),
            retry_of.map(str::to_string).into(),
            created_at.into(),
        ],
    ))
    .await
    .expect("run");
}

/// The `id` column of `query`'s rows, in order.
async fn ids(db: &DatabaseConnection, query: SqlFragment) -> Vec<String> {
    db.query_all_sql(query.into_statement())
        .await
        .expect("query")
        .iter()
        .map(|row| row.try_get("", "id").expect("id"))
        .collect()
}

async fn holds(db: &DatabaseConnection, condition: &SqlFragment) -> bool {
    let mut query = SqlFragment::new("SELECT CASE WHEN ", []);
    query
        .push_fragment(condition)
        .push(" THEN 1 ELSE 0 END AS yes", []);
    let row = db
        .query_one_sql(query.into_statement())
        .await
        .expect("query")
        .expect("a row");
    row.try_get::<i32>("", "yes").expect("yes") == 1
}

on_both_backends!(fragments_answer_from_the_runs_table);

async fn fragments_answer_from_the_runs_table(backend: Backend) {
    let (_db_guard, db) = database(backend).await;
    // a: failed, replayed by b (failed), replayed by c (succeeded); d failed alone; e belongs
    // to another subject and succeeded.
    run(&db, "run_a", "s1", "failed", None, "2026-01-01T00:00:01Z").await;
    run(
        &db,
        "run_b",
        "s1",
        "failed",
        Some("run_a"),
        "2026-01-01T00:00:02Z",
    )
    .await;
    run(
        &db,
        "run_c",
        "s1",
        "succeeded",
        Some("run_b"),
        "2026-01-01T00:00:03Z",
    )
    .await;
    run(&db, "run_d", "s1", "failed", None, "2026-01-01T00:00:03Z").await;
    run(
        &db,
        "run_e",
        "s2",
        "succeeded",
        None,
        "2026-01-01T00:00:09Z",
    )
    .await;

    let mut good = SqlFragment::new("SELECT id FROM (", []);
    good.push_fragment(&succeeded_run_ids("s1"))
        .push(") g ORDER BY id", []);
    assert_eq!(ids(&db, good).await, ["run_a", "run_b", "run_c"]);

    assert!(holds(&db, &has_succeeded_run("s1")).await);
    assert!(holds(&db, &has_succeeded_run("s2")).await);
    assert!(!holds(&db, &has_succeeded_run("s3")).await);

    // One step only: b was replayed by the succeeded c, a only by the failed b.
    let mut stands = SqlFragment::new(
        "SELECT x.id FROM (SELECT 'run_a' AS id UNION ALL SELECT 'run_b' UNION ALL \
         SELECT 'run_c' UNION ALL SELECT 'run_d' UNION ALL SELECT 'gone') x WHERE ",
        [],
    );
    stands
        .push_fragment(&run_succeeded_or_replayed("x.id"))
        .push(" ORDER BY x.id", []);
    assert_eq!(ids(&db, stands).await, ["run_b", "run_c"]);

    // Newest first; equal creation times by insertion order (d after c); a gone run last.
    let mut order = SqlFragment::new(
        "SELECT p.id FROM (SELECT id FROM runs WHERE subject = ? UNION ALL SELECT 'gone') p \
         ORDER BY ",
        [Value::from("s1")],
    );
    order.push_fragment(&run_created_order("p.id"));
    assert_eq!(
        ids(&db, order).await,
        ["run_d", "run_c", "run_b", "run_a", "gone"]
    );

    for statement in delete_runs_of("s1") {
        db.execute_sql(statement).await.expect("delete");
    }
    let left = SqlFragment::new("SELECT id FROM runs ORDER BY id", []);
    assert_eq!(ids(&db, left).await, ["run_e"]);
}
