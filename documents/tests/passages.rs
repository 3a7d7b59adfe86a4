//! Passages and dense search on a real SQLite file and a real PostgreSQL database (each test on
//! both): storing, replacing, deleting and pruning passages, the backfill's stale documents,
//! semantic ranking against a brute-force reference, filters, paging and facets in semantic
//! mode, hybrid fusion by hand-computed reciprocal ranks, similar documents, and a matrix that
//! follows writes made through another connection. Vectors are synthetic: no model is needed.

#[macro_use]
mod common;

use std::collections::HashMap;

use common::{Env, ids};
use sea_orm::{ConnectionTrait, Database};
use shelf_db::sql::SqlExt;
use shelf_documents::{
    Document, DocumentResults, DocumentsError, MatchMode, Passage, PrunedRunOf, QueryVector,
    SearchMode, SearchRequest, SearchScope, document_passages, index_document, passage_counts,
    pruned_run_statements, put_passages, search_facets, search_ids, search_results, set_results,
    similar_documents, stale_documents,
};

const MODEL: &str = "test-model@1";

fn unit(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

/// A vector of 8 dimensions pointing mostly along `axis`, a little along `tilt`.
fn axis(axis: usize, tilt: usize, amount: f32) -> Vec<f32> {
    let mut v = vec![0.0; 8];
    v[axis] = 1.0;
    v[tilt] += amount;
    unit(&v)
}

fn passage(text: &str, start: u64) -> Passage {
    Passage {
        text: text.into(),
        char_start: start,
        char_end: start + text.chars().count() as u64,
        start_seconds: None,
    }
}

async fn add(env: &Env, name: &str, cleaned: &str) -> Document {
    let doc = env
        .upload(name, format!("{name}\n{cleaned}").as_bytes())
        .await
        .expect("ingest")
        .document;
    index_document(env.db(), &doc.id, &format!("run_{name}"), cleaned, cleaned)
        .await
        .expect("index");
    env.db()
        .execute_unprepared(&format!(
            "UPDATE documents SET status = 'ready' WHERE id = '{}'",
            doc.id
        ))
        .await
        .expect("ready");
    doc
}

/// Adds a document whose passages are `passages` (text and vector each), embedded by `run`.
async fn add_embedded(env: &Env, name: &str, passages: &[(&str, Vec<f32>)]) -> Document {
    let cleaned: Vec<&str> = passages.iter().map(|(t, _)| *t).collect();
    let doc = add(env, name, &cleaned.join("\n\n")).await;
    let mut start = 0;
    let rows: Vec<(Passage, Vec<f32>)> = passages
        .iter()
        .map(|(text, vector)| {
            let p = passage(text, start);
            start = p.char_end + 2;
            (p, vector.clone())
        })
        .collect();
    put_passages(env.db(), &doc.id, &format!("run_{name}"), MODEL, &rows)
        .await
        .expect("put passages");
    doc
}

fn dense(query: &str, mode: SearchMode, vector: Vec<f32>) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        mode,
        query_vector: Some(QueryVector {
            model: MODEL.into(),
            values: vector,
        }),
        ..Default::default()
    }
}

async fn count_rows(env: &Env, document_id: &str) -> i64 {
    env.db()
        .query_one_sql(shelf_db::sql::fit(
            env.db().get_database_backend(),
            sea_orm::Statement::from_sql_and_values(
                sea_orm::DbBackend::Sqlite,
                "SELECT count(*) AS n FROM document_passages WHERE document_id = ?",
                [document_id.to_string().into()],
            ),
        ))
        .await
        .expect("count")
        .and_then(|row| row.try_get::<i64>("", "n").ok())
        .unwrap_or(-1)
}

on_both_backends!(passages_are_replaced_deleted_and_pruned_with_their_run);
async fn passages_are_replaced_deleted_and_pruned_with_their_run(env: Env) {
    let doc = add(&env, "a.txt", "One. Two. Three.").await;
    let first: Vec<(Passage, Vec<f32>)> = ["One.", "Two.", "Three."]
        .iter()
        .enumerate()
        .map(|(i, t)| (passage(t, i as u64 * 5), axis(i, 7, 0.5)))
        .collect();
    put_passages(env.db(), &doc.id, "run_1", MODEL, &first)
        .await
        .expect("put");
    let stored = document_passages(env.db(), &doc.id).await.expect("read");
    assert_eq!(stored.len(), 3);
    assert_eq!(stored[2].text, "Three.");
    assert_eq!(stored[2].position, 2);
    assert_eq!(stored[2].run_id, "run_1");
    assert_eq!(stored[2].model, MODEL);
    assert_eq!(
        stored[2].vector, first[2].1,
        "the vector round-trips bit for bit"
    );

    // A new run replaces every passage of the document, whatever run wrote them.
    put_passages(env.db(), &doc.id, "run_2", MODEL, &first[..2])
        .await
        .expect("replace");
    let stored = document_passages(env.db(), &doc.id).await.expect("read");
    assert_eq!(stored.len(), 2);
    assert!(stored.iter().all(|p| p.run_id == "run_2"));

    // Pruning another run leaves them; pruning theirs takes them.
    let prune = |run_id: &'static str| {
        pruned_run_statements(&[PrunedRunOf {
            run_id,
            document_id: &doc.id,
        }])
    };
    env.db()
        .execute_all_sql(prune("run_1"))
        .await
        .expect("prune");
    assert_eq!(count_rows(&env, &doc.id).await, 2);
    env.db()
        .execute_all_sql(prune("run_2"))
        .await
        .expect("prune");
    assert_eq!(count_rows(&env, &doc.id).await, 0);

    // Stale: no passages of this model (none, or another model's).
    let other = add(&env, "b.txt", "Other text.").await;
    put_passages(env.db(), &doc.id, "run_3", MODEL, &first)
        .await
        .expect("put");
    put_passages(env.db(), &other.id, "run_3", "old-model@0", &first[..1])
        .await
        .expect("put");
    assert_eq!(
        stale_documents(env.db(), MODEL, None, 10)
            .await
            .expect("stale"),
        vec![other.id.clone()]
    );
    let mut both = vec![doc.id.clone(), other.id.clone()];
    both.sort();
    assert_eq!(
        stale_documents(env.db(), "new-model@2", None, 10)
            .await
            .expect("stale"),
        both
    );
    assert_eq!(
        stale_documents(env.db(), "new-model@2", Some(&both[0]), 10)
            .await
            .expect("stale"),
        vec![both[1].clone()],
        "the walk resumes after the last id seen"
    );
    let counts = passage_counts(env.db(), MODEL).await.expect("counts");
    assert_eq!(
        (
            counts.passages,
            counts.stale_passages,
            counts.embedded_documents,
            counts.pending_documents
        ),
        (3, 1, 1, 1)
    );

    // The document's delete takes its passages.
    env.store.delete(&doc.id, Vec::new()).await.expect("delete");
    assert_eq!(count_rows(&env, &doc.id).await, 0);
    assert_eq!(count_rows(&env, &other.id).await, 1);
}

on_both_backends!(semantic_ranks_documents_by_their_best_passage);
async fn semantic_ranks_documents_by_their_best_passage(env: Env) {
    // Random vectors, checked against a brute-force ranking of the same rows.
    let mut rng = fastrand::Rng::with_seed(7);
    let mut random = || unit(&(0..8).map(|_| rng.f32() - 0.5).collect::<Vec<_>>());
    let mut rows: Vec<(String, Vec<Vec<f32>>)> = Vec::new();
    for d in 0..12 {
        let vectors: Vec<Vec<f32>> = (0..1 + d % 4).map(|_| random()).collect();
        let texts: Vec<String> = (0..vectors.len())
            .map(|p| format!("Doc {d} part {p}."))
            .collect();
        let passages: Vec<(&str, Vec<f32>)> = texts
            .iter()
            .map(String::as_str)
            .zip(vectors.iter().cloned())
            .collect();
        let doc = add_embedded(&env, &format!("d{d}.txt"), &passages).await;
        rows.push((doc.id, vectors));
    }
    let query = random();
    let mut reference: Vec<(String, f32)> = rows
        .iter()
        .map(|(id, vectors)| {
            let best = vectors
                .iter()
                .map(|v| v.iter().zip(&query).map(|(a, b)| a * b).sum::<f32>())
                .fold(f32::MIN, f32::max);
            (id.clone(), best)
        })
        .collect();
    reference.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let request = dense("parts", SearchMode::Semantic, query.clone());
    let page = search_results(env.db(), &request).await.expect("search");
    assert_eq!(
        page.total, 12,
        "every document with passages is a candidate"
    );
    assert_eq!(page.match_mode, MatchMode::Any);
    let got: Vec<(String, f64)> = page
        .results
        .iter()
        .map(|h| (h.document_id.clone(), h.score))
        .collect();
    assert_eq!(got.len(), 12);
    for ((id, score), (want_id, want)) in got.iter().zip(&reference) {
        assert_eq!(id, want_id);
        assert!((score - f64::from(*want)).abs() < 1e-5);
    }
    assert!(
        page.results
            .iter()
            .all(|h| h.source == SearchScope::Cleaned)
    );
    assert!(
        page.results[0].snippet.starts_with("Doc "),
        "the best passage's text"
    );

    // Paging: the pages are slices of the one ranking, the total the same on each.
    let mut paged = request.clone();
    paged.limit = Some(5);
    paged.offset = 10;
    let tail = search_ids(env.db(), &paged).await.expect("page");
    assert_eq!(tail.total, 12);
    let want: Vec<String> = reference[10..].iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(tail.document_ids, want);

    // No vector: a clear error, before anything is read.
    let mut bare = request.clone();
    bare.query_vector = None;
    assert!(matches!(
        search_results(env.db(), &bare).await,
        Err(DocumentsError::EmbeddingUnavailable)
    ));
    bare.query = "  ".into();
    assert!(matches!(
        search_results(env.db(), &bare).await,
        Err(DocumentsError::InvalidSearchQuery)
    ));
}

on_both_backends!(filters_facets_and_scope_hold_in_semantic_mode);
async fn filters_facets_and_scope_hold_in_semantic_mode(env: Env) {
    let horses = add_embedded(
        &env,
        "horses.txt",
        &[("Caring for a horse.", axis(0, 1, 0.1))],
    )
    .await;
    let ponies = add_embedded(
        &env,
        "ponies.txt",
        &[("Ponies and their saddles.", axis(0, 1, 0.4))],
    )
    .await;
    let boats = add_embedded(&env, "boats.txt", &[("Sailing boats.", axis(3, 1, 0.1))]).await;
    let plain = add(&env, "plain.txt", "Not embedded yet.").await;
    for (doc, code) in [(&horses, "636.1"), (&ponies, "636.1"), (&boats, "797")] {
        set_results(
            env.db(),
            &doc.id,
            &DocumentResults {
                classification_code: Some(code.into()),
                ..Default::default()
            },
        )
        .await
        .expect("classify");
    }
    let request = dense("horse care", SearchMode::Semantic, axis(0, 1, 0.0));
    assert_eq!(
        ids(&env, &request).await,
        vec![horses.id.clone(), ponies.id.clone(), boats.id.clone()],
        "a document without passages is no semantic candidate"
    );
    let mut filtered = request.clone();
    filtered.classification_prefix = Some("636".into());
    filtered.filename_contains = Some("PON".into());
    let page = search_results(env.db(), &filtered).await.expect("search");
    assert_eq!(page.total, 1);
    assert_eq!(page.results[0].document_id, ponies.id);
    assert_eq!(page.results[0].snippet, "Ponies and their saddles.");
    assert_eq!(page.results[0].run_id.as_deref(), Some("run_ponies.txt"));

    let facets = search_facets(env.db(), &request, None)
        .await
        .expect("facets");
    let classes: HashMap<String, u64> = facets
        .classifications
        .iter()
        .map(|f| (f.value.clone(), f.count))
        .collect();
    assert_eq!(classes.get("636.1"), Some(&2));
    assert_eq!(classes.get("797"), Some(&1));
    assert_eq!(facets.sources[0].count, 3);
    assert_eq!(facets.sources[0].value, "cleaned");

    // Raw scope: semantic still reads the cleaned passages and says so.
    let mut raw = request.clone();
    raw.scope = SearchScope::Raw;
    let page = search_results(env.db(), &raw).await.expect("search");
    assert_eq!(page.results[0].source, SearchScope::Cleaned);
    assert_eq!(page.results[0].snippet, "Caring for a <mark>horse</mark>.");
    let _ = plain;
}

on_both_backends!(hybrid_fuses_keyword_and_dense_ranks);
async fn hybrid_fuses_keyword_and_dense_ranks(env: Env) {
    // Keyword "zebra": k1 (three times) before k2 (once); dense: d1 nearest, then k2, then k1.
    let k1 = add_embedded(
        &env,
        "k1.txt",
        &[("zebra zebra zebra stripes", axis(2, 1, 0.0))],
    )
    .await;
    let k2 = add_embedded(
        &env,
        "k2.txt",
        &[("a zebra among horses here", axis(0, 2, 0.6))],
    )
    .await;
    let d1 = add_embedded(
        &env,
        "d1.txt",
        &[("striped equines of Africa", axis(0, 1, 0.1))],
    )
    .await;
    let none = add(&env, "none.txt", "nothing related").await;
    let request = dense("zebra", SearchMode::Hybrid, axis(0, 1, 0.0));
    // Keyword ranks: k1 = 1, k2 = 2. Dense ranks (every embedded document): d1 = 1, k2 = 2,
    // k1 = 3. RRF: k2 = 1/62 + 1/62 = 0.032258, k1 = 1/61 + 1/63 = 0.032266, d1 = 1/61.
    let page = search_results(env.db(), &request).await.expect("search");
    let got: Vec<&str> = page
        .results
        .iter()
        .map(|h| h.document_id.as_str())
        .collect();
    assert_eq!(got, [k1.id.as_str(), k2.id.as_str(), d1.id.as_str()]);
    assert!((page.results[0].score - (1.0 / 61.0 + 1.0 / 63.0)).abs() < 1e-12);
    assert!((page.results[1].score - 2.0 / 62.0).abs() < 1e-12);
    assert!((page.results[2].score - 1.0 / 61.0).abs() < 1e-12);
    assert_eq!(page.total, 3, "the union of the two rankings");
    assert_eq!(page.match_mode, MatchMode::All, "the keyword half's mode");
    assert_eq!(
        page.results[0].snippet,
        "<mark>zebra</mark> <mark>zebra</mark> <mark>zebra</mark> stripes"
    );
    assert!(!got.contains(&none.id.as_str()));

    // A document BM25 finds that has no passages yet: its snippet is its indexed text's.
    let fresh = add(&env, "fresh.txt", "zebra zebra zebra zebra zebra").await;
    let page = search_results(env.db(), &request).await.expect("search");
    let hit = page
        .results
        .iter()
        .find(|h| h.document_id == fresh.id)
        .expect("found by keyword");
    assert!(
        hit.snippet.starts_with("<mark>zebra</mark>"),
        "{}",
        hit.snippet
    );
    assert_eq!(page.total, 4);

    // Raw scope: the keyword half reads raw, and the hits say so.
    let mut raw = request.clone();
    raw.scope = SearchScope::Raw;
    let page = search_results(env.db(), &raw).await.expect("search");
    assert!(
        page.results
            .iter()
            .all(|h| h.source == SearchScope::Raw && h.run_id.is_none())
    );
}

on_both_backends!(similar_documents_are_nearest_by_the_mean_passage);
async fn similar_documents_are_nearest_by_the_mean_passage(env: Env) {
    let seed = add_embedded(
        &env,
        "seed.txt",
        &[
            ("first half", axis(0, 1, 0.0)),
            ("second half", axis(1, 0, 0.0)),
        ],
    )
    .await;
    let near = add_embedded(&env, "near.txt", &[("both", axis(0, 1, 1.0))]).await;
    let half = add_embedded(&env, "half.txt", &[("one side", axis(0, 5, 0.2))]).await;
    let far = add_embedded(&env, "far.txt", &[("elsewhere", axis(6, 5, 0.2))]).await;
    let similar = similar_documents(env.db(), &seed.id, MODEL, 10)
        .await
        .expect("similar");
    let got: Vec<&str> = similar.iter().map(|h| h.document_id.as_str()).collect();
    assert_eq!(got, [near.id.as_str(), half.id.as_str(), far.id.as_str()]);
    assert!(
        (similar[0].score - 1.0).abs() < 1e-5,
        "the mean of the seed is near's vector"
    );
    let limited = similar_documents(env.db(), &seed.id, MODEL, 1)
        .await
        .expect("similar");
    assert_eq!(limited.len(), 1);
    assert!(
        similar_documents(env.db(), &seed.id, "other@1", 5)
            .await
            .expect("similar")
            .is_empty()
    );
    assert!(matches!(
        similar_documents(env.db(), "doc_unknown", MODEL, 5).await,
        Err(DocumentsError::NotFound { .. })
    ));
}

/// The API's process keeps a matrix; a worker's process commits through its own connection.
/// Every kind of write (a new document, a replacement with as many rows, a delete) is seen by
/// the next search.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_matrix_follows_commits_made_through_another_connection() {
    let env = common::env().await;
    let url = format!(
        "sqlite://{}?mode=rwc",
        env.data_dir().join("shelf.sqlite").display()
    );
    let worker = Database::connect(&url).await.expect("second connection");
    let a = add_embedded(&env, "a.txt", &[("alpha", axis(0, 1, 0.0))]).await;
    let request = dense("alpha", SearchMode::Semantic, axis(0, 1, 0.0));
    assert_eq!(ids(&env, &request).await, vec![a.id.clone()]);

    let b = add(&env, "b.txt", "beta").await;
    put_passages(
        &worker,
        &b.id,
        "run_w",
        MODEL,
        &[(passage("beta", 0), axis(0, 1, 0.0))],
    )
    .await
    .expect("worker writes");
    let mut both = vec![a.id.clone(), b.id.clone()];
    both.sort();
    assert_eq!(ids(&env, &request).await, both, "a new document is seen");

    // Replaced by as many rows, now far from the query.
    put_passages(
        &worker,
        &a.id,
        "run_w2",
        MODEL,
        &[(passage("alpha", 0), axis(4, 1, 0.0))],
    )
    .await
    .expect("worker replaces");
    assert_eq!(
        ids(&env, &request).await,
        vec![b.id.clone(), a.id.clone()],
        "a replacement is seen"
    );
    worker
        .execute_unprepared(&format!(
            "DELETE FROM document_passages WHERE document_id = '{}'",
            b.id
        ))
        .await
        .expect("worker deletes");
    assert_eq!(
        ids(&env, &request).await,
        vec![a.id.clone()],
        "a delete is seen"
    );
}
