//! The harness: a fresh data directory, a migrated database and the full router, called
//! in-process with `tower::ServiceExt::oneshot`.

#![allow(dead_code)]

use shelf_db::sql::SqlExt;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use bytes::Bytes;
use http_body_util::BodyExt;
use sea_orm::{DbBackend, Statement};
use serde_json::Value;
use shelf_app::{Settings, Shelf};
use shelf_server::{AppState, ServerOptions};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

pub const READ_KEY: &str = "read-key-0123456789";
pub const WRITE_KEY: &str = "write-key-0123456789";
/// A key configured only as its SHA-256 (`SHELF_API_KEY_HASHES`), write scope.
pub const HASHED_KEY: &str = "hashed-key-0123456789";
/// A key configured only as its SHA-256, read scope.
pub const HASHED_READ_KEY: &str = "hashed-read-key-0123456789";

pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// The settings of an API with every kind of credential.
pub fn auth_vars() -> Vec<(String, String)> {
    vec![
        (
            "SHELF_API_KEYS".into(),
            format!("read:{READ_KEY},write:{WRITE_KEY}"),
        ),
        (
            "SHELF_API_KEY_HASHES".into(),
            format!(
                "write:{},read:{}",
                sha256_hex(HASHED_KEY),
                sha256_hex(HASHED_READ_KEY)
            ),
        ),
    ]
}

pub struct TestApp {
    pub dir: TempDir,
    pub state: AppState,
    pub router: Router,
    pub shutdown: CancellationToken,
}

impl TestApp {
    pub async fn new() -> TestApp {
        Self::with(Vec::<(String, String)>::new()).await
    }

    pub async fn with<K: Into<String>, V: Into<String>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> TestApp {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut map: HashMap<String, String> = HashMap::new();
        map.insert(
            "SHELF_DATA_DIR".into(),
            dir.path().join("data").display().to_string(),
        );
        map.insert("SHELF_LLM_PROVIDER".into(), "mock".into());
        map.insert("HOME".into(), dir.path().display().to_string());
        for (k, v) in vars {
            map.insert(k.into(), v.into());
        }
        let settings = Settings::from_vars(&map).expect("settings");
        let shelf = Shelf::open(settings).await.expect("open");
        let shutdown = CancellationToken::new();
        let state = AppState::new(
            shelf,
            shutdown.clone(),
            ServerOptions {
                sse_poll: Duration::from_millis(20),
                sse_heartbeat: Duration::from_millis(150),
                ..ServerOptions::default()
            },
        );
        let router = shelf_server::router(state.clone());
        TestApp {
            dir,
            state,
            router,
            shutdown,
        }
    }

    pub fn shelf(&self) -> &Shelf {
        &self.state.shelf
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub async fn send(&self, req: Request<Body>) -> Reply {
        let response = self
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("infallible router");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        Reply {
            status,
            headers,
            body,
        }
    }

    pub async fn call(&self, call: Call) -> Reply {
        self.send(call.build()).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.call(Call::new(Method::GET, path)).await
    }

    pub async fn post_json(&self, path: &str, body: Value) -> Reply {
        self.call(Call::new(Method::POST, path).json(&body)).await
    }

    pub async fn upload(&self, filename: &str, bytes: &[u8]) -> Reply {
        self.call(Call::new(Method::POST, "/documents").multipart("file", filename, bytes))
            .await
    }

    /// Uploads and returns the new document id.
    pub async fn upload_ok(&self, filename: &str, bytes: &[u8]) -> String {
        let reply = self.upload(filename, bytes).await;
        assert!(reply.status.is_success(), "{}", reply.text());
        reply.json()["id"]
            .as_str()
            .expect("document id")
            .to_string()
    }

    pub async fn sql(&self, sql: &str) {
        self.shelf()
            .db
            .execute_sql(Statement::from_string(DbBackend::Sqlite, sql))
            .await
            .expect("sql");
    }

    pub async fn count(&self, table: &str) -> i64 {
        let row = self
            .shelf()
            .db
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                format!("SELECT count(*) AS n FROM {table}"),
            ))
            .await
            .expect("count")
            .expect("row");
        row.try_get::<i64>("", "n").expect("n")
    }

    /// Polls `GET /runs/{id}` until the run is terminal.
    pub async fn wait_terminal(&self, run_id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let run = self.get(&format!("/runs/{run_id}")).await.json();
            if matches!(
                run["status"].as_str(),
                Some("succeeded" | "failed" | "canceled")
            ) {
                return run;
            }
            assert!(Instant::now() < deadline, "run {run_id} never ended: {run}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls until `api_audit_events` holds at least `n` denials (rows aggregate them).
    pub async fn wait_audit(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let page = self.shelf().audit_events(1, 0).await.expect("audit");
            if page.denials >= n {
                return;
            }
            assert!(Instant::now() < deadline, "audit denials never reached {n}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A request under construction.
pub struct Call {
    builder: axum::http::request::Builder,
    body: Body,
    peer: Option<SocketAddr>,
}

impl Call {
    pub fn new(method: Method, path: &str) -> Call {
        Call {
            builder: Request::builder().method(method).uri(path),
            body: Body::empty(),
            peer: Some(SocketAddr::from(([127, 0, 0, 1], 40000))),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Call {
        self.builder = self.builder.header(name, value);
        self
    }

    pub fn key(self, key: &str) -> Call {
        self.header("x-api-key", key)
    }

    pub fn bearer(self, key: &str) -> Call {
        self.header("authorization", &format!("Bearer {key}"))
    }

    pub fn peer(mut self, addr: &str) -> Call {
        self.peer = Some(addr.parse().expect("socket address"));
        self
    }

    pub fn json(mut self, value: &Value) -> Call {
        self.builder = self.builder.header("content-type", "application/json");
        self.body = Body::from(value.to_string());
        self
    }

    pub fn raw(mut self, content_type: &str, body: impl Into<Body>) -> Call {
        self.builder = self.builder.header("content-type", content_type);
        self.body = body.into();
        self
    }

    pub fn multipart(self, field: &str, filename: &str, bytes: &[u8]) -> Call {
        let body = multipart_body(&[(field, Some(filename), bytes)]);
        self.raw(&format!("multipart/form-data; boundary={BOUNDARY}"), body)
    }

    pub fn build(self) -> Request<Body> {
        let mut req = self.builder.body(self.body).expect("request");
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(ConnectInfo(peer));
        }
        req
    }
}

pub const BOUNDARY: &str = "shelf-test-boundary-7MA4YWxkTrZu0gW";

/// A multipart body of `(name, filename, bytes)` parts.
pub fn multipart_body(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, filename, bytes) in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        match filename {
            Some(f) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{f}\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts an error reply: status, code, and the `{detail, code}` shape.
    pub fn assert_error(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "expected {status} {code}, got {}: {}",
            self.status,
            self.text()
        );
        let body = self.json();
        assert_eq!(body["code"], code, "{body}");
        assert!(body.get("detail").is_some(), "{body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(2), "{body}");
        body
    }
}

/// Files under a directory, recursively (for "nothing was left behind" checks).
pub fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}
