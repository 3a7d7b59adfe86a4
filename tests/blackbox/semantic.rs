//! Semantic and hybrid search end to end with the real model: documents uploaded to a real
//! `shelf api`, embedded by its worker's `embed` stage, then found by meaning where keyword
//! search finds nothing; "more like this"; and, in a process without a model, `embed` skipped
//! (not failed) with the reason, semantic search refused with `embedding_unavailable`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api::{Api, client, get_json, migrated, run_to_the_end_with, upload};
use crate::embedding_model::model_or_skip;
use crate::support::{Env, WriteLock};

const DOCS: &[(&str, &str)] = &[
    (
        "battery.txt",
        "The automobile would not start this morning. The mechanic said its battery was flat \
         and the alternator no longer charged it, so the vehicle had to be towed to the garage.",
    ),
    (
        "bread.txt",
        "Knead the dough for ten minutes, let it rise in a warm kitchen until doubled, then bake \
         the loaf in a hot oven until the crust is golden brown.",
    ),
    (
        "hooves.txt",
        "A farrier trims the hooves of working horses every six weeks and fits new iron shoes \
         when the old ones are worn thin.",
    ),
];

async fn search(client: &reqwest::Client, api: &Api, body: Value) -> (StatusCode, Value) {
    let r = client
        .post(api.url("/search/results"))
        .json(&body)
        .send()
        .await
        .expect("search");
    let status = r.status();
    (status, r.json().await.expect("json"))
}

fn filenames(page: &Value) -> Vec<String> {
    page["results"]
        .as_array()
        .map(|hits| {
            hits.iter()
                .filter_map(|h| h["filename"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_search_finds_a_paraphrase_that_keyword_search_misses() {
    let Some(model) = model_or_skip() else {
        return;
    };
    let env = migrated(Env::new().with("SHELF_EMBEDDING_MODEL_DIR", &model.display().to_string()));
    let api = Api::start_with(&env, &["api", "--port", "0", "--workers", "1"]);
    let client = client();
    let mut ids = Vec::new();
    for (name, text) in DOCS {
        let (status, doc) = upload(&client, &api, name, text.as_bytes().to_vec()).await;
        assert_eq!(status, 201, "{doc}");
        let id = doc["id"].as_str().expect("id").to_string();
        let run = run_to_the_end_with(&client, &api, json!({"document_id": id})).await;
        assert_eq!(run["status"], "succeeded", "{run}");
        let stages = run["stages"].as_array().expect("stages");
        let embed = stages
            .iter()
            .find(|s| s["name"] == "embed")
            .expect("embed stage");
        assert_eq!(embed["status"], "succeeded", "{run}");
        ids.push(id);
    }

    // No word of the question is in the battery document.
    let question = "car engine trouble";
    let (status, keyword) = search(&client, &api, json!({"query": question})).await;
    assert_eq!(status, 200, "{keyword}");
    assert!(
        !filenames(&keyword).contains(&"battery.txt".to_string()),
        "keyword search is not expected to find it: {keyword}"
    );
    for mode in ["semantic", "hybrid"] {
        let (status, page) = search(&client, &api, json!({"query": question, "mode": mode})).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(
            filenames(&page).first().map(String::as_str),
            Some("battery.txt"),
            "{mode}: {page}"
        );
        let snippet = page["results"][0]["snippet"].as_str().unwrap_or_default();
        assert!(
            snippet.contains("automobile"),
            "{mode} snippet from the best passage: {page}"
        );
    }
    // Filters hold in every mode.
    let (_, filtered) = search(
        &client,
        &api,
        json!({"query": question, "mode": "hybrid", "filename_contains": "bread"}),
    )
    .await;
    assert_eq!(filenames(&filtered), ["bread.txt"], "{filtered}");
    let (status, bad) = search(&client, &api, json!({"query": question, "mode": "fuzzy"})).await;
    assert_eq!(status, 400, "{bad}");
    assert_eq!(bad["code"], "invalid_search_mode");

    // More like this: the others, nearest first, never the document itself.
    let similar = get_json(
        &client,
        &api,
        &format!("/documents/{}/similar?limit=5", ids[2]),
    )
    .await;
    let found = similar["results"].as_array().expect("similar documents");
    assert_eq!(found.len(), 2, "{similar}");
    assert!(
        found.iter().all(|d| d["document_id"] != ids[2]),
        "{similar}"
    );

    // A process without a model: `embed` is skipped with its reason, semantic search refused.
    let plain = migrated(Env::new());
    let api = Api::start_with(&plain, &["api", "--port", "0", "--workers", "1"]);
    let (_, doc) = upload(&client, &api, "bread.txt", DOCS[1].1.as_bytes().to_vec()).await;
    let id = doc["id"].as_str().expect("id").to_string();
    let run = run_to_the_end_with(&client, &api, json!({"document_id": id})).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let embed = run["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "embed"))
        .expect("embed stage")
        .clone();
    assert_eq!(embed["status"], "skipped", "{run}");
    let run_id = run["id"].as_str().expect("run id");
    let events = get_json(&client, &api, &format!("/runs/{run_id}/events/records")).await;
    assert!(
        events
            .to_string()
            .contains("no embedding model is configured"),
        "{events}"
    );
    let (status, refused) =
        search(&client, &api, json!({"query": "bread", "mode": "hybrid"})).await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["code"], "embedding_unavailable");
}

/// [`DOCS`] imported and processed without a model (`embed` skipped), then the environment
/// with `model` configured.
fn processed_without_a_model(model: &std::path::Path) -> Env {
    let env = migrated(Env::new());
    for (name, text) in DOCS {
        let file = env.write(name, text);
        let out = env.run(&["import", &file.display().to_string()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    env.with("SHELF_EMBEDDING_MODEL_DIR", &model.display().to_string())
}

#[test]
fn the_backfill_embeds_what_was_processed_without_a_model_and_resumes() {
    let Some(model) = model_or_skip() else {
        return;
    };
    // Processed without a model: `embed` skipped, nothing to search by meaning.
    let env = processed_without_a_model(&model);
    let before = env.json(&[
        "search",
        "car engine trouble",
        "--mode",
        "semantic",
        "--json",
    ]);
    assert_eq!(before["total"], 0, "no passages yet: {before}");
    let first = env.json(&["admin", "embed-backfill", "--json"]);
    assert_eq!(first["embedded"], 3, "{first}");
    assert_eq!(first["total"], 3, "{first}");
    assert_eq!(first["complete"], true, "{first}");
    assert!(
        first["passages"].as_u64().is_some_and(|n| n >= 3),
        "{first}"
    );
    // Nothing left: a second run has nothing to do.
    let again = env.json(&["admin", "embed-backfill", "--json"]);
    assert_eq!(again["embedded"], 0, "{again}");
    assert_eq!(again["total"], 0, "{again}");
    let found = env.json(&[
        "search",
        "car engine trouble",
        "--mode",
        "hybrid",
        "--details",
        "--json",
    ]);
    assert_eq!(found["results"][0]["filename"], "battery.txt", "{found}");
}

/// A backup tool holds the database's write lock for as long as the backfill runs: the
/// backfill gives up with the database's error and a non-zero exit (no hang, no panic) and
/// writes nothing; once the lock is gone, running it again embeds everything.
#[test]
fn a_backfill_under_a_held_write_lock_fails_cleanly_and_resumes() {
    let Some(model) = model_or_skip() else {
        return;
    };
    let env = processed_without_a_model(&model);
    let lock = WriteLock::hold(&env.path().join("data/shelf.sqlite"));
    let locked = env.run(&["admin", "embed-backfill", "--json"]);
    let stderr = String::from_utf8_lossy(&locked.stderr);
    assert_eq!(locked.status.code(), Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let error: Value = serde_json::from_slice(&locked.stdout).expect("a JSON error");
    assert_eq!(error["code"], "service_unavailable", "{error}");
    let detail = error["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("The database is busy"), "{error}");
    lock.release();
    let counts = env.json(&["admin", "embed-backfill", "--json"]);
    assert_eq!(
        counts["embedded"], 3,
        "nothing was half-written before: {counts}"
    );
    assert_eq!(counts["complete"], true, "{counts}");
}

#[test]
fn a_bad_model_directory_stops_the_process_naming_what_is_wrong() {
    let env = migrated(Env::new());
    let missing = env.path().join("no-model");
    let out = env
        .command(&["runs", "--json"])
        .env("SHELF_EMBEDDING_MODEL_DIR", &missing)
        .output()
        .expect("run shelf");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let body: Value = serde_json::from_slice(&out.stdout).expect("json error");
    assert_eq!(body["code"], "invalid_configuration");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("no-model")),
        "{body}"
    );
    // A directory with a broken config: the file and what is wrong with it are named.
    let partial = env.write("partial/config.json", r#"{"model_type": "bert"}"#);
    let dir = partial.parent().expect("dir");
    let out = env
        .command(&["runs", "--json"])
        .env("SHELF_EMBEDDING_MODEL_DIR", dir)
        .output()
        .expect("run shelf");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let body: Value = serde_json::from_slice(&out.stdout).expect("json error");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("config.json") && d.contains("vocab_size")),
        "{body}"
    );
}
