//! By hand only: the `generic-compatible` provider against a real model server named by
//! `SHELF_TEST_LLM_BASE_URL` (and `SHELF_TEST_LLM_MODEL`), such as llama-cpp-python serving
//! SmolLM2 (`bench/llama_server.sh`): `cargo test -p shelf-stages --test it real_server --
//! --ignored --nocapture`. It prints what the server answered; docs/providers.md records it.

use std::time::{Duration, Instant};

use shelf_stages::provider::openai::{OpenAiCompatibleProvider, OpenAiConfig};
use shelf_stages::provider::{CleanRequest, Provider};

const TEXT: &str = "Horses need hay, fresh water and pasture. A mare carries her foal for about \
eleven months, and a foal stands within an hour of its birth. Grooming, hoof care every six to \
eight weeks and yearly vaccinations keep a horse healthy. In 1998 a survey of 1,200 stables found \
that most horses were kept for riding.";

fn real_provider(max_response_chars: usize) -> Option<OpenAiCompatibleProvider> {
    let base_url = std::env::var("SHELF_TEST_LLM_BASE_URL").ok()?;
    Some(OpenAiCompatibleProvider::new(OpenAiConfig {
        base_url: Some(base_url),
        model: std::env::var("SHELF_TEST_LLM_MODEL").unwrap_or_else(|_| "smollm2".into()),
        max_response_chars,
        max_retries: 0,
        initial_backoff: Duration::from_millis(100),
        ..OpenAiConfig::default()
    }))
}

#[tokio::test]
#[ignore = "needs a real model server (SHELF_TEST_LLM_BASE_URL)"]
async fn real_server() {
    let Some(provider) = real_provider(2_097_152) else {
        eprintln!("SHELF_TEST_LLM_BASE_URL is not set");
        return;
    };
    eprintln!("check: {:?}", provider.check().await);
    for version in ["dewey_v1", "dewey_v2"] {
        let started = Instant::now();
        let answer = provider.classify(TEXT, version).await;
        eprintln!("classify {version}: {answer:?} in {:?}", started.elapsed());
    }
    let started = Instant::now();
    let answer = provider.summarize(TEXT).await;
    eprintln!("summarize: {answer:?} in {:?}", started.elapsed());
    let started = Instant::now();
    let answer = provider
        .clean(CleanRequest {
            text: TEXT,
            context: "",
            prompt_version: "cmos_v4",
        })
        .await;
    eprintln!("clean: {answer:?} in {:?}", started.elapsed());
    eprintln!("usage: {:?}", provider.usage());

    // An answer given up mid-stream (over a tiny response cap) closes the connection: the
    // server's log shows the generation ended after a few tokens, not at its bound.
    let Some(capped) = real_provider(40) else {
        return;
    };
    let started = Instant::now();
    let answer = capped
        .clean(CleanRequest {
            text: &TEXT.repeat(4),
            context: "",
            prompt_version: "cmos_v4",
        })
        .await;
    eprintln!("clean given up: {answer:?} in {:?}", started.elapsed());
}
