//! `Provider::check` of the `generic-compatible` provider: `GET /models` once against a fake
//! server, the configured models looked up, and what a server without a list leaves.

use serde_json::json;
use shelf_stages::provider::openai::{OpenAiCompatibleProvider, OpenAiConfig};
use shelf_stages::provider::{MockProvider, ModelCheck, Provider, local::LocalProvider};
use tokio::net::TcpListener;

use super::config;
use crate::fake_server::{FakeServer, Reply, status};

fn list(ids: &[&str]) -> Reply {
    let data: Vec<_> = ids
        .iter()
        .map(|id| json!({"id": id, "object": "model", "owned_by": "me"}))
        .collect();
    Reply::Respond {
        status: 200,
        headers: vec![("Content-Type", "application/json".into())],
        body: serde_json::to_vec(&json!({"object": "list", "data": data})).unwrap(),
    }
}

#[tokio::test]
async fn a_listed_model_is_verified() {
    let server = FakeServer::start(|_, _| list(&["other", "test-model", "ocr-model:latest"])).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        correction_model: Some("ocr-model".into()),
        ..config(&server.base_url)
    });
    assert_eq!(
        provider.check().await.unwrap(),
        ModelCheck::Verified {
            models: vec!["test-model".into(), "ocr-model".into()]
        }
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "one request for both models");
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", "/v1/models")
    );
    assert!(requests[0].header("authorization").is_some());
}

#[tokio::test]
async fn a_missing_model_is_fatal_and_names_the_setting() {
    let ids: Vec<String> = (0..15).map(|i| format!("model-{i}")).collect();
    let server = FakeServer::start(move |_, _| {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        list(&ids)
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let e = provider.check().await.unwrap_err();
    assert_eq!(e.code, "model_not_found");
    assert!(!e.retryable);
    assert!(e.message.contains("SHELF_LLM_MODEL"), "{}", e.message);
    assert!(e.message.contains("test-model"), "{}", e.message);
    assert!(e.message.contains("model-9, and 5 more"), "{}", e.message);
    assert!(!e.message.contains("model-10"), "{}", e.message);

    // The OCR model is checked too when it is set.
    let server = FakeServer::start(|_, _| list(&["test-model"])).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        correction_model: Some("ocr-model".into()),
        ..config(&server.base_url)
    });
    let e = provider.check().await.unwrap_err();
    assert_eq!(e.code, "model_not_found");
    assert!(e.message.contains("SHELF_OCR_LLM_MODEL"), "{}", e.message);
}

#[tokio::test]
async fn a_server_without_a_list_leaves_the_model_unverified() {
    for reply in [404u16, 405, 501] {
        let server = FakeServer::start(move |_, _| status(reply, Vec::new())).await;
        let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
        match provider.check().await.unwrap() {
            ModelCheck::Unverified { note } => {
                assert!(note.contains(&format!("HTTP {reply}")), "{note}");
                assert!(note.contains("SHELF_LLM_MODEL"), "{note}");
            }
            other => panic!("HTTP {reply}: {other:?}"),
        }
    }
    let server = FakeServer::start(|_, _| Reply::Respond {
        status: 200,
        headers: Vec::new(),
        body: b"<html>models</html>".to_vec(),
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    assert!(matches!(
        provider.check().await.unwrap(),
        ModelCheck::Unverified { .. }
    ));
    // llama.cpp's own server answers any name with its one model.
    let server = FakeServer::start(|_, _| Reply::Respond {
        status: 200,
        headers: Vec::new(),
        body: br#"{"data": [{"id": "/models/qwen.gguf", "owned_by": "llamacpp"}]}"#.to_vec(),
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    assert!(matches!(
        provider.check().await.unwrap(),
        ModelCheck::Unverified { .. }
    ));
}

#[tokio::test]
async fn refused_credentials_and_unreachable_servers_are_errors() {
    let server = FakeServer::start(|_, _| status(401, Vec::new())).await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let e = provider.check().await.unwrap_err();
    assert_eq!(e.code, "credential_refused");
    assert!(!e.retryable);

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let provider = OpenAiCompatibleProvider::new(config(&format!("http://{addr}/v1")));
    let e = provider.check().await.unwrap_err();
    assert_eq!(e.code, "provider_unreachable");
    assert!(e.message.contains("SHELF_LLM_BASE_URL"), "{}", e.message);

    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        base_url: None,
        ..config("unused")
    });
    assert_eq!(
        provider.check().await.unwrap_err().code,
        "provider_not_configured"
    );
}

#[tokio::test]
async fn providers_without_a_server_need_no_check() {
    assert_eq!(
        MockProvider::default().check().await.unwrap(),
        ModelCheck::NotNeeded
    );
    assert_eq!(
        LocalProvider::new().check().await.unwrap(),
        ModelCheck::NotNeeded
    );
}
