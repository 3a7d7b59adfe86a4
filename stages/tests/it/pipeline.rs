//! Running the shipped default pipeline through the real engine on a fresh SQLite file, with a
//! provider of the test's choosing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use shelf_documents::DocumentStore;
use shelf_engine::executor::NoHooks;
use shelf_engine::{Engine, EngineConfig, PipelineSource, Registry, RunRecord, RunStore};
use shelf_migrations::{Migrator, MigratorTrait};
use shelf_stages::chunk::ChunkSettings;
use shelf_stages::{Provider, StageDeps};
use tokio_util::sync::CancellationToken;

pub struct Setup {
    _dir: tempfile::TempDir,
    pub engine: Engine,
    pub documents: DocumentStore,
}

pub async fn setup(provider: Arc<dyn Provider>, target_chars: usize, concurrency: usize) -> Setup {
    setup_with(provider, target_chars, concurrency, |_| {}).await
}

/// `setup`, with the stage dependencies adjusted by `adjust` (OCR and correction settings).
pub async fn setup_with(
    provider: Arc<dyn Provider>,
    target_chars: usize,
    concurrency: usize,
    adjust: impl FnOnce(&mut StageDeps),
) -> Setup {
    setup_engine(
        provider,
        target_chars,
        concurrency,
        adjust,
        shelf_stages::registry,
        EngineConfig::default(),
    )
    .await
}

/// `setup_with`, with the registry made by `registry` from the stage dependencies (a test may
/// replace a stage kind with a wrapper of it) and the engine's own configuration.
pub async fn setup_engine(
    provider: Arc<dyn Provider>,
    target_chars: usize,
    concurrency: usize,
    adjust: impl FnOnce(&mut StageDeps),
    registry: impl FnOnce(&StageDeps) -> Registry,
    config: EngineConfig,
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let db = shelf_db::connect(&dir.path().join("s.sqlite"), 4)
        .await
        .unwrap();
    Migrator::up(&db, None).await.unwrap();
    let documents = DocumentStore::new(db.clone(), dir.path().join("data"));
    let mut deps = StageDeps {
        documents: documents.clone(),
        provider,
        chunking: ChunkSettings {
            target_chars,
            overlap_chars: target_chars / 8,
        },
        llm_concurrency: concurrency,
        extraction: shelf_stages::extract::ExtractionSettings {
            max_bytes: 10 * 1024 * 1024,
            ..Default::default()
        },
        ocr: Default::default(),
        correction: Default::default(),
        cleaning_prompt_version: "cmos_v4".into(),
        classification_prompt_version: "dewey_v2".into(),
        embeddings: None,
    };
    adjust(&mut deps);
    let engine = Engine::new(
        RunStore::new(db, config.lease),
        registry(&deps),
        Arc::new(NoHooks),
        config,
    );
    Setup {
        _dir: dir,
        engine,
        documents,
    }
}

/// A vendored corpus text (tests/corpus/text/NAME).
pub fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus/text")
        .join(name)
}

/// Ingests `file` and runs the shipped default pipeline on it to the end, in process.
pub async fn run_default(s: &Setup, file: &Path) -> RunRecord {
    let run = submit_default(s, file).await;
    s.engine
        .run_in_process(&run.id, "test", CancellationToken::new())
        .await
        .unwrap()
}

/// Ingests `file` and submits a run of the shipped default pipeline on it (queued).
pub async fn submit_default(s: &Setup, file: &Path) -> RunRecord {
    let doc = s.documents.ingest_path(file).await.unwrap().document;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pipelines/default.yaml"
    ))
    .unwrap();
    let pipeline = s
        .engine
        .compile(&PipelineSource {
            name: "default".into(),
            file: "pipelines/default.yaml".into(),
            text,
        })
        .unwrap();
    s.engine
        .submit(&doc.id, &pipeline, json!({ "document_id": doc.id }))
        .await
        .unwrap()
}

/// The `clean` stage's checkpointed output.
pub async fn clean_output(s: &Setup, run: &RunRecord) -> serde_json::Value {
    s.engine
        .store()
        .stages(&run.id)
        .await
        .unwrap()
        .into_iter()
        .find(|st| st.name == "clean")
        .and_then(|st| st.output)
        .unwrap()
}
