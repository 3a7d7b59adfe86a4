//! A new data directory that just works: `shelf api` and `shelf worker` create and migrate
//! the database themselves, processes starting at once on one new database do not race, a
//! refused public bind touches no storage, a broken `uploads` answers `ingest_failed`; and
//! `shelf delete` through the same service as `DELETE /documents/{id}`.

use shelf_db::sql::SqlExt;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::api::{Api, client, get_json, upload};
use crate::support::{Env, Running, corpus, wait_for};

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The tables a migrated database has, and SQLite's verdict on the file (on its own thread:
/// async tests call it too).
fn inspect(db: &Path) -> (Vec<String>, String) {
    let db = db.to_path_buf();
    std::thread::spawn(move || inspect_now(&db))
        .join()
        .expect("inspect")
}

fn inspect_now(db: &Path) -> (Vec<String>, String) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let conn = sea_orm::Database::connect(format!("sqlite://{}?mode=ro", db.display()))
            .await
            .expect("open");
        let tables = conn
            .query_all_sql(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Sqlite,
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
            ))
            .await
            .expect("tables")
            .iter()
            .filter_map(|row| row.try_get::<String>("", "name").ok())
            .collect();
        let verdict = conn
            .query_one_sql(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Sqlite,
                "PRAGMA integrity_check",
            ))
            .await
            .expect("check")
            .and_then(|row| row.try_get_by_index::<String>(0).ok())
            .unwrap_or_default();
        (tables, verdict)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_serves_at_once_on_an_empty_directory() {
    let env = Env::new();
    assert!(!env.path().join("data").exists());
    let api = Api::start(&env);
    let client = client();
    let ready = client.get(api.url("/ready")).send().await.expect("ready");
    assert_eq!(ready.status(), 200);
    let ready: Value = ready.json().await.expect("json");
    assert_eq!(ready["status"], "ready");
    assert!(!strings(&ready["applied_migrations"]).is_empty());
    let text = std::fs::read(corpus("text/crazyones.txt")).expect("corpus");
    let (status, doc) = upload(&client, &api, "crazyones.txt", text).await;
    assert_eq!(status, 201, "{doc}");
    assert_eq!(get_json(&client, &api, "/documents").await["total"], 1);
}

#[test]
fn processes_migrating_one_new_database_at_once_do_not_race() {
    for round in 0..4 {
        let env = Env::new();
        // Both start before either has created the file.
        let spawned: Vec<_> = (0..2)
            .map(|_| {
                env.command(&["migrate", "--json"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn")
            })
            .collect();
        let outputs: Vec<Output> = spawned
            .into_iter()
            .map(|c| c.wait_with_output().expect("wait"))
            .collect();
        let mut applied_now = Vec::new();
        let mut full = Vec::new();
        for out in &outputs {
            assert!(
                out.status.success(),
                "round {round}: {} {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let report = stdout_json(out);
            applied_now.extend(strings(&report["applied_now"]));
            full = strings(&report["applied_migrations"]);
        }
        // Every migration was applied exactly once, by one of the two.
        applied_now.sort();
        assert_eq!(applied_now, full, "round {round}");
        let (tables, verdict) = inspect(&env.path().join("data/shelf.sqlite"));
        assert_eq!(verdict, "ok");
        for table in ["documents", "runs", "seaql_migrations"] {
            assert!(tables.iter().any(|t| t == table), "{table}: {tables:?}");
        }
    }
}

/// Starts `shelf worker` and returns it once it logged `worker started` (its stderr is then
/// drained in the background); panics with its output if it exits first.
fn start_worker(env: &Env) -> Running {
    let mut worker = env.spawn(&["worker"]);
    let stderr = worker.child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = String::new();
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            seen.push_str(&line);
            seen.push('\n');
            if !sent && line.contains("worker started") {
                let _ = tx.send(Ok(()));
                sent = true;
            }
        }
        if !sent {
            let _ = tx.send(Err(seen));
        }
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(())) => worker,
        Ok(Err(log)) => panic!("the worker exited: {log}"),
        Err(e) => panic!("the worker did not start: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_starting_together_on_a_new_database_all_come_up() {
    for _ in 0..3 {
        let env = Env::new();
        // Two APIs and two workers start at once on one database that does not exist yet.
        let (apis, workers) = std::thread::scope(|s| {
            let apis = [s.spawn(|| Api::start(&env)), s.spawn(|| Api::start(&env))];
            let workers = [
                s.spawn(|| start_worker(&env)),
                s.spawn(|| start_worker(&env)),
            ];
            (
                apis.map(|h| h.join().expect("api")),
                workers.map(|h| h.join().expect("worker")),
            )
        });
        let client = client();
        for api in &apis {
            let ready = client.get(api.url("/ready")).send().await.expect("ready");
            assert_eq!(ready.status(), 200);
        }
        let (tables, verdict) = inspect(&env.path().join("data/shelf.sqlite"));
        assert_eq!(verdict, "ok");
        assert!(tables.iter().any(|t| t == "documents"), "{tables:?}");
        drop(workers);
    }
}

#[test]
fn a_refused_public_bind_creates_no_storage() {
    let env = Env::new();
    let data = env.path().join("data");
    let out = env.run(&["api", "--host", "0.0.0.0", "--port", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SHELF_API_KEY") && stderr.contains("SHELF_API_IMPORT_ROOT"),
        "{stderr}"
    );
    assert!(!data.exists(), "the data directory was created");

    // From the environment, with a key but no import root.
    let out = env
        .command(&["api", "--port", "0"])
        .env("SHELF_API_HOST", "0.0.0.0")
        .env("SHELF_API_KEY", "a-key")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SHELF_API_IMPORT_ROOT") && !stderr.contains("SHELF_API_KEY,"),
        "{stderr}"
    );
    assert!(!data.exists(), "the data directory was created");

    // An import root but no key.
    let root = env.path().join("imports");
    std::fs::create_dir_all(&root).expect("mkdir");
    let out = env
        .command(&["api", "--host", "0.0.0.0", "--port", "0"])
        .env("SHELF_API_IMPORT_ROOT", &root)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("an API key"));
    assert!(!data.exists(), "the data directory was created");
}

/// An API on a data directory whose `uploads` is a regular file: a broken data directory, not
/// anything a client did.
pub(crate) fn api_with_a_file_for_uploads(env: &Env) -> Api {
    let data = env.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("uploads"), b"a file where a directory belongs").expect("write");
    Api::start(env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unplanned_upload_failure_is_ingest_failed() {
    let env = Env::new();
    let api = api_with_a_file_for_uploads(&env);
    let client = client();
    let (status, body) = upload(&client, &api, "note.txt", b"some text\n".to_vec()).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "ingest_failed");
    assert_eq!(body["detail"], "Document ingest failed");
    assert_eq!(get_json(&client, &api, "/documents").await["total"], 0);
    let logs = wait_for(Duration::from_secs(10), "the cause in the log", || {
        let logs = api.logs();
        logs.contains("not a directory").then_some(logs)
    });
    assert_eq!(
        logs.matches("not a directory").count(),
        1,
        "the cause is logged once: {logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shelf_delete_removes_uploads_and_leaves_imported_sources() {
    let env = Env::new();
    let api = Api::start(&env);
    let client = client();
    let (status, doc) = upload(&client, &api, "gone.txt", b"to be deleted\n".to_vec()).await;
    assert_eq!(status, 201);
    let id = doc["id"].as_str().expect("id").to_string();
    let owned = env.path().join("data/uploads").join(&id).join("gone.txt");
    assert!(owned.is_file());
    let deleted = env.json(&["delete", &id, "--json"]);
    assert_eq!(deleted["id"], id.as_str());
    assert_eq!(deleted["deleted"], true);
    assert_eq!(deleted["removed_files"], true);
    assert!(!owned.exists());
    let reply = client
        .get(api.url(&format!("/documents/{id}")))
        .send()
        .await
        .expect("get");
    assert_eq!(reply.status(), 404);

    // Again: it is gone, and the exit code says so.
    let out = env.run(&["delete", &id, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stdout_json(&out)["code"], "not_found");
    let out = env.run(&["delete", "doc_0000000000000000"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}

#[test]
fn deleting_an_imported_document_keeps_its_source_and_creates_nothing() {
    let env = Env::new();
    let source = env.write("sources/kept.md", "# Kept\n\nAn imported source file.\n");
    let report = env.json(&[
        "import",
        &source.display().to_string(),
        "--mode",
        "none",
        "--json",
    ]);
    let id = report["files"][0]["document_id"]
        .as_str()
        .expect("document id")
        .to_string();
    let uploads = env.path().join("data/uploads");
    assert!(!uploads.exists());
    let out = env.run(&["delete", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("deleted {id}")));
    assert!(source.is_file(), "the source file was removed");
    assert!(!uploads.exists(), "an uploads directory was created");
    assert_eq!(env.json(&["runs", "--json"])["total"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shelf_delete_refuses_a_symlinked_uploads_directory() {
    let env = Env::new();
    let api = Api::start(&env);
    let client = client();
    let (_, doc) = upload(&client, &api, "linked.txt", b"behind a link\n".to_vec()).await;
    let id = doc["id"].as_str().expect("id").to_string();
    drop(api);
    let uploads = env.path().join("data/uploads");
    let moved = env.path().join("elsewhere");
    std::fs::rename(&uploads, &moved).expect("move");
    std::os::unix::fs::symlink(&moved, &uploads).expect("symlink");
    let out = env.run(&["delete", &id, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_json(&out)["code"], "invalid_import_path");
    assert!(
        moved.join(&id).join("linked.txt").is_file(),
        "nothing removed"
    );
    // The row is still there: the refusal came before the delete.
    std::fs::remove_file(&uploads).expect("unlink");
    std::fs::rename(&moved, &uploads).expect("move back");
    let deleted = env.json(&["delete", &id, "--json"]);
    assert_eq!(deleted["removed_files"], true);
}
