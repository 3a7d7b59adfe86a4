//! A fake OpenAI-compatible server on 127.0.0.1 for tests: a few lines of tokio that read one
//! HTTP/1.1 request per connection and answer from a script.

#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

pub enum Reply {
    Respond {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    },
    /// Reads the request and never answers.
    Hang,
    /// A 200 whose chunked body never ends.
    Endless,
    /// The reply this future gives, sent when it is ready: a test holds one request until
    /// others have arrived.
    Later(Pin<Box<dyn Future<Output = Reply> + Send>>),
}

pub type Script = dyn Fn(usize, &Request) -> Reply + Send + Sync;

pub struct FakeServer {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<Request>>>,
    /// Set when an endless body stopped because the client went away.
    pub endless_stopped: Arc<AtomicBool>,
}

impl FakeServer {
    pub async fn start(script: impl Fn(usize, &Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let endless_stopped = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let (reqs, stopped) = (requests.clone(), endless_stopped.clone());
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let (script, reqs, stopped) = (script.clone(), reqs.clone(), stopped.clone());
                tokio::spawn(async move {
                    serve(socket, script, reqs, stopped).await;
                });
            }
        });
        FakeServer {
            base_url: format!("http://{addr}/v1"),
            requests,
            endless_stopped,
        }
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(
    mut socket: TcpStream,
    script: Arc<Script>,
    requests: Arc<Mutex<Vec<Request>>>,
    endless_stopped: Arc<AtomicBool>,
) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    let index = {
        let mut all = requests.lock().unwrap();
        all.push(request.clone());
        all.len() - 1
    };
    let mut reply = script(index, &request);
    while let Reply::Later(later) = reply {
        reply = later.await;
    }
    match reply {
        Reply::Later(_) => {}
        Reply::Respond {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Status\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(&body).await;
            let _ = socket.shutdown().await;
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Reply::Endless => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let piece = "x".repeat(8192);
            let chunk = format!("{:x}\r\n{piece}\r\n", piece.len());
            let opening = r#"{"choices":[{"message":{"content":""#;
            let start = format!("{:x}\r\n{opening}\r\n", opening.len());
            let _ = socket.write_all(start.as_bytes()).await;
            // At most ~1 GiB, far past any cap: stops as soon as the client hangs up.
            for _ in 0..131_072 {
                if socket.write_all(chunk.as_bytes()).await.is_err() {
                    endless_stopped.store(true, Ordering::SeqCst);
                    return;
                }
            }
        }
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Request> {
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
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

pub fn completion(content: &str) -> Reply {
    Reply::Respond {
        status: 200,
        headers: vec![("Content-Type", "application/json".into())],
        body: serde_json::to_vec(&json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
        }))
        .unwrap(),
    }
}

pub fn status(code: u16, headers: Vec<(&'static str, String)>) -> Reply {
    Reply::Respond {
        status: code,
        headers,
        body: br#"{"error": {"message": "nope: your prompt was ...", "type": "server_error", "code": null}}"#
            .to_vec(),
    }
}

/// A well-behaved model: cleaning echoes the text it was given (whitespace collapsed),
/// classification and summaries answer valid JSON.
pub fn faithful_model(request: &Request) -> Reply {
    let body = request.json();
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    let user = body["messages"][1]["content"].as_str().unwrap_or_default();
    if system.contains("Dewey") {
        completion(r#"{"code": "949.72", "confidence": 0.7}"#)
    } else if system.contains("cataloguing") {
        completion(
            r#"{"title": "Dubrovnik after the war", "summary": "A travel report.", "tags": ["dubrovnik", "croatia"], "suggested_stem": "dubrovnik-after-the-war"}"#,
        )
    } else {
        let text = user
            .split_once("<<<TEXT\n")
            .and_then(|(_, rest)| rest.rsplit_once("\nTEXT>>>"))
            .map(|(text, _)| text)
            .unwrap_or_default();
        let cleaned: Vec<String> = text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        completion(&cleaned.join("\n"))
    }
}
