//! Shelf as a cluster on PostgreSQL: two `shelf api` and three `shelf worker` processes share
//! one throwaway PostgreSQL database and one data directory. Documents go in through both APIs,
//! workers are SIGKILLed and restarted while runs are in flight, and still every run succeeds
//! exactly once with gap-free events, and every document is found through either API. The
//! admin commands answer on PostgreSQL, and the SQLite-only ones refuse with
//! `postgres_unsupported`.
//!
//! Skipped (with a message) where PostgreSQL is not installed, unless `SHELF_REQUIRE_POSTGRES=1`
//! (CI), which makes its absence a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::Duration;

use reqwest::Client;
use serde_json::{Value, json};

use crate::api::{Api, client, get_json, upload};
use crate::pg_cluster::PgCluster;
use crate::support::{Env, Running, corpus, drain};

const WORKERS: usize = 3;
/// Generated documents, each with a word no other document holds.
const GENERATED: usize = 40;
/// Worker kills while runs are in flight.
const KILLS: usize = 6;
/// A password put in a URL, to prove it is never printed.
const PASSWORD: &str = "hunter2secret";

/// The cluster's shared environment on a new database, or `None` where PostgreSQL is absent.
fn cluster_env(prefix: &str) -> Option<Env> {
    let Some(cluster) = PgCluster::shared() else {
        eprintln!("cluster test skipped: no PostgreSQL (set SHELF_REQUIRE_POSTGRES=1 to fail)");
        return None;
    };
    let url = cluster.create_database(prefix);
    Some(
        Env::new()
            .with("SHELF_DATABASE_URL", &url)
            .with("SHELF_DATABASE_MAX_CONNECTIONS", "8")
            // Slow enough that a kill lands in the middle of runs, short leases so that a
            // killed worker's runs come back soon, and no reclaim cap within this test's kills.
            .with("SHELF_LLM_MOCK_DELAY_MS", "150")
            .with("SHELF_CHUNK_TARGET_CHARS", "400")
            .with("SHELF_CHUNK_OVERLAP_CHARS", "40")
            .with("SHELF_WORKER_LEASE_SECONDS", "2")
            .with("SHELF_WORKER_HEARTBEAT_MS", "300")
            .with("SHELF_WORKER_MAX_RECLAIMS", "100")
            .with("SHELF_LOG_LEVEL", "warn"),
    )
}

/// A worker whose output is drained (a full pipe would block its logging).
fn worker(env: &Env) -> Running {
    let mut process = Running {
        child: env
            .command(&["worker", "--concurrency", "3"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worker"),
    };
    drain(process.child.stdout.take().expect("stdout"));
    drain(process.child.stderr.take().expect("stderr"));
    process
}

/// A made-up word for document `i`: letters only, so both backends' tokenizers keep it whole,
/// and ending in `zq`, so that no stemmer takes a suffix off (`…ls` and `…ll` both stem to
/// `…l` in English: two documents would share a word).
fn unique_word(i: usize) -> String {
    let letters: String = format!("{i:03}")
        .bytes()
        .map(|d| char::from(b"bcdfghjkmp"[usize::from(d - b'0')]))
        .collect();
    format!("quorvex{letters}zq")
}

fn generated_text(i: usize) -> String {
    let word = unique_word(i);
    let filler = "The archive keeps letters, ledgers and maps of the harbour town. ".repeat(12);
    format!(
        "# Cluster note {i}\n\n{filler}\n\nThe index word of this note is {word}.\n\n{filler}\n"
    )
}

/// The corpus files uploaded: text, Word and HTML.
fn corpus_files() -> Vec<(String, Vec<u8>)> {
    let mut paths: Vec<_> = std::fs::read_dir(corpus("text"))
        .expect("corpus")
        .flatten()
        .map(|e| e.path())
        .collect();
    paths.sort();
    for extra in [
        "office/docx/sources/lorem_ipsum.docx",
        "office/docx/sources/word_sample.docx",
        "office/html/sources/example_01.html",
        "office/html/sources/example_02.html",
    ] {
        paths.push(corpus(extra));
    }
    paths
        .iter()
        .map(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).expect("name");
            (name.to_string(), std::fs::read(p).expect("read corpus"))
        })
        .collect()
}

async fn post(client: &Client, url: String, body: &Value) -> (u16, Value) {
    let reply = client.post(url).json(body).send().await.expect("post");
    let status = reply.status().as_u16();
    (status, reply.json().await.expect("json"))
}

/// The longest word of at least four ASCII letters in `text`: one search finds its document.
fn distinctive_word(text: &str) -> Option<String> {
    text.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 4)
        .max_by_key(|w| (w.len(), *w))
        .map(str::to_lowercase)
}

/// The last lines of an API's log, for a failure message.
fn log_tail(api: &Api) -> String {
    let logs = api.logs();
    let lines: Vec<&str> = logs.lines().collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

async fn search_ids(client: &Client, api: &Api, query: &str) -> Vec<String> {
    let (status, body) = post(
        client,
        api.url("/search"),
        &json!({ "query": query, "limit": 500 }),
    )
    .await;
    if status != 200 {
        panic!(
            "search {query:?}: {status} {body}; the API's log ends with:\n{}",
            log_tail(api)
        );
    }
    body["document_ids"]
        .as_array()
        .expect("document_ids")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apis_and_three_killed_workers_on_postgres_finish_every_run_once() {
    let Some(env) = cluster_env("cluster") else {
        return;
    };
    // No `shelf migrate` first: both APIs migrate the new database at once, one after the other.
    let apis = {
        let env_a = &env;
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| Api::start(env_a));
            let b = s.spawn(|| Api::start(env_a));
            (a.join().expect("api a"), b.join().expect("api b"))
        });
        [a, b]
    };
    let client = client();
    for api in &apis {
        let ready = get_json(&client, api, "/ready").await;
        assert_eq!(ready["status"], "ready", "{ready}");
    }
    let config = get_json(&client, &apis[0], "/config").await;
    assert_eq!(
        config["storage"]["database_backend"], "postgres",
        "{config}"
    );

    // Uploads alternate between the APIs; the generated documents carry their unique word.
    let mut uploads: Vec<(String, Vec<u8>)> = corpus_files();
    uploads.extend((0..GENERATED).map(|i| {
        (
            format!("cluster-note-{i:02}.md"),
            generated_text(i).into_bytes(),
        )
    }));
    let mut documents: BTreeMap<String, String> = BTreeMap::new();
    let mut generated_ids: Vec<(String, String)> = Vec::new();
    for (i, (name, bytes)) in uploads.iter().enumerate() {
        let (status, doc) = upload(&client, &apis[i % 2], name, bytes.clone()).await;
        // Two corpus text files have identical bytes: the second is the same document.
        assert!(
            status == 201 || (status == 200 && doc["duplicate"] == true),
            "{name}: {status} {doc}"
        );
        let id = doc["id"].as_str().expect("id").to_string();
        if let Some(n) = name
            .strip_prefix("cluster-note-")
            .and_then(|n| n.strip_suffix(".md"))
        {
            let n: usize = n.parse().expect("note number");
            generated_ids.push((id.clone(), unique_word(n)));
        }
        documents.insert(id, name.clone());
    }
    assert!(documents.len() >= 50, "{} documents", documents.len());

    // The same bytes through both APIs at once are one document.
    let twin = b"Twin upload: the same bytes through two APIs at once.\n".to_vec();
    let (first, second) = tokio::join!(
        upload(&client, &apis[0], "twin.txt", twin.clone()),
        upload(&client, &apis[1], "twin.txt", twin.clone()),
    );
    assert_eq!(
        first.1["id"],
        second.1["id"],
        "one document: {first:?} {second:?}; the APIs' logs end with:\n{}\n{}",
        log_tail(&apis[0]),
        log_tail(&apis[1])
    );
    let mut statuses = [first.0.as_u16(), second.0.as_u16()];
    statuses.sort();
    assert_eq!(
        statuses,
        [200, 201],
        "one created, one duplicate: {first:?} {second:?}"
    );
    let twin_id = first.1["id"].as_str().expect("id").to_string();
    documents.insert(twin_id, "twin.txt".into());

    // One queued run per document, created through either API.
    let mut runs: Vec<(String, String)> = Vec::new();
    for (i, id) in documents.keys().enumerate() {
        let (status, run) = post(
            &client,
            apis[i % 2].url("/runs"),
            &json!({ "document_id": id, "processing_mode": "queue" }),
        )
        .await;
        assert_eq!(status, 201, "{run}");
        runs.push((run["id"].as_str().expect("run id").to_string(), id.clone()));
    }

    // The workers start once every run is queued, so that the kills below land while there
    // is work in flight.
    let mut workers: Vec<Running> = (0..WORKERS).map(|_| worker(&env)).collect();

    // Kill workers while runs are running, each time restarting the one killed.
    let statuses_of = |api: &Api| {
        let client = client.clone();
        let url = api.url(&format!("/runs?limit={}", runs.len() + 10));
        async move {
            let list: Value = client
                .get(url)
                .send()
                .await
                .expect("runs")
                .json()
                .await
                .expect("json");
            list["runs"]
                .as_array()
                .expect("runs")
                .iter()
                .map(|r| {
                    (
                        r["id"].as_str().unwrap_or_default().to_string(),
                        r["status"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect::<BTreeMap<String, String>>()
        }
    };
    let mut kills = 0;
    while kills < KILLS {
        let statuses = statuses_of(&apis[kills % 2]).await;
        if !statuses.values().any(|s| s == "running" || s == "queued") {
            break;
        }
        if statuses.values().any(|s| s == "running") {
            let victim = kills % WORKERS;
            workers[victim].kill();
            workers[victim] = worker(&env);
            kills += 1;
            // Give the restarted worker time to claim before the next kill.
            tokio::time::sleep(Duration::from_millis(500)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    eprintln!("{kills} worker kills landed while runs were in flight");
    assert!(
        kills >= 2,
        "only {kills} kills landed while runs were in flight"
    );

    // Every run ends, and ends succeeded.
    let mut finished = BTreeMap::new();
    for _ in 0..1200 {
        finished = statuses_of(&apis[1]).await;
        if runs.iter().all(|(id, _)| {
            matches!(
                finished.get(id).map(String::as_str),
                Some("succeeded" | "failed" | "canceled")
            )
        }) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (run_id, doc) in &runs {
        assert_eq!(
            finished.get(run_id).map(String::as_str),
            Some("succeeded"),
            "run {run_id} of {doc} ({})",
            documents[doc]
        );
    }
    for worker in &mut workers {
        worker.kill();
    }

    // Exactly once, gap-free: read through both APIs.
    let mut reclaimed = 0;
    for (i, (run_id, _)) in runs.iter().enumerate() {
        let api = &apis[i % 2];
        let body = get_json(
            &client,
            api,
            &format!("/runs/{run_id}/events/records?limit=1000"),
        )
        .await;
        assert_eq!(body["run_status"], "succeeded", "{body}");
        let events = body["events"].as_array().expect("events");
        let sequences: Vec<i64> = events
            .iter()
            .map(|e| e["sequence"].as_i64().expect("sequence"))
            .collect();
        let expected: Vec<i64> = (1..=events.len() as i64).collect();
        assert_eq!(sequences, expected, "run {run_id}: gaps or repeats");
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or_default())
            .collect();
        let count = |kind: &str| kinds.iter().filter(|k| **k == kind).count();
        assert_eq!(count("run_succeeded"), 1, "run {run_id}: {kinds:?}");
        assert_eq!(count("run_failed") + count("run_canceled"), 0, "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"run_succeeded"), "run {run_id}");
        reclaimed += count("run_reclaimed");
    }
    assert!(
        reclaimed >= 1,
        "no run was reclaimed: the kills hit no run in flight"
    );

    // Every document is found through either API: the generated ones by their unique word,
    // the corpus ones by a distinctive word of their cleaned text.
    for (id, word) in &generated_ids {
        for api in &apis {
            assert_eq!(
                search_ids(&client, api, word).await,
                vec![id.clone()],
                "{word} through {}",
                api.url("")
            );
        }
    }
    let generated: BTreeSet<&String> = generated_ids.iter().map(|(id, _)| id).collect();
    for id in documents.keys().filter(|id| !generated.contains(id)) {
        let content = get_json(&client, &apis[0], &format!("/documents/{id}/content")).await;
        let text = content["text"].as_str().unwrap_or_default();
        let word = distinctive_word(text)
            .unwrap_or_else(|| panic!("{}: no word to search for in {text:?}", documents[id]));
        for api in &apis {
            let found = search_ids(&client, api, &word).await;
            assert!(
                found.contains(id),
                "{} not found by {word:?} through {}: {found:?}",
                documents[id],
                api.url("")
            );
        }
    }
}

#[test]
fn admin_commands_answer_on_postgres_and_file_commands_refuse() {
    let Some(env) = cluster_env("cluster_admin") else {
        return;
    };
    // The test cluster trusts every login, so a password in the URL is accepted and ignored:
    // it must still never be printed.
    let url = env
        .vars
        .iter()
        .find(|(k, _)| k == "SHELF_DATABASE_URL")
        .map(|(_, v)| v.replacen("postgres@", &format!("postgres:{PASSWORD}@"), 1))
        .expect("url");
    let env = env.with("SHELF_DATABASE_URL", &url);
    let migrated = env.json(&["migrate", "--json"]);
    assert!(
        !migrated["database"]
            .as_str()
            .unwrap_or_default()
            .contains("sqlite"),
        "{migrated}"
    );
    assert!(!migrated.to_string().contains(PASSWORD), "{migrated}");
    let check = env.json(&["admin", "db-check", "--json"]);
    assert_eq!(check["backend"], "postgres", "{check}");
    assert_eq!(check["healthy"], true, "{check}");
    assert_eq!(check["integrity"], json!(["ok"]));
    let stats = env.json(&["admin", "db-stats", "--json"]);
    assert!(
        stats["database_bytes"].as_i64().expect("size") > 0,
        "{stats}"
    );
    let tables = stats["tables"].as_array().expect("tables");
    assert!(
        tables
            .iter()
            .any(|t| t["table"] == "runs" && t["bytes"].as_i64() > Some(0)),
        "{stats}"
    );
    let maintained = env.json(&["admin", "db-maintain", "--json"]);
    assert_eq!(maintained["analyzed"], true, "{maintained}");
    assert_eq!(maintained["pruned_runs"], 0, "{maintained}");

    let backup = env.path().join("backup.sqlite");
    let zip = env.path().join("workspace.zip");
    let (backup, zip) = (
        backup.to_str().expect("utf-8"),
        zip.to_str().expect("utf-8"),
    );
    for args in [
        vec!["admin", "db-backup", backup, "--json"],
        vec!["admin", "db-restore", backup, "--yes", "--json"],
        vec!["admin", "db-maintain", "--vacuum", "--json"],
        vec!["admin", "workspace-backup", zip, "--json"],
        vec!["admin", "workspace-restore", zip, "--yes", "--json"],
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let body: Value = serde_json::from_slice(&out.stdout).expect("json error");
        assert_eq!(body["code"], "postgres_unsupported", "{args:?}: {body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        // Each names what to use instead: pg_dump or pg_restore, or VACUUM through psql.
        assert!(
            detail.contains("pg_dump")
                || detail.contains("pg_restore")
                || detail.contains("VACUUM"),
            "{args:?}: {detail}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains(PASSWORD) && !detail.contains(PASSWORD),
            "{detail}"
        );
    }
    // Nothing of SQLite was created on the way.
    assert!(!env.path().join("data/shelf.sqlite").exists());
}
