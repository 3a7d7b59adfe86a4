//! The `local` and `generic-compatible` providers through the real engine and the default
//! pipeline, on a real SQLite file.

use std::sync::Arc;

use shelf_engine::RunStatus;
use shelf_stages::provider::local::LocalProvider;
use shelf_stages::provider::openai::{OpenAiCompatibleProvider, OpenAiConfig};

use crate::fake_server::{FakeServer, faithful_model};
use crate::pipeline::{clean_output, corpus, run_default, setup};

#[tokio::test]
async fn the_local_provider_publishes_a_document_offline() {
    let s = setup(Arc::new(LocalProvider::new()), 800, 4).await;
    for name in ["8071_093.3B.txt", "8087_054.3B.txt", "crazyones.txt"] {
        let run = run_default(&s, &corpus(name)).await;
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
    let server = FakeServer::start(|_, r| faithful_model(r)).await;
    let provider = Arc::new(OpenAiCompatibleProvider::new(OpenAiConfig {
        base_url: Some(server.base_url.clone()),
        ..OpenAiConfig::default()
    }));
    let s = setup(provider.clone(), 800, 4).await;
    let run = run_default(&s, &corpus("8087_054.3B.txt")).await;
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
    let s = setup(provider, 800, 4).await;
    let run = run_default(&s, &corpus("crazyones.txt")).await;
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.unwrap_or_default();
    assert!(error.contains("SHELF_LLM_BASE_URL"), "{error}");
    // At once: the code is not retryable, so the stage was tried once, with no backoff.
    let stages = s.engine.store().stages(&run.id).await.unwrap();
    assert!(stages.iter().all(|st| st.attempts <= 1), "{stages:?}");
    // The document is still there for a later run.
    assert!(s.documents.get(&run.subject).await.is_ok());
}
