//! Every write a stage makes is fenced, on a real SQLite file through the real engine: a worker
//! whose run another worker took over (its lease token bumped, as a claim after the lease
//! lapsed does) writes no page record, segment, page image or correction afterwards; and a run
//! never removes another run's page records.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use sea_orm::{DatabaseConnection, DbBackend, Statement};
use serde_json::Value;
use shelf_db::sql::SqlExt;
use shelf_documents::pages::run_pages;
use shelf_documents::{PageRecord, PageSource};
use shelf_engine::executor::ClaimOutcome;
use shelf_engine::{EngineConfig, RunRecord, RunStatus, Stage, StageContext, StageError};
use shelf_stages::provider::{
    Classification, CleanRequest, CorrectRequest, MockProvider, Synopsis,
};
use shelf_stages::{Provider, ProviderError, StageDeps};
use tokio_util::sync::CancellationToken;

use crate::pipeline::{Setup, run_default, setup_engine, submit_default};

fn corpus(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus")
        .join(relative)
}

/// A real stage that, when armed, first hands its run to another worker: the lease token is
/// bumped in SQL, so every fenced write of this claim is refused from then on. The stage then
/// runs as usual, as a worker that has not noticed yet would.
struct TakenOver<S> {
    inner: S,
    db: DatabaseConnection,
    armed: Arc<AtomicBool>,
}

#[async_trait]
impl<S: Stage> Stage for TakenOver<S> {
    const KIND: &'static str = S::KIND;
    type Options = S::Options;

    async fn run(&self, options: &S::Options, ctx: &StageContext) -> Result<Value, StageError> {
        if self.armed.load(Ordering::SeqCst) {
            self.db
                .execute_sql(Statement::from_sql_and_values(
                    DbBackend::Sqlite,
                    "UPDATE runs SET lease_token = lease_token + 1, lease_owner = 'other-worker' \
                     WHERE id = ?",
                    [ctx.run_id.clone().into()],
                ))
                .await
                .expect("take the run over");
        }
        self.inner.run(options, ctx).await
    }
}

/// The mock provider, whose corrections fail for good while `fail_correct` is set.
#[derive(Default)]
struct Switch {
    inner: MockProvider,
    fail_correct: AtomicBool,
}

#[async_trait]
impl Provider for Switch {
    fn name(&self) -> &'static str {
        "switch"
    }

    async fn correct(&self, request: CorrectRequest<'_>) -> Result<String, ProviderError> {
        if self.fail_correct.load(Ordering::SeqCst) {
            return Err(ProviderError {
                code: "provider_refused",
                message: "the test refuses corrections".into(),
                retryable: false,
            });
        }
        self.inner.correct(request).await
    }

    async fn clean(&self, request: CleanRequest<'_>) -> Result<String, ProviderError> {
        self.inner.clean(request).await
    }

    async fn classify(&self, text: &str, v: &str) -> Result<Classification, ProviderError> {
        self.inner.classify(text, v).await
    }

    async fn summarize(&self, text: &str) -> Result<Synopsis, ProviderError> {
        self.inner.summarize(text).await
    }
}

/// Which stage loses its run to another worker when it starts (while armed).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lose {
    Extract,
    Ocr,
    Correct,
}

struct Fixture {
    s: Setup,
    provider: Arc<Switch>,
    armed: Arc<AtomicBool>,
}

async fn fixture(lose: Lose, adjust: impl FnOnce(&mut StageDeps)) -> Fixture {
    let provider = Arc::new(Switch::default());
    let armed = Arc::new(AtomicBool::new(false));
    let arm = armed.clone();
    let registry = move |deps: &StageDeps| {
        let mut registry = shelf_stages::registry(deps);
        let db = deps.documents.db.clone();
        match lose {
            Lose::Extract => registry.register(TakenOver {
                inner: shelf_stages::extract::Extract::new(deps),
                db,
                armed: arm,
            }),
            Lose::Ocr => registry.register(TakenOver {
                inner: shelf_stages::ocr::Ocr::new(deps),
                db,
                armed: arm,
            }),
            Lose::Correct => registry.register(TakenOver {
                inner: shelf_stages::correct::Correct::new(deps),
                db,
                armed: arm,
            }),
        };
        registry
    };
    // No heartbeat during a test: the takeover must be met by the stage's own writes, not by
    // a renewal that cancels the stage first.
    let config = EngineConfig {
        lease: Duration::from_secs(600),
        heartbeat: Duration::from_secs(300),
        ..EngineConfig::default()
    };
    let s = setup_engine(provider.clone(), 12_000, 2, adjust, registry, config).await;
    Fixture { s, provider, armed }
}

/// Claims `run` and executes it until the claim ends; the takeover makes that a lost lease.
async fn execute_until_lease_lost(s: &Setup, run: &RunRecord) {
    let claim = s
        .engine
        .claim("worker-a", Some(&run.id))
        .await
        .expect("claim")
        .expect("the run is due");
    let outcome = s
        .engine
        .execute(claim, CancellationToken::new())
        .await
        .expect("execute");
    assert_eq!(outcome, ClaimOutcome::LeaseLost);
}

async fn count(db: &DatabaseConnection, table: &str, document_id: &str) -> i64 {
    db.query_one_sql(Statement::from_sql_and_values(
        DbBackend::Sqlite,
        format!("SELECT count(*) AS n FROM {table} WHERE document_id = ?"),
        [document_id.into()],
    ))
    .await
    .expect("count")
    .expect("a row")
    .try_get("", "n")
    .expect("n")
}

/// The names of the files in a document's page-image directory (none if it does not exist).
fn page_image_files(s: &Setup, document_id: &str) -> Vec<String> {
    match std::fs::read_dir(s.documents.page_images_dir(document_id)) {
        Ok(entries) => entries
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("cannot read the page images: {e}"),
    }
}

#[tokio::test]
async fn a_worker_that_lost_its_lease_in_extract_writes_no_page_records_or_segments() {
    let f = fixture(Lose::Extract, |_| {}).await;
    f.armed.store(true, Ordering::SeqCst);
    let db = &f.s.documents.db;
    // A PDF with a text layer (page records) and a transcript (segments), both extracted
    // without warnings, so nothing but the stage's own writes meets the takeover.
    for (file, table) in [
        ("pdf/pypdf/crazyones.pdf", "document_pages"),
        (
            "office/webvtt/sources/webvtt_example_03.vtt",
            "document_segments",
        ),
    ] {
        let run = submit_default(&f.s, &corpus(file)).await;
        execute_until_lease_lost(&f.s, &run).await;
        assert_eq!(count(db, table, &run.subject).await, 0, "{file}: {table}");
        assert_eq!(
            count(db, "document_texts", &run.subject).await,
            0,
            "{file}: texts"
        );
    }
}

#[tokio::test]
async fn a_worker_that_lost_its_lease_in_ocr_keeps_no_page_image_and_updates_no_record() {
    let f = fixture(Lose::Ocr, |deps| deps.ocr.preserve_page_images = true).await;
    f.armed.store(true, Ordering::SeqCst);
    let run = submit_default(&f.s, &corpus("ocr/tesseract/phototest.tif")).await;
    execute_until_lease_lost(&f.s, &run).await;
    // `extract` succeeded under the lease: its record stands, pending, and nothing of the
    // page read after the takeover shows, neither in the record nor as an image file.
    let pages = run_pages(&f.s.documents.db, &run.subject, &run.id)
        .await
        .expect("pages");
    assert_eq!(pages, vec![PageRecord::pending(1)]);
    assert_eq!(page_image_files(&f.s, &run.subject), Vec::<String>::new());
}

#[tokio::test]
async fn a_kept_page_image_is_in_place_once_its_page_is_read() {
    let f = fixture(Lose::Ocr, |deps| deps.ocr.preserve_page_images = true).await;
    let run = run_default(&f.s, &corpus("ocr/tesseract/phototest.tif")).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let pages = run_pages(&f.s.documents.db, &run.subject, &run.id)
        .await
        .expect("pages");
    let image = pages[0].image_path.clone().expect("a kept page image");
    assert_eq!(image, format!("page-images/{}/page-0001.png", run.subject));
    let png = std::fs::read(f.s.documents.data_dir.join(&image)).expect("the page image");
    assert!(png.starts_with(b"\x89PNG"));
    // Published by a rename: no temporary file is left.
    assert_eq!(page_image_files(&f.s, &run.subject), vec!["page-0001.png"]);
}

#[tokio::test]
async fn a_retry_that_lost_its_lease_copies_no_page_records_and_corrects_nothing() {
    let f = fixture(Lose::Correct, |_| {}).await;
    let db = &f.s.documents.db;
    f.provider.fail_correct.store(true, Ordering::SeqCst);
    let first = run_default(&f.s, &corpus("ocr/tesseract/phototest.tif")).await;
    assert_eq!(first.status, RunStatus::Failed);
    let error = first.error.clone().unwrap_or_default();
    assert!(error.contains("provider_refused"), "{error}");
    let read = run_pages(db, &first.subject, &first.id)
        .await
        .expect("pages");
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].source, PageSource::Ocr);

    // The retry reuses extract's and ocr's checkpoints; its `correct` is the first stage that
    // needs the page records, and loses the run before copying them.
    f.provider.fail_correct.store(false, Ordering::SeqCst);
    f.armed.store(true, Ordering::SeqCst);
    let retry = f.s.engine.retry(&first.id).await.expect("retry");
    execute_until_lease_lost(&f.s, &retry).await;
    assert_eq!(
        run_pages(db, &retry.subject, &retry.id)
            .await
            .expect("pages"),
        Vec::<PageRecord>::new()
    );
    assert_eq!(
        run_pages(db, &first.subject, &first.id)
            .await
            .expect("pages"),
        read,
        "the failed run's records are neither removed nor corrected"
    );
}

#[tokio::test]
async fn a_later_run_leaves_an_earlier_runs_page_records_alone() {
    let f = fixture(Lose::Correct, |_| {}).await;
    let db = &f.s.documents.db;
    let file = corpus("ocr/tesseract/phototest.tif");
    let first = run_default(&f.s, &file).await;
    assert_eq!(first.status, RunStatus::Succeeded, "{:?}", first.error);
    let kept = run_pages(db, &first.subject, &first.id)
        .await
        .expect("pages");
    assert_eq!(kept.len(), 1);

    // A second run that fails in `correct` (after its extract and ocr wrote its own records)
    // does not touch the first run's records; nor does a third that succeeds: removing a
    // pruned run's records is retention's work, not a later run's.
    f.provider.fail_correct.store(true, Ordering::SeqCst);
    let second = run_default(&f.s, &file).await;
    assert_eq!(second.status, RunStatus::Failed);
    assert_eq!(
        run_pages(db, &first.subject, &first.id)
            .await
            .expect("pages"),
        kept
    );
    let second_pages = run_pages(db, &second.subject, &second.id)
        .await
        .expect("pages");
    assert_eq!(second_pages.len(), 1);

    f.provider.fail_correct.store(false, Ordering::SeqCst);
    let third = run_default(&f.s, &file).await;
    assert_eq!(third.status, RunStatus::Succeeded, "{:?}", third.error);
    assert_eq!(
        run_pages(db, &first.subject, &first.id)
            .await
            .expect("pages"),
        kept
    );
    assert_eq!(
        run_pages(db, &second.subject, &second.id)
            .await
            .expect("pages"),
        second_pages
    );
    assert_eq!(count(db, "document_pages", &first.subject).await, 3);
}
