//! Gives every indexed document of a Shelf data directory passages with random normalised
//! vectors, stored as the `embed` stage stores real ones (`put_passages_statements`), so the
//! latency of semantic and hybrid search can be measured at 100,000 passages without embedding
//! them with the real model (about 6 passages/s on two cores: four to five hours). Run it after
//! `search_corpus` on the same directory; keyword latency is then measured on the same file.
//!
//! ```sh
//! cargo run --release -p shelf-documents --example search_corpus -- /tmp/s100k 100000
//! cargo run --release -p shelf-documents --example search_vectors -- /tmp/s100k "$MODEL_ID"
//! ```
//!
//! Arguments: the data directory, the model identity the API's embedder reports (the `model`
//! column of a database the real `embed` stage wrote: vectors of another identity are stale and
//! ignored), passages per document (1) and dimensions (384). Each passage's text is a slice of
//! the document's indexed text (up to 200 words), so snippets are of realistic size. A query's
//! real vector against random document vectors ranks nothing meaningfully: this is for
//! latency only.

use std::path::PathBuf;
use std::time::Instant;

use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ConnectionTrait, SqliteTransactionMode, SqlxSqliteConnector, Statement, TransactionOptions,
    TransactionTrait,
};
use shelf_db::sql::SqlExt;
use shelf_documents::search::vectors::normalised;
use shelf_documents::{Passage, put_passages_statements};

const USAGE: &str = "usage: search_vectors DATA_DIR MODEL_IDENTITY [PER_DOCUMENT=1] [DIMS=384]";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let data_dir = PathBuf::from(args.first().ok_or(USAGE)?);
    let model = args.get(1).ok_or(USAGE)?.clone();
    let per_document: usize = args.get(2).map_or(Ok(1), |s| s.parse())?;
    let dims: usize = args.get(3).map_or(Ok(384), |s| s.parse())?;

    let options = SqliteConnectOptions::new()
        .filename(data_dir.join("shelf.sqlite"))
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true);
    let pool = sea_orm::sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?;
    let db = SqlxSqliteConnector::from_sqlx_sqlite_pool(pool);
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT d.id AS id, t.body AS body FROM documents d \
             JOIN search_documents s ON s.pk = d.pk \
             JOIN document_texts t ON t.id = s.cleaned_text_id ORDER BY d.pk",
        ))
        .await?;
    let mut rng = fastrand::Rng::with_seed(100_000);
    let started = Instant::now();
    let mut written = 0usize;
    for (n, chunk) in rows.chunks(1000).enumerate() {
        let txn = db
            .begin_with_options(TransactionOptions {
                sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
                ..Default::default()
            })
            .await?;
        for row in chunk {
            let id: String = row.try_get("", "id")?;
            let body: String = row.try_get("", "body")?;
            let words: Vec<&str> = body.split_whitespace().collect();
            let passages: Vec<(Passage, Vec<f32>)> = (0..per_document)
                .map(|p| {
                    let from = (p * 150).min(words.len());
                    let text = words[from..(from + 200).min(words.len())].join(" ");
                    let chars = text.chars().count() as u64;
                    let vector = normalised((0..dims).map(|_| rng.f32() * 2.0 - 1.0).collect());
                    (
                        Passage {
                            text,
                            char_start: 0,
                            char_end: chars,
                            start_seconds: None,
                        },
                        vector,
                    )
                })
                .collect();
            txn.execute_all_sql(put_passages_statements(
                &id,
                "run_bench_vectors",
                &model,
                &passages,
            )?)
            .await?;
            written += passages.len();
        }
        txn.commit().await?;
        if (n + 1) % 10 == 0 {
            eprintln!(
                "{written} passages, {:.1}s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    eprintln!(
        "wrote {written} passages for {} documents in {:.1}s",
        rows.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
