//! Loads a search benchmark corpus straight into a Shelf data directory through the
//! documents crate's own write path (`DocumentStore::ingest_upload`, then `index_document`
//! with the document's text as both the cleaned and the raw body), without running
//! pipelines: 100,000 documents through the API and the worker would take most of an hour.
//!
//! ```sh
//! cargo run --release -p shelf-documents --example search_corpus -- /tmp/s100k 100000
//! ```
//!
//! Documents: the 1,400 Cranfield records (title, blank line, abstract; named
//! `cranfield-<id>.txt`, as `bench/search.py` and `peer_bench.py` name them) and, beyond
//! those, synthetic documents made by recombining Cranfield sentences (a seeded choice of a
//! title and 4–12 sentences from random abstracts), so term statistics stay those of real
//! aerodynamics abstracts. Pending migrations are applied first. With `SHELF_DATABASE_URL`
//! set, the documents go to that PostgreSQL database.

use std::path::PathBuf;
use std::time::Instant;

use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ConnectionTrait, SqliteTransactionMode, SqlxSqliteConnector, TransactionOptions,
    TransactionTrait,
};
use shelf_documents::{DocumentStore, index_document_in, sha256_hex};
use shelf_migrations::{Migrator, MigratorTrait};

const CRANFIELD: &str = "/work/shared/corpus/ir/cranfield/corpus.jsonl";

struct Record {
    id: String,
    title: String,
    text: String,
}

fn cranfield() -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    let path = std::env::var("CRANFIELD_CORPUS").unwrap_or_else(|_| CRANFIELD.to_string());
    let mut out = Vec::new();
    for line in std::fs::read_to_string(path)?.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        out.push(Record {
            id: field("_id"),
            title: field("title"),
            text: field("text"),
        });
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let data_dir = PathBuf::from(args.next().ok_or("usage: search_corpus DATA_DIR N")?);
    let n: usize = args
        .next()
        .ok_or("usage: search_corpus DATA_DIR N")?
        .parse()?;
    // SHELF_DATABASE_URL loads a PostgreSQL database instead (the data directory still holds
    // the uploaded files).
    let db = match std::env::var("SHELF_DATABASE_URL") {
        Ok(url) => shelf_db::connect_target(&shelf_db::DatabaseTarget::Postgres(url), 2).await?,
        Err(_) => {
            let options = SqliteConnectOptions::new()
                .filename(data_dir.join("shelf.sqlite"))
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                .create_if_missing(true);
            let pool = sea_orm::sqlx::sqlite::SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await?;
            SqlxSqliteConnector::from_sqlx_sqlite_pool(pool)
        }
    };
    Migrator::up(&db, None).await?;
    let store = DocumentStore::new(db.clone(), data_dir.clone());

    let records = cranfield()?;
    let sentences: Vec<&str> = records
        .iter()
        .flat_map(|r| r.text.split(" . "))
        .filter(|s| s.split_whitespace().count() >= 4)
        .collect();
    let mut rng = fastrand::Rng::with_seed(20261122);
    let started = Instant::now();
    let mut batch: Vec<(String, String)> = Vec::new();
    for i in 0..n {
        let (name, body) = match records.get(i) {
            Some(r) => (
                format!("cranfield-{}.txt", r.id),
                format!("{}\n\n{}\n", r.title, r.text),
            ),
            None => {
                let title = &records[rng.usize(..records.len())].title;
                let count = rng.usize(4..=12);
                let text: Vec<&str> = (0..count)
                    .map(|_| sentences[rng.usize(..sentences.len())])
                    .collect();
                (
                    format!("synthetic-{i:06}.txt"),
                    format!("{title}\n\n{} .\n", text.join(" . ")),
                )
            }
        };
        let staged = store.new_staging_path().await?;
        tokio::fs::write(&staged, body.as_bytes()).await?;
        let ingested = store
            .ingest_upload(
                &staged,
                &name,
                &sha256_hex(body.as_bytes()),
                body.len() as u64,
            )
            .await?;
        if !ingested.duplicate {
            batch.push((ingested.document.id, body));
        }
        if batch.len() >= 1000 || i + 1 == n {
            let txn = db
                .begin_with_options(TransactionOptions {
                    sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
                    ..Default::default()
                })
                .await?;
            for (id, body) in batch.drain(..) {
                index_document_in(&txn, &id, "run_bench_corpus", &body, &body).await?;
            }
            txn.commit().await?;
            eprintln!(
                "{} documents, {:.1}s",
                i + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    eprintln!(
        "loaded {n} documents in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    if db.get_database_backend() == sea_orm::DbBackend::Postgres {
        // Fresh statistics for the planner, as autovacuum would give them a little later.
        db.execute_unprepared("ANALYZE").await?;
    }
    Ok(())
}
