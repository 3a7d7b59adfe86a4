//! One copy of each text, on a real SQLite file and a real PostgreSQL database: a database
//! written by the Shelf before the index read stored texts (FTS5 tables with their own content,
//! an extraction cache holding the Markdown, chunk checkpoints of finished stages) is converted
//! by the migration, and searches answer exactly as before it; afterwards the index follows
//! the texts it reads whoever writes or deletes them.

#[allow(unused_macros)]
mod common;

use sea_orm::{DbBackend, Statement, Value};
use shelf_db::sql::SqlExt;
use shelf_documents::{
    MatchMode, SearchRequest, SearchScope, TEXT_KIND_CLEANED, TEXT_KIND_RAW, TextRecord,
    cached_extraction, document_pk, index_statements, put_text, search_results,
};
use shelf_extractors::Extraction;
use shelf_migrations::{Migrator, MigratorTrait};

use common::Env;
use common::engine_sql::delete_runs_of;

/// The migrations before the one that made the index read stored texts.
fn steps_before_conversion() -> u32 {
    let position = shelf_migrations::known_migrations()
        .iter()
        .position(|name| name == "m20261126_000001_one_text_copy")
        .expect("the conversion is a known migration");
    u32::try_from(position).expect("few migrations")
}

async fn exec(env: &Env, sql: &str, values: Vec<Value>) {
    env.db()
        .execute_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            sql,
            values,
        ))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

async fn count(env: &Env, sql: &str, values: Vec<Value>) -> i64 {
    let row = env
        .db()
        .query_one_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            sql,
            values,
        ))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .expect("a row");
    row.try_get_by_index::<i64>(0).expect("count")
}

async fn text(env: &Env, id: &str, document: &str, run: &str, kind: &str, body: &str) {
    put_text(
        env.db(),
        &TextRecord {
            id: id.into(),
            document_id: document.into(),
            run_id: run.into(),
            kind: kind.into(),
            body: body.into(),
        },
    )
    .await
    .expect("text");
}

/// An index row as the Shelf before the conversion wrote it (the same statements on both
/// backends, bodies without the highlight sentinels).
async fn old_index_row(env: &Env, pk: i64, run: &str, cleaned: &str, raw: &str) {
    exec(
        env,
        "INSERT INTO search_cleaned (rowid, body, run_id) VALUES (?, ?, ?)",
        vec![pk.into(), cleaned.into(), run.into()],
    )
    .await;
    exec(
        env,
        "INSERT INTO search_raw (rowid, body) VALUES (?, ?)",
        vec![pk.into(), raw.into()],
    )
    .await;
}

/// What a set of searches answers, in full (ids, runs, scores, snippets, totals).
async fn answers(env: &Env) -> Vec<String> {
    let mut out = Vec::new();
    for query in [
        "horse",
        "saddle farrier",
        "forged",
        "pony",
        "raw",
        "mule donkey",
    ] {
        for scope in [SearchScope::Cleaned, SearchScope::Raw] {
            for match_mode in [MatchMode::Auto, MatchMode::Any] {
                let page = search_results(
                    env.db(),
                    &SearchRequest {
                        query: query.into(),
                        scope,
                        match_mode,
                        ..Default::default()
                    },
                )
                .await
                .expect("search");
                out.push(format!("{query} {scope:?} {match_mode:?}: {page:?}"));
            }
        }
    }
    out
}

fn sqlite_only(env: &Env) -> bool {
    !env.is_postgres()
}

/// The FTS5 index agrees with the content it reads, and the file is sound (SQLite only).
async fn index_is_consistent(env: &Env) {
    if !sqlite_only(env) {
        return;
    }
    for table in ["search_cleaned", "search_raw"] {
        exec(
            env,
            &format!("INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)"),
            vec![],
        )
        .await;
    }
    let row = env
        .db()
        .query_one_sql(Statement::from_string(
            DbBackend::Sqlite,
            "PRAGMA quick_check",
        ))
        .await
        .expect("quick_check")
        .expect("a row");
    assert_eq!(row.try_get_by_index::<String>(0).expect("verdict"), "ok");
}

async fn converting_keeps_search_answers_and_one_copy_of_each_text(env: Env) {
    let horse = env
        .upload("horse.txt", b"horse bytes")
        .await
        .expect("ingest")
        .document;
    let by_hand = env
        .upload("hand.txt", b"hand bytes")
        .await
        .expect("ingest")
        .document;
    let marked = env
        .upload("marked.txt", b"marked bytes")
        .await
        .expect("ingest")
        .document;
    let db = env.db();
    let (horse_pk, hand_pk, marked_pk) = (
        document_pk(db, &horse.id).await.expect("pk"),
        document_pk(db, &by_hand.id).await.expect("pk"),
        document_pk(db, &marked.id).await.expect("pk"),
    );

    // A processed document: its run's texts, and the index rows made of them.
    let (cleaned, raw) = (
        "The horse wore a saddle the farrier fitted.",
        "raw: THE HORSE wore a saddle; the farrier fitted it.",
    );
    text(
        &env,
        "run_h:clean",
        &horse.id,
        "run_h",
        TEXT_KIND_CLEANED,
        cleaned,
    )
    .await;
    text(
        &env,
        "run_h:extract",
        &horse.id,
        "run_h",
        TEXT_KIND_RAW,
        raw,
    )
    .await;
    // An older run's texts, with other bodies: not what the index holds.
    text(
        &env,
        "run_o:clean",
        &horse.id,
        "run_o",
        TEXT_KIND_CLEANED,
        "an old pony",
    )
    .await;
    old_index_row(&env, horse_pk, "run_h", cleaned, raw).await;
    // Rows indexed by hand: no stored text holds their bodies.
    old_index_row(&env, hand_pk, "run_x", "a mule and a donkey", "raw mule").await;
    // A text holding the highlight sentinels: the index held it without them.
    let forged = "a pony \u{E000}forged\u{E001} here";
    text(
        &env,
        "run_m:clean",
        &marked.id,
        "run_m",
        TEXT_KIND_CLEANED,
        forged,
    )
    .await;
    text(
        &env,
        "run_m:extract",
        &marked.id,
        "run_m",
        TEXT_KIND_RAW,
        forged,
    )
    .await;
    let stripped = "a pony forged here";
    old_index_row(&env, marked_pk, "run_m", stripped, stripped).await;

    // The cache: one result whose Markdown is the stored raw text, one no text holds.
    let cached = |markdown: &str| {
        serde_json::to_string(&Extraction {
            markdown: markdown.into(),
            warnings: vec!["kept".into()],
            ..Default::default()
        })
        .expect("json")
    };
    for (sha256, markdown) in [(&horse.sha256, raw), (&by_hand.sha256, "hand markdown")] {
        exec(
            &env,
            "INSERT INTO extraction_cache (sha256, extractor_version, result, created_at) \
             VALUES (?, 'txt@1', ?, 't')",
            vec![sha256.clone().into(), cached(markdown).into()],
        )
        .await;
    }
    // Chunk checkpoints: a succeeded stage's and a failed one's.
    for (run, stage, status) in [
        ("run_h", "clean", "succeeded"),
        ("run_f", "clean", "failed"),
    ] {
        exec(
            &env,
            "INSERT INTO runs (id, subject, pipeline, pipeline_yaml, pipeline_sha256, status, \
             due_at, enqueued_at, created_at) VALUES (?, ?, 'default', '', '', ?, 0, 0, 't')",
            vec![run.into(), horse.id.clone().into(), status.into()],
        )
        .await;
        exec(
            &env,
            "INSERT INTO run_stages (run_id, name, kind, position, status) \
             VALUES (?, ?, 'clean', 0, ?)",
            vec![run.into(), stage.into(), status.into()],
        )
        .await;
        exec(
            &env,
            "INSERT INTO run_stage_parts (run_id, stage, key, value) VALUES (?, ?, 'chunk-0', 'x')",
            vec![run.into(), stage.into()],
        )
        .await;
    }

    let before = answers(&env).await;
    assert!(
        before.iter().any(|a| a.contains("<mark>horse</mark>")),
        "the searches find something: {before:#?}"
    );
    Migrator::up(db, None).await.expect("convert");
    assert_eq!(
        answers(&env).await,
        before,
        "the same answers after the conversion"
    );
    index_is_consistent(&env).await;

    // The index names the texts it reads; bodies no text held became texts of its own.
    for (pk, cleaned_id, raw_id) in [
        (
            horse_pk,
            "run_h:clean".to_string(),
            "run_h:extract".to_string(),
        ),
        (
            hand_pk,
            format!("index:{}:cleaned", by_hand.id),
            format!("index:{}:raw", by_hand.id),
        ),
        (
            marked_pk,
            "run_m:clean".to_string(),
            "run_m:extract".to_string(),
        ),
    ] {
        assert_eq!(
            count(
                &env,
                "SELECT count(*) FROM search_documents WHERE pk = ? AND cleaned_text_id = ? \
                 AND raw_text_id = ?",
                vec![pk.into(), cleaned_id.clone().into(), raw_id.into()],
            )
            .await,
            1,
            "document {pk} maps to {cleaned_id}"
        );
    }
    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM document_texts WHERE kind IN ('indexed_cleaned', 'indexed_raw')",
            vec![],
        )
        .await,
        2
    );
    // No copy of the text is left in the index: FTS5 keeps no content table (SQLite), the
    // search tables are views of the texts (PostgreSQL).
    let copies = if sqlite_only(&env) {
        "SELECT count(*) FROM sqlite_master WHERE name IN ('search_cleaned_content', \
         'search_raw_content')"
    } else {
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' \
         AND table_name IN ('search_cleaned', 'search_raw') AND table_type <> 'VIEW'"
    };
    assert_eq!(count(&env, copies, vec![]).await, 0);

    // The cache names the raw text instead of copying it, and reads the same.
    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM extraction_cache WHERE sha256 = ? AND text_id = 'run_h:extract'",
            vec![horse.sha256.clone().into()],
        )
        .await,
        1
    );
    let hit = cached_extraction(db, &horse.sha256, "txt@1")
        .await
        .expect("cache")
        .expect("a hit");
    assert_eq!((hit.markdown.as_str(), hit.warnings.len()), (raw, 1));
    let inline = cached_extraction(db, &by_hand.sha256, "txt@1")
        .await
        .expect("cache")
        .expect("a hit");
    assert_eq!(inline.markdown, "hand markdown");
    // Only the unfinished stage keeps its checkpoint.
    assert_eq!(
        count(&env, "SELECT count(*) FROM run_stage_parts", vec![]).await,
        1
    );
    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM run_stage_parts WHERE run_id = 'run_f'",
            vec![]
        )
        .await,
        1
    );

    // Afterwards: reindexing to other texts (the upsert), a text rewritten in place, a text
    // deleted (its run pruned) and a document deleted all keep the index in step.
    let (shod, shod_raw) = ("the farrier shod a mule", "raw farrier notes");
    text(
        &env,
        "run_y:clean",
        &by_hand.id,
        "run_y",
        TEXT_KIND_CLEANED,
        shod,
    )
    .await;
    text(
        &env,
        "run_y:extract",
        &by_hand.id,
        "run_y",
        TEXT_KIND_RAW,
        shod_raw,
    )
    .await;
    for statement in index_statements(
        hand_pk,
        &by_hand.id,
        "run_y",
        "run_y:clean",
        "run_y:extract",
    ) {
        db.execute_sql(statement).await.expect("reindex");
    }
    assert_eq!(
        count(
            &env,
            "SELECT count(*) FROM document_texts WHERE document_id = ?",
            vec![by_hand.id.clone().into()],
        )
        .await,
        2,
        "the index's own texts went once it named stored ones"
    );
    let ids_for = |query: &'static str| {
        let env = &env;
        async move {
            search_results(
                env.db(),
                &SearchRequest {
                    query: query.into(),
                    match_mode: MatchMode::All,
                    ..Default::default()
                },
            )
            .await
            .expect("search")
            .results
            .into_iter()
            .map(|hit| (hit.document_id, hit.run_id))
            .collect::<Vec<_>>()
        }
    };
    assert!(
        ids_for("donkey").await.is_empty(),
        "the old body left the index"
    );
    assert_eq!(
        ids_for("shod mule").await,
        vec![(by_hand.id.clone(), Some("run_y".to_string()))]
    );
    text(
        &env,
        "run_m:clean",
        &marked.id,
        "run_m",
        TEXT_KIND_CLEANED,
        "a zebra now",
    )
    .await;
    assert!(
        ids_for("pony").await.is_empty(),
        "the old body left the index"
    );
    assert_eq!(ids_for("zebra").await.len(), 1);
    exec(
        &env,
        "DELETE FROM document_texts WHERE id = 'run_m:extract'",
        vec![],
    )
    .await;
    assert!(
        ids_for("zebra").await.is_empty(),
        "a text gone takes its document out"
    );
    env.store
        .delete(&horse.id, delete_runs_of(&horse.id))
        .await
        .expect("delete");
    assert!(ids_for("horse").await.is_empty());
    assert_eq!(
        count(&env, "SELECT count(*) FROM search_documents", vec![]).await,
        1,
        "only the document whose texts are all there is left"
    );
    assert_eq!(ids_for("farrier").await.len(), 1);
    index_is_consistent(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converting_keeps_search_answers_and_one_copy_of_each_text_sqlite() {
    converting_keeps_search_answers_and_one_copy_of_each_text(
        common::env_migrated(Some(steps_before_conversion())).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converting_keeps_search_answers_and_one_copy_of_each_text_postgres() {
    if let Some(env) = common::pg_env_migrated(Some(steps_before_conversion())).await {
        converting_keeps_search_answers_and_one_copy_of_each_text(env).await;
    }
}
