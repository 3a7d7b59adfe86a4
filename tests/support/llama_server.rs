//! A real model server for the tests: llama.cpp's server (llama-cpp-python) serving
//! SmolLM2-135M-Instruct, as `scripts/fetch-llama-server` installs it, started on a free
//! loopback port for one test and stopped when dropped. Without it a test skips with a notice,
//! unless `SHELF_REQUIRE_LLAMA_SERVER=1` (CI), where it fails.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The model file inside the fetch script's directory.
pub const GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The name the server answers to (`SHELF_LLM_MODEL`).
pub const MODEL: &str = "smollm2";

/// The directory the fetch script fills (or the one the environment names).
pub fn home() -> PathBuf {
    if let Some(d) = std::env::var_os("SHELF_LLAMA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("shelf-llama")
}

/// A running llama.cpp server; killed on drop.
pub struct LlamaServer {
    child: Child,
    pub port: u16,
    /// `SHELF_LLM_BASE_URL` for Shelf.
    pub base_url: String,
    /// Everything the server wrote (its log: one timing block per finished completion).
    pub log: Arc<Mutex<String>>,
}

impl LlamaServer {
    /// Starts the server with `threads` CPU threads, or `None` (after a notice) when it is not
    /// installed and not required.
    pub fn start_or_skip(threads: usize) -> Option<LlamaServer> {
        let home = home();
        let python = home.join("venv/bin/python");
        let gguf = home.join(GGUF);
        if !python.is_file() || !gguf.is_file() {
            if std::env::var("SHELF_REQUIRE_LLAMA_SERVER").as_deref() == Ok("1") {
                panic!(
                    "no llama.cpp server in {} (SHELF_REQUIRE_LLAMA_SERVER=1): run scripts/fetch-llama-server",
                    home.display()
                );
            }
            eprintln!(
                "SKIPPED: no llama.cpp server in {}; run scripts/fetch-llama-server (or set SHELF_LLAMA_HOME)",
                home.display()
            );
            return None;
        }
        let port = free_port();
        let mut child = Command::new(&python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&gguf)
            .args(["--model_alias", MODEL, "--n_ctx", "8192", "--n_threads"])
            .arg(threads.to_string())
            .args(["--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the llama.cpp server");
        let log = Arc::new(Mutex::new(String::new()));
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let log = log.clone();
            std::thread::spawn(move || collect(pipe, &log));
        }
        let mut server = LlamaServer {
            child,
            port,
            base_url: format!("http://127.0.0.1:{port}/v1"),
            log,
        };
        // A hang guard, not a speed assert: loading a 98 MB model takes seconds.
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if let Some((200, _)) = server.get("/v1/models") {
                return Some(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "the llama.cpp server exited ({status}) before answering:\n{}",
                    server.log_tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the llama.cpp server did not answer within 5 minutes:\n{}",
                server.log_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn log_text(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The end of the log without the model-loading lines, for a failure's message.
    pub fn log_tail(&self) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| {
                ![
                    "llama_",
                    "load",
                    "print_info",
                    "create_tensor",
                    "graph",
                    "sched_",
                    "CPU :",
                ]
                .iter()
                .any(|p| l.starts_with(p))
            })
            .collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// A plain `GET`: the status and body, or `None` when nothing answers.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .ok()?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let status = response.split(' ').nth(1)?.parse().ok()?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())?;
        Some((status, body))
    }

    /// The completions the server finished so far, as the generated-token counts of their
    /// timing blocks (llama.cpp prints `eval time = ... / N runs` when a completion ends,
    /// finished or abandoned).
    pub fn finished_generations(&self) -> Vec<u64> {
        self.log_text()
            .lines()
            .filter(|l| l.contains("eval time") && !l.contains("prompt eval time"))
            .filter_map(|l| {
                let (_, rest) = l.split_once('/')?;
                rest.split_whitespace().next()?.parse().ok()
            })
            .collect()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(mut pipe: Box<dyn Read + Send>, log: &Mutex<String>) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf) {
        if n == 0 {
            return;
        }
        if let Ok(mut log) = log.lock() {
            log.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
}

/// A port nothing listens on now (the kernel's pick, released for the server to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
