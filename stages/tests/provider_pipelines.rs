//! The `local` and `generic-compatible` providers through the real engine and the default
//! pipeline, on a real SQLite file.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use shelf_documents::DocumentStore;
use shelf_engine::executor::NoHooks;
use shelf_engine::{Engine, EngineConfig, PipelineSource, RunRecord, RunStatus, RunStore};
use shelf_migrations::{Migrator, MigratorTrait};
use shelf_stages::chunk::ChunkSettings;
use shelf_stages::provider::local::LocalProvider;
use shelf_stages::provider::openai::{OpenAiCompatibleProvider, OpenAiConfig};
use shelf_stages::{Provider, StageDeps};
use support::FakeServer;
use tokio_util::sync::CancellationToken;

struct Setup {
    _dir: tempfile::TempDir,
    engine: Engine,
    documents: DocumentStore,
}

async fn setup(provider: Arc<dyn Provider>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let db = shelf_engine::db::connect(&dir.path().join("s.sqlite"), 4)
        .await
        .unwrap();
    Migrator::up(&db, None).await.unwrap();
    let documents = DocumentStore::new(db.clone(), dir.path().join("data"));
    let deps = StageDeps {
        documents: documents.clone(),
        provider,
        chunking: ChunkSettings {
            target_chars: 800,
            overlap_chars: 100,
        },
        llm_concurrency: 4,
        max_extract_bytes: 10 * 1024 * 1024,
        cleaning_prompt_version: "cmos_v4".into(),
        classification_prompt_version: "dewey_v2".into(),
    };
    let config = EngineConfig::default();
    let engine = Engine::new(
        RunStore::new(db, config.lease),
        shelf_stages::registry(&deps),
        Arc::new(NoHooks),
        config,
    );
    Setup {
        _dir: dir,
        engine,
        documents,
    }
}

async fn run_default(s: &Setup, name: &str) -> RunRecord {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus/text")
        .join(name);
    let doc = s.documents.ingest_path(&file).await.unwrap().document;
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
    let run = s
        .engine
        .submit(&doc.id, &pipeline, json!({ "document_id": doc.id }))
        .await
        .unwrap();
    s.engine
        .run_in_process(&run.id, "test", CancellationToken::new())
        .await
        .unwrap()
}

async fn clean_output(s: &Setup, run: &RunRecord) -> serde_json::Value {
    let stages = s.engine.store().stages(&run.id).await.unwrap();
    stages
        .iter()
        .find(|st| st.name == "clean")
        .unwrap()
        .output
        .clone()
        .unwrap()
}

#[tokio::test]
async fn the_local_provider_publishes_a_document_offline() {
    let s = setup(Arc::new(LocalProvider::new())).await;
    for name in ["8071_093.3B.txt", "8087_054.3B.txt", "crazyones.txt"] {
        let run = run_default(&s, name).await;
        assert_eq!(run.status, RunStatus::Succeeded, "{name}: {:?}", run.error);
        let output = clean_output(&s, &run).await;
        assert_eq!(output["provider"], "local");
        assert_eq!(output["fallback_chunks"], 0, "{name}: {output}");
        let doc = s.documents.get(&run.subject).await.unwrap();
        assert!(doc.title.is_some() && !doc.tags.is_empty(), "{name}");
        if name == "8087_054.3B.txt" {
            assert_eq!(doc.classification.as_deref(), Some("940"));
            assert_eq!(
                doc.classification_label.as_deref(),
                Some("History of Europe")
            );
        }
    }
}

#[tokio::test]
async fn the_generic_provider_publishes_a_document_through_a_compatible_server() {
    let server = FakeServer::start(|_, r| support::faithful_model(r)).await;
    let provider = Arc::new(OpenAiCompatibleProvider::new(OpenAiConfig {
        base_url: Some(server.base_url.clone()),
        ..OpenAiConfig::default()
    }));
    let s = setup(provider.clone()).await;
    let run = run_default(&s, "8087_054.3B.txt").await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let output = clean_output(&s, &run).await;
    assert_eq!(output["provider"], "generic-compatible");
    assert_eq!(output["fallback_chunks"], 0, "{output}");
    let chunks = output["chunks"].as_u64().unwrap();
    assert!(chunks >= 5, "{output}");
    let doc = s.documents.get(&run.subject).await.unwrap();
    assert_eq!(doc.classification.as_deref(), Some("949.72"));
    assert_eq!(doc.title.as_deref(), Some("Dubrovnik after the war"));
    // One call per chunk, one to classify, one to summarize.
    assert_eq!(server.requests().len() as u64, chunks + 2);
    assert_eq!(provider.usage().requests, chunks + 2);
}

#[tokio::test]
async fn a_missing_endpoint_fails_the_run_at_once_with_the_setting_to_change() {
    let provider = Arc::new(OpenAiCompatibleProvider::new(OpenAiConfig::default()));
    let s = setup(provider).await;
    let started = Instant::now();
    let run = run_default(&s, "crazyones.txt").await;
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.unwrap_or_default();
    assert!(error.contains("SHELF_LLM_BASE_URL"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // The document is still there for a later run.
    assert!(s.documents.get(&run.subject).await.is_ok());
}
