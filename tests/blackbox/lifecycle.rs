//! The run lifecycle seen from outside, with real `shelf api` and `shelf worker` processes and a
//! fake model that holds chosen requests: two runs of one document never run at once and end
//! in creation order, and a run canceled between `clean` and `index` leaves the document as it
//! was (no `ready` without an index, no content from the canceled run).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated, post_files, upload};
use crate::fake_model::FakeModel;
use crate::support::{Env, WriteLock, corpus, tree};

fn env_with(model: &FakeModel) -> Env {
    migrated(
        Env::new()
            .with("SHELF_LLM_PROVIDER", "generic-compatible")
            .with("SHELF_LLM_BASE_URL", &model.base_url)
            // A key from the test's own environment must not reach the fake model.
            .with("SHELF_LLM_API_KEY_ENV", "SHELF_TEST_NO_SUCH_KEY"),
    )
}

/// Polls `check` until it returns Some; the deadline only bounds a broken run.
async fn poll<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn create_run(api: &Api, document_id: &str) -> Value {
    let reply = client()
        .post(api.url("/runs"))
        .json(&json!({ "document_id": document_id }))
        .send()
        .await
        .expect("create run");
    assert_eq!(reply.status(), 201);
    reply.json().await.expect("run")
}

async fn run_status(api: &Api, run_id: &str) -> Value {
    get_json(&client(), api, &format!("/runs/{run_id}")).await
}

async fn wait_status(api: &Api, run_id: &str, status: &str) -> Value {
    poll(&format!("run {run_id} {status}"), || async {
        let run = run_status(api, run_id).await;
        (run["status"] == status).then_some(run)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_of_one_document_with_two_workers_never_overlap_and_end_in_order() {
    let model = FakeModel::held();
    let env = env_with(&model);
    let api = Api::start(&env);
    let _workers = [env.spawn(&["worker"]), env.spawn(&["worker"])];
    let text = std::fs::read(corpus("text/crazyones.txt")).expect("corpus");
    let (_, doc) = upload(&client(), &api, "crazy.txt", text).await;
    let document_id = doc["id"].as_str().expect("id").to_string();
    // Two clicks at once: both answered 201.
    let (first, second) = tokio::join!(
        create_run(&api, &document_id),
        create_run(&api, &document_id)
    );
    // One of them holds the model; the other must wait in the queue, whichever worker polls.
    poll("a run to call the model", || async {
        (model.requests() >= 1).then_some(())
    })
    .await;
    let runs = get_json(&client(), &api, &format!("/runs?document_id={document_id}")).await;
    let statuses: Vec<&str> = runs["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["status"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == "running").count(),
        1,
        "{runs:#}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == "queued").count(),
        1,
        "{runs:#}"
    );
    model.release();
    let a = wait_status(&api, first["id"].as_str().unwrap_or_default(), "succeeded").await;
    let b = wait_status(&api, second["id"].as_str().unwrap_or_default(), "succeeded").await;
    // One ran after the other: the later start came after the earlier run had finished, and
    // when their creation times tell them apart, the older one ran first.
    let (earlier, later) = if a["started_at"].as_str() <= b["started_at"].as_str() {
        (a, b)
    } else {
        (b, a)
    };
    assert!(
        earlier["finished_at"].as_str() <= later["started_at"].as_str(),
        "the runs overlapped: {earlier:#} {later:#}"
    );
    assert!(
        earlier["created_at"].as_str() <= later["created_at"].as_str(),
        "the newer run ran first: {earlier:#} {later:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_canceled_between_clean_and_index_leaves_the_document_as_it_was() {
    // Classification is held: `clean` succeeds (its text committed), `index` never runs.
    let model = FakeModel::holding("Dewey");
    let env = env_with(&model);
    let api = Api::start_with(&env, &["api", "--port", "0", "--workers", "1"]);
    let text = std::fs::read(corpus("text/crazyones.txt")).expect("corpus");
    let (_, doc) = upload(&client(), &api, "crazy.txt", text).await;
    let document_id = doc["id"].as_str().expect("id").to_string();
    let run = create_run(&api, &document_id).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    poll("classify to call the model", || async {
        (model.held_requests() >= 1).then_some(())
    })
    .await;
    let clean = run_status(&api, &run_id).await;
    let stage = |run: &Value, name: &str| {
        run["stages"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == name).cloned())
            .unwrap_or(Value::Null)
    };
    assert_eq!(stage(&clean, "clean")["status"], "succeeded", "{clean:#}");
    let canceled: Value = client()
        .post(api.url(&format!("/runs/{run_id}/cancel")))
        .send()
        .await
        .expect("cancel")
        .json()
        .await
        .expect("json");
    assert_eq!(canceled["outcome"], "requested", "{canceled:#}");
    wait_status(&api, &run_id, "canceled").await;

    // The document never had a succeeded run: not `ready`, no content, nothing found.
    let document = get_json(&client(), &api, &format!("/documents/{document_id}")).await;
    assert_eq!(document["status"], "ingested", "{document:#}");
    let content = client()
        .get(api.url(&format!("/documents/{document_id}/content")))
        .send()
        .await
        .expect("content");
    assert_eq!(content.status(), 404);
    let body: Value = content.json().await.expect("json");
    assert_eq!(body["code"], "not_found", "{body:#}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("no cleaned output")),
        "{body:#}"
    );
    let found: Value = client()
        .post(api.url("/search"))
        .json(&json!({ "query": "troublemakers" }))
        .send()
        .await
        .expect("search")
        .json()
        .await
        .expect("json");
    assert_eq!(found["total"], 0, "{found:#}");

    // A later run that succeeds makes it `ready`, with its content.
    model.release();
    let again = create_run(&api, &document_id).await;
    wait_status(&api, again["id"].as_str().unwrap_or_default(), "succeeded").await;
    let document = get_json(&client(), &api, &format!("/documents/{document_id}")).await;
    assert_eq!(document["status"], "ready", "{document:#}");
    let content = get_json(
        &client(),
        &api,
        &format!("/documents/{document_id}/content"),
    )
    .await;
    assert!(
        content["text"]
            .as_str()
            .is_some_and(|t| t.contains("troublemakers")),
        "{content:#}"
    );
}

/// A backup tool holds the database's write lock for 8 s just as a stage's answer comes back:
/// the worker waits for the lock instead of giving the run up, so the run succeeds with no
/// reclaim, no second attempt and no model call made twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_locked_for_8_s_mid_run_costs_no_model_call_twice() {
    let model = FakeModel::holding("Dewey");
    let env = env_with(&model);
    let api = Api::start(&env);
    let _worker = env.spawn(&["worker"]);
    let text = std::fs::read(corpus("text/crazyones.txt")).expect("corpus");
    let (_, doc) = upload(&client(), &api, "crazy.txt", text).await;
    let document_id = doc["id"].as_str().expect("id").to_string();
    let run = create_run(&api, &document_id).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    poll("classify to call the model", || async {
        (model.held_requests() >= 1).then_some(())
    })
    .await;
    let lock = WriteLock::hold_for(&env.path().join("data/shelf.sqlite"), 8);
    // Classification answers while the lock is held: its success has to wait for the lock.
    let before = model.requests();
    model.release();
    let done = wait_status(&api, &run_id, "succeeded").await;
    lock.release();
    assert_eq!(model.requests(), before, "a model call was made twice");
    let events = get_json(
        &client(),
        &api,
        &format!("/runs/{run_id}/events/records?limit=500"),
    )
    .await;
    let text = events.to_string();
    assert!(!text.contains("run_reclaimed"), "{events:#}");
    for stage in done["stages"].as_array().expect("stages") {
        assert!(
            stage["attempts"].as_i64().unwrap_or(0) <= 1,
            "a stage ran twice: {done:#}"
        );
    }
}

/// A backup tool holds the database's write lock for longer than the busy timeout while a
/// client uploads (alone and in a batch) and `shelf import` runs: the upload is answered 503
/// `service_unavailable` with `Retry-After` and a detail saying the database is busy (not a
/// 500), the batch entry and the import's record say the same (not `ingest_failed`), none
/// keeps anything, and the same upload retried once the lock is gone is stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_and_an_import_under_a_backups_write_lock_say_so_and_keep_nothing() {
    let env = migrated(Env::new());
    let api = Api::start(&env);
    // Held until the test closes the holder's stdin: the upload meets it however slow the
    // machine is.
    let lock = WriteLock::hold(&env.path().join("data/shelf.sqlite"));
    let text = std::fs::read(corpus("text/crazyones.txt")).expect("corpus");
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(text.clone()).file_name("crazy.txt"),
    );
    let reply = client()
        .post(api.url("/documents"))
        .multipart(form)
        .send()
        .await
        .expect("upload");
    assert_eq!(reply.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.headers()["retry-after"], "5");
    let body: Value = reply.json().await.expect("json");
    assert_eq!(body["code"], "service_unavailable", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("The database is busy")),
        "{body}"
    );
    // A batch under the same lock: the entry says why.
    let (status, batch) = post_files(
        &client(),
        &api,
        "/documents/batch",
        "files",
        &[("crazy.txt", text.clone())],
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{batch}");
    assert_eq!(
        batch["documents"][0]["error"]["code"], "service_unavailable",
        "{batch}"
    );
    // `shelf import` under the same lock: the file's record says why, the command exits 1.
    let file = env.write("in/crazy.txt", &text);
    let imported = env.run(&["import", &file.display().to_string(), "--json"]);
    assert_eq!(imported.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&imported.stdout).expect("import report");
    let error = &report["files"][0]["error"];
    assert_eq!(error["code"], "service_unavailable", "{report}");
    assert!(
        error["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("The database is busy")),
        "{report}"
    );
    lock.release();
    let listed = get_json(&client(), &api, "/documents").await;
    assert_eq!(
        listed["total"], 0,
        "the refused upload and import kept nothing: {listed}"
    );
    let (status, doc) = upload(&client(), &api, "crazy.txt", text).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{doc}");
    let listed = get_json(&client(), &api, "/documents").await;
    assert_eq!(listed["total"], 1, "{listed}");
    let stored = tree(&env.path().join("data/uploads"));
    assert_eq!(stored.len(), 1, "one stored file, no leftover: {stored:?}");
}
