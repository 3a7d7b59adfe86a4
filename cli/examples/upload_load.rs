//! A load client for `POST /documents` that does not share the peer benchmark's limit: the
//! Python client runs on one core (asyncio, the GIL) and saturates it at about 600 uploads/s on
//! this machine kind, so it cannot show what the API takes. Same request as the peer bench
//! (multipart field `file`, the file's bytes read into memory first, `text/plain` or
//! `text/markdown`), at a fixed concurrency; prints one JSON line (docs/PERFORMANCE.md,
//! Throughput).
//!
//!   cargo build --release -p shelf-cli --example upload_load
//!   target/release/examples/upload_load URL DIR [N=1000] [CONCURRENCY=8]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [base, dir, rest @ ..] = args.as_slice() else {
        bail!("usage: upload_load URL DIR [N] [CONCURRENCY]");
    };
    let n: usize = rest.first().map_or(Ok(1000), |s| s.parse())?;
    let concurrency: usize = rest.get(1).map_or(Ok(8), |s| s.parse())?;

    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {dir}"))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    paths.truncate(n);
    let mut docs = Vec::with_capacity(paths.len());
    for path in paths {
        let name = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let data = std::fs::read(&path).with_context(|| format!("cannot read {path:?}"))?;
        docs.push((name, data));
    }
    let bytes: usize = docs.iter().map(|(_, data)| data.len()).sum();
    let count = docs.len();
    let queue = Arc::new(Mutex::new(docs.into_iter()));
    let client = reqwest::Client::new();
    let url = format!("{}/documents", base.trim_end_matches('/'));

    let started = Instant::now();
    let cpu_before = own_cpu();
    let mut tasks = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (queue, client, url) = (queue.clone(), client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = 0usize;
            loop {
                let next = queue.lock().map(|mut q| q.next()).unwrap_or(None);
                let Some((name, data)) = next else { break };
                let mime = if name.ends_with(".md") {
                    "text/markdown"
                } else {
                    "text/plain"
                };
                let t0 = Instant::now();
                let part = reqwest::multipart::Part::bytes(data)
                    .file_name(name)
                    .mime_str(mime)?;
                let form = reqwest::multipart::Form::new().part("file", part);
                let response = client.post(&url).multipart(form).send().await?;
                let ok = response.status().is_success();
                response.bytes().await?;
                if ok {
                    latencies.push(t0.elapsed());
                } else {
                    failures += 1;
                }
            }
            anyhow::Ok((latencies, failures))
        }));
    }
    let mut latencies: Vec<Duration> = Vec::new();
    let mut failures = 0;
    for task in tasks {
        let (mut l, f) = task.await??;
        latencies.append(&mut l);
        failures += f;
    }
    let wall = started.elapsed().as_secs_f64();
    let client_cpu = own_cpu() - cpu_before;
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{}",
        serde_json::json!({
            "files": count,
            "bytes": bytes,
            "ok": latencies.len(),
            "failed": failures,
            "concurrency": concurrency,
            "wall_s": wall,
            "uploads_per_s": latencies.len() as f64 / wall,
            "p50_ms": pct(0.5),
            "p95_ms": pct(0.95),
            "p99_ms": pct(0.99),
            "client_cpu_s": client_cpu,
        })
    );
    Ok(())
}

/// This process's CPU seconds (user + system), from /proc.
fn own_cpu() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some((user + system) / 100.0)
        })
        .unwrap_or(0.0)
}
