//! Runs that nothing executes, made visible and fixable: `shelf api --workers N` executing
//! queued runs with no `shelf worker` (and releasing them on SIGTERM), `GET /queue` and
//! `shelf runs` warning about runs that wait with no claim, and a `POST /imports` whose client
//! disconnects still finishing its run.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated, run_to_the_end_with, upload};
use crate::fake_model::FakeModel;
use crate::pg_cluster::PgCluster;
use crate::support::{Env, corpus, wait_for};

const TEXT: &[u8] = b"Farriers trim and shoe the hooves of horses.\n";

/// The database of `env`, as a URL: its PostgreSQL URL, or its SQLite file.
fn database_url(env: &Env) -> String {
    env.vars
        .iter()
        .find(|(k, _)| k == "SHELF_DATABASE_URL")
        .map(|(_, url)| url.clone())
        .unwrap_or_else(|| {
            let db = env.path().join("data/shelf.sqlite");
            format!("sqlite://{}?mode=rw", db.display())
        })
}

/// Moves a run's due time two minutes back, as if it had waited that long (the database is
/// shared with the running API, as with any second process).
async fn age_run(env: &Env, run_id: &str) {
    use sea_orm::ConnectionTrait;
    let conn = sea_orm::Database::connect(database_url(env))
        .await
        .expect("open the database");
    conn.execute_unprepared(&format!(
        "UPDATE runs SET due_at = due_at - 120000 WHERE id = '{run_id}'"
    ))
    .await
    .expect("age the run");
    conn.close().await.expect("close");
}

/// Polls `check` until it returns Some, or panics after `timeout`.
async fn poll<T, F: std::future::Future<Output = Option<T>>>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `POST /runs` of `doc` (queued: the default processing mode); the new run's id.
async fn create_run(client: &reqwest::Client, api: &Api, doc: &Value) -> String {
    let run: Value = client
        .post(api.url("/runs"))
        .json(&json!({"document_id": doc["id"]}))
        .send()
        .await
        .expect("create run")
        .json()
        .await
        .expect("run");
    run["id"].as_str().expect("run id").to_string()
}

/// Polls `GET /runs/{id}` until the run is terminal.
async fn wait_terminal(api: &Api, run_id: &str) -> Value {
    let client = client();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let run = get_json(&client, api, &format!("/runs/{run_id}")).await;
        if matches!(
            run["status"].as_str(),
            Some("succeeded" | "failed" | "canceled")
        ) {
            return run;
        }
        assert!(Instant::now() < deadline, "run never ended: {run:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A single-process deployment: `shelf api --workers 1` and no `shelf worker` executes a run
/// queued through the API, and `GET /queue` then shows the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_with_workers_executes_queued_runs_alone() {
    let env = migrated(Env::new());
    let api = Api::start_with(&env, &["api", "--port", "0", "--workers", "1"]);
    let client = client();
    let (status, doc) = upload(&client, &api, "farriers.txt", TEXT.to_vec()).await;
    assert_eq!(status, 201, "{doc}");
    let run = run_to_the_end_with(
        &client,
        &api,
        json!({"document_id": doc["id"], "processing_mode": "queue"}),
    )
    .await;
    assert_eq!(run["status"], "succeeded", "{run:#}\n{}", api.logs());

    let queue = get_json(&client, &api, "/queue").await;
    assert!(queue["last_claim_at"].is_string(), "{queue}");
    assert_eq!(queue["queued"], 0, "{queue}");
    assert_eq!(queue["running"], 0, "{queue}");
    assert_eq!(queue["warning"], Value::Null, "{queue}");
}

/// An API without workers leaves a queued run queued, and says so: `GET /queue` counts it
/// (never claimed), and once it has waited over a minute (its due time moved back, not
/// waited for) `GET /queue` and `shelf runs` warn. Restarted with `SHELF_API_WORKERS=1`, the
/// API executes it and the claim shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_warns_about_runs_no_worker_claims_until_one_does() {
    queue_warns_until_a_worker_claims(migrated(Env::new())).await;
}

/// The same on PostgreSQL (skipped where there is none): the queue's statement is one text
/// for both backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_warns_the_same_on_postgres() {
    let Some(cluster) = PgCluster::shared() else {
        eprintln!("skipped: no PostgreSQL (set SHELF_REQUIRE_POSTGRES=1 to fail)");
        return;
    };
    let url = cluster.create_database("queue_health");
    queue_warns_until_a_worker_claims(Env::new().with("SHELF_DATABASE_URL", &url)).await;
}

async fn queue_warns_until_a_worker_claims(env: Env) {
    let mut api = Api::start(&env);
    let client = client();
    let (_, doc) = upload(&client, &api, "farriers.txt", TEXT.to_vec()).await;
    let run_id = create_run(&client, &api, &doc).await;

    let queue = get_json(&client, &api, "/queue").await;
    assert_eq!(
        (queue["queued"].as_u64(), queue["due"].as_u64()),
        (Some(1), Some(1)),
        "{queue}"
    );
    // Due at creation: it has an age, whatever it is.
    assert!(queue["oldest_due_age_seconds"].is_u64(), "{queue}");
    assert_eq!(queue["last_claim_at"], Value::Null, "{queue}");
    assert_eq!(queue["workers_seen_recently"], false, "{queue}");

    age_run(&env, &run_id).await;
    let queue = get_json(&client, &api, "/queue").await;
    assert!(
        queue["oldest_due_age_seconds"].as_u64() >= Some(120),
        "{queue}"
    );
    let warning = queue["warning"]
        .as_str()
        .unwrap_or_else(|| panic!("no warning: {queue}"))
        .to_string();
    assert!(
        warning.starts_with("1 run is waiting") && warning.contains("shelf api --workers N"),
        "{warning}"
    );
    let listed = env.run(&["runs"]);
    assert!(listed.status.success());
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert!(stderr.contains(&format!("warning: {warning}")), "{stderr}");
    let listed = env.json(&["runs", "--json"]);
    assert_eq!(listed["queue_warning"], warning.as_str(), "{listed}");
    // Still queued: an API without workers never takes it.
    let still = get_json(&client, &api, &format!("/runs/{run_id}")).await;
    assert_eq!(still["status"], "queued", "{still}");

    let stopped = api.process.terminate(Duration::from_secs(60));
    assert!(stopped.is_some_and(|s| s.success()), "{}", api.logs());
    let env = env.with("SHELF_API_WORKERS", "1");
    let api = Api::start(&env);
    let done = wait_terminal(&api, &run_id).await;
    assert_eq!(done["status"], "succeeded", "{done:#}\n{}", api.logs());
    let queue = get_json(&client, &api, "/queue").await;
    assert!(queue["last_claim_at"].is_string(), "{queue}");
    assert_eq!(queue["queued"], 0, "{queue}");
    assert_eq!(queue["warning"], Value::Null, "{queue}");
    assert_eq!(env.json(&["runs", "--json"])["queue_warning"], Value::Null);
}

/// SIGTERM stops the API's workers with it: the run one of them was executing (its stage
/// waiting on a model that holds its answer) goes back to the queue at once, released rather
/// than left to a lapsing lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_puts_the_runs_of_api_workers_back_on_the_queue() {
    let model = FakeModel::held();
    let env = migrated(with_model(Env::new(), &model));
    let mut api = Api::start_with(&env, &["api", "--port", "0", "--workers", "1"]);
    let client = client();
    let text = std::fs::read(corpus("text/crazyones.txt")).expect("corpus");
    let (_, doc) = upload(&client, &api, "crazy.txt", text).await;
    let run_id = create_run(&client, &api, &doc).await;
    poll(
        Duration::from_secs(60),
        "the worker to call the model",
        || async { (model.requests() >= 1).then_some(()) },
    )
    .await;

    let stopped = api.process.terminate(Duration::from_secs(60));
    assert!(stopped.is_some_and(|s| s.success()), "{}", api.logs());
    let shown = env.json(&["runs", &run_id, "--json"]);
    assert_eq!(shown["status"], "queued", "{shown:#}");
    let kinds: Vec<&str> = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"run_released"), "{kinds:?}");
}

/// A `shelf worker` with a remote model has no fixed number of runs: with every run waiting
/// on the model (which holds its answers), it claims as many as the limiter lets calls out,
/// far past the two a worker used to keep, since each run it holds is in a model call and few
/// calls wait. The limit starts at one and grows only on answers, which a model that holds
/// them never gives, so the operator's floor (`SHELF_LLM_MIN_CONCURRENCY`, a server known to
/// take 8) sets it here. SIGTERM then puts every run back on the queue, none left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_keeps_as_many_runs_as_the_model_takes() {
    let model = FakeModel::held();
    let env = migrated(with_model(Env::new(), &model).with("SHELF_LLM_MIN_CONCURRENCY", "8"));
    let mut runs = Vec::new();
    for i in 0..8 {
        let file = env.write(
            &format!("waiting-{i}.txt"),
            format!("Document {i} waits for a model that answers when the test says so.\n"),
        );
        runs.push(env.queue(&file).1);
    }
    let mut worker = env.spawn(&["worker"]);
    // Eight runs, each with one cleaning request out at the same time: only a worker whose
    // runs follow the model gets there (a fixed two would hold two requests forever).
    wait_for(Duration::from_secs(120), "8 requests held at once", || {
        (model.held_requests() >= 8).then_some(())
    });
    let stopped = worker.terminate(Duration::from_secs(60));
    assert!(stopped.is_some_and(|s| s.success()), "{stopped:?}");
    for run_id in &runs {
        let shown = env.json(&["runs", run_id, "--json"]);
        assert_eq!(shown["status"], "queued", "{shown:#}");
    }
    model.release();
}

/// A `shelf worker` at default settings whose model server answers its first 60 requests
/// with 429 (a storm of push-back): every run succeeds and no stage used a second attempt,
/// since a refusal waits out `Retry-After` instead of failing the call (the provider has 3
/// retries, which 60 refusals would have spent many times over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_refusals_fails_no_run_and_spends_no_attempt() {
    let model = FakeModel::refusing_first(60);
    let env = migrated(with_model(Env::new(), &model));
    let mut runs = vec![env.queue(&corpus("text/crazyones.txt")).1];
    for i in 0..5 {
        let file = env.write(
            &format!("note-{i}.txt"),
            format!("Note {i}. The model server was busy when this note was read.\n"),
        );
        runs.push(env.queue(&file).1);
    }
    let _worker = env.spawn(&["worker"]);
    for run_id in &runs {
        let shown = wait_for(Duration::from_secs(120), "the run to end", || {
            let shown = env.json(&["runs", run_id, "--json"]);
            (shown["status"] != "queued" && shown["status"] != "running").then_some(shown)
        });
        assert_eq!(shown["status"], "succeeded", "{shown:#}");
        for stage in shown["stages"].as_array().expect("stages") {
            assert!(stage["attempts"].as_u64() <= Some(1), "{stage:#}");
        }
    }
    assert_eq!(model.refused(), 60);
}

/// Worker counts out of range are refused before anything starts, from the flag and from the
/// setting alike.
#[test]
fn api_worker_counts_out_of_range_are_refused() {
    let env = Env::new();
    let flag = env.run(&["api", "--port", "0", "--workers", "257"]);
    assert_eq!(flag.status.code(), Some(2), "{flag:?}");
    let env = env.with("SHELF_API_WORKERS", "257");
    let setting = env.run(&["api", "--port", "0"]);
    assert_eq!(setting.status.code(), Some(2), "{setting:?}");
    let stderr = String::from_utf8_lossy(&setting.stderr);
    assert!(stderr.contains("SHELF_API_WORKERS"), "{stderr}");
}

/// `env` with the `generic-compatible` provider on `model`; a key from the test's own
/// environment never reaches it.
fn with_model(env: Env, model: &FakeModel) -> Env {
    env.with("SHELF_LLM_PROVIDER", "generic-compatible")
        .with("SHELF_LLM_BASE_URL", &model.base_url)
        .with("SHELF_LLM_API_KEY_ENV", "SHELF_TEST_NO_SUCH_KEY")
}

fn read_manifest(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// `POST /imports` with `processing_mode: process` whose client gives up while the run waits
/// on the model (`curl -m 3`): the import goes on without it, and its run succeeds instead of
/// staying `running` with nothing to finish it. The fake model holds its answers until
/// released, so the request is known to be open (the run is mid-stage) when the client
/// closes; no worker runs, so only the detached import can finish the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_whose_client_disconnects_still_finishes_its_run() {
    let model = FakeModel::held();
    let env = Env::new();
    let root = env.path().join("root");
    let env = migrated(
        with_model(env, &model).with("SHELF_API_IMPORT_ROOT", root.to_str().expect("utf-8")),
    );
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::copy(corpus("text/crazyones.txt"), root.join("crazy.txt")).expect("copy");
    let api = Api::start(&env);

    // A raw connection, so "the client went away" is exactly a closed socket.
    let address = api.url("").trim_start_matches("http://").to_string();
    let mut socket = TcpStream::connect(&address).expect("connect");
    let body =
        json!({"source_dir": "crazy.txt", "processing_mode": "process", "manifest_path": "import.json"})
            .to_string();
    write!(
        socket,
        "POST /imports HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send the import");
    poll(
        Duration::from_secs(60),
        "the run to call the model",
        || async { (model.requests() >= 1).then_some(()) },
    )
    .await;
    // The model holds its answer, so the import cannot have answered yet.
    socket.set_nonblocking(true).expect("nonblocking");
    let mut byte = [0u8; 1];
    let read = socket.read(&mut byte);
    assert!(
        matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the import answered before the model did: {read:?}"
    );
    socket
        .shutdown(std::net::Shutdown::Both)
        .expect("close the connection");
    drop(socket);
    // Give the server a moment to see the closed connection before the model answers: without
    // it the test still passes, but it could miss the bug it guards against (an import dropped
    // with its request).
    tokio::time::sleep(Duration::from_millis(500)).await;
    model.release();

    let client = client();
    let run = poll(
        Duration::from_secs(120),
        "the import's run to end",
        || async {
            let runs = get_json(&client, &api, "/runs").await;
            let run = runs["runs"].get(0).cloned()?;
            matches!(
                run["status"].as_str(),
                Some("succeeded" | "failed" | "canceled")
            )
            .then_some(run)
        },
    )
    .await;
    assert_eq!(run["status"], "succeeded", "{run:#}\n{}", api.logs());
    let manifest = poll(
        Duration::from_secs(60),
        "the import to complete",
        || async {
            read_manifest(&root.join("import.json")).filter(|m| m["status"] == "completed")
        },
    )
    .await;
    assert_eq!(
        manifest["files"][0]["run_status"], "succeeded",
        "{manifest:#}"
    );
    assert_eq!(manifest["files"][0]["status"], "converted", "{manifest:#}");
}
