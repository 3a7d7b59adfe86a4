//! A damaged database: one page of the `documents` table overwritten with garbage inside an
//! otherwise valid file (it opens, and everything not on that page reads). `shelf api`,
//! `shelf worker` and `shelf import` refuse it at start (`PRAGMA quick_check`, exit 4); with
//! that check off, reads that touch the page answer 503 `database_corrupt` (never 500),
//! writes are refused from then on, `shelf import` exits 4 and writes nothing, and the damage
//! is logged once with the recovery steps.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde_json::{Value, json};

use crate::api::{Api, client, upload};
use crate::support::{Env, wait_for};

/// The CLI's exit status for a damaged database (README, CLI).
const EXIT_DATABASE_CORRUPT: i32 = 4;

fn database(env: &Env) -> PathBuf {
    env.path().join("data/shelf.sqlite")
}

/// Overwrites the root page of `table` with garbage: the page size from the database, the page
/// from `sqlite_schema`, everything checkpointed into the main file first.
async fn damage_root_page(file: &Path, table: &str) {
    let url = format!("sqlite://{}?mode=rw", file.display());
    let db = sea_orm::Database::connect(&url).await.expect("open");
    let scalar = |sql: String| {
        let db = db.clone();
        async move {
            db.query_one_raw(Statement::from_string(DbBackend::Sqlite, sql.clone()))
                .await
                .expect("query")
                .unwrap_or_else(|| panic!("no row for {sql}"))
                .try_get_by_index::<i64>(0)
                .expect("integer")
        }
    };
    let page_size = scalar("PRAGMA page_size".into()).await;
    let root = scalar(format!(
        "SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = '{table}'"
    ))
    .await;
    assert!(root > 1, "{table} has its own root page");
    db.execute_unprepared("PRAGMA wal_checkpoint(TRUNCATE)")
        .await
        .expect("checkpoint");
    db.close().await.expect("close");
    let mut bytes = std::fs::read(file).expect("read the database");
    let start = usize::try_from((root - 1) * page_size).expect("offset");
    let end = start + usize::try_from(page_size).expect("page size");
    assert!(end <= bytes.len(), "the page is inside the file");
    bytes[start..end].fill(0x5a);
    std::fs::write(file, bytes).expect("write the damage");
}

/// The database file and its WAL as they are now: equal snapshots mean nothing was written.
fn snapshot(file: &Path) -> (Vec<u8>, Vec<u8>) {
    let mut wal = file.as_os_str().to_owned();
    wal.push("-wal");
    (
        std::fs::read(file).expect("read the database"),
        std::fs::read(PathBuf::from(wal)).unwrap_or_default(),
    )
}

/// Runs a command that must end by itself (a refused service), within a generous deadline.
fn run_to_exit(env: &Env, args: &[&str]) -> Output {
    let mut child = env
        .command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn shelf");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("shelf {args:?} did not refuse the damaged database and exit");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_page_is_reported_as_such_and_nothing_more_is_written() {
    let env = Env::new();
    let first = env.write(
        "farriers.txt",
        "Farriers trim and shoe the hooves of horses.\n",
    );
    env.json(&["import", &first.display().to_string(), "--json"]);
    let backup = env.path().join("backup.sqlite").display().to_string();
    env.json(&["admin", "db-backup", &backup, "--json"]);
    let db = database(&env);
    damage_root_page(&db, "documents").await;
    let before = snapshot(&db);

    // At start: the services and the importer run `quick_check` and refuse, saying so.
    for args in [&["api", "--port", "0"][..], &["worker"][..]] {
        let out = run_to_exit(&env, args);
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(EXIT_DATABASE_CORRUPT),
            "shelf {args:?}: {stderr}"
        );
        assert!(
            stderr.contains("database check at start failed") && stderr.contains("ran=true"),
            "{stderr}"
        );
        assert!(
            stderr.contains("shelf admin db-restore FILE --yes"),
            "the recovery steps are logged: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let second = env.write("second.txt", "A second document about hooves.\n");
    let out = run_to_exit(&env, &["import", &second.display().to_string(), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(EXIT_DATABASE_CORRUPT),
        "{}",
        text(&out.stderr)
    );
    let body: Value = serde_json::from_slice(&out.stdout).expect("a JSON error");
    assert_eq!(body["code"], "database_corrupt", "{body}");
    assert!(
        snapshot(&db) == before,
        "the refused import wrote into the database"
    );
    let out = env.run(&["admin", "db-check", "--json"]);
    assert_eq!(out.status.code(), Some(EXIT_DATABASE_CORRUPT));
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["healthy"], false, "{report:#}");

    // Without the check at start, the first read of the page finds the damage: the import
    // fails with the same code and still writes nothing.
    let unchecked = env.with("SHELF_DATABASE_START_CHECK_MAX_BYTES", "0");
    let out = run_to_exit(
        &unchecked,
        &["import", &second.display().to_string(), "--json"],
    );
    assert_eq!(
        out.status.code(),
        Some(EXIT_DATABASE_CORRUPT),
        "{}",
        text(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("import report");
    assert_eq!(
        report["files"][0]["error"]["code"], "database_corrupt",
        "{report:#}"
    );
    assert!(
        snapshot(&db) == before,
        "the import wrote into a damaged database"
    );

    // The API started anyway answers 503 `database_corrupt`, never 500, wherever the damaged
    // page is read, and refuses every write after that.
    let api = Api::start(&unchecked);
    let http = client();
    let documents = http.get(api.url("/documents")).send().await.expect("list");
    assert_eq!(documents.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = documents.json().await.expect("json");
    assert_eq!(body["code"], "database_corrupt", "{body}");
    assert!(
        !body.to_string().contains("malformed"),
        "no internal text: {body}"
    );
    for path in ["/search", "/search/results"] {
        let reply = http
            .post(api.url(path))
            .json(&json!({ "query": "hooves" }))
            .send()
            .await
            .expect("search");
        let status = reply.status();
        let body: Value = reply.json().await.expect("json");
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("database_corrupt")),
            "{path}: {body}"
        );
    }
    let (status, body) = upload(&http, &api, "third.txt", b"A third text.\n".to_vec()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["code"], "database_corrupt", "{body}");
    // The upload met the latch; its line is the last of these requests' (stderr is read in
    // the background, so wait for it, and every line before it is there too).
    let logs = wait_for(
        Duration::from_secs(30),
        "the refused upload's log line",
        || {
            let logs = api.logs();
            logs.contains("writes are refused").then_some(logs)
        },
    );
    assert_eq!(
        logs.matches("database damage detected").count(),
        1,
        "logged once per process: {logs}"
    );
    assert!(logs.contains("shelf admin db-restore FILE --yes"), "{logs}");
    assert!(!logs.contains("status=500"), "{logs}");
    // Having met the damage, the process is not ready, before any full check says so.
    let ready = http.get(api.url("/ready")).send().await.expect("ready");
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let ready: Value = ready.json().await.expect("json");
    assert_eq!(
        ready["detail"], "database is damaged; restore it from a backup",
        "{ready}"
    );
    drop(api);

    // The recovery the log names: restore the backup, and the services start again.
    let restored = unchecked.with("SHELF_DATABASE_START_CHECK_MAX_BYTES", "67108864");
    let out = restored.run(&["admin", "db-restore", &backup, "--yes", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = restored.json(&["admin", "db-check", "--json"]);
    assert_eq!(report["healthy"], true, "{report:#}");
    let api = Api::start(&restored);
    // Its stderr is read in the background: wait for the line rather than race it.
    wait_for(
        Duration::from_secs(30),
        "the check at start's verdict",
        || {
            api.logs()
                .contains("database check at start ran=true verdict=\"ok\"")
                .then_some(())
        },
    );
    let documents = http.get(api.url("/documents")).send().await.expect("list");
    assert_eq!(documents.status(), StatusCode::OK);
}
