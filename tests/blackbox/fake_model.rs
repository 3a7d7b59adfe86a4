//! A fake OpenAI-compatible model on 127.0.0.1 for the `generic-compatible` provider of a real
//! `shelf` process: one thread per connection, one request each. It holds every answer until
//! released, so a test knows a stage is in flight (a request arrived) without sleeping.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::{Value, json};

#[derive(Default)]
struct State {
    requests: usize,
    released: bool,
    /// With [`FakeModel::holding`]: only requests whose system prompt contains this are held;
    /// the rest are answered at once.
    hold_only: Option<String>,
    /// Requests held so far (all of them without `hold_only`).
    held: usize,
    /// With [`FakeModel::refusing_first`]: requests still to refuse with 429.
    to_refuse: usize,
    /// Requests refused so far.
    refused: usize,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

pub struct FakeModel {
    /// `SHELF_LLM_BASE_URL` for the provider.
    pub base_url: String,
    shared: Shared,
}

impl FakeModel {
    /// A model that answers nothing until [`FakeModel::release`].
    pub fn held() -> FakeModel {
        Self::start(None)
    }

    /// A model that answers every request at once except those whose system prompt contains
    /// `pattern` (e.g. `Dewey`: classification), held until [`FakeModel::release`]: a run
    /// stops at that stage, its earlier stages done.
    pub fn holding(pattern: &str) -> FakeModel {
        Self::start(Some(pattern.to_string()))
    }

    /// A model that refuses its first `n` requests with 429 and `retry-after-ms: 20` (a
    /// storm of push-back), then answers every request at once.
    pub fn refusing_first(n: usize) -> FakeModel {
        let model = Self::start(Some(String::new()));
        if let Ok(mut state) = model.shared.0.lock() {
            state.to_refuse = n;
            state.released = true;
        }
        model
    }

    /// Requests refused so far.
    pub fn refused(&self) -> usize {
        self.shared.0.lock().map(|s| s.refused).unwrap_or(0)
    }

    fn start(hold_only: Option<String>) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake model");
        let addr = listener.local_addr().expect("local addr");
        let shared: Shared = Arc::default();
        if let Ok(mut state) = shared.0.lock() {
            state.hold_only = hold_only;
        }
        let accepting = shared.clone();
        std::thread::spawn(move || {
            for socket in listener.incoming() {
                let Ok(socket) = socket else { return };
                let shared = accepting.clone();
                std::thread::spawn(move || serve(socket, &shared));
            }
        });
        FakeModel {
            base_url: format!("http://{addr}/v1"),
            shared,
        }
    }

    /// Requests received so far, answered or not.
    pub fn requests(&self) -> usize {
        self.shared.0.lock().map(|s| s.requests).unwrap_or(0)
    }

    /// Requests held so far (answered since or not).
    pub fn held_requests(&self) -> usize {
        self.shared.0.lock().map(|s| s.held).unwrap_or(0)
    }

    /// Answers the held requests (whose clients may be gone) and every later one at once.
    pub fn release(&self) {
        if let Ok(mut state) = self.shared.0.lock() {
            state.released = true;
        }
        self.shared.1.notify_all();
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        // Held threads end instead of waiting for the rest of the test binary.
        self.release();
    }
}

fn serve(mut socket: TcpStream, shared: &Shared) {
    let Some(request) = read_request(&mut socket) else {
        return;
    };
    // Like the bench's model_server.py, the fake implements completions only: the model
    // check at start (`GET /models`) is told the endpoint does not exist, at once.
    let Request::Post(body) = request else {
        let body = br#"{"error": {"message": "not found", "type": "not_found"}}"#;
        let head = format!(
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = socket.write_all(head.as_bytes());
        let _ = socket.write_all(body);
        return;
    };
    let (lock, released) = &**shared;
    let Ok(mut state) = lock.lock() else { return };
    state.requests += 1;
    if state.to_refuse > 0 {
        state.to_refuse -= 1;
        state.refused += 1;
        drop(state);
        let body = br#"{"error": {"message": "busy", "type": "rate_limit_error"}}"#;
        let head = format!(
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nretry-after-ms: 20\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = socket.write_all(head.as_bytes());
        let _ = socket.write_all(body);
        return;
    }
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let hold = state
        .hold_only
        .as_deref()
        .is_none_or(|pattern| system.contains(pattern));
    if hold {
        state.held += 1;
    }
    let Ok(state) = released.wait_while(state, |s| hold && !s.released) else {
        return;
    };
    drop(state);
    let answer = serde_json::to_vec(&json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content(&body)}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    }))
    .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        answer.len()
    );
    // The client may have gone (a process stopped while it waited): nothing to do then.
    let _ = socket.write_all(head.as_bytes());
    let _ = socket.write_all(&answer);
}

/// A well-behaved model's answer: cleaning echoes its text (whitespace collapsed, so the
/// fidelity check passes), classification and summaries are valid JSON.
fn content(body: &Value) -> String {
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let user = body["messages"][1]["content"].as_str().unwrap_or_default();
    if system.contains("Dewey") {
        r#"{"code": "949.72", "confidence": 0.7}"#.into()
    } else if system.contains("cataloguing") {
        r#"{"title": "The crazy ones", "summary": "A tribute.", "tags": ["misfits"], "suggested_stem": "the-crazy-ones"}"#.into()
    } else {
        let text = user
            .split_once("<<<TEXT\n")
            .and_then(|(_, rest)| rest.rsplit_once("\nTEXT>>>"))
            .map(|(text, _)| text)
            .unwrap_or_default();
        text.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// One request: a `POST` with its JSON body, or anything else.
enum Request {
    Post(Value),
    Other,
}

/// One HTTP/1.1 request (headers, then `Content-Length` bytes).
fn read_request(socket: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut tmp).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    if !head.starts_with("POST ") {
        return Some(Request::Other);
    }
    let length: usize = head
        .split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut tmp).ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    serde_json::from_slice(&body).ok().map(Request::Post)
}
