//! The concrete stages through the real engine on a real SQLite file: the default pipeline on
//! a real document, chunked cleaning with its concurrency cap, and the fidelity fallback; and
//! each provider's OCR correction (`Provider::correct`), the generic-compatible one against the
//! fake OpenAI-compatible server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use shelf_engine::RunStatus;
use shelf_stages::provider::local::LocalProvider;
use shelf_stages::provider::openai::{
    ApiKey, CORRECTION_PROMPT_VERSION, OpenAiCompatibleProvider, OpenAiConfig,
};
use shelf_stages::provider::{
    Classification, CleanRequest, CorrectRequest, MockProvider, Synopsis,
};
use shelf_stages::{Provider, ProviderError};

use crate::fake_server::{FakeServer, completion, status};
use crate::pipeline::{Setup, corpus, run_default, setup};

/// Wraps the mock provider; can "summarize" instead of copy-editing and counts concurrency.
struct Probe {
    inner: MockProvider,
    unfaithful: bool,
    active: AtomicUsize,
    max_active: AtomicUsize,
    cleans: AtomicUsize,
    corrects: AtomicUsize,
}

#[async_trait]
impl Provider for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }

    async fn correct(&self, request: CorrectRequest<'_>) -> Result<String, ProviderError> {
        self.corrects.fetch_add(1, Ordering::SeqCst);
        self.inner.correct(request).await
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
        corrects: AtomicUsize::new(0),
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
    assert_eq!(
        provider.corrects.load(Ordering::SeqCst),
        0,
        "a text file has no OCR pages to correct"
    );
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

// ---------------------------------------------------------------------------------------------
// OCR correction, provider by provider

const KEY: &str = "sk-test-0123456789";

fn openai_config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig {
        base_url: Some(base_url.to_string()),
        api_key: Some(ApiKey::new(KEY)),
        model: "main-model".into(),
        timeout: Duration::from_secs(10),
        max_prompt_chars: 100_000,
        max_response_chars: 100_000,
        max_retries: 2,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
        ..OpenAiConfig::default()
    }
}

fn page<'a>(text: &'a str, model: &'a str) -> CorrectRequest<'a> {
    CorrectRequest { text, model }
}

#[tokio::test]
async fn openai_correct_sends_the_ocr_prompt_and_returns_the_answer() {
    let server =
        FakeServer::start(|_, _| completion("```\nThe modern world was cold in 1998.\n```")).await;
    let provider = OpenAiCompatibleProvider::new(openai_config(&server.base_url));
    let source = "The rnodern vvorld was c0ld in 19-\n98.";
    let corrected = provider.correct(page(source, "")).await.unwrap();
    assert_eq!(corrected, "The modern world was cold in 1998.");
    assert_eq!(provider.usage().requests, 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    let body = requests[0].json();
    assert_eq!(
        body["model"], "main-model",
        "an empty model is the main model"
    );
    assert_eq!(body["temperature"], 0);
    let system = body["messages"][0]["content"].as_str().unwrap();
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert_eq!(CORRECTION_PROMPT_VERSION, "ocr_fix_v1");
    assert!(system.contains("Fix OCR errors only"), "{system}");
    assert!(system.contains("split across line ends"));
    assert!(system.contains("corrected text only"));
    assert!(!system.contains("Chicago"), "not the cleaning prompt");
    assert_eq!(user, format!("<<<TEXT\n{source}\nTEXT>>>"));

    // `SHELF_OCR_LLM_MODEL` overrides the main model for correction only.
    provider.correct(page(source, "ocr-model")).await.unwrap();
    provider
        .clean(CleanRequest {
            text: source,
            context: "",
            prompt_version: "cmos_v4",
        })
        .await
        .unwrap();
    let models: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.json()["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(models, ["main-model", "ocr-model", "main-model"]);

    // A blank page is not sent.
    assert_eq!(provider.correct(page("  \n ", "")).await.unwrap(), "  \n ");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn openai_correct_errors_map_like_clean() {
    // 5xx: retried, then a retryable provider_unavailable that never quotes the server.
    let server = FakeServer::start(|_, _| status(503, Vec::new())).await;
    let provider = OpenAiCompatibleProvider::new(openai_config(&server.base_url));
    let e = provider.correct(page("c0ld", "")).await.unwrap_err();
    assert_eq!(server.requests().len(), 3);
    assert_eq!(e.code, "provider_unavailable");
    assert!(e.retryable);
    assert!(e.message.contains("3 attempts"), "{}", e.message);
    assert!(!e.message.contains("your prompt") && !e.message.contains("c0ld"));

    // 401: fatal at once, naming the key variable, never the key.
    let server = FakeServer::start(|_, _| status(401, Vec::new())).await;
    let provider = OpenAiCompatibleProvider::new(openai_config(&server.base_url));
    let e = provider
        .correct(page("c0ld", "ocr-model"))
        .await
        .unwrap_err();
    assert_eq!(server.requests().len(), 1);
    assert_eq!(e.code, "credential_refused");
    assert!(!e.retryable);
    assert!(!e.message.contains(KEY));

    // An empty answer: a retryable invalid_response, as for clean.
    let server = FakeServer::start(|_, _| completion("```\n```")).await;
    let provider = OpenAiCompatibleProvider::new(openai_config(&server.base_url));
    let e = provider.correct(page("c0ld", "")).await.unwrap_err();
    assert_eq!(e.code, "invalid_response");
    assert!(e.retryable);

    // A page over the prompt limit is refused before anything is sent.
    let server = FakeServer::start(|_, _| completion("never")).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_prompt_chars: 100,
        ..openai_config(&server.base_url)
    });
    let long = "word ".repeat(100);
    let e = provider.correct(page(&long, "")).await.unwrap_err();
    assert_eq!(e.code, "prompt_too_large");
    assert!(server.requests().is_empty());

    // No endpoint configured.
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig::default());
    let e = provider.correct(page("c0ld", "")).await.unwrap_err();
    assert_eq!(e.code, "provider_not_configured");
}

#[tokio::test]
async fn local_correct_fixes_what_it_can_verify_and_nothing_else() {
    let provider = LocalProvider::new();
    // A token with a digit (`c0ld`) is a code, never a word to fix; nor are names and
    // acronyms (issue 25).
    let source = "The rnorning vvorld was c0ld in 1998; the infor-\nmation came from\nKarlsruhe, see https://example.org/rn0d. Walt kept HCL.";
    let corrected = provider.correct(page(source, "")).await.unwrap();
    assert_eq!(
        corrected,
        "The morning world was c0ld in 1998; the information\ncame from\nKarlsruhe, see https://example.org/rn0d. Walt kept HCL."
    );
    assert_eq!(
        provider.correct(page(&corrected, "")).await.unwrap(),
        corrected
    );
    let clean = "Nothing to fix on this page.";
    assert_eq!(provider.correct(page(clean, "")).await.unwrap(), clean);
}

#[tokio::test]
async fn mock_correct_normalizes_whitespace_and_probes_count_corrections() {
    let probe = Probe {
        inner: MockProvider::default(),
        unfaithful: false,
        active: AtomicUsize::new(0),
        max_active: AtomicUsize::new(0),
        cleans: AtomicUsize::new(0),
        corrects: AtomicUsize::new(0),
    };
    let corrected = probe.correct(page("a  b \n\n\nc", "")).await.unwrap();
    assert_eq!(corrected, "a b\n\nc");
    assert_eq!(probe.corrects.load(Ordering::SeqCst), 1);
    assert_eq!(probe.cleans.load(Ordering::SeqCst), 0);
}
