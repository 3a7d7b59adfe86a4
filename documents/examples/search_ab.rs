//! Search latency of this build's search code on several database files, alternated, so that
//! only the files differ (their layout, e.g. before and after a migration): the 225 Cranfield
//! questions verbatim and cut to their first two long words, each in both scopes, `limit` 10
//! with snippets, one read-only connection per file, one round of warm-up then three measured.
//!
//! ```sh
//! cargo run --release -p shelf-documents --example search_ab -- A/shelf.sqlite B/shelf.sqlite
//! ```
//!
//! The files must hold the search tables this build reads (any schema since the first migration
//! does: the statements are the same). A `postgres://` URL in place of a file compares
//! PostgreSQL databases the same way. Prints p50/p90/p99 and the mean per file.

use std::time::Instant;

use sea_orm::{ConnectOptions, Database};
use shelf_documents::{SearchRequest, SearchScope, search_results};

const QUERIES: &str = "/work/shared/corpus/ir/cranfield/queries.jsonl";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        return Err("usage: search_ab FILE.sqlite [FILE.sqlite ...]".into());
    }
    let path = std::env::var("CRANFIELD_QUERIES").unwrap_or_else(|_| QUERIES.to_string());
    let mut queries = Vec::new();
    for line in std::fs::read_to_string(path)?.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let question = v["text"].as_str().unwrap_or_default().to_string();
        let keywords: Vec<&str> = question
            .split_whitespace()
            .filter(|w| w.len() > 3 && w.chars().all(char::is_alphabetic))
            .take(2)
            .collect();
        queries.push(keywords.join(" "));
        queries.push(question);
    }
    let mut dbs = Vec::new();
    for file in &files {
        let url = if file.starts_with("postgres://") {
            file.clone()
        } else {
            format!("sqlite://{file}?mode=ro")
        };
        let mut options = ConnectOptions::new(url);
        options.max_connections(1).sqlx_logging(false);
        dbs.push(Database::connect(options).await?);
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); dbs.len()];
    for round in 0..4 {
        for (db, times) in dbs.iter().zip(times.iter_mut()) {
            for query in &queries {
                for scope in [SearchScope::Cleaned, SearchScope::Raw] {
                    let request = SearchRequest {
                        query: query.clone(),
                        limit: Some(10),
                        scope,
                        ..Default::default()
                    };
                    let started = Instant::now();
                    let answer = search_results(db, &request).await;
                    let ms = started.elapsed().as_secs_f64() * 1000.0;
                    if round > 0 {
                        times.push(ms);
                    } else if let Err(e) = answer {
                        eprintln!("{query:?}: {e}");
                    }
                }
            }
        }
    }
    for (file, times) in files.iter().zip(times.iter_mut()) {
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        println!(
            "{file}: {} searches, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, mean {:.2} ms",
            times.len(),
            at(0.5),
            at(0.9),
            at(0.99),
            mean
        );
    }
    Ok(())
}
