//! One copy of each text with the real binary: real documents imported and processed (cut into
//! many chunks), then the SQLite file holds each text once (no FTS5 content table, no chunk
//! checkpoint of a finished stage, an extraction cache that names the stored text), the FTS5
//! index agrees with the texts it reads, and `shelf search` still finds and highlights them,
//! after a reprocess and a delete too.

use std::path::Path;

use serde_json::Value;
use shelf_db::sql::SqlExt;

use crate::support::{Env, corpus};

/// Runs `queries` (each answering one integer) and the FTS5 integrity checks on the database
/// file, on a thread of its own (the test is synchronous).
fn inspect(db: &Path, queries: &[&str]) -> Vec<i64> {
    let db = db.to_path_buf();
    let queries: Vec<String> = queries.iter().map(|q| q.to_string()).collect();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let conn = sea_orm::Database::connect(format!("sqlite://{}?mode=rw", db.display()))
                .await
                .expect("open");
            let statement =
                |sql: &str| sea_orm::Statement::from_string(sea_orm::DbBackend::Sqlite, sql);
            // Each raises an error unless the index holds exactly the tokens of the texts.
            for table in ["search_cleaned", "search_raw"] {
                conn.execute_sql(statement(&format!(
                    "INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)"
                )))
                .await
                .unwrap_or_else(|e| panic!("{table} integrity-check: {e}"));
            }
            let verdict = conn
                .query_one_sql(statement("PRAGMA quick_check"))
                .await
                .expect("quick_check")
                .expect("a row");
            assert_eq!(verdict.try_get_by_index::<String>(0).expect("ok"), "ok");
            let mut out = Vec::new();
            for sql in &queries {
                let row = conn
                    .query_one_sql(statement(sql))
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
                    .expect("a row");
                out.push(row.try_get_by_index::<i64>(0).expect("an integer"));
            }
            conn.close().await.expect("close");
            out
        })
    })
    .join()
    .expect("inspect")
}

/// The hits of a search: (document id, snippet).
fn hits(env: &Env, args: &[&str]) -> Vec<(String, String)> {
    let mut all = vec!["search"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--details", "--json"]);
    let page = env.json(&all);
    page["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {page}"))
        .iter()
        .map(|hit| {
            (
                hit["document_id"].as_str().unwrap_or_default().to_string(),
                hit["snippet"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn processed_real_documents_are_stored_once_and_search_still_finds_and_highlights_them() {
    // Small chunks: every document is cleaned in several, each saved as a checkpoint.
    let env = Env::new()
        .with("SHELF_CHUNK_TARGET_CHARS", "300")
        .with("SHELF_CHUNK_OVERLAP_CHARS", "50");
    let docs = env.path().join("docs");
    std::fs::create_dir_all(&docs).expect("mkdir");
    let mut sources: Vec<_> = std::fs::read_dir(corpus("text"))
        .expect("corpus")
        .flatten()
        .map(|entry| entry.path())
        .collect();
    sources.push(corpus("office/docx/sources/lorem_ipsum.docx"));
    sources.push(corpus("office/docx/sources/word_tables.docx"));
    for source in &sources {
        let name = source.file_name().expect("a file name");
        std::fs::copy(source, docs.join(name)).expect("copy");
    }
    let report = env.json(&[
        "import",
        &docs.display().to_string(),
        "--mode",
        "process",
        "--json",
    ]);
    let files = report["files"].as_array().expect("files");
    assert_eq!(files.len(), sources.len(), "{report}");
    let mut crazy = None;
    for file in files {
        assert_eq!(file["run_status"], "succeeded", "{file}");
        if file["filename"] == "crazyones.txt" {
            crazy = file["document_id"].as_str().map(str::to_string);
        }
    }
    let crazy = crazy.expect("crazyones.txt was imported");
    // Identical files are one document (two of the vendored texts are the same bytes).
    let documents: std::collections::BTreeSet<&str> = files
        .iter()
        .filter_map(|file| file["document_id"].as_str())
        .collect();
    let documents = documents.len() as i64;
    let chunks: i64 = files
        .iter()
        .map(|file| {
            let run = env.json(&["runs", file["run_id"].as_str().expect("run"), "--json"]);
            run["total_chunks"].as_i64().unwrap_or_default()
        })
        .sum();
    assert!(
        chunks > 2 * sources.len() as i64,
        "the documents were cleaned in several chunks each ({chunks})"
    );

    let database = env.path().join("data/shelf.sqlite");
    let found = inspect(
        &database,
        &[
            // FTS5 keeps no copy of the bodies it indexes.
            "SELECT count(*) FROM sqlite_master WHERE name LIKE 'search\\_%\\_content' ESCAPE '\\'",
            // Chunk checkpoints went with each stage's success.
            "SELECT count(*) FROM run_stage_parts",
            // The cache names each raw text and holds no Markdown itself.
            "SELECT count(*) FROM extraction_cache WHERE text_id IS NULL \
             OR json_extract(result, '$.markdown') <> ''",
            "SELECT count(*) FROM extraction_cache",
            "SELECT count(*) FROM search_documents",
            // Each text is stored once: the raw and cleaned texts of each run, nothing else.
            "SELECT count(*) FROM document_texts WHERE kind NOT IN ('raw', 'cleaned')",
        ],
    );
    assert_eq!(found, vec![0, 0, 0, documents, documents, 0]);

    // Search reads the stored texts: it finds, highlights, in both scopes.
    let crazy_hits = hits(&env, &["troublemakers"]);
    assert_eq!(crazy_hits.len(), 1, "{crazy_hits:?}");
    assert_eq!(crazy_hits[0].0, crazy);
    assert!(
        crazy_hits[0].1.contains("<mark>troublemakers</mark>"),
        "{crazy_hits:?}"
    );
    let raw = hits(&env, &["troublemakers", "--scope", "raw"]);
    assert_eq!(raw.len(), 1, "{raw:?}");
    assert!(raw[0].1.contains("<mark>"), "{raw:?}");
    let lorem = hits(&env, &["lorem ipsum"]);
    assert!(lorem.len() >= 2, "{lorem:?}");

    // Processed again: the index moves to the new run's texts, the cache to its raw text.
    let rerun: Value = env.json(&["process", &crazy, "--json"]);
    assert_eq!(rerun["status"], "succeeded", "{rerun}");
    let rerun_id = rerun["id"].as_str().expect("run id").to_string();
    let again = hits(&env, &["troublemakers"]);
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(
        again[0].1.contains("<mark>troublemakers</mark>"),
        "{again:?}"
    );
    let found = inspect(
        &database,
        &[
            &format!("SELECT count(*) FROM search_documents WHERE run_id = '{rerun_id}'"),
            &format!("SELECT count(*) FROM extraction_cache WHERE text_id LIKE '{rerun_id}:%'"),
            "SELECT count(*) FROM run_stage_parts",
        ],
    );
    assert_eq!(found, vec![1, 1, 0]);

    // Deleted: gone from both indexes, the others untouched.
    let deleted = env.run(&["delete", &crazy]);
    assert!(deleted.status.success(), "{deleted:?}");
    assert!(hits(&env, &["troublemakers"]).is_empty());
    assert!(hits(&env, &["troublemakers", "--scope", "raw"]).is_empty());
    assert_eq!(hits(&env, &["lorem ipsum"]).len(), lorem.len());
    let found = inspect(&database, &["SELECT count(*) FROM search_documents"]);
    assert_eq!(found, vec![documents - 1]);
}
