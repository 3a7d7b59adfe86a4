//! The `extract` stage through the real engine on a real SQLite file: real corpus documents
//! of several formats, the extraction cache (reused on reprocess, missed when the extractor
//! version changes or the cache is off), transcript segments stored with the document, and
//! the OCR flags of images.

use shelf_db::sql::SqlExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sea_orm::ConnectionTrait;
use shelf_engine::{RunRecord, RunStatus};
use shelf_stages::provider::MockProvider;

use crate::pipeline::{Setup, run_default, setup};

fn corpus(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus")
        .join(relative)
}

async fn extract_output(s: &Setup, run: &RunRecord) -> serde_json::Value {
    s.engine
        .store()
        .stages(&run.id)
        .await
        .unwrap()
        .into_iter()
        .find(|st| st.name == "extract")
        .and_then(|st| st.output)
        .expect("extract output")
}

async fn raw_text(s: &Setup, run: &RunRecord) -> String {
    let output = extract_output(s, run).await;
    let id = output["raw_text_id"].as_str().unwrap();
    shelf_documents::get_text(&s.documents.db, id)
        .await
        .unwrap()
        .unwrap()
        .body
}

#[tokio::test]
async fn documents_of_each_kind_are_extracted_through_the_pipeline() {
    let s = setup(Arc::new(MockProvider::default()), 12_000, 2).await;
    let cases = [
        ("office/docx/sources/word_tables.docx", "| "),
        (
            "office/pptx/sources/powerpoint_sample.pptx",
            "# Second slide title",
        ),
        ("office/xlsx/sources/xlsx_01.xlsx", "## "),
        ("office/odf/sources/text_document_01.odt", ""),
        ("office/epub/sources/epub_purvis_poetry.epub", ""),
        ("office/html/sources/example_01.html", "# Introduction"),
        ("pdf/pypdf/crazyones.pdf", "Here"),
    ];
    for (path, must_contain) in cases {
        let run = run_default(&s, &corpus(path)).await;
        assert_eq!(run.status, RunStatus::Succeeded, "{path}: {:?}", run.error);
        let output = extract_output(&s, &run).await;
        assert_eq!(output["needs_ocr"], false, "{path}");
        assert_eq!(output["from_cache"], false, "{path}");
        let text = raw_text(&s, &run).await;
        assert!(text.len() > 100, "{path}: {text}");
        assert!(text.contains(must_contain), "{path}: {text}");
    }
}

#[tokio::test]
async fn the_cache_is_reused_on_reprocess_and_missed_for_a_new_extractor_version() {
    let s = setup(Arc::new(MockProvider::default()), 12_000, 2).await;
    let file = corpus("office/docx/sources/lorem_ipsum.docx");
    let first = run_default(&s, &file).await;
    assert_eq!(extract_output(&s, &first).await["from_cache"], false);
    let second = run_default(&s, &file).await;
    let output = extract_output(&s, &second).await;
    assert_eq!(output["from_cache"], true, "{output}");
    assert_eq!(raw_text(&s, &first).await, raw_text(&s, &second).await);

    // A row written by another version of the extractor is not this version's result.
    s.documents
        .db
        .execute_unprepared("UPDATE extraction_cache SET extractor_version = 'docx-0'")
        .await
        .unwrap();
    let third = run_default(&s, &file).await;
    assert_eq!(extract_output(&s, &third).await["from_cache"], false);

    // Deleting the document deletes its cached text.
    s.documents
        .delete(
            &third.subject,
            shelf_engine::subject_sql::delete_runs_of(&third.subject),
        )
        .await
        .unwrap();
    let left = s
        .documents
        .db
        .query_all_sql(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Sqlite,
            "SELECT sha256 FROM extraction_cache",
        ))
        .await
        .unwrap();
    assert!(left.is_empty(), "the cache kept a deleted document's text");
}

/// The cache row of a file, as (text_id, the Markdown it holds itself).
async fn cache_row(s: &Setup, sha256: &str) -> (Option<String>, String) {
    let row = s
        .documents
        .db
        .query_one_sql(sea_orm::Statement::from_sql_and_values(
            sea_orm::DbBackend::Sqlite,
            "SELECT text_id, json_extract(result, '$.markdown') AS markdown \
             FROM extraction_cache WHERE sha256 = ?",
            [sha256.into()],
        ))
        .await
        .unwrap()
        .expect("a cache row");
    (
        row.try_get("", "text_id").unwrap(),
        row.try_get("", "markdown").unwrap(),
    )
}

#[tokio::test]
async fn the_cache_names_the_runs_raw_text_instead_of_copying_it() {
    let s = setup(Arc::new(MockProvider::default()), 12_000, 2).await;
    let file = corpus("office/docx/sources/lorem_ipsum.docx");
    let first = run_default(&s, &file).await;
    let sha256 = s.documents.get(&first.subject).await.unwrap().sha256;
    let first_text = extract_output(&s, &first).await["raw_text_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        cache_row(&s, &sha256).await,
        (Some(first_text.clone()), String::new()),
        "the row names the raw text and keeps no Markdown of its own"
    );
    // A hit names the newest run's text: the older run can go without costing the cache.
    let second = run_default(&s, &file).await;
    assert_eq!(extract_output(&s, &second).await["from_cache"], true);
    assert_eq!(raw_text(&s, &first).await, raw_text(&s, &second).await);
    let second_text = extract_output(&s, &second).await["raw_text_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        cache_row(&s, &sha256).await,
        (Some(second_text), String::new())
    );
    let delete_texts_of = |runs: Vec<String>| {
        let db = s.documents.db.clone();
        async move {
            for run in runs {
                db.execute_sql(sea_orm::Statement::from_sql_and_values(
                    sea_orm::DbBackend::Sqlite,
                    "DELETE FROM document_texts WHERE run_id = ?",
                    [run.into()],
                ))
                .await
                .unwrap();
            }
        }
    };
    delete_texts_of(vec![first.id.clone()]).await;
    let third = run_default(&s, &file).await;
    assert_eq!(extract_output(&s, &third).await["from_cache"], true);

    // The named text gone (its run pruned): a miss, extracted again, and the row then names
    // the new run's text.
    delete_texts_of(vec![second.id.clone(), third.id.clone()]).await;
    let fourth = run_default(&s, &file).await;
    assert_eq!(fourth.status, RunStatus::Succeeded, "{:?}", fourth.error);
    assert_eq!(extract_output(&s, &fourth).await["from_cache"], false);
    let fourth_text = extract_output(&s, &fourth).await["raw_text_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!raw_text(&s, &fourth).await.is_empty());
    assert_eq!(
        cache_row(&s, &sha256).await,
        (Some(fourth_text), String::new())
    );
}

#[tokio::test]
async fn transcript_segments_are_stored_with_the_document() {
    let s = setup(Arc::new(MockProvider::default()), 12_000, 2).await;
    let run = run_default(&s, &corpus("office/webvtt/sources/webvtt_example_03.vtt")).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let segments = shelf_documents::segments(&s.documents.db, &run.subject)
        .await
        .unwrap();
    assert!(segments.len() > 5, "{segments:?}");
    assert_eq!(extract_output(&s, &run).await["segments"], segments.len());
    for (i, pair) in segments.windows(2).enumerate() {
        assert_eq!(pair[0].index as usize, i);
        assert!(pair[0].start_seconds <= pair[1].start_seconds);
    }
    assert!(
        segments
            .iter()
            .all(|seg| seg.end_seconds >= seg.start_seconds)
    );
    assert!(
        segments.iter().any(|seg| seg.speaker.is_some()),
        "the meeting transcript names its speakers: {segments:?}"
    );
}

#[tokio::test]
async fn an_image_is_marked_for_ocr_and_a_broken_one_fails_clearly() {
    let s = setup(Arc::new(MockProvider::default()), 12_000, 2).await;
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("scan.png");
    std::fs::write(&image, b"\x89PNG\r\n\x1a\n a scanned page").unwrap();
    let run = run_default(&s, &image).await;
    assert_eq!(run.status, RunStatus::Failed);
    let output = extract_output(&s, &run).await;
    assert_eq!(output["needs_ocr"], true);
    assert_eq!(output["ocr_pages"], serde_json::json!([1]));
    let error = run.error.unwrap_or_default();
    assert!(error.contains("(image_unreadable)"), "{error}");
}

#[tokio::test]
async fn paged_documents_get_page_records_for_the_run() {
    let s = setup(Arc::new(MockProvider::default()), 12_000, 2).await;
    let run = run_default(&s, &corpus("pdf/pypdf/crazyones.pdf")).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let output = extract_output(&s, &run).await;
    let pages = shelf_documents::pages::run_pages(&s.documents.db, &run.subject, &run.id)
        .await
        .unwrap();
    assert!(!pages.is_empty());
    assert_eq!(output["page_records"], pages.len());
    assert_eq!(output["pages_run_id"], run.id.as_str());
    assert!(
        pages
            .iter()
            .all(|p| p.source == shelf_documents::PageSource::TextLayer)
    );
    assert!(pages[0].text.contains("Here"), "{:?}", pages[0].text);
    let listing = shelf_documents::pages::page_listing(
        &s.documents.db,
        &run.subject,
        10,
        0,
        false,
        shelf_engine::subject_sql::run_created_order,
    )
    .await
    .unwrap();
    assert_eq!(listing.run_id.as_deref(), Some(run.id.as_str()));
    assert_eq!(listing.summary.text_layer, pages.len() as u64);

    // A format without pages gets none.
    let run = run_default(&s, &corpus("office/docx/sources/lorem_ipsum.docx")).await;
    assert_eq!(extract_output(&s, &run).await["page_records"], 0);
    let pages = shelf_documents::pages::run_pages(&s.documents.db, &run.subject, &run.id)
        .await
        .unwrap();
    assert!(pages.is_empty());

    // An image's pages are all pending: the `ocr` stage reads them.
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("scan.png");
    std::fs::write(&image, b"\x89PNG\r\n\x1a\n a page to read").unwrap();
    let run = run_default(&s, &image).await;
    let output = extract_output(&s, &run).await;
    assert_eq!(output["page_records"], 1);
    assert_eq!(output["ocr_pages"], serde_json::json!([1]));
    let pages = shelf_documents::pages::run_pages(&s.documents.db, &run.subject, &run.id)
        .await
        .unwrap();
    assert_eq!(pages.len(), 1);
    assert!(matches!(
        pages[0].source,
        shelf_documents::PageSource::Pending | shelf_documents::PageSource::Failed
    ));
}

#[tokio::test]
async fn extractor_warnings_become_events_and_an_empty_document_fails_clearly() {
    let s = setup(Arc::new(MockProvider::default()), 12_000, 2).await;
    // One cue of this file has no timing line: it is skipped, with a warning naming its line.
    let run = run_default(&s, &corpus("transcripts/webvtt-py/missing_timeframe.vtt")).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let events = s.engine.store().events(&run.id, 0, 1000).await.unwrap();
    let warnings: Vec<_> = events
        .iter()
        .filter(|e| e.kind == "stage_warning" && e.stage == "extract")
        .collect();
    assert!(!warnings.is_empty(), "{events:?}");
    assert!(
        warnings.iter().all(|w| w.message.contains("line")),
        "{warnings:?}"
    );

    // A transcript with no cue has nothing to clean: the run says so instead of going on empty.
    let run = run_default(&s, &corpus("transcripts/webvtt-py/no_captions.vtt")).await;
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.unwrap_or_default();
    assert!(error.contains("(no_text_found)"), "{error}");
}
