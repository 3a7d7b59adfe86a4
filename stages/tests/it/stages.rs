//! The concrete stages through the real engine on a real SQLite file: the default pipeline on
//! a real document, chunked cleaning with its concurrency cap, and the fidelity fallback.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use shelf_engine::RunStatus;
use shelf_stages::provider::{Classification, CleanRequest, MockProvider, Synopsis};
use shelf_stages::{Provider, ProviderError};

use crate::pipeline::{Setup, corpus, run_default, setup};

/// Wraps the mock provider; can "summarize" instead of copy-editing and counts concurrency.
struct Probe {
    inner: MockProvider,
    unfaithful: bool,
    active: AtomicUsize,
    max_active: AtomicUsize,
    cleans: AtomicUsize,
}

#[async_trait]
impl Provider for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }

    async fn correct(
        &self,
        _request: shelf_stages::provider::CorrectRequest<'_>,
    ) -> Result<String, ProviderError> {
        todo!()
    }

    async fn clean(&self, request: CleanRequest<'_>) -> Result<String, ProviderError> {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        self.cleans.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.active.fetch_sub(1, Ordering::SeqCst);
        if self.unfaithful {
            Ok("In short: lorem.".to_string())
        } else {
            self.inner.clean(request).await
        }
    }

    async fn classify(&self, text: &str, v: &str) -> Result<Classification, ProviderError> {
        self.inner.classify(text, v).await
    }

    async fn summarize(&self, text: &str) -> Result<Synopsis, ProviderError> {
        self.inner.summarize(text).await
    }
}

async fn probed(unfaithful: bool, concurrency: usize) -> (Setup, Arc<Probe>) {
    let provider = Arc::new(Probe {
        inner: MockProvider::default(),
        unfaithful,
        active: AtomicUsize::new(0),
        max_active: AtomicUsize::new(0),
        cleans: AtomicUsize::new(0),
    });
    (setup(provider.clone(), 500, concurrency).await, provider)
}

#[tokio::test]
async fn the_default_pipeline_publishes_a_real_document() {
    let (s, provider) = probed(false, 3).await;
    let run = run_default(&s, &corpus("8087_054.3B.txt")).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let stages = s.engine.store().stages(&run.id).await.unwrap();
    let clean = stages.iter().find(|st| st.name == "clean").unwrap();
    let output = clean.output.as_ref().unwrap();
    let chunks = output["chunks"].as_u64().unwrap();
    assert!(chunks >= 8, "a 4 KB text in 500-char chunks: {output}");
    assert_eq!(output["fallback_chunks"], 0);
    assert_eq!(provider.cleans.load(Ordering::SeqCst) as u64, chunks);
    let max = provider.max_active.load(Ordering::SeqCst);
    assert!(
        max > 1 && max <= 3,
        "chunks are cleaned concurrently, at most 3 at once: {max}"
    );
    let doc = s.documents.get(&run.subject).await.unwrap();
    assert!(doc.classification.is_some() && doc.title.is_some() && !doc.tags.is_empty());
}

#[tokio::test]
async fn unfaithful_cleaning_falls_back_to_the_source_with_a_warning() {
    let (s, provider) = probed(true, 2).await;
    let run = run_default(&s, &corpus("multicolumn-lorem-ipsum.txt")).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let stages = s.engine.store().stages(&run.id).await.unwrap();
    let output = stages
        .iter()
        .find(|st| st.name == "clean")
        .unwrap()
        .output
        .clone()
        .unwrap();
    assert_eq!(output["fallback_chunks"], output["chunks"], "{output}");
    // Each chunk was tried twice before falling back.
    let chunks = output["chunks"].as_u64().unwrap();
    assert_eq!(provider.cleans.load(Ordering::SeqCst) as u64, 2 * chunks);
    let events = s.engine.store().events(&run.id, 0, 1000).await.unwrap();
    let warnings = events.iter().filter(|e| e.kind == "stage_warning").count() as u64;
    assert_eq!(warnings, chunks);
    assert!(
        events.iter().all(|e| !e.message.contains("dolor")),
        "events carry no document text"
    );
}

#[tokio::test]
async fn binary_content_fails_extract_without_retries() {
    let (s, _provider) = probed(false, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.txt");
    // Control bytes but no NUL: ingest's first-block check passes, extract refuses.
    let bytes: Vec<u8> = (1u8..9).cycle().take(4000).collect();
    std::fs::write(&path, bytes).unwrap();
    let run = run_default(&s, &path).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert!(run.error.unwrap().contains("binary content"));
    let stages = s.engine.store().stages(&run.id).await.unwrap();
    assert_eq!(stages[0].attempts, 1);
}
