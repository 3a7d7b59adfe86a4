//! Measures the dense half of search: the exact scan over an in-memory matrix of random
//! normalised vectors (p50/p99 of one query, the matrix's memory), then the same through a real
//! SQLite file (a semantic `search_ids`: the table's signature, the scan, the page), the cold
//! load of the matrix and its incremental refresh after one document is re-embedded.
//!
//! ```sh
//! cargo run --release -p shelf-documents --example vector_scan -- 1400 100000
//! ```
//!
//! Arguments: passage counts to measure (default 1400 and 100000); 384 dimensions, ten
//! passages a document. Figures are in docs/search.md ("Modes").

use std::time::{Duration, Instant};

use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectionTrait, SqlxSqliteConnector, TransactionTrait};
use shelf_db::sql::SqlExt;
use shelf_documents::search::vectors::{VectorMatrix, current_matrix, normalised};
use shelf_documents::{
    Passage, QueryVector, SearchMode, SearchRequest, put_passages_statements, search_ids,
};
use shelf_migrations::{Migrator, MigratorTrait};

const DIMS: usize = 384;
const PER_DOCUMENT: usize = 10;
const QUERIES: usize = 200;
const MODEL: &str = "bench@1";

fn random_unit(rng: &mut fastrand::Rng) -> Vec<f32> {
    normalised((0..DIMS).map(|_| rng.f32() * 2.0 - 1.0).collect())
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1000.0
    };
    (at(0.50), at(0.99))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1400, 100_000]
    } else {
        sizes
    };
    for passages in sizes {
        let mut rng = fastrand::Rng::with_seed(27);
        let mut matrix = VectorMatrix::new(DIMS);
        let rows: Vec<(String, Vec<f32>)> = (0..passages)
            .map(|i| {
                (
                    format!("doc_{:08}", i / PER_DOCUMENT),
                    random_unit(&mut rng),
                )
            })
            .collect();
        for (i, (doc, v)) in rows.iter().enumerate() {
            matrix.push(doc, i as i64 + 1, v);
        }
        matrix.shrink_to_fit();
        let queries: Vec<Vec<f32>> = (0..QUERIES).map(|_| random_unit(&mut rng)).collect();
        let mut samples = Vec::with_capacity(QUERIES);
        for q in &queries {
            let started = Instant::now();
            let top = matrix.top_documents(q, 1000, None, None)?;
            samples.push(started.elapsed());
            std::hint::black_box(top);
        }
        let (p50, p99) = percentiles(samples);
        println!(
            "scan   {passages:>7} passages x {DIMS}: p50 {p50:.2} ms, p99 {p99:.2} ms, matrix {:.1} MiB",
            matrix.memory_bytes() as f64 / 1048576.0
        );

        // The same through a SQLite file.
        let dir = tempfile::tempdir()?;
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("shelf.sqlite"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal);
        let pool = sea_orm::sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        let db = SqlxSqliteConnector::from_sqlx_sqlite_pool(pool);
        Migrator::up(&db, None).await?;
        let started = Instant::now();
        let txn = db.begin().await?;
        for (d, chunk) in rows.chunks(PER_DOCUMENT).enumerate() {
            let id = &chunk[0].0;
            txn.execute_unprepared(&format!(
                "INSERT INTO documents (id, filename, extension, sha256, byte_size, \
                 storage_path, source_kind, status, created_at, updated_at) VALUES \
                 ('{id}', 'f{d}.txt', 'txt', '{id}', 1, 'p', 'upload', 'ready', 't', 't')"
            ))
            .await?;
            let passages: Vec<(Passage, Vec<f32>)> = chunk
                .iter()
                .enumerate()
                .map(|(p, (_, v))| {
                    (
                        Passage {
                            text: format!("passage {p} of document {d}"),
                            char_start: 0,
                            char_end: 1,
                            start_seconds: None,
                        },
                        v.clone(),
                    )
                })
                .collect();
            txn.execute_all_sql(put_passages_statements(id, "run", MODEL, &passages)?)
                .await?;
        }
        txn.commit().await?;
        let written = started.elapsed();
        let started = Instant::now();
        let loaded = current_matrix(&db, MODEL).await?;
        let cold = started.elapsed();
        assert_eq!(loaded.len(), passages);
        // Held, it would make the refresh below copy the matrix (copy-on-write).
        drop(loaded);
        let request = |q: &Vec<f32>| SearchRequest {
            query: "bench".into(),
            mode: SearchMode::Semantic,
            limit: Some(10),
            query_vector: Some(QueryVector {
                model: MODEL.into(),
                values: q.clone(),
            }),
            ..Default::default()
        };
        let mut samples = Vec::with_capacity(QUERIES);
        for q in &queries {
            let started = Instant::now();
            std::hint::black_box(search_ids(&db, &request(q)).await?);
            samples.push(started.elapsed());
        }
        let (p50, p99) = percentiles(samples);
        // One document re-embedded (as many rows, new ids): the next search refreshes.
        let chunk = &rows[..PER_DOCUMENT];
        let again: Vec<(Passage, Vec<f32>)> = chunk
            .iter()
            .map(|(_, v)| {
                (
                    Passage {
                        text: "again".into(),
                        char_start: 0,
                        char_end: 1,
                        start_seconds: None,
                    },
                    v.clone(),
                )
            })
            .collect();
        let txn = db.begin().await?;
        txn.execute_all_sql(put_passages_statements(&chunk[0].0, "run2", MODEL, &again)?)
            .await?;
        txn.commit().await?;
        let started = Instant::now();
        std::hint::black_box(search_ids(&db, &request(&queries[0])).await?);
        let refreshed = started.elapsed();
        println!(
            "sqlite {passages:>7} passages: semantic search p50 {p50:.2} ms, p99 {p99:.2} ms; \
             cold load {:.0} ms; search after one document re-embedded {:.1} ms \
             (written in {:.1} s)",
            cold.as_secs_f64() * 1000.0,
            refreshed.as_secs_f64() * 1000.0,
            written.as_secs_f64()
        );
    }
    Ok(())
}
