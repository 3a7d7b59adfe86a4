//! Answers cut at their `max_tokens` bound through the real engine and the default pipeline: a
//! cleaning answer cut off is treated like an unfaithful one (asked once more, then the chunk
//! keeps its normalized source with a warning), never taken as the cleaned text.

use std::sync::Arc;

use shelf_engine::RunStatus;
use shelf_stages::provider::openai::{OpenAiCompatibleProvider, OpenAiConfig};

use crate::fake_server::{FakeServer, Reply, faithful_model};
use crate::pipeline::{clean_output, corpus, run_default, setup};

#[tokio::test]
async fn cleaning_answers_cut_at_the_bound_fall_back_to_the_source() {
    let server = FakeServer::start(|_, request| {
        let system = request.json()["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if system.contains("copy editor") {
            // A part of the chunk, stopped at the bound.
            Reply::Respond {
                status: 200,
                headers: vec![("Content-Type", "application/json".into())],
                body: br#"{"choices": [{"message": {"content": "The first words"}, "finish_reason": "length"}]}"#
                    .to_vec(),
            }
        } else {
            faithful_model(request)
        }
    })
    .await;
    let provider = Arc::new(OpenAiCompatibleProvider::new(OpenAiConfig {
        base_url: Some(server.base_url.clone()),
        ..OpenAiConfig::default()
    }));
    let s = setup(provider, 800, 4).await;
    let run = run_default(&s, &corpus("8087_054.3B.txt")).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let output = clean_output(&s, &run).await;
    let chunks = output["chunks"].as_u64().unwrap();
    assert_eq!(output["fallback_chunks"], chunks, "{output}");
    let cleanings = server
        .requests()
        .iter()
        .filter(|r| {
            r.json()["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .contains("copy editor")
        })
        .count() as u64;
    assert_eq!(cleanings, 2 * chunks, "each chunk asked twice, then kept");
    let events = s.engine.store().events(&run.id, 0, 1000).await.unwrap();
    let cut: Vec<_> = events
        .iter()
        .filter(|e| e.kind == "stage_warning" && e.message.contains("cut off at its length bound"))
        .collect();
    assert_eq!(cut.len() as u64, chunks);
    // The document is still published: the source text, normalized, is its cleaned text.
    let doc = s.documents.get(&run.subject).await.unwrap();
    assert_eq!(doc.title.as_deref(), Some("Dubrovnik after the war"));
}
