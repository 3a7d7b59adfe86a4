//! The `generic-compatible` provider against a fake server that streams its answers as
//! server-sent events, piece by piece with pauses, or stops sending: streamed answers, their
//! usage, the length bound, the idle timeout, structured-output forms and the validation retry.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use shelf_stages::provider::openai::{OpenAiCompatibleProvider, OpenAiConfig, TokenUsage};
use shelf_stages::provider::{CleanRequest, Provider};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::config;

/// What the fake server does next on a streamed answer.
#[derive(Debug, Clone)]
enum Piece {
    /// Sends these bytes.
    Send(Vec<u8>),
    Sleep(Duration),
    /// Sends nothing more and keeps the connection open until the client closes it.
    Hang,
}

/// A reply to one request.
enum Answer {
    Stream(Vec<Piece>),
    Status(u16, &'static str),
}

type Script = dyn Fn(usize, &Value) -> Answer + Send + Sync;

struct SseServer {
    base_url: String,
    /// Each request's JSON body, in order.
    bodies: Arc<Mutex<Vec<Value>>>,
    /// Connections the client closed while the server held them open (`Piece::Hang`).
    closed_by_client: Arc<AtomicUsize>,
    closed: Arc<Notify>,
}

impl SseServer {
    async fn start(script: impl Fn(usize, &Value) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let closed_by_client = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(Notify::new());
        let script: Arc<Script> = Arc::new(script);
        let (b, c, n) = (bodies.clone(), closed_by_client.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (script, b, c, n) = (script.clone(), b.clone(), c.clone(), n.clone());
                tokio::spawn(async move { serve(socket, script, b, c, n).await });
            }
        });
        SseServer {
            base_url: format!("http://{addr}/v1"),
            bodies,
            closed_by_client,
            closed,
        }
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }

    /// Waits until the client has closed a connection the server held open.
    async fn until_closed_by_client(&self) {
        loop {
            let notified = self.closed.notified();
            if self.closed_by_client.load(Ordering::SeqCst) > 0 {
                return;
            }
            notified.await;
        }
    }
}

async fn serve(
    mut socket: TcpStream,
    script: Arc<Script>,
    bodies: Arc<Mutex<Vec<Value>>>,
    closed_by_client: Arc<AtomicUsize>,
    closed: Arc<Notify>,
) {
    let Some(body) = read_body(&mut socket).await else {
        return;
    };
    let index = {
        let mut all = bodies.lock().unwrap();
        all.push(body.clone());
        all.len() - 1
    };
    match script(index, &body) {
        Answer::Status(status, text) => {
            let head = format!(
                "HTTP/1.1 {status} Refused\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                text.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(text.as_bytes()).await;
        }
        Answer::Stream(pieces) => {
            // No length: the body ends when the connection closes.
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for piece in pieces {
                match piece {
                    Piece::Send(bytes) => {
                        if socket.write_all(&bytes).await.is_err() {
                            return;
                        }
                    }
                    Piece::Sleep(pause) => tokio::time::sleep(pause).await,
                    Piece::Hang => {
                        // Only the client closing ends this: a read of 0 bytes (or an error).
                        let mut buf = [0u8; 64];
                        while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
                        closed_by_client.fetch_add(1, Ordering::SeqCst);
                        closed.notify_waiters();
                        return;
                    }
                }
            }
        }
    }
    let _ = socket.shutdown().await;
}

async fn read_body(socket: &mut TcpStream) -> Option<Value> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    serde_json::from_slice(&body).ok()
}

fn event(value: Value) -> Piece {
    Piece::Send(format!("data: {value}\n\n").into_bytes())
}

fn role() -> Piece {
    event(json!({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]}))
}

fn token(text: &str) -> Piece {
    event(json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}))
}

fn finish(reason: &str) -> Piece {
    event(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

fn done() -> Piece {
    Piece::Send(b"data: [DONE]\n\n".to_vec())
}

/// A whole streamed answer of `pieces` of text, as llama.cpp sends one (no usage).
fn streamed(pieces: &[&str], reason: &str) -> Answer {
    let mut out = vec![role()];
    out.extend(pieces.iter().map(|p| token(p)));
    out.push(finish(reason));
    out.push(done());
    Answer::Stream(out)
}

fn clean_request(text: &str) -> CleanRequest<'_> {
    CleanRequest {
        text,
        context: "",
        prompt_version: "cmos_v4",
    }
}

/// The text of the request's last message.
fn last_message(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_streamed_answer_is_assembled_bounded_and_counted() {
    let server = SseServer::start(|_, _| {
        Answer::Stream(vec![
            role(),
            // One event split across two writes, and CRLF line ends, as sse-starlette sends.
            Piece::Send(
                b"data: {\"choices\":[{\"delta\":{\"content\":\"The 1998 \"}}]}\r".to_vec(),
            ),
            Piece::Send(b"\n\r\n".to_vec()),
            token("survey found horses."),
            finish("stop"),
            event(json!({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 7}})),
            done(),
        ])
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let text = "The 1998 survey  found hor-\nses.";
    let cleaned = provider.clean(clean_request(text)).await.unwrap();
    assert_eq!(cleaned, "The 1998 survey found horses.");
    assert_eq!(
        provider.usage(),
        TokenUsage {
            requests: 1,
            prompt_tokens: 40,
            completion_tokens: 7
        }
    );
    let body = &server.bodies()[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    // Half the chunk's bytes plus 256.
    assert_eq!(body["max_tokens"], text.len() / 2 + 256);
    assert!(body.get("response_format").is_none(), "cleaning is text");

    // Without the server's usage, each event of text counts as a token.
    let server = SseServer::start(|_, _| streamed(&["a", "b", "c"], "stop")).await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    assert_eq!(provider.clean(clean_request("abc")).await.unwrap(), "abc");
    assert_eq!(provider.usage().completion_tokens, 3);
}

#[tokio::test]
async fn an_answer_cut_at_the_bound_is_never_a_success() {
    let server = SseServer::start(|_, body| {
        if last_message(body).contains("not valid") {
            streamed(&["{\"code\": \"636\", \"confi"], "length")
        } else {
            streamed(&["{\"code\": \"636\", ", "\"confi"], "length")
        }
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let e = provider.clean(clean_request("A chunk.")).await.unwrap_err();
    assert_eq!(e.code, "answer_truncated");
    assert!(e.is_truncated() && !e.retryable);
    assert!(e.message.contains("260 tokens"), "{}", e.message);
    assert_eq!(server.bodies().len(), 1, "no HTTP-level retry");
    // A classification cut off is asked once more, then is an invalid answer.
    let e = provider.classify("Horses.", "dewey_v1").await.unwrap_err();
    assert_eq!(e.code, "invalid_response");
    assert!(e.message.contains("cut off"), "{}", e.message);
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[1]["max_tokens"], 128);
    assert!(last_message(&bodies[2]).contains("cut off at the length limit of 128 tokens"));
}

#[tokio::test]
async fn a_server_that_ignores_the_bound_is_cut_off() {
    // Tokens for ever, never a finish reason: reading stops past twice the bound.
    let server = SseServer::start(|_, _| {
        let mut pieces = vec![role()];
        pieces.extend((0..100_000).map(|_| token("x ")));
        Answer::Stream(pieces)
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let e = provider.clean(clean_request("x")).await.unwrap_err();
    assert_eq!(e.code, "answer_truncated");
}

#[tokio::test]
async fn a_server_that_stops_sending_times_out_and_is_hung_up_on() {
    let server =
        SseServer::start(|_, _| Answer::Stream(vec![role(), token("The"), Piece::Hang])).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        idle_timeout: Duration::from_millis(300),
        max_retries: 1,
        ..config(&server.base_url)
    });
    // The server never sends again: an error at all shows the idle timeout fired, twice.
    let e = provider
        .clean(clean_request("The text."))
        .await
        .unwrap_err();
    assert_eq!(e.code, "provider_timeout");
    assert!(e.retryable);
    assert!(
        e.message.contains("SHELF_LLM_IDLE_TIMEOUT_SECONDS"),
        "{}",
        e.message
    );
    assert_eq!(server.bodies().len(), 2);
    // Giving up closed the connection: the server saw it (llama.cpp stops generating there).
    server.until_closed_by_client().await;
    assert_eq!(provider.limiter().in_flight(), 0);
}

#[tokio::test]
async fn a_stream_that_never_begins_is_the_first_token_timeout() {
    let server = SseServer::start(|_, _| Answer::Stream(vec![role(), Piece::Hang])).await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(3600),
        max_retries: 0,
        ..config(&server.base_url)
    });
    // The idle timeout is an hour: an error at all shows the first-token limit fired.
    let e = provider
        .clean(clean_request("The text."))
        .await
        .unwrap_err();
    assert_eq!(e.code, "provider_timeout");
    assert!(
        e.message.contains("SHELF_LLM_TIMEOUT_SECONDS"),
        "{}",
        e.message
    );
    server.until_closed_by_client().await;
}

#[tokio::test]
async fn a_slow_but_steady_server_is_never_cut_off() {
    // A token every 50 ms for 2 s: longer than both the first-token limit and the idle
    // timeout (1 s each), each gap far inside the idle timeout.
    let words: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
    let expected: String = words.concat().trim().to_string();
    let server = SseServer::start(move |_, _| {
        let mut pieces = vec![role()];
        for word in &words {
            pieces.push(Piece::Sleep(Duration::from_millis(50)));
            pieces.push(token(word));
        }
        pieces.push(finish("stop"));
        pieces.push(done());
        Answer::Stream(pieces)
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        max_retries: 0,
        ..config(&server.base_url)
    });
    let cleaned = provider.clean(clean_request(&expected)).await.unwrap();
    assert_eq!(cleaned, expected);
    assert_eq!(server.bodies().len(), 1);
}

const CLASSIFIED: &str = "{\"code\": \"636.1\", \"confidence\": 0.8}";

#[tokio::test]
async fn a_refused_response_format_falls_back_and_is_remembered() {
    let server = SseServer::start(|_, body| {
        match body["response_format"]["type"].as_str() {
            // llama-cpp-python 0.3.36's refusal of OpenAI's form: HTTP 500 naming the field.
            Some("json_schema") => Answer::Status(
                500,
                r#"{"error":{"message":"1 validation error: {'loc': ('body', 'response_format', 'type')}","type":"internal_server_error"}}"#,
            ),
            Some("json_object") if body["response_format"]["schema"].is_object() => {
                streamed(&[CLASSIFIED], "stop")
            }
            _ => Answer::Status(400, r#"{"error":{"message":"unexpected"}}"#),
        }
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let c = provider.classify("Horses.", "dewey_v2").await.unwrap();
    assert_eq!((c.code.as_str(), c.confidence), ("636.1", 0.8));
    let c = provider.classify("Horses.", "dewey_v2").await.unwrap();
    assert_eq!(c.code, "636.1");
    let forms: Vec<String> = server
        .bodies()
        .iter()
        .map(|b| {
            b["response_format"]["type"]
                .as_str()
                .unwrap_or("none")
                .to_string()
        })
        .collect();
    // Asked with OpenAI's form once; the next call sends the remembered one first.
    assert_eq!(forms, ["json_schema", "json_object", "json_object"]);
    let first = &server.bodies()[0]["response_format"]["json_schema"];
    assert_eq!(first["strict"], true);
    assert_eq!(first["schema"]["required"], json!(["code", "confidence"]));
    // The limiter did not take the refusal for overload.
    assert_eq!(provider.limiter().report().refused, 0);
}

#[tokio::test]
async fn a_server_that_takes_no_form_is_asked_without_one() {
    let server = SseServer::start(|_, body| {
        if body.get("response_format").is_some() {
            Answer::Status(422, r#"{"detail":[{"loc":["body","response_format"],"msg":"Extra inputs are not permitted"}]}"#)
        } else if body.get("stream_options").is_some() {
            Answer::Status(400, r#"{"error":{"message":"Unrecognized request argument supplied: stream_options"}}"#)
        } else {
            streamed(&[CLASSIFIED], "stop")
        }
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    provider.classify("Horses.", "dewey_v1").await.unwrap();
    provider.classify("Horses.", "dewey_v1").await.unwrap();
    let bodies = server.bodies();
    // Two forms and stream_options refused once each, then one plain request a call.
    assert_eq!(bodies.len(), 5);
    let last = &bodies[4];
    assert!(last.get("response_format").is_none() && last.get("stream_options").is_none());
    assert_eq!(last["stream"], true);
}

#[tokio::test]
async fn an_invalid_answer_is_asked_again_with_the_reason() {
    let server = SseServer::start(|i, _| {
        if i == 0 {
            // Five digits are no Dewey number.
            streamed(&["{\"code\": \"63612\", \"confidence\": 0.9}"], "stop")
        } else {
            streamed(&[CLASSIFIED], "stop")
        }
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let c = provider.classify("Horses.", "dewey_v2").await.unwrap();
    assert_eq!(c.code, "636.1");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(
        messages[2]["content"],
        "{\"code\": \"63612\", \"confidence\": 0.9}"
    );
    let again = messages[3]["content"].as_str().unwrap();
    assert!(again.starts_with("That answer was not valid: "), "{again}");
    assert!(again.contains("Dewey code"), "{again}");

    // A summary without a title, twice: the second failure is the call's error.
    let server = SseServer::start(|_, _| {
        streamed(
            &["{\"title\": \"  \", \"summary\": \"x\", \"tags\": [], \"suggested_stem\": \"x\"}"],
            "stop",
        )
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    let e = provider.summarize("Horses.").await.unwrap_err();
    assert_eq!(e.code, "invalid_response");
    assert!(
        !e.retryable,
        "asked twice: another attempt would ask the same"
    );
    assert!(e.message.contains("no title"), "{}", e.message);
    assert_eq!(server.bodies().len(), 2);
    assert_eq!(server.bodies()[0]["max_tokens"], 768);
}

#[tokio::test]
async fn an_error_event_or_a_cut_stream_is_a_failed_attempt() {
    let server = SseServer::start(|i, _| match i {
        0 => Answer::Stream(vec![
            role(),
            event(json!({"error": {"message": "your prompt: secret", "type": "overloaded_error"}})),
        ]),
        // The connection closes mid-answer.
        1 => Answer::Stream(vec![role(), token("The")]),
        _ => streamed(&["The text."], "stop"),
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(config(&server.base_url));
    assert_eq!(
        provider.clean(clean_request("The text.")).await.unwrap(),
        "The text."
    );
    assert_eq!(server.bodies().len(), 3);
}

#[tokio::test]
async fn a_streamed_answer_over_the_cap_is_cut() {
    let server = SseServer::start(|_, _| {
        let mut pieces = vec![role()];
        pieces.extend((0..100).map(|_| token(&"y".repeat(100))));
        Answer::Stream(pieces)
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_response_chars: 5_000,
        ..config(&server.base_url)
    });
    let e = provider.clean(clean_request("text")).await.unwrap_err();
    assert_eq!(e.code, "response_too_large");
    assert_eq!(server.bodies().len(), 1);
}

/// llama-cpp-python's server, asked a second request while it streams, ends the first answer
/// with `[DONE]` and no finish reason. That is no answer: the call is sent again as push-back
/// (with no retries allowed, a counted attempt would have failed it) and gets the full answer.
#[tokio::test]
async fn an_answer_the_server_cut_short_is_sent_again_without_an_attempt() {
    let server = SseServer::start(|i, _| match i {
        0 => Answer::Stream(vec![role(), token("The"), done()]),
        _ => streamed(&["The text."], "stop"),
    })
    .await;
    let provider = OpenAiCompatibleProvider::new(OpenAiConfig {
        max_retries: 0,
        initial_backoff: Duration::from_millis(10),
        ..config(&server.base_url)
    });
    let cleaned = provider.clean(clean_request("The text.")).await.unwrap();
    assert_eq!(cleaned, "The text.");
    assert_eq!(server.bodies().len(), 2);
    assert!(provider.limiter().pushed_back_for() > Duration::ZERO);
}
