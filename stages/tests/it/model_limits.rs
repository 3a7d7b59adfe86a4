//! The limiter of language-model requests against fake model servers on 127.0.0.1 that keep
//! a fixed number of slots, as GPU servers do: the limit grows on a large server, comes down
//! to a small one that refuses what does not fit, and a storm of refusals fails no call (the
//! waits burn no attempt: these providers have no retries at all). How latency moves the
//! limit is tested on the algorithm with made-up latencies (no wall clock):
//! `shelf_stages::provider::limiter::algorithm`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::fake_server::{FakeServer, Reply, completion, status};
use crate::openai_provider::config;
use shelf_stages::provider::Provider;
use shelf_stages::provider::limiter::LimitConfig;
use shelf_stages::provider::openai::{OpenAiCompatibleProvider, OpenAiConfig};

/// A server with `slots` places: a request takes a free one for `hold`, or, when all are
/// taken, is refused with 429 and `retry-after-ms: 10`. The first `storm` requests are
/// refused whatever the load. Counts refusals.
struct SlotServer {
    server: FakeServer,
    refused: Arc<AtomicUsize>,
}

async fn slot_server(slots: usize, hold: Duration, storm: usize) -> SlotServer {
    let busy = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let r = refused.clone();
    let server = FakeServer::start(move |i, _| {
        let taken = busy.fetch_add(1, Ordering::SeqCst) + 1;
        if i < storm || taken > slots {
            busy.fetch_sub(1, Ordering::SeqCst);
            r.fetch_add(1, Ordering::SeqCst);
            return status(429, vec![("retry-after-ms", "10".into())]);
        }
        let busy = busy.clone();
        Reply::Later(Box::pin(async move {
            tokio::time::sleep(hold).await;
            busy.fetch_sub(1, Ordering::SeqCst);
            completion(r#"{"code": "500", "confidence": 0.5}"#)
        }))
    })
    .await;
    SlotServer { server, refused }
}

/// A provider with no retries (a refusal counted as an attempt would fail its call at once)
/// and an adaptive limit from `initial`.
fn provider(base_url: &str, initial: usize) -> Arc<OpenAiCompatibleProvider> {
    Arc::new(OpenAiCompatibleProvider::new(OpenAiConfig {
        max_retries: 0,
        concurrency: LimitConfig::new(1, 128, initial),
        ..config(base_url)
    }))
}

/// `calls` classifications from `callers` tasks at once; every one must succeed.
async fn classify_all(provider: &Arc<OpenAiCompatibleProvider>, callers: usize, calls: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (provider, next) = (provider.clone(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::SeqCst) < calls {
                    let c = provider.classify("Physics.", "dewey_v1").await;
                    assert_eq!(c.expect("no call fails").code, "500");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test]
async fn the_limit_comes_down_to_a_small_server_that_refuses_and_no_call_fails() {
    let slots = 4;
    let server = slot_server(slots, Duration::from_millis(30), 0).await;
    let provider = provider(&server.server.base_url, 16);
    classify_all(&provider, 32, 200).await;
    let limiter = provider.limiter();
    assert!(
        server.refused.load(Ordering::SeqCst) > 0,
        "16 calls at once on 4 slots are refused"
    );
    assert!(
        limiter.limit() <= slots + 2,
        "the limit came down near the server's {slots} slots: {}",
        limiter.limit()
    );
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(limiter.waiting(), 0);
}

#[tokio::test]
async fn a_storm_of_refusals_fails_nothing() {
    // The first 60 requests are refused whatever the load, then a server with room.
    let server = slot_server(64, Duration::from_millis(5), 60).await;
    let provider = provider(&server.server.base_url, 8);
    classify_all(&provider, 16, 40).await;
    assert_eq!(server.refused.load(Ordering::SeqCst), 60);
    let report = provider.limiter().report();
    assert_eq!(report.refused, 60);
    assert_eq!(report.calls, 100);
}

#[tokio::test]
async fn the_limit_grows_on_a_large_server() {
    // Room for all and 48 callers: every call is sent with the limit full, and the first
    // answer, of a class not seen before and with no round judged yet, adds a place by
    // construction; how far it grows depends on latencies, which the algorithm's own tests
    // drive without a clock (`shelf_stages::provider::limiter::algorithm`).
    let server = slot_server(256, Duration::from_millis(50), 0).await;
    let provider = provider(&server.server.base_url, 4);
    classify_all(&provider, 48, 120).await;
    let limit = provider.limiter().limit();
    assert!(limit > 4, "grew from 4 to {limit}");
    assert_eq!(server.refused.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn push_back_past_its_budget_counts_as_a_failed_attempt() {
    // A server that refuses for good: the call waits through refusals for its budget, then
    // fails with the code of a refusal, retryable (the stage may try again later).
    let server = slot_server(1, Duration::ZERO, usize::MAX).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_retries: 0,
        push_back_budget: Duration::from_millis(50),
        ..config(&server.server.base_url)
    });
    let e = provider.classify("Physics.", "dewey_v1").await.unwrap_err();
    assert_eq!(e.code, "rate_limited");
    assert!(e.retryable);
    assert!(
        e.message.contains("SHELF_LLM_PUSH_BACK_SECONDS"),
        "{}",
        e.message
    );
    // 10 ms a wait within 50 ms: five waits, six requests.
    assert_eq!(server.refused.load(Ordering::SeqCst), 6);
}

#[tokio::test]
async fn a_pinned_limit_holds_whatever_happens() {
    let server = slot_server(2, Duration::from_millis(20), 0).await;
    let provider = Arc::new(OpenAiCompatibleProvider::new(OpenAiConfig {
        max_retries: 0,
        concurrency: LimitConfig::new(3, 3, 3),
        ..config(&server.server.base_url)
    }));
    classify_all(&provider, 8, 30).await;
    assert_eq!(provider.limiter().limit(), 3);
    assert_eq!(
        provider.limiter().report().calls,
        30 + server.refused.load(Ordering::SeqCst) as u64
    );
}
