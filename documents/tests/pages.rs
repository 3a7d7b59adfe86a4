//! Page records on a real SQLite file and a real PostgreSQL database: batched replacement,
//! upserts, other runs' records left alone, the listing (latest run, summary, failures filter,
//! paging) and deletion with page images.

#[macro_use]
mod common;

use common::Env;
use common::engine_sql::{delete_runs_of, run_created_order};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use shelf_db::sql::SqlExt;
use shelf_documents::pages::{page_listing, put_page, put_pages, run_pages};
use shelf_documents::{DocumentsError, PageRecord, PageSource};

/// A `runs` row as the engine would write it (only the columns these tests read matter).
async fn add_run(db: &impl ConnectionTrait, id: &str, subject: &str, status: &str, created: &str) {
    db.execute_sql(Statement::from_sql_and_values(
        DbBackend::Sqlite,
        "INSERT INTO runs (id, subject, pipeline, pipeline_yaml, pipeline_sha256, status, \
         due_at, enqueued_at, created_at) VALUES (?, ?, 'default', '', '', ?, 0, 0, ?)",
        [id.into(), subject.into(), status.into(), created.into()],
    ))
    .await
    .expect("insert run");
}

async fn delete_run(db: &impl ConnectionTrait, id: &str) {
    db.execute_sql(Statement::from_sql_and_values(
        DbBackend::Sqlite,
        "DELETE FROM runs WHERE id = ?",
        [id.into()],
    ))
    .await
    .expect("delete run");
}

async fn page_rows(db: &impl ConnectionTrait, document_id: &str) -> i64 {
    let row = db
        .query_one_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "SELECT count(*) FROM document_pages WHERE document_id = ?",
            [document_id.into()],
        ))
        .await
        .expect("query")
        .expect("row");
    row.try_get_by_index::<i64>(0).expect("count")
}

fn ocr_page(number: u32, text: &str, confidence: f64) -> PageRecord {
    PageRecord {
        source: PageSource::Ocr,
        text: text.into(),
        confidence: Some(confidence),
        rotation_degrees: Some(90),
        attempts: 2,
        ..PageRecord::pending(number)
    }
}

on_both_backends!(a_runs_pages_are_replaced_in_batches_and_read_in_order);
async fn a_runs_pages_are_replaced_in_batches_and_read_in_order(env: Env) {
    let doc = env
        .upload("scan.pdf", b"%PDF-1.7\n%fake\n")
        .await
        .expect("ingest")
        .document;
    add_run(
        env.db(),
        "run_a",
        &doc.id,
        "running",
        "2026-11-23T10:00:00.000Z",
    )
    .await;

    // 450 pages: three statements of at most 200 rows.
    let pages: Vec<PageRecord> = (1..=450)
        .rev()
        .map(|n| PageRecord::text_layer(n, format!("page {n}")))
        .collect();
    put_pages(env.db(), &doc.id, "run_a", &pages)
        .await
        .expect("put");
    let read = run_pages(env.db(), &doc.id, "run_a").await.expect("read");
    assert_eq!(read.len(), 450);
    assert!(read.windows(2).all(|w| w[0].number < w[1].number));
    assert_eq!(read[449], PageRecord::text_layer(450, "page 450"));

    // Replaying with fewer pages drops the others; replaying the same is a no-op.
    let fewer = vec![PageRecord::text_layer(1, "one"), PageRecord::pending(2)];
    put_pages(env.db(), &doc.id, "run_a", &fewer)
        .await
        .expect("put");
    put_pages(env.db(), &doc.id, "run_a", &fewer)
        .await
        .expect("replay");
    assert_eq!(
        run_pages(env.db(), &doc.id, "run_a").await.expect("read"),
        fewer
    );

    // One page updated in place, every field round-trips.
    let mut read_page = ocr_page(2, "recognized", 87.25);
    read_page.warnings = vec!["low contrast".into()];
    read_page.corrected = true;
    read_page.image_path = Some(format!("page-images/{}/page-0002.png", doc.id));
    put_page(env.db(), &doc.id, "run_a", &read_page)
        .await
        .expect("put page");
    let read = run_pages(env.db(), &doc.id, "run_a").await.expect("read");
    assert_eq!(read, vec![PageRecord::text_layer(1, "one"), read_page]);
    assert!(
        run_pages(env.db(), &doc.id, "run_other")
            .await
            .expect("read")
            .is_empty()
    );
}

on_both_backends!(writing_a_runs_records_never_touches_another_runs);
async fn writing_a_runs_records_never_touches_another_runs(env: Env) {
    let doc = env
        .upload("scan.pdf", b"%PDF-1.7\n%prune\n")
        .await
        .expect("ingest")
        .document;
    let db = env.db();
    add_run(
        db,
        "run_1",
        &doc.id,
        "succeeded",
        "2026-11-23T10:00:00.000Z",
    )
    .await;
    add_run(db, "run_2", &doc.id, "failed", "2026-11-23T10:01:00.000Z").await;
    add_run(db, "run_3", &doc.id, "running", "2026-11-23T10:02:00.000Z").await;
    let two = [PageRecord::pending(1), PageRecord::text_layer(2, "two")];
    put_pages(db, &doc.id, "run_1", &two).await.expect("put 1");
    put_pages(db, &doc.id, "run_2", &two[..1])
        .await
        .expect("put 2");
    // Finished runs' records stay whatever a later run writes: removing them is retention's
    // work, once their run is pruned, and a run's own write replaces only its records.
    put_pages(db, &doc.id, "run_3", &two[1..])
        .await
        .expect("put 3");
    put_pages(db, &doc.id, "run_3", &two[1..])
        .await
        .expect("put 3 again");
    assert_eq!(run_pages(db, &doc.id, "run_1").await.expect("read"), two);
    assert_eq!(
        run_pages(db, &doc.id, "run_2").await.expect("read"),
        two[..1]
    );
    assert_eq!(
        run_pages(db, &doc.id, "run_3").await.expect("read"),
        two[1..]
    );
    assert_eq!(page_rows(db, &doc.id).await, 4);
}

on_both_backends!(the_listing_shows_the_latest_run_with_a_summary_and_filters);
async fn the_listing_shows_the_latest_run_with_a_summary_and_filters(env: Env) {
    let db = env.db();
    let missing = page_listing(db, "doc_0000000000000000", 10, 0, false, run_created_order).await;
    assert!(matches!(missing, Err(DocumentsError::NotFound { .. })));

    let doc = env
        .upload("mixed.pdf", b"%PDF-1.7\n%mixed\n")
        .await
        .expect("ingest")
        .document;
    let empty = page_listing(db, &doc.id, 10, 0, false, run_created_order)
        .await
        .expect("listing");
    assert_eq!(empty.run_id, None);
    assert_eq!(empty.total, 0);
    assert!(empty.pages.is_empty());

    add_run(
        db,
        "run_old",
        &doc.id,
        "running",
        "2026-11-23T09:00:00.000Z",
    )
    .await;
    // One running run per document (the database refuses two): the newer one waits queued.
    add_run(db, "run_new", &doc.id, "queued", "2026-11-23T10:00:00.000Z").await;
    put_pages(db, &doc.id, "run_new", &[PageRecord::text_layer(1, "x")])
        .await
        .expect("new");
    let mut failed = PageRecord::pending(4);
    failed.source = PageSource::Failed;
    failed.error = Some("ocr_timeout: too slow".into());
    failed.attempts = 1;
    let mut warned = ocr_page(3, "ab", 50.0);
    warned.warnings = vec!["low confidence".into()];
    let mut corrected = ocr_page(2, "Grüße", 91.0);
    corrected.corrected = true;
    let pages = vec![
        PageRecord::text_layer(1, "Héllo wörld"),
        corrected,
        warned,
        failed,
        PageRecord::pending(5),
    ];
    // The older run writes last: the listing still picks the newer run's records.
    put_pages(db, &doc.id, "run_old", &pages)
        .await
        .expect("old");
    let listing = page_listing(db, &doc.id, 100, 0, false, run_created_order)
        .await
        .expect("listing");
    assert_eq!(listing.run_id.as_deref(), Some("run_new"));
    assert_eq!(listing.total, 1);

    // Records of a run whose row is gone count as oldest.
    delete_run(db, "run_new").await;
    let listing = page_listing(db, &doc.id, 100, 0, false, run_created_order)
        .await
        .expect("listing");
    assert_eq!(listing.run_id.as_deref(), Some("run_old"));
    let summary = &listing.summary;
    assert_eq!(
        (
            summary.pages,
            summary.text_layer,
            summary.ocr,
            summary.failed,
            summary.pending
        ),
        (5, 1, 2, 1, 1)
    );
    assert_eq!(
        (summary.corrected, summary.with_warnings, summary.attempts),
        (1, 1, 5)
    );
    assert_eq!(summary.average_confidence, Some(70.5));
    assert_eq!(listing.total, 5);
    let numbers: Vec<u32> = listing.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, vec![1, 2, 3, 4, 5]);
    assert_eq!(listing.pages[0].chars, 11, "characters, not bytes");
    assert_eq!(listing.pages[1].chars, 5);
    assert_eq!(
        listing.pages[3].error.as_deref(),
        Some("ocr_timeout: too slow")
    );

    let json = serde_json::to_value(&listing).expect("json");
    let first = &json["pages"][1];
    assert!(first.get("text").is_none());
    assert_eq!(first["source"], "ocr");
    assert_eq!(first["rotation_degrees"], 90);
    assert_eq!(first["corrected"], true);

    let failures = page_listing(db, &doc.id, 100, 0, true, run_created_order)
        .await
        .expect("failures");
    let numbers: Vec<u32> = failures.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, vec![3, 4]);
    assert_eq!(failures.total, 2);
    assert_eq!(
        failures.summary, listing.summary,
        "the summary ignores the filter"
    );

    let paged = page_listing(db, &doc.id, 2, 3, false, run_created_order)
        .await
        .expect("paged");
    let numbers: Vec<u32> = paged.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, vec![4, 5]);
    assert_eq!((paged.total, paged.limit, paged.offset), (5, 2, 3));
    let past = page_listing(db, &doc.id, 2, 50, false, run_created_order)
        .await
        .expect("past the end");
    assert!(past.pages.is_empty());
    assert_eq!(past.total, 5);
}

on_both_backends!(deleting_a_document_removes_its_pages_and_page_images);
async fn deleting_a_document_removes_its_pages_and_page_images(env: Env) {
    let db = env.db();
    let doc = env
        .upload("scan.png", b"\x89PNG\r\n\x1a\n fake png")
        .await
        .expect("ingest")
        .document;
    add_run(
        db,
        "run_a",
        &doc.id,
        "succeeded",
        "2026-11-23T10:00:00.000Z",
    )
    .await;
    put_pages(db, &doc.id, "run_a", &[ocr_page(1, "text", 90.0)])
        .await
        .expect("put");

    let dir = env
        .store
        .create_page_images_dir(&doc.id)
        .await
        .expect("dir");
    assert_eq!(dir, env.data_dir().join("page-images").join(&doc.id));
    assert_eq!(env.store.page_images_dir(&doc.id), dir);
    std::fs::write(dir.join("page-0001.png"), b"png").expect("write image");

    env.store
        .delete(&doc.id, delete_runs_of(&doc.id))
        .await
        .expect("delete");
    assert_eq!(page_rows(db, &doc.id).await, 0);
    assert!(!dir.exists());
    assert!(env.data_dir().join("page-images").is_dir());
}

on_both_backends!(symlinked_page_image_boundaries_are_refused);
async fn symlinked_page_image_boundaries_are_refused(env: Env) {
    let doc = env
        .upload("scan.png", b"\x89PNG\r\n\x1a\n other")
        .await
        .expect("ingest")
        .document;
    assert!(matches!(
        env.store.create_page_images_dir("../escape").await,
        Err(DocumentsError::InvalidPath { .. })
    ));
    let outside = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(outside.path(), env.data_dir().join("page-images"))
        .expect("symlink");
    assert!(matches!(
        env.store.create_page_images_dir(&doc.id).await,
        Err(DocumentsError::InvalidPath { .. })
    ));
    assert!(
        std::fs::read_dir(outside.path())
            .expect("read")
            .next()
            .is_none()
    );
    // The delete is refused before anything is removed.
    assert!(matches!(
        env.store.delete(&doc.id, delete_runs_of(&doc.id)).await,
        Err(DocumentsError::InvalidPath { .. })
    ));
    assert!(env.store.get(&doc.id).await.is_ok());
}
