//! Queue and engine throughput: runs per second of the default pipeline with the mock provider
//! through the durable queue, for N small text documents and one or two workers, next to the
//! raw rate of small write transactions on the same SQLite file.
//!
//! `cargo bench -p shelf-app --bench queue` (all sizes), or
//! `cargo bench -p shelf-app --bench queue -- 1000` for one size.

use shelf_engine::sql::SqlExt;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DbBackend, Statement};
use shelf_app::{ProcessingMode, Settings, Shelf};
use tokio_util::sync::CancellationToken;

const CONCURRENCY_PER_WORKER: usize = 4;

fn settings(dir: &std::path::Path) -> Settings {
    let vars: HashMap<String, String> = [
        ("SHELF_DATA_DIR", dir.display().to_string()),
        ("SHELF_LLM_PROVIDER", "mock".into()),
        ("SHELF_WORKER_POLL_MS", "20".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Settings::from_vars(&vars).expect("settings")
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<f64>().ok())
            })
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

async fn raw_write_rate(shelf: &Shelf, n: usize) -> f64 {
    let db = &shelf.db;
    db.execute_unprepared("CREATE TABLE IF NOT EXISTS bench_raw (id INTEGER PRIMARY KEY, v TEXT)")
        .await
        .expect("table");
    let started = Instant::now();
    for i in 0..n {
        let txn = shelf_app::engine::store::begin_write(db)
            .await
            .expect("begin");
        txn.execute_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "INSERT INTO bench_raw (v) VALUES (?)",
            [format!("row {i}").into()],
        ))
        .await
        .expect("insert");
        txn.commit().await.expect("commit");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

async fn scenario(documents: usize, workers: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let shelf = Shelf::open(settings(dir.path())).await.expect("open");
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).expect("mkdir");

    let started = Instant::now();
    let mut ids = Vec::with_capacity(documents);
    for i in 0..documents {
        let path = files.join(format!("doc-{i}.txt"));
        std::fs::write(
            &path,
            format!(
                "Document {i}\n\nA small text about topic {} with a few sentences. \
                 It exists to measure the queue. Number {i} keeps it unique.\n",
                i % 37
            ),
        )
        .expect("write");
        ids.push(shelf.ingest_path(&path).await.expect("ingest").document.id);
    }
    let ingest_rate = documents as f64 / started.elapsed().as_secs_f64();

    let started = Instant::now();
    for id in &ids {
        shelf
            .process(id, None, ProcessingMode::Queue)
            .await
            .expect("enqueue");
    }
    let enqueue_rate = documents as f64 / started.elapsed().as_secs_f64();

    let shutdown = CancellationToken::new();
    let mut handles = Vec::new();
    let started = Instant::now();
    for _ in 0..workers {
        // Each worker has its own connection pool, as a separate process would.
        let worker = Shelf::open(settings(dir.path()))
            .await
            .expect("open worker");
        let stop = shutdown.clone();
        handles.push(tokio::spawn(async move {
            worker.work(CONCURRENCY_PER_WORKER, stop).await
        }));
    }
    loop {
        let counts = shelf.engine.store().queue_counts().await.expect("counts");
        if counts.queued == 0 && counts.running == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let elapsed = started.elapsed();
    shutdown.cancel();
    for h in handles {
        let _ = h.await;
    }
    let (_, total) = shelf.list_runs(None, 1, 0).await.expect("runs");
    let succeeded = {
        let row = shelf
            .db
            .query_one_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT COUNT(*) AS n FROM runs WHERE status = 'succeeded'",
            ))
            .await
            .expect("count")
            .expect("row");
        row.try_get::<i64>("", "n").expect("n")
    };
    assert_eq!(succeeded as usize, documents, "every run succeeds");
    let raw = raw_write_rate(&shelf, 2000).await;
    let db_mib = std::fs::metadata(&shelf.settings.database_path)
        .map(|m| m.len() as f64 / 1048576.0)
        .unwrap_or(0.0);
    println!(
        "| {documents:>6} | {workers} x {CONCURRENCY_PER_WORKER} | {:>8.1} | {:>7.2} | {:>9.0} | {:>9.0} | {:>9.0} | {:>7.1} | {:>7.1} |",
        documents as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64(),
        ingest_rate,
        enqueue_rate,
        raw,
        db_mib,
        peak_rss_mib(),
    );
    assert_eq!(total as usize, documents);
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 10_000]
    } else {
        sizes
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "| documents | workers x concurrency | runs/s | seconds | ingest/s | enqueue/s | raw write txn/s | db MiB | peak RSS MiB |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for documents in sizes {
        for workers in [1, 2] {
            runtime.block_on(scenario(documents, workers));
        }
    }
}
