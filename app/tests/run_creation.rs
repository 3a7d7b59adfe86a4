//! A run's creation and its document's deletion, interleaved on purpose rather than hoped to
//! race: the document is checked inside the transaction that inserts the run, so no order of
//! the two leaves a run of a document that is gone. On SQLite and on the test process's
//! PostgreSQL cluster (skipped with a message when PostgreSQL is absent).

#[path = "../../tests/support/pg_cluster.rs"]
mod pg_cluster;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Database, DbBackend, Statement, TransactionTrait};
use shelf_app::{ProcessingMode, Settings, Shelf};
use shelf_db::sql::SqlExt;
use tempfile::TempDir;

/// A Shelf on a new data directory: its SQLite file, or a fresh PostgreSQL database.
async fn shelf(postgres: Option<String>) -> (TempDir, Shelf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut vars = HashMap::from([
        (
            "SHELF_DATA_DIR".to_string(),
            dir.path().join("data").display().to_string(),
        ),
        ("SHELF_LLM_PROVIDER".to_string(), "mock".to_string()),
    ]);
    if let Some(url) = postgres {
        vars.insert("SHELF_DATABASE_URL".to_string(), url);
    }
    let settings = Settings::from_vars(&vars).expect("settings");
    (dir, Shelf::open(settings).await.expect("open"))
}

fn postgres_url(prefix: &str) -> Option<String> {
    match pg_cluster::PgCluster::shared() {
        Some(cluster) => Some(cluster.create_database(prefix)),
        None => {
            eprintln!("skipped on PostgreSQL: no PostgreSQL binaries");
            None
        }
    }
}

async fn ingest(dir: &TempDir, shelf: &Shelf, text: &str) -> String {
    let path = dir.path().join("doc.txt");
    std::fs::write(&path, text).expect("write");
    shelf.ingest_path(&path).await.expect("ingest").document.id
}

async fn count(shelf: &Shelf, sql: &str) -> i64 {
    shelf
        .db
        .query_one_sql(Statement::from_string(DbBackend::Sqlite, sql))
        .await
        .expect("count")
        .expect("a row")
        .try_get::<i64>("", "n")
        .expect("n")
}

async fn runs(shelf: &Shelf) -> i64 {
    count(shelf, "SELECT COUNT(*) AS n FROM runs").await
}

/// Runs of no document, with their stages and events: what the race used to leave.
async fn orphans(shelf: &Shelf) -> i64 {
    count(
        shelf,
        "SELECT (SELECT COUNT(*) FROM runs WHERE subject NOT IN (SELECT id FROM documents)) \
         + (SELECT COUNT(*) FROM run_stages WHERE run_id NOT IN (SELECT id FROM runs)) \
         + (SELECT COUNT(*) FROM run_events WHERE run_id NOT IN (SELECT id FROM runs)) AS n",
    )
    .await
}

/// `process_with`'s steps taken apart: the document is read (found), the pipeline loaded,
/// then the document is deleted, then the run is submitted. Before the check moved into the
/// run's transaction, this submission inserted a queued run of a document that no longer
/// existed.
async fn deleted_between_the_check_and_the_insert(postgres: Option<String>) {
    let (dir, shelf) = shelf(postgres).await;
    let id = ingest(&dir, &shelf, "a document about to go\n").await;
    shelf.document(&id).await.expect("the check finds it");
    let pipeline = shelf
        .load_pipeline(&shelf.settings.pipeline.name)
        .expect("pipeline");
    shelf.delete_document(&id).await.expect("delete");
    let err = shelf
        .submit_run(&id, &pipeline)
        .await
        .expect_err("no run for a deleted document");
    assert_eq!(err.code(), "not_found", "{err}");
    assert!(err.is_user_error(), "the document's 404, not a 503: {err}");
    assert_eq!(runs(&shelf).await, 0, "no run was written");
    assert_eq!(orphans(&shelf).await, 0);
}

#[tokio::test]
async fn a_document_deleted_between_the_check_and_the_insert_gets_no_run_on_sqlite() {
    deleted_between_the_check_and_the_insert(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_deleted_between_the_check_and_the_insert_gets_no_run_on_postgres() {
    if let Some(url) = postgres_url("runcreate") {
        deleted_between_the_check_and_the_insert(Some(url)).await;
    }
}

/// The other order: the run is created first, then the delete removes it with the document.
async fn created_then_deleted(postgres: Option<String>) {
    let (dir, shelf) = shelf(postgres).await;
    let id = ingest(&dir, &shelf, "a document with a run\n").await;
    let run = shelf
        .process(&id, None, ProcessingMode::Queue)
        .await
        .expect("run created")
        .expect("a run");
    assert_eq!(run.subject, id);
    shelf.delete_document(&id).await.expect("delete");
    assert_eq!(runs(&shelf).await, 0, "the delete took the run");
    assert_eq!(orphans(&shelf).await, 0);
}

#[tokio::test]
async fn a_run_created_before_the_delete_goes_with_its_document_on_sqlite() {
    created_then_deleted(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_created_before_the_delete_goes_with_its_document_on_postgres() {
    if let Some(url) = postgres_url("runcreate") {
        created_then_deleted(Some(url)).await;
    }
}

/// Waits until some session of this database waits on a lock (the run's creation, on the
/// document's advisory lock).
async fn until_blocked_on_a_lock(db: &sea_orm::DatabaseConnection) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = db
            .query_one_raw(Statement::from_string(
                DbBackend::Postgres,
                "SELECT COUNT(*) AS n FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            ))
            .await
            .expect("pg_stat_activity")
            .expect("one row");
        if row.try_get::<i64>("", "n").expect("n") > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the run's creation never waited for the delete in flight"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// PostgreSQL, where transactions really overlap: a delete holds its document's lock and has
/// not yet written anything when `POST /runs`' call starts. The creation reads the document
/// (still there), then waits for the lock; the delete removes the document and commits; the
/// creation then finds it gone and writes nothing. Without the lock in the run's transaction
/// the creation would not wait, and its run would outlive the document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_creation_waits_for_a_delete_in_flight_and_finds_the_document_gone_on_postgres() {
    let Some(url) = postgres_url("runcreate") else {
        return;
    };
    let (dir, shelf) = shelf(Some(url.clone())).await;
    let id = ingest(&dir, &shelf, "a document deleted while its run is made\n").await;
    let pk: i64 = shelf
        .db
        .query_one_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "SELECT pk FROM documents WHERE id = ?",
            [id.clone().into()],
        ))
        .await
        .expect("pk")
        .expect("row")
        .try_get("", "pk")
        .expect("pk");

    // The delete, as `DocumentStore::delete` runs it, paused after its lock.
    let other = Database::connect(url).await.expect("connect");
    let delete = other.begin().await.expect("begin");
    let lock = shelf_documents::lock_document_statement(DbBackend::Postgres, &id)
        .expect("a lock on PostgreSQL");
    delete.execute_sql(lock).await.expect("lock");

    let creating = {
        let shelf = shelf.clone();
        let id = id.clone();
        tokio::spawn(async move { shelf.process(&id, None, ProcessingMode::Queue).await })
    };
    until_blocked_on_a_lock(&other).await;
    // As `Shelf::delete_document` composes it: the engine's runs first, then the document.
    let statements = shelf_engine::subject_sql::delete_runs_of(&id)
        .into_iter()
        .chain(shelf_documents::delete_statements(&id, pk));
    for statement in statements {
        delete.execute_sql(statement).await.expect("delete");
    }
    delete.commit().await.expect("commit");

    let err = creating
        .await
        .expect("task")
        .expect_err("the document went first");
    assert_eq!(err.code(), "not_found", "{err}");
    assert!(err.is_user_error(), "the document's 404, not a 503: {err}");
    assert_eq!(runs(&shelf).await, 0, "no run was written");
    assert_eq!(orphans(&shelf).await, 0);
}
