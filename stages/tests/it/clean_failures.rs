//! A chunk the model refuses fails `clean` at once: no chunk is sent after the failure, so a
//! document of many chunks costs only the calls already in flight, not one call per chunk.

use std::sync::Arc;

use shelf_engine::RunStatus;
use shelf_stages::chunk::{ChunkSettings, split};
use shelf_stages::provider::limiter::LimitConfig;
use shelf_stages::provider::openai::{OpenAiCompatibleProvider, OpenAiConfig};
use tokio::sync::watch;

use crate::fake_server::{FakeServer, Reply, faithful_model, status};
use crate::pipeline::{corpus, run_default, setup};

/// Small chunks, so the document is many of them.
const TARGET_CHARS: usize = 300;
const DOCUMENT: &str = "multicolumn-lorem-ipsum.txt";

/// Whether a request cleans the document's first chunk: the only one sent without context.
fn is_first_chunk(request: &crate::fake_server::Request) -> bool {
    let body = request.json();
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let user = body["messages"][1]["content"].as_str().unwrap_or_default();
    system.contains("<<<CONTEXT") && user.contains("<<<TEXT") && !user.contains("<<<CONTEXT")
}

/// Runs the default pipeline on a many-chunk document with `concurrency` chunks in flight,
/// against a model that refuses the first chunk (HTTP 400, not retryable) only once
/// `concurrency` requests have arrived, and answers every other chunk faithfully. Returns the
/// number of requests the model received.
async fn requests_when_the_first_chunk_fails(concurrency: usize) -> usize {
    let text = std::fs::read_to_string(corpus(DOCUMENT)).unwrap_or_default();
    let chunks = split(
        &text,
        ChunkSettings {
            target_chars: TARGET_CHARS,
            overlap_chars: TARGET_CHARS / 8,
        },
    )
    .len();
    assert!(chunks >= 10, "{DOCUMENT} is only {chunks} chunk(s)");

    let (arrived, watching) = watch::channel(0usize);
    let server = FakeServer::start(move |_, request| {
        arrived.send_modify(|n| *n += 1);
        if !is_first_chunk(request) {
            return faithful_model(request);
        }
        // Held until every chunk the stage sends at once is in flight, so the count below is
        // the same on every run: exactly those, none started after the failure.
        let mut watching = watching.clone();
        Reply::Later(Box::pin(async move {
            let _ = watching.wait_for(|n| *n >= concurrency).await;
            status(400, vec![])
        }))
    })
    .await;
    // The limiter pinned at the stage's concurrency: the first chunk is held until that many
    // are in flight, which an adaptive limit starting at one would never let out.
    let provider = Arc::new(OpenAiCompatibleProvider::new(OpenAiConfig {
        base_url: Some(server.base_url.clone()),
        concurrency: LimitConfig::new(concurrency, concurrency, concurrency),
        ..OpenAiConfig::default()
    }));
    let s = setup(provider, TARGET_CHARS, concurrency).await;
    let run = run_default(&s, &corpus(DOCUMENT)).await;
    assert_eq!(run.status, RunStatus::Failed, "{run:?}");
    let clean = s
        .engine
        .store()
        .stages(&run.id)
        .await
        .unwrap_or_default()
        .into_iter()
        .find(|st| st.name == "clean")
        .map(|st| (st.status, st.attempts));
    assert_eq!(
        clean,
        Some((shelf_engine::StageStatus::Failed, 1)),
        "a refused request is not retried: {:?}",
        run.error
    );
    server.requests().len()
}

#[tokio::test]
async fn one_chunk_at_a_time_a_failed_chunk_is_the_only_call() {
    assert_eq!(requests_when_the_first_chunk_fails(1).await, 1);
}

#[tokio::test]
async fn a_failed_chunk_stops_the_stage_with_only_the_calls_in_flight() {
    assert_eq!(requests_when_the_first_chunk_fails(4).await, 4);
}
