//! `POST /runs` racing `DELETE /documents/{id}` on the real `shelf api`, on SQLite and on
//! PostgreSQL: every creation answers 201 (made before the delete, which then removed it) or
//! 404 (the document was gone), never a 5xx, and no run, stage or event outlives its document.
//! The interleavings themselves are forced one by one in `app/tests/run_creation.rs`; this is
//! the same property under load, over the wire.

use reqwest::StatusCode;
use sea_orm::{ConnectionTrait, Database, Statement};
use serde_json::json;

use crate::api::{Api, client, migrated, upload};
use crate::pg_cluster::PgCluster;
use crate::support::Env;

/// Documents created and deleted, each with this many run creations racing its delete.
const ROUNDS: usize = 40;
const CREATIONS: usize = 4;

/// Runs of no document, and stages and events of no run.
async fn orphans(url: &str) -> i64 {
    let db = Database::connect(url).await.expect("connect");
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT (SELECT COUNT(*) FROM runs WHERE subject NOT IN (SELECT id FROM documents)) \
             + (SELECT COUNT(*) FROM run_stages WHERE run_id NOT IN (SELECT id FROM runs)) \
             + (SELECT COUNT(*) FROM run_events WHERE run_id NOT IN (SELECT id FROM runs)) AS n",
        ))
        .await
        .expect("count")
        .expect("a row");
    let n = row.try_get::<i64>("", "n").expect("n");
    db.close().await.expect("close");
    n
}

async fn creations_racing_deletes_leave_no_orphan(env: Env, database_url: String) {
    let env = migrated(env);
    let api = Api::start(&env);
    let client = client();
    let (mut created, mut gone) = (0usize, 0usize);
    for round in 0..ROUNDS {
        let (status, doc) = upload(
            &client,
            &api,
            &format!("race-{round}.txt"),
            format!("document {round} of the race between runs and deletes\n").into_bytes(),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{doc}");
        let id = doc["id"].as_str().expect("id").to_string();
        // All five requests in flight at once, the delete among them.
        let creations: Vec<_> = (0..CREATIONS)
            .map(|_| {
                let request = client
                    .post(api.url("/runs"))
                    .json(&json!({ "document_id": id }));
                tokio::spawn(async move {
                    let answer = request.send().await.expect("create");
                    (answer.status(), answer.text().await.unwrap_or_default())
                })
            })
            .collect();
        let deleted = client
            .delete(api.url(&format!("/documents/{id}")))
            .send()
            .await
            .expect("delete");
        assert_eq!(deleted.status(), StatusCode::OK, "round {round}: delete");
        let mut answers = Vec::new();
        for creation in creations {
            answers.push(creation.await.expect("task"));
        }
        for (status, body) in answers {
            match status {
                StatusCode::CREATED => created += 1,
                StatusCode::NOT_FOUND => gone += 1,
                other => panic!("round {round}: POST /runs answered {other}: {body}"),
            }
        }
    }
    eprintln!("{created} runs created before their document's delete, {gone} refused after it");
    assert_eq!(
        orphans(&database_url).await,
        0,
        "runs, stages or events outlived their document"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_creations_racing_deletes_leave_no_orphan_run() {
    let env = Env::new();
    let url = format!(
        "sqlite://{}?mode=ro",
        env.path().join("data/shelf.sqlite").display()
    );
    creations_racing_deletes_leave_no_orphan(env, url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_creations_racing_deletes_leave_no_orphan_run_on_postgres() {
    let Some(cluster) = PgCluster::shared() else {
        eprintln!("skipped on PostgreSQL: no PostgreSQL server binaries here");
        return;
    };
    let url = cluster.create_database("runraces");
    let env = Env::new().with("SHELF_DATABASE_URL", &url);
    creations_racing_deletes_leave_no_orphan(env, url).await;
}
