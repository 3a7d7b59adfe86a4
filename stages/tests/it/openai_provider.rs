//! The `generic-compatible` provider against a fake OpenAI-compatible server on 127.0.0.1,
//! started inside each test (see `support`). These servers answer one JSON body, as a server
//! that ignores `stream` does; `stream` holds the streamed answers, and `check` the model check.

#[path = "openai_check.rs"]
mod check;
#[path = "openai_real.rs"]
mod real;
#[path = "openai_stream.rs"]
mod stream;
#[path = "openai_truncated.rs"]
mod truncated;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::fake_server::{FakeServer, Reply, completion, status};
use shelf_stages::provider::openai::{ApiKey, OpenAiCompatibleProvider, OpenAiConfig, TokenUsage};
use shelf_stages::provider::{CleanRequest, Provider};
use tokio::net::TcpListener;

const KEY: &str = "sk-test-0123456789";

pub(crate) fn config(base_url: &str) -> OpenAiConfig {
    OpenAiConfig {
        base_url: Some(base_url.to_string()),
        api_key: Some(ApiKey::new(KEY)),
        api_key_env: "OPENAI_API_KEY".into(),
        model: "test-model".into(),
        timeout: Duration::from_secs(10),
        max_prompt_chars: 100_000,
        max_response_chars: 100_000,
        max_retries: 3,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_secs(5),
        ..OpenAiConfig::default()
    }
}

fn clean_request<'a>(text: &'a str, context: &'a str) -> CleanRequest<'a> {
    CleanRequest {
        text,
        context,
        prompt_version: "cmos_v4",
    }
}

#[tokio::test]
async fn clean_sends_a_versioned_prompt_and_records_usage() {
    let server = FakeServer::start(|_, _| completion("The 1998 survey found horses.")).await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let cleaned = provider
        .clean(clean_request(
            "The 1998 survey  found hor-\nses.",
            "Earlier text.",
        ))
        .await
        .unwrap();
    assert_eq!(cleaned, "The 1998 survey found horses.");
    assert_eq!(
        provider.usage(),
        TokenUsage {
            requests: 1,
            prompt_tokens: 120,
            completion_tokens: 30
        }
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    let body = request.json();
    assert_eq!(body["model"], "test-model");
    let system = body["messages"][0]["content"].as_str().unwrap();
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(system.contains("Chicago Manual of Style"));
    assert!(system.contains("do not summarize"));
    assert!(system.contains("never repeat it"));
    assert!(user.contains("<<<CONTEXT\nEarlier text.\nCONTEXT>>>"));
    assert!(user.contains("<<<TEXT\nThe 1998 survey  found hor-\nses.\nTEXT>>>"));

    // Each version is a different, stricter prompt.
    let mut systems = Vec::new();
    for version in ["cmos_v1", "cmos_v2", "cmos_v3", "cmos_v4"] {
        provider
            .clean(CleanRequest {
                text: "x",
                context: "",
                prompt_version: version,
            })
            .await
            .unwrap();
        let last = server.requests().pop().unwrap().json();
        systems.push(last["messages"][0]["content"].as_str().unwrap().len());
    }
    assert!(systems.windows(2).all(|w| w[0] < w[1]), "{systems:?}");
    assert_eq!(provider.usage().requests, 5);
}

#[tokio::test]
async fn classify_parses_fenced_json_and_v2_lists_divisions() {
    let server = FakeServer::start(|_, _| {
        completion("Here you go:\n```json\n{\"code\": \"636.1\", \"confidence\": 0.8}\n```")
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let c = provider
        .classify("Horses eat hay.", "dewey_v2")
        .await
        .unwrap();
    assert_eq!(c.code, "636.1");
    assert!((c.confidence - 0.8).abs() < 1e-9);
    provider
        .classify("Horses eat hay.", "dewey_v1")
        .await
        .unwrap();
    let requests = server.requests();
    let v2 = requests[0].json()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let v1 = requests[1].json()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(v2.contains("630 Agriculture") && v2.contains("{\"code\": \"636.1\""));
    assert!(!v1.contains("630 Agriculture") && v1.contains("JSON"));
    assert!(
        requests[0].json()["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("Horses eat hay.")
    );
}

#[tokio::test]
async fn summarize_parses_and_sanitizes() {
    let server = FakeServer::start(|_, _| {
        completion(
            r#"{"title": "Keeping Horses", "summary": "How to keep horses well.", "tags": ["horses", "Care"], "suggested_stem": "Keeping Horses!"}"#,
        )
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let s = provider.summarize("Horses eat hay.").await.unwrap();
    assert_eq!(s.title, "Keeping Horses");
    assert_eq!(s.summary, "How to keep horses well.");
    assert_eq!(s.tags, ["horses", "care"]);
    assert_eq!(s.suggested_stem, "keeping-horses");
}

/// A server that refuses the first request with `code` and `Retry-After: retry_after`, then
/// answers `answer`; and a provider whose backoff without a header is capped at `cap`.
async fn refusing_once(
    code: u16,
    retry_after: &'static str,
    answer: &'static str,
    cap: Duration,
) -> (FakeServer, OpenAiCompatibleProvider) {
    let server = FakeServer::start(move |i, _| {
        if i == 0 {
            status(code, vec![("Retry-After", retry_after.into())])
        } else {
            completion(answer)
        }
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_backoff: cap,
        ..config(&server.base_url)
    });
    (server, provider)
}

const CLASSIFIED: &str = "{\"code\": \"500\", \"confidence\": 0.4}";

#[tokio::test]
async fn rate_limits_honour_retry_after_then_succeed() {
    let (server, provider) = refusing_once(429, "1", CLASSIFIED, Duration::from_secs(30)).await;
    let started = Instant::now();
    let c = provider.classify("Science.", "dewey_v1").await.unwrap();
    assert_eq!(c.code, "500");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "waited only {:?}",
        started.elapsed()
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(provider.usage().requests, 1);
    assert_eq!(provider.limiter().pushed_back_for(), Duration::from_secs(1));
}

#[tokio::test]
async fn a_retry_after_longer_than_the_backoff_cap_is_waited_in_full() {
    // Backoff without a header is capped at 50 ms here; the server's 1 s is still honoured
    // (asking sooner would only be refused again).
    let (server, provider) = refusing_once(429, "1", CLASSIFIED, Duration::from_millis(50)).await;
    provider.classify("Science.", "dewey_v1").await.unwrap();
    assert_eq!(provider.limiter().pushed_back_for(), Duration::from_secs(1));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_retry_after_beyond_the_push_back_budget_is_a_failed_attempt() {
    // An hour asked, ten minutes of budget: not waited out; a failed attempt instead, tried
    // again after the backoff cap (50 ms here), which the server then answers.
    let (server, provider) = refusing_once(503, "3600", "ok", Duration::from_millis(50)).await;
    // The bound only keeps a regression (an hour's wait) from hanging the suite.
    tokio::time::timeout(
        Duration::from_secs(600),
        provider.clean(clean_request("ok", "")),
    )
    .await
    .expect("not an hour's wait")
    .unwrap();
    assert_eq!(provider.limiter().pushed_back_for(), Duration::ZERO);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_until_the_retries_run_out() {
    let server = FakeServer::start(|_, _| status(500, Vec::new())).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_retries: 2,
        ..config(&server.base_url)
    });
    let e = provider.summarize("text").await.unwrap_err();
    assert_eq!(server.requests().len(), 3);
    assert_eq!(e.code, "provider_unavailable");
    assert!(e.retryable);
    assert!(e.message.contains("HTTP 500"), "{}", e.message);
    assert!(e.message.contains("3 attempts"), "{}", e.message);
    assert!(e.message.contains("server_error"), "{}", e.message);
    assert!(!e.message.contains("your prompt"), "{}", e.message);
    assert_eq!(provider.usage(), TokenUsage::default());
}

#[tokio::test]
async fn refused_credentials_are_fatal_at_once() {
    for code in [401, 403] {
        let server = FakeServer::start(move |_, _| status(code, Vec::new())).await;
        let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
        let e = provider.classify("text", "dewey_v2").await.unwrap_err();
        assert_eq!(server.requests().len(), 1, "HTTP {code} is not retried");
        assert_eq!(e.code, "credential_refused");
        assert!(!e.retryable);
        assert!(
            e.message.contains("refused the credential"),
            "{}",
            e.message
        );
        assert!(e.message.contains("SHELF_LLM_API_KEY_ENV"), "{}", e.message);
        assert!(e.message.contains("OPENAI_API_KEY"), "{}", e.message);
        assert!(!e.message.contains(KEY));
        assert!(!format!("{e:?}").contains(KEY));
        assert!(!format!("{provider:?}").contains(KEY));
    }
}

#[tokio::test]
async fn without_a_key_no_authorization_header_is_sent() {
    let server = FakeServer::start(|_, _| completion("fine")).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        api_key: None,
        ..config(&server.base_url)
    });
    provider.clean(clean_request("fine", "")).await.unwrap();
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn garbage_answers_are_invalid_responses() {
    let server = FakeServer::start(|i, _| match i {
        0 => Reply::Respond {
            status: 200,
            headers: Vec::new(),
            body: b"<html>oops</html>".to_vec(),
        },
        1 | 2 => completion("I think this one is about horses."),
        3 | 4 => completion("{\"code\": \"horses\", \"confidence\": 0.9}"),
        5 | 6 => completion("{\"title\": 7}"),
        7 => completion("   "),
        _ => Reply::Respond {
            status: 200,
            headers: Vec::new(),
            body: br#"{"choices": []}"#.to_vec(),
        },
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let errors = vec![
        provider.classify("t", "dewey_v1").await.unwrap_err(),
        provider.classify("t", "dewey_v1").await.unwrap_err(),
        provider.classify("t", "dewey_v1").await.unwrap_err(),
        provider.summarize("t").await.unwrap_err(),
        provider.clean(clean_request("t", "")).await.unwrap_err(),
        provider.clean(clean_request("t", "")).await.unwrap_err(),
    ];
    for e in &errors {
        assert_eq!(e.code, "invalid_response", "{e:?}");
        assert!(!e.message.contains("horses") && !e.message.contains("oops"));
    }
    // An answer that is no chat completion may come right next time; a JSON answer the model
    // was told was wrong and gave again (temperature 0) would come the same: not retried.
    let retryable: Vec<bool> = errors.iter().map(|e| e.retryable).collect();
    assert_eq!(retryable, [true, false, false, false, true, true]);
    // An answer that is not a chat completion is not re-asked inside the call; a completion
    // whose JSON is not valid is, once, with the reason.
    assert_eq!(server.requests().len(), 9);
    let again = server.requests()[2].json();
    assert_eq!(again["messages"][2]["role"], "assistant");
    assert!(
        again["messages"][3]["content"]
            .as_str()
            .unwrap()
            .contains("no JSON object")
    );
}

#[tokio::test]
async fn a_json_answer_cut_at_the_bound_is_truncated() {
    // A server that does not stream says so in the completion's finish reason.
    let server = FakeServer::start(|_, _| Reply::Respond {
        status: 200,
        headers: vec![("Content-Type", "application/json".into())],
        body:
            br#"{"choices": [{"message": {"content": "The 1998 sur"}, "finish_reason": "length"}]}"#
                .to_vec(),
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let e = provider
        .clean(clean_request("The 1998 survey.", ""))
        .await
        .unwrap_err();
    assert_eq!(e.code, "answer_truncated");
    assert!(!e.retryable);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.requests()[0].json()["max_tokens"], 264);
}

#[tokio::test]
async fn an_oversized_response_is_cut_at_the_cap() {
    let server = FakeServer::start(|_, _| Reply::Endless).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_response_chars: 20_000,
        timeout: Duration::from_secs(30),
        ..config(&server.base_url)
    });
    // The body never ends: an answer at all shows reading stopped at the cap.
    let e = provider.clean(clean_request("text", "")).await.unwrap_err();
    assert_eq!(e.code, "response_too_large");
    assert!(!e.retryable);
    assert!(e.message.contains("SHELF_LLM_MAX_RESPONSE_CHARS=20000"));
    assert_eq!(server.requests().len(), 1, "not retried");
    // The client hung up instead of reading on.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.endless_stopped.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(server.endless_stopped.load(Ordering::SeqCst));

    // A complete body one character over the cap fails the same way.
    let answer = "y".repeat(5000);
    let server = FakeServer::start(move |_, _| completion(&answer)).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_response_chars: 5000,
        ..config(&server.base_url)
    });
    let e = provider.clean(clean_request("text", "")).await.unwrap_err();
    assert_eq!(e.code, "response_too_large");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = FakeServer::start(|_, _| Reply::Hang).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        timeout: Duration::from_millis(300),
        max_retries: 1,
        ..config(&server.base_url)
    });
    // The server never answers: an error at all shows the timeout fired, twice.
    let e = provider.summarize("text").await.unwrap_err();
    assert_eq!(e.code, "provider_timeout");
    assert!(e.retryable);
    assert!(
        e.message.contains("SHELF_LLM_TIMEOUT_SECONDS"),
        "{}",
        e.message
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(provider.limiter().in_flight(), 0);
}

#[tokio::test]
async fn a_missing_base_url_names_the_setting() {
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        base_url: None,
        ..config("unused")
    });
    let e = provider.clean(clean_request("text", "")).await.unwrap_err();
    assert_eq!(e.code, "provider_not_configured");
    assert!(!e.retryable);
    assert!(e.message.contains("SHELF_LLM_BASE_URL"), "{}", e.message);
    let e = provider.classify("text", "dewey_v2").await.unwrap_err();
    assert_eq!(e.code, "provider_not_configured");
}

#[tokio::test]
async fn an_unreachable_endpoint_names_the_setting() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_retries: 1,
        ..config(&format!("http://{addr}/v1"))
    });
    let e = provider.summarize("text").await.unwrap_err();
    assert_eq!(e.code, "provider_unreachable");
    assert!(e.message.contains("SHELF_LLM_BASE_URL"), "{}", e.message);
    assert!(e.message.contains("connection refused"), "{}", e.message);
}

#[tokio::test]
async fn oversized_prompts_and_unknown_versions_never_reach_the_server() {
    let server = FakeServer::start(|_, _| completion("x")).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_prompt_chars: 3000,
        ..config(&server.base_url)
    });
    let long = "word ".repeat(1000);
    let e = provider.clean(clean_request(&long, "")).await.unwrap_err();
    assert_eq!(e.code, "prompt_too_large");
    assert!(!e.retryable);
    assert!(e.message.contains("SHELF_LLM_MAX_PROMPT_CHARS=3000"));
    let e = provider
        .clean(CleanRequest {
            text: "x",
            context: "",
            prompt_version: "cmos_v9",
        })
        .await
        .unwrap_err();
    assert_eq!(e.code, "bad_prompt_version");
    let e = provider.classify("x", "dewey_v3").await.unwrap_err();
    assert_eq!(e.code, "bad_prompt_version");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn not_found_and_bad_requests_are_fatal() {
    let server = FakeServer::start(|i, _| {
        if i == 0 {
            status(404, Vec::new())
        } else {
            Reply::Respond {
                status: 400,
                headers: Vec::new(),
                body:
                    br#"{"error": {"message": "model xyz not found", "code": "model_not_found"}}"#
                        .to_vec(),
            }
        }
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let e = provider.summarize("t").await.unwrap_err();
    assert_eq!(e.code, "endpoint_not_found");
    assert!(!e.retryable && e.message.contains("SHELF_LLM_BASE_URL"));
    let e = provider.summarize("t").await.unwrap_err();
    assert_eq!(e.code, "provider_rejected");
    assert!(e.message.contains("model_not_found"), "{}", e.message);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn concurrent_calls_share_the_usage_counter() {
    let server = FakeServer::start(|_, _| completion("fine")).await;
    let provider = Arc::new(OpenAiCompatibleProvider::new(config(&server.base_url)));
    let counter = provider.usage_counter();
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let p = provider.clone();
            tokio::spawn(async move { p.clean(clean_request("fine", "")).await })
        })
        .collect();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(
        counter.snapshot(),
        TokenUsage {
            requests: 8,
            prompt_tokens: 960,
            completion_tokens: 240
        }
    );
}
