//! Document store on a real SQLite file and a real PostgreSQL database: ingest (uploads and imports), dedupe, refusals that
//! leave nothing behind, listing, results, statuses, texts, content pages and deletion.

#[macro_use]
mod common;

use common::engine_sql::{delete_runs_of, has_succeeded_run, succeeded_run_ids};
use common::{Env, files_under};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use shelf_db::sql::SqlExt;
use shelf_documents::{
    DocumentFilter, DocumentResults, DocumentStatus, DocumentsError, SourceKind, TextRecord,
    content_page, document_id, find_document, get_text, index_document, latest_succeeded_text,
    latest_text, put_text, set_results, sha256_hex, status_after_unsuccessful_run_statement,
    status_statement,
};

async fn count(db: &impl ConnectionTrait, sql: &str) -> i64 {
    let row = db
        .query_one_sql(Statement::from_string(DbBackend::Sqlite, sql))
        .await
        .expect("query")
        .expect("row");
    row.try_get_by_index::<i64>(0).expect("count")
}

on_both_backends!(upload_is_stored_content_addressed);
async fn upload_is_stored_content_addressed(env: Env) {
    let bytes = b"Horses are large animals.\n";
    let ingested = env
        .upload("../My  Notes?.TXT", bytes)
        .await
        .expect("ingest");
    assert!(!ingested.duplicate);
    let doc = &ingested.document;
    assert_eq!(doc.id, document_id(&sha256_hex(bytes)));
    assert_eq!(doc.filename, "My Notes_.TXT");
    assert_eq!(doc.extension, "txt");
    assert_eq!(doc.status, DocumentStatus::Ingested);
    assert_eq!(doc.source_kind, SourceKind::Upload);
    assert_eq!(doc.byte_size, bytes.len() as u64);
    assert_eq!(
        doc.storage_path,
        format!("uploads/{}/My Notes_.TXT", doc.id)
    );
    assert!(doc.created_at.ends_with('Z') && doc.created_at.len() == 24);
    assert_eq!(
        files_under(&env.data_dir().join("uploads")),
        vec![format!("{}/My Notes_.TXT", doc.id)]
    );
    let path = env.store.open_source(doc).await.expect("open source");
    assert_eq!(std::fs::read(path).expect("read"), bytes);

    let json = serde_json::to_value(&ingested).expect("json");
    assert_eq!(json["id"], doc.id.as_str());
    assert_eq!(json["duplicate"], false);
    assert_eq!(json["classification"], serde_json::Value::Null);
    assert_eq!(json["tags"], serde_json::json!([]));
    assert!(json.get("storage_path").is_none());
    assert!(json.get("pk").is_none());
}

on_both_backends!(identical_bytes_are_a_duplicate_and_stored_once);
async fn identical_bytes_are_a_duplicate_and_stored_once(env: Env) {
    let first = env.upload("a.txt", b"same bytes").await.expect("first");
    let second = env.upload("b.md", b"same bytes").await.expect("second");
    assert!(second.duplicate);
    assert_eq!(second.document, first.document);
    assert_eq!(count(env.db(), "SELECT count(*) FROM documents").await, 1);
    assert_eq!(
        files_under(&env.data_dir().join("uploads")),
        vec![format!("{}/a.txt", first.document.id)]
    );
}

on_both_backends!(refused_uploads_leave_nothing_behind);
async fn refused_uploads_leave_nothing_behind(env: Env) {
    let cases: Vec<(&str, &[u8], &str)> = vec![
        ("archive.zip", b"PK\x03\x04....", "archive_not_supported"),
        ("data.tar.gz", b"\x1f\x8b\x08\x00", "archive_not_supported"),
        ("renamed.txt", b"PK\x03\x04rest", "archive_not_supported"),
        (
            "report.docx",
            b"\x00\x01\x02binary, not a ZIP container",
            "unsupported_file_type",
        ),
        (
            "slides.ppt",
            b"\x00\x01\x02random bytes, not a compound file",
            "unsupported_file_type",
        ),
        ("program.exe", b"MZ\x90\x00", "unsupported_file_type"),
        ("binary.txt", b"abc\0def", "unsupported_file_type"),
    ];
    for (name, bytes, code) in cases {
        let err = env.upload(name, bytes).await.expect_err(name);
        assert_eq!(err.code(), code, "{name}: {err}");
        assert!(err.is_user_error());
    }
    match env.upload("program.exe", b"\x00\x01").await {
        Err(DocumentsError::UnsupportedFileType { detail }) => assert!(detail.contains("exe")),
        other => panic!("{other:?}"),
    }
    assert!(files_under(&env.data_dir().join("uploads")).is_empty());
    assert_eq!(count(env.db(), "SELECT count(*) FROM documents").await, 0);
    // Content that is another format Shelf reads is read as that format.
    for (name, bytes, extension) in [
        (
            "report.docx",
            &b"plain text, not a ZIP container"[..],
            "txt",
        ),
        ("scan.pdf", b"\x89PNG\r\n\x1a\n", "png"),
        ("noext", b"hello", "txt"),
    ] {
        let ingested = env.upload(name, bytes).await.expect(name);
        assert_eq!(ingested.document.extension, extension, "{name}");
        assert_eq!(ingested.document.filename, name);
    }
    // UTF-16 with a byte-order mark is text.
    let utf16 = b"\xFF\xFEh\0i\0";
    assert!(env.upload("wide.txt", utf16).await.is_ok());
}

on_both_backends!(symlinked_uploads_directory_is_refused);
async fn symlinked_uploads_directory_is_refused(env: Env) {
    let outside = tempfile::tempdir().expect("tempdir");
    let staged = env.stage(b"hello symlink").await;
    // Replace uploads/<id> parent with a symlink after staging.
    let id = document_id(&sha256_hex(b"hello symlink"));
    std::os::unix::fs::symlink(outside.path(), env.data_dir().join("uploads").join(&id))
        .expect("symlink");
    let err = env
        .store
        .ingest_upload(&staged, "a.txt", &sha256_hex(b"hello symlink"), 13)
        .await
        .expect_err("symlinked parent");
    assert!(matches!(err, DocumentsError::InvalidPath { .. }), "{err}");
    assert!(!staged.exists());
    assert!(files_under(outside.path()).is_empty());

    let env2 = common::env().await;
    let outside2 = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(outside2.path(), env2.data_dir().join("uploads")).expect("symlink");
    let err = env2
        .store
        .new_staging_path()
        .await
        .expect_err("symlinked uploads");
    assert!(matches!(err, DocumentsError::InvalidPath { .. }));
}

on_both_backends!(import_references_the_file_in_place);
async fn import_references_the_file_in_place(env: Env) {
    let source_dir = tempfile::tempdir().expect("tempdir");
    let path = source_dir.path().join("Chapter 1.md");
    let body = "# Chapter\n".repeat(20_000);
    std::fs::write(&path, &body).expect("write");
    let ingested = env.store.ingest_path(&path).await.expect("import");
    let doc = &ingested.document;
    assert_eq!(doc.source_kind, SourceKind::Import);
    assert_eq!(doc.id, document_id(&sha256_hex(body.as_bytes())));
    assert_eq!(doc.byte_size, body.len() as u64);
    assert_eq!(
        std::path::PathBuf::from(&doc.storage_path),
        std::fs::canonicalize(&path).expect("canonical")
    );
    assert!(!env.data_dir().join("uploads").exists());
    assert!(env.store.ingest_path(&path).await.expect("again").duplicate);

    // The same bytes uploaded are a duplicate of the import.
    assert!(
        env.upload("copy.md", body.as_bytes())
            .await
            .expect("upload")
            .duplicate
    );

    // Changing the source is detected.
    std::fs::write(&path, "changed").expect("write");
    let err = env.store.open_source(doc).await.expect_err("changed");
    assert!(matches!(err, DocumentsError::SourceChanged { .. }));

    // Deleting an import never touches the file nor creates an uploads directory.
    let deleted = env
        .store
        .delete(&doc.id, delete_runs_of(&doc.id))
        .await
        .expect("delete");
    assert!(!deleted.removed_files);
    assert!(path.exists());
    let uploads = env.data_dir().join("uploads");
    assert!(files_under(&uploads).is_empty());
    assert!(!uploads.join(&doc.id).exists() && !uploads.join(".trash").exists());
}

on_both_backends!(deleting_an_import_creates_no_uploads_directory);
async fn deleting_an_import_creates_no_uploads_directory(env: Env) {
    let source_dir = tempfile::tempdir().expect("tempdir");
    let path = source_dir.path().join("notes.txt");
    std::fs::write(&path, "imported").expect("write");
    let doc = env.store.ingest_path(&path).await.expect("import").document;
    env.store
        .delete(&doc.id, delete_runs_of(&doc.id))
        .await
        .expect("delete");
    assert!(path.exists());
    assert!(!env.data_dir().join("uploads").exists());
}

on_both_backends!(imports_refuse_symlinks_archives_and_non_files);
async fn imports_refuse_symlinks_archives_and_non_files(env: Env) {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("real.txt");
    std::fs::write(&real, "text").expect("write");
    let link = dir.path().join("link.txt");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let err = env.store.ingest_path(&link).await.expect_err("symlink");
    assert!(matches!(err, DocumentsError::InvalidPath { .. }));
    let err = env.store.ingest_path(dir.path()).await.expect_err("dir");
    assert!(matches!(err, DocumentsError::InvalidPath { .. }));
    let err = env
        .store
        .ingest_path(&dir.path().join("missing.txt"))
        .await
        .expect_err("missing");
    assert!(matches!(err, DocumentsError::InvalidPath { .. }));
    let corpus = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/hostile/archives-renamed"
    ));
    let entries: Vec<_> = std::fs::read_dir(corpus)
        .unwrap_or_else(|e| panic!("vendored corpus {}: {e}", corpus.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .collect();
    // An emptied directory would pass the loop below without checking anything.
    assert!(
        entries.len() >= 10,
        "too few archives in {}",
        corpus.display()
    );
    for path in entries {
        let err = env.store.ingest_path(&path).await.expect_err("archive");
        assert_eq!(err.code(), "archive_not_supported", "{path:?}");
    }
    assert_eq!(count(env.db(), "SELECT count(*) FROM documents").await, 0);
}

on_both_backends!(list_is_newest_first_with_total);
async fn list_is_newest_first_with_total(env: Env) {
    let mut ids = Vec::new();
    for i in 0..5 {
        let doc = env
            .upload(&format!("n{i}.txt"), format!("document {i}").as_bytes())
            .await
            .expect("ingest");
        ids.push(doc.document.id);
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let (page, total) = env
        .store
        .list(&Default::default(), 2, 1)
        .await
        .expect("list");
    assert_eq!(total, 5);
    let got: Vec<_> = page.iter().map(|d| d.id.clone()).collect();
    assert_eq!(got, vec![ids[3].clone(), ids[2].clone()]);
    let err = env
        .store
        .get("doc_0000000000000000")
        .await
        .expect_err("missing");
    assert_eq!(err.code(), "not_found");
}

/// Documents with known statuses, codes, tags and creation times (set by hand, so the window
/// is decided by construction), for the list's filters. Their ids, in the order made.
async fn filterable(env: &Env) -> Vec<String> {
    // (status, classification, tags, created_at)
    let specs: [(DocumentStatus, Option<&str>, &[&str], &str); 6] = [
        (
            DocumentStatus::Ready,
            Some("636.1"),
            &["horses", "farm"],
            "2026-11-01T10:00:00.000Z",
        ),
        (
            DocumentStatus::Ready,
            Some("636"),
            &["Horses"],
            "2026-11-02T00:00:00.000Z",
        ),
        (
            DocumentStatus::Failed,
            Some("63"),
            &[],
            "2026-11-03T12:00:00.000Z",
        ),
        (
            DocumentStatus::Ingested,
            None,
            &["horses"],
            "2026-11-04T00:00:00.000Z",
        ),
        (
            DocumentStatus::Ready,
            Some("637"),
            &["horses farm"],
            "2026-11-05T00:00:00.000Z",
        ),
        (
            DocumentStatus::Ready,
            Some("636.2"),
            &[],
            "2026-11-06T00:00:00.000Z",
        ),
    ];
    let mut ids = Vec::new();
    for (i, (status, code, tags, created)) in specs.into_iter().enumerate() {
        let doc = env
            .upload(&format!("f{i}.txt"), format!("filterable {i}").as_bytes())
            .await
            .expect("ingest")
            .document;
        env.store
            .set_results(
                &doc.id,
                &DocumentResults {
                    classification_code: code.map(str::to_string),
                    tags: tags.iter().map(|t| t.to_string()).collect(),
                    ..Default::default()
                },
            )
            .await
            .expect("results");
        env.db()
            .execute_sql(status_statement(&doc.id, status))
            .await
            .expect("status");
        env.db()
            .execute_sql(Statement::from_sql_and_values(
                DbBackend::Sqlite,
                "UPDATE documents SET created_at = ? WHERE id = ?",
                [created.into(), doc.id.clone().into()],
            ))
            .await
            .expect("created_at");
        ids.push(doc.id);
    }
    ids
}

on_both_backends!(list_filters_by_status_prefix_tag_and_window);
async fn list_filters_by_status_prefix_tag_and_window(env: Env) {
    let ids = filterable(&env).await;
    let at = |text: &str| {
        chrono::DateTime::parse_from_rfc3339(text)
            .expect("time")
            .with_timezone(&chrono::Utc)
    };
    // The ids a filter lets through (newest first) and the total it reports.
    let listed = |filter: DocumentFilter| {
        let store = env.store.clone();
        async move {
            let (page, total) = store.list(&filter, 100, 0).await.expect("list");
            assert_eq!(total, page.len() as u64, "{filter:?}");
            page.into_iter().map(|d| d.id).collect::<Vec<_>>()
        }
    };
    let of = |picks: &[usize]| picks.iter().map(|&i| ids[i].clone()).collect::<Vec<_>>();

    assert_eq!(
        listed(DocumentFilter::default()).await,
        of(&[5, 4, 3, 2, 1, 0])
    );
    let status = |s| DocumentFilter {
        status: Some(s),
        ..Default::default()
    };
    assert_eq!(
        listed(status(DocumentStatus::Ready)).await,
        of(&[5, 4, 1, 0])
    );
    assert_eq!(listed(status(DocumentStatus::Failed)).await, of(&[2]));
    assert_eq!(listed(status(DocumentStatus::Processing)).await, of(&[]));

    // A plain string prefix, as search's: `636` is 636 and 636.x, not 63 or 637.
    let prefix = |p: &str| DocumentFilter {
        classification_prefix: Some(p.to_string()),
        ..Default::default()
    };
    assert_eq!(listed(prefix("636")).await, of(&[5, 1, 0]));
    assert_eq!(listed(prefix("636.1")).await, of(&[0]));
    assert_eq!(listed(prefix("63")).await, of(&[5, 4, 2, 1, 0]));
    assert_eq!(listed(prefix("  ")).await, of(&[5, 4, 3, 2, 1, 0]));

    // One whole element, exactly: not `Horses`, not `horses farm`.
    let tag = |t: &str| DocumentFilter {
        tag: Some(t.to_string()),
        ..Default::default()
    };
    assert_eq!(listed(tag("horses")).await, of(&[3, 0]));
    assert_eq!(listed(tag("Horses")).await, of(&[1]));
    assert_eq!(listed(tag("farm")).await, of(&[0]));
    assert_eq!(listed(tag("hors")).await, of(&[]));
    // A value that would be SQL if it were spliced in is only a value.
    assert_eq!(listed(tag("') OR 1=1 --")).await, of(&[]));

    // Both bounds inclusive.
    let window = |after: Option<&str>, before: Option<&str>| DocumentFilter {
        created_after: after.map(at),
        created_before: before.map(at),
        ..Default::default()
    };
    assert_eq!(
        listed(window(
            Some("2026-11-02T00:00:00Z"),
            Some("2026-11-04T00:00:00Z")
        ))
        .await,
        of(&[3, 2, 1])
    );
    assert_eq!(
        listed(window(Some("2026-11-05T00:00:00.001Z"), None)).await,
        of(&[5])
    );
    assert_eq!(
        listed(window(None, Some("2026-11-01T10:00:00Z"))).await,
        of(&[0])
    );

    // Combined, with paging and a total over the whole filtered set.
    let combined = DocumentFilter {
        status: Some(DocumentStatus::Ready),
        classification_prefix: Some("636".into()),
        tag: None,
        created_after: Some(at("2026-11-01T00:00:00Z")),
        created_before: Some(at("2026-11-06T00:00:00Z")),
    };
    assert_eq!(listed(combined.clone()).await, of(&[5, 1, 0]));
    let (page, total) = env.store.list(&combined, 1, 1).await.expect("page");
    assert_eq!(total, 3);
    assert_eq!(
        page.iter().map(|d| d.id.clone()).collect::<Vec<_>>(),
        of(&[1])
    );
    let tagged = DocumentFilter {
        tag: Some("horses".into()),
        ..combined
    };
    assert_eq!(listed(tagged).await, of(&[0]));

    // A window that ends before it starts is refused, as search refuses it.
    let err = env
        .store
        .list(
            &window(Some("2026-11-02T00:00:00Z"), Some("2026-11-01T00:00:00Z")),
            10,
            0,
        )
        .await
        .expect_err("reversed window");
    assert_eq!(err.code(), "invalid_search_window");
}

on_both_backends!(results_statuses_and_texts);
async fn results_statuses_and_texts(env: Env) {
    let doc = env
        .upload("horses.txt", b"horse text")
        .await
        .expect("ingest")
        .document;
    let db = env.db();

    set_results(
        db,
        &doc.id,
        &DocumentResults {
            classification_code: Some("636.1".into()),
            classification_confidence: Some(0.9),
            title: Some("Horses".into()),
            summary: Some("About horses.".into()),
            tags: vec!["horses".into(), "animals".into()],
            suggested_stem: Some("636-1-horses".into()),
            ..Default::default()
        },
    )
    .await
    .expect("results");
    let stored = env.store.get(&doc.id).await.expect("get");
    assert_eq!(stored.classification.as_deref(), Some("636.1"));
    assert_eq!(
        stored.classification_label.as_deref(),
        Some("Animal husbandry")
    );
    assert_eq!(stored.tags, vec!["horses", "animals"]);
    assert_eq!(stored.title.as_deref(), Some("Horses"));
    let err = set_results(db, "doc_0000000000000000", &DocumentResults::default())
        .await
        .expect_err("missing");
    assert_eq!(err.code(), "not_found");

    db.execute_sql(status_statement(&doc.id, DocumentStatus::Processing))
        .await
        .expect("status");
    assert_eq!(
        env.store.get(&doc.id).await.expect("get").status,
        DocumentStatus::Processing
    );
    db.execute_sql(status_after_unsuccessful_run_statement(
        &doc.id,
        DocumentStatus::Ingested,
        &has_succeeded_run(&doc.id),
    ))
    .await
    .expect("cancel");
    assert_eq!(
        env.store.get(&doc.id).await.expect("get").status,
        DocumentStatus::Ingested
    );

    let err = content_page(db, &doc.id, 0, 10, &succeeded_run_ids(&doc.id))
        .await
        .expect_err("no content");
    assert_eq!(err.code(), "not_found");
    assert!(matches!(err, DocumentsError::NoContent { .. }));

    let record = TextRecord {
        id: "run_1:clean".into(),
        document_id: doc.id.clone(),
        run_id: "run_1".into(),
        kind: "cleaned".into(),
        body: "Ünïcödé horses gallop.".into(),
    };
    put_text(db, &record).await.expect("put");
    put_text(db, &record).await.expect("put again");
    assert_eq!(
        get_text(db, "run_1:clean").await.expect("get"),
        Some(record.clone())
    );
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    let newer = TextRecord {
        id: "run_2:clean".into(),
        run_id: "run_2".into(),
        body: "Ünïcödé horses gallop fast.".into(),
        ..record.clone()
    };
    put_text(db, &newer).await.expect("put newer");
    assert_eq!(
        latest_text(db, &doc.id, "cleaned").await.expect("latest"),
        Some(newer.clone())
    );
    assert_eq!(latest_text(db, &doc.id, "raw").await.expect("latest"), None);

    // Readers see the texts of succeeded runs only.
    let err = content_page(db, &doc.id, 0, 10, &succeeded_run_ids(&doc.id))
        .await
        .expect_err("no succeeded run yet");
    assert!(matches!(err, DocumentsError::NoContent { .. }));
    for (run, status) in [("run_1", "succeeded"), ("run_2", "succeeded")] {
        db.execute_sql(sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Sqlite,
            "INSERT INTO runs (id, subject, pipeline, pipeline_yaml, pipeline_sha256, status, due_at, enqueued_at, created_at) \
             VALUES (?, ?, 'default', '', '', ?, 0, 0, '2026-01-01T00:00:00Z')",
            [run.into(), doc.id.clone().into(), status.into()],
        ))
        .await
        .expect("run");
    }
    // A run that succeeded makes a later failure leave the document ready.
    db.execute_sql(status_after_unsuccessful_run_statement(
        &doc.id,
        DocumentStatus::Failed,
        &has_succeeded_run(&doc.id),
    ))
    .await
    .expect("failed");
    assert_eq!(
        env.store.get(&doc.id).await.expect("get").status,
        DocumentStatus::Ready
    );
    let page = content_page(db, &doc.id, 2, 5, &succeeded_run_ids(&doc.id))
        .await
        .expect("page");
    assert_eq!(page.text, "ïcödé");
    assert_eq!(page.total_chars, 27);
    assert!(page.truncated);
    let tail = content_page(db, &doc.id, 20, 100, &succeeded_run_ids(&doc.id))
        .await
        .expect("tail");
    assert_eq!(tail.text, "p fast.");
    assert!(!tail.truncated);
    let past = content_page(db, &doc.id, 1000, 10, &succeeded_run_ids(&doc.id))
        .await
        .expect("past");
    assert_eq!(past.text, "");
    let json = serde_json::to_value(&page).expect("json");
    for key in [
        "document_id",
        "text",
        "total_chars",
        "offset",
        "limit",
        "truncated",
    ] {
        assert!(json.get(key).is_some(), "{key}");
    }
    let err = content_page(
        db,
        "doc_0000000000000000",
        0,
        1,
        &succeeded_run_ids("doc_0000000000000000"),
    )
    .await
    .expect_err("missing");
    assert!(matches!(err, DocumentsError::NotFound { .. }));

    db.execute_sql(status_after_unsuccessful_run_statement(
        &doc.id,
        DocumentStatus::Ingested,
        &has_succeeded_run(&doc.id),
    ))
    .await
    .expect("cancel");
    assert_eq!(
        env.store.get(&doc.id).await.expect("get").status,
        DocumentStatus::Ready
    );
    assert!(find_document(db, &doc.id).await.expect("find").is_some());
}

on_both_backends!(delete_removes_rows_index_runs_and_owned_files);
async fn delete_removes_rows_index_runs_and_owned_files(env: Env) {
    let keep = env
        .upload("keep.txt", b"keep me")
        .await
        .expect("keep")
        .document;
    let doc = env
        .upload("gone.txt", b"delete me")
        .await
        .expect("ingest")
        .document;
    let db = env.db();
    index_document(db, &doc.id, "run_a", "cleaned horses", "raw horses")
        .await
        .expect("index");
    index_document(db, &keep.id, "run_b", "cleaned cows", "raw cows")
        .await
        .expect("index");
    put_text(
        db,
        &TextRecord {
            id: "t1".into(),
            document_id: doc.id.clone(),
            run_id: "run_a".into(),
            kind: "cleaned".into(),
            body: "cleaned horses".into(),
        },
    )
    .await
    .expect("text");
    for sql in [
        format!(
            "INSERT INTO runs (id, subject, pipeline, pipeline_yaml, pipeline_sha256, status, \
             due_at, enqueued_at, created_at) VALUES ('run_a', '{}', 'default', '', '', \
             'succeeded', 0, 0, '2026-01-01T00:00:00.000Z')",
            doc.id
        ),
        "INSERT INTO run_stages (run_id, name, kind, position, status) \
         VALUES ('run_a', 'clean', 'clean', 0, 'succeeded')"
            .to_string(),
        "INSERT INTO run_events (run_id, sequence, stage, kind, message, created_at) \
         VALUES ('run_a', 1, 'clean', 'info', 'ok', '2026-01-01T00:00:00.000Z')"
            .to_string(),
        "INSERT INTO run_stage_parts (run_id, stage, key, value) \
         VALUES ('run_a', 'clean', 'chunk-0', 'x')"
            .to_string(),
    ] {
        db.execute_unprepared(&sql).await.expect("engine rows");
    }

    let deleted = env
        .store
        .delete(&doc.id, delete_runs_of(&doc.id))
        .await
        .expect("delete");
    assert!(deleted.removed_files);
    for (table, expected) in [
        ("documents", 1),
        // The kept document's index bodies (`index_document` stores them as its texts).
        ("document_texts", 2),
        ("runs", 0),
        ("run_stages", 0),
        ("run_events", 0),
        ("run_stage_parts", 0),
        ("search_cleaned", 1),
        ("search_raw", 1),
        ("search_documents", 1),
    ] {
        assert_eq!(
            count(db, &format!("SELECT count(*) FROM {table}")).await,
            expected,
            "{table}"
        );
    }
    assert_eq!(
        files_under(&env.data_dir().join("uploads")),
        vec![format!("{}/keep.txt", keep.id)]
    );
    let err = env
        .store
        .delete(&doc.id, delete_runs_of(&doc.id))
        .await
        .expect_err("twice");
    assert_eq!(err.code(), "not_found");

    // Re-uploading the deleted bytes works again.
    let again = env.upload("gone.txt", b"delete me").await.expect("again");
    assert!(!again.duplicate);
}

on_both_backends!(delete_refuses_a_symlinked_uploads_boundary);
async fn delete_refuses_a_symlinked_uploads_boundary(env: Env) {
    let doc = env
        .upload("a.txt", b"boundary")
        .await
        .expect("ingest")
        .document;
    let uploads = env.data_dir().join("uploads");
    let moved = env.dir.path().join("elsewhere");
    std::fs::rename(&uploads, &moved).expect("move");
    std::os::unix::fs::symlink(&moved, &uploads).expect("symlink");
    let err = env
        .store
        .delete(&doc.id, delete_runs_of(&doc.id))
        .await
        .expect_err("symlinked");
    assert!(matches!(err, DocumentsError::InvalidPath { .. }), "{err}");
    assert!(env.store.get(&doc.id).await.is_ok());
    assert_eq!(files_under(&moved).len(), 1);
}

on_both_backends!(concurrent_identical_uploads_store_one_document);
async fn concurrent_identical_uploads_store_one_document(env: Env) {
    let env = std::sync::Arc::new(env);
    let mut tasks = Vec::new();
    for i in 0..6 {
        let env = env.clone();
        tasks.push(tokio::spawn(async move {
            env.upload(&format!("same{i}.txt"), b"racing bytes").await
        }));
    }
    let mut fresh = 0;
    for task in tasks {
        let ingested = task.await.expect("join").expect("ingest");
        if !ingested.duplicate {
            fresh += 1;
        }
    }
    assert_eq!(fresh, 1);
    assert_eq!(count(env.db(), "SELECT count(*) FROM documents").await, 1);
    assert_eq!(files_under(&env.data_dir().join("uploads")).len(), 1);
}

on_both_backends!(an_upload_whose_row_fails_leaves_no_file_and_no_row);
async fn an_upload_whose_row_fails_leaves_no_file_and_no_row(env: Env) {
    // The row's insert fails after the file was moved into uploads/<id>/ (on SQLite inside
    // the writer thread's transaction): the move is undone with the transaction.
    let refuse = if env.is_postgres() {
        "CREATE FUNCTION refuse_documents() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$; \
         CREATE TRIGGER refuse_documents BEFORE INSERT ON documents \
         FOR EACH ROW EXECUTE FUNCTION refuse_documents()"
    } else {
        "CREATE TRIGGER refuse_documents BEFORE INSERT ON documents \
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    };
    env.db().execute_unprepared(refuse).await.expect("trigger");
    let bytes = b"a row that never lands";
    let staged = env.stage(bytes).await;
    let err = env
        .store
        .ingest_upload(&staged, "a.txt", &sha256_hex(bytes), bytes.len() as u64)
        .await
        .expect_err("the insert is refused");
    assert!(err.to_string().contains("refused by the test"), "{err}");
    assert!(!staged.exists(), "the staged file is removed");
    let id = document_id(&sha256_hex(bytes));
    assert!(
        !env.data_dir().join("uploads").join(&id).exists(),
        "the moved file is removed"
    );
    assert_eq!(count(env.db(), "SELECT count(*) FROM documents").await, 0);

    let drop = if env.is_postgres() {
        "DROP TRIGGER refuse_documents ON documents"
    } else {
        "DROP TRIGGER refuse_documents"
    };
    env.db()
        .execute_unprepared(drop)
        .await
        .expect("drop trigger");
    let again = env.stage(bytes).await;
    let ingested = env
        .store
        .ingest_upload(&again, "a.txt", &sha256_hex(bytes), bytes.len() as u64)
        .await
        .expect("ingested once the trigger is gone");
    assert!(!ingested.duplicate);
}

async fn an_upload_whose_caller_goes_away_still_ends_whole(env: Env) {
    // The caller's future is polled once and dropped (a client that disconnected mid-ingest):
    // the ingest goes on by itself and ends with a row, its stored file and no staged file,
    // never with a moved file and no row.
    let bytes = b"an upload whose client went away";
    let staged = env.stage(bytes).await;
    let sha256 = sha256_hex(bytes);
    {
        let ingest = env
            .store
            .ingest_upload(&staged, "gone.txt", &sha256, bytes.len() as u64);
        // A zero timeout polls the ingest once (tokio polls the future before the timer).
        let _ = tokio::time::timeout(std::time::Duration::ZERO, ingest).await;
    }
    let id = document_id(&sha256_hex(bytes));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while count(
        env.db(),
        &format!("SELECT count(*) FROM documents WHERE id = '{id}'"),
    )
    .await
        == 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the ingest stopped with its caller"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let stored = env.data_dir().join("uploads").join(&id).join("gone.txt");
    assert_eq!(std::fs::read(&stored).expect("stored file"), bytes);
    assert!(!staged.exists(), "the staged file moved");
}
on_both_backends!(an_upload_whose_caller_goes_away_still_ends_whole);

async fn a_succeeded_retry_shows_the_text_it_reused_from_the_failed_run(env: Env) {
    // run_a failed after cleaning; run_b, its retry, succeeded by reusing that checkpoint, and
    // run_c, a retry of another failed run, too: the cleaned texts they reuse are what
    // readers see, up a chain of retries, and a failed run's own text is not.
    let bytes = b"retries reuse texts\n";
    let staged = env.stage(bytes).await;
    let doc = env
        .store
        .ingest_upload(&staged, "chain.txt", &sha256_hex(bytes), bytes.len() as u64)
        .await
        .expect("ingest")
        .document;
    let db = env.db();
    for (run, status, retry_of) in [
        ("run_a", "failed", None),
        ("run_b", "failed", Some("run_a")),
        ("run_c", "succeeded", Some("run_b")),
        ("run_d", "failed", None),
    ] {
        db.execute_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "INSERT INTO runs (id, subject, pipeline, pipeline_yaml, pipeline_sha256, status, retry_of, due_at, enqueued_at, created_at) \
             VALUES (?, ?, 'default', '', '', ?, ?, 0, 0, '2026-01-01T00:00:00Z')",
            [run.into(), doc.id.clone().into(), status.into(), retry_of.into()],
        ))
        .await
        .expect("run");
    }
    let text = |run: &str, body: &str| TextRecord {
        id: format!("{run}:clean"),
        document_id: doc.id.clone(),
        run_id: run.into(),
        kind: "cleaned".into(),
        body: body.into(),
    };
    put_text(db, &text("run_a", "cleaned once, reused twice"))
        .await
        .expect("text");
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    put_text(db, &text("run_d", "a failed run's text"))
        .await
        .expect("text");
    let seen = latest_succeeded_text(db, &doc.id, "cleaned", &succeeded_run_ids(&doc.id))
        .await
        .expect("read")
        .expect("a text");
    assert_eq!(seen.run_id, "run_a");
    let page = content_page(db, &doc.id, 0, 100, &succeeded_run_ids(&doc.id))
        .await
        .expect("page");
    assert_eq!(page.text, "cleaned once, reused twice");
}
on_both_backends!(a_succeeded_retry_shows_the_text_it_reused_from_the_failed_run);
