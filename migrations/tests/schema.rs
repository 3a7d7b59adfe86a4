//! The schema history on both backends: up, down to nothing and up again on a real SQLite file
//! and on a real PostgreSQL database from the test cluster, and the PostgreSQL schema compared
//! with SQLite's column by column, index by index and key by key.

#[path = "../../tests/support/pg_cluster.rs"]
mod pg_cluster;

use std::collections::{BTreeMap, BTreeSet};

use sea_orm_migration::sea_orm::{
    ConnectionTrait, Database, DatabaseConnection, DbBackend, QueryResult, Statement, Value,
};
use shelf_migrations::{Migrator, MigratorTrait, known_migrations};
use tempfile::TempDir;

use pg_cluster::PgCluster;
use shelf_migrations::TABLES;

const SQLITE_TABLES: &str = "SELECT name FROM sqlite_master WHERE type = 'table' \
     AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
     AND name NOT LIKE 'search\\_cleaned\\_%' ESCAPE '\\' \
     AND name NOT LIKE 'search\\_raw\\_%' ESCAPE '\\' ORDER BY name";

const POSTGRES_TABLES: &str = "SELECT table_name::text AS name FROM information_schema.tables \
     WHERE table_schema = 'public' ORDER BY name";

async fn sqlite() -> (TempDir, DatabaseConnection) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("shelf.sqlite").display()
    );
    let db = Database::connect(&url).await.expect("connect to SQLite");
    db.execute_unprepared("PRAGMA foreign_keys = ON")
        .await
        .expect("foreign keys");
    (dir, db)
}

async fn postgres() -> Option<DatabaseConnection> {
    let Some(cluster) = PgCluster::shared() else {
        eprintln!("skipped: no PostgreSQL");
        return None;
    };
    let url = cluster.create_database("migrations");
    Some(
        Database::connect(&url)
            .await
            .expect("connect to PostgreSQL"),
    )
}

async fn rows(db: &DatabaseConnection, sql: &str, values: Vec<Value>) -> Vec<QueryResult> {
    let backend = db.get_database_backend();
    db.query_all_raw(Statement::from_sql_and_values(backend, sql, values))
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn text(row: &QueryResult, column: &str) -> String {
    row.try_get::<String>("", column)
        .unwrap_or_else(|e| panic!("{column}: {e}"))
}

fn int(row: &QueryResult, column: &str) -> i64 {
    row.try_get::<i64>("", column)
        .unwrap_or_else(|e| panic!("{column}: {e}"))
}

async fn names(db: &DatabaseConnection, sql: &str) -> Vec<String> {
    rows(db, sql, vec![])
        .await
        .iter()
        .map(|row| text(row, "name"))
        .collect()
}

/// Up, down to zero, up again; after each step the tables and the recorded migrations are those
/// expected, so every DOWN undoes its UP in full and the names match `known_migrations`.
async fn up_down_up(db: &DatabaseConnection, tables: &str) {
    let recorded = "SELECT version AS name FROM seaql_migrations ORDER BY version";
    let without_migrator = |mut names: Vec<String>| {
        names.retain(|n| n != "seaql_migrations");
        names
    };
    for round in 0..2 {
        Migrator::up(db, None).await.expect("up");
        assert_eq!(
            without_migrator(names(db, tables).await),
            TABLES,
            "tables after up (round {round})"
        );
        assert_eq!(names(db, recorded).await, known_migrations());

        if round == 0 {
            Migrator::down(db, None).await.expect("down");
            assert_eq!(
                without_migrator(names(db, tables).await),
                Vec::<String>::new(),
                "tables after down"
            );
            assert_eq!(names(db, recorded).await, Vec::<String>::new());
        }
    }
}

#[tokio::test]
async fn sqlite_migrates_up_down_and_up_again() {
    let (_dir, db) = sqlite().await;
    up_down_up(&db, SQLITE_TABLES).await;
}

#[tokio::test]
async fn postgres_migrates_up_down_and_up_again() {
    let Some(db) = postgres().await else { return };
    up_down_up(&db, POSTGRES_TABLES).await;
}

/// One column as both backends can describe it.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone)]
struct Column {
    table: String,
    name: String,
    /// PostgreSQL's name for the type.
    ty: String,
    /// `None` where the two cannot be compared: FTS5 columns have no constraints.
    not_null: Option<bool>,
}

fn is_search(table: &str) -> bool {
    table == "search_cleaned" || table == "search_raw"
}

async fn sqlite_columns(db: &DatabaseConnection) -> BTreeSet<Column> {
    let sql = format!(
        "SELECT m.name AS tbl, p.name AS col, p.type AS ty, p.\"notnull\" AS nn, p.pk AS pk \
         FROM ({SQLITE_TABLES}) m, pragma_table_info(m.name) p"
    );
    rows(db, &sql, vec![])
        .await
        .iter()
        .filter(|row| text(row, "tbl") != "seaql_migrations")
        .map(|row| {
            let table = text(row, "tbl");
            let ty = match text(row, "ty").as_str() {
                "INTEGER" => "bigint".to_string(),
                "REAL" => "double precision".to_string(),
                "BLOB" => "bytea".to_string(),
                // FTS5 columns are untyped text.
                "TEXT" | "" => "text".to_string(),
                other => panic!("a SQLite type this test does not map: {other}"),
            };
            // A primary key column cannot hold NULL in practice (an INTEGER PRIMARY KEY is the
            // rowid), whatever the pragma says.
            let not_null = int(row, "nn") != 0 || int(row, "pk") != 0;
            Column {
                not_null: (!is_search(&table)).then_some(not_null),
                table,
                name: text(row, "col"),
                ty,
            }
        })
        .collect()
}

async fn postgres_columns(db: &DatabaseConnection) -> BTreeSet<Column> {
    let sql = "SELECT table_name::text AS tbl, column_name::text AS col, data_type::text AS ty, \
         is_nullable::text AS nullable FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name <> 'seaql_migrations'";
    rows(db, sql, vec![])
        .await
        .iter()
        .filter_map(|row| {
            let table = text(row, "tbl");
            let name = text(row, "col");
            // The columns that stand in for SQLite's hidden rowid, and the search vectors (kept
            // with the index rows, shown by the search views).
            let extra = match table.as_str() {
                "runs" | "document_texts" => name == "rowid",
                "search_cleaned" | "search_raw" => name == "rowid" || name == "tsv",
                "search_documents" => name == "cleaned_tsv" || name == "raw_tsv",
                _ => false,
            };
            (!extra).then(|| Column {
                not_null: (!is_search(&table)).then(|| text(row, "nullable") == "NO"),
                table,
                name,
                ty: text(row, "ty"),
            })
        })
        .collect()
}

/// (table, column, referenced table, referenced column, on delete) for every foreign key.
type ForeignKey = (String, String, String, String, String);

async fn sqlite_foreign_keys(db: &DatabaseConnection) -> BTreeSet<ForeignKey> {
    let sql = format!(
        "SELECT m.name AS tbl, f.\"from\" AS col, f.\"table\" AS ref, f.\"to\" AS ref_col, \
         f.on_delete AS on_delete FROM ({SQLITE_TABLES}) m, pragma_foreign_key_list(m.name) f"
    );
    rows(db, &sql, vec![])
        .await
        .iter()
        .map(|row| {
            (
                text(row, "tbl"),
                text(row, "col"),
                text(row, "ref"),
                text(row, "ref_col"),
                text(row, "on_delete"),
            )
        })
        .collect()
}

async fn postgres_foreign_keys(db: &DatabaseConnection) -> BTreeSet<ForeignKey> {
    let sql = "SELECT t.relname::text AS tbl, a.attname::text AS col, r.relname::text AS ref, \
         ra.attname::text AS ref_col, \
         CASE c.confdeltype WHEN 'c' THEN 'CASCADE' ELSE c.confdeltype::text END AS on_delete \
         FROM pg_constraint c \
         JOIN pg_class t ON t.oid = c.conrelid \
         JOIN pg_class r ON r.oid = c.confrelid \
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] \
         JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = c.confkey[1] \
         WHERE c.contype = 'f' AND cardinality(c.conkey) = 1";
    rows(db, sql, vec![])
        .await
        .iter()
        .map(|row| {
            (
                text(row, "tbl"),
                text(row, "col"),
                text(row, "ref"),
                text(row, "ref_col"),
                text(row, "on_delete"),
            )
        })
        .collect()
}

/// Named indexes (not those that keys make) with their table.
async fn sqlite_indexes(db: &DatabaseConnection) -> BTreeMap<String, String> {
    let sql = "SELECT name, tbl_name AS tbl FROM sqlite_master \
         WHERE type = 'index' AND sql IS NOT NULL";
    rows(db, sql, vec![])
        .await
        .iter()
        .map(|row| (text(row, "name"), text(row, "tbl")))
        .collect()
}

async fn postgres_indexes(db: &DatabaseConnection) -> BTreeMap<String, String> {
    // Keys' indexes are named `*_pkey` and `*_key`; the GIN indexes do FTS5's work.
    let sql = "SELECT indexname::text AS name, tablename::text AS tbl FROM pg_indexes \
         WHERE schemaname = 'public' AND indexname NOT LIKE '%\\_pkey' \
         AND indexname NOT LIKE '%\\_key' AND indexname NOT LIKE 'search\\_%\\_tsv'";
    rows(db, sql, vec![])
        .await
        .iter()
        .map(|row| (text(row, "name"), text(row, "tbl")))
        .collect()
}

#[tokio::test]
async fn postgres_schema_matches_sqlite() {
    let Some(pg) = postgres().await else { return };
    let (_dir, lite) = sqlite().await;
    Migrator::up(&pg, None).await.expect("up on PostgreSQL");
    Migrator::up(&lite, None).await.expect("up on SQLite");

    let (expected, actual) = (sqlite_columns(&lite).await, postgres_columns(&pg).await);
    assert!(expected.len() > 50, "too few columns seen: {expected:?}");
    let missing: Vec<_> = expected.difference(&actual).collect();
    let unexpected: Vec<_> = actual.difference(&expected).collect();
    assert!(
        missing.is_empty() && unexpected.is_empty(),
        "columns differ\n  SQLite only: {missing:#?}\n  PostgreSQL only: {unexpected:#?}"
    );

    let foreign_keys = sqlite_foreign_keys(&lite).await;
    assert!(!foreign_keys.is_empty());
    assert_eq!(postgres_foreign_keys(&pg).await, foreign_keys);

    let indexes = sqlite_indexes(&lite).await;
    assert!(indexes.contains_key("runs_due"));
    assert_eq!(postgres_indexes(&pg).await, indexes);
}

/// The statements the code sends to SQLite that this schema is shaped to keep: the search
/// tables' `rowid` (views over `search_documents` here), and `rowid` as the insertion-order
/// tie-break of `runs` and `document_texts`.
#[tokio::test]
async fn postgres_accepts_the_rowid_statements() {
    let Some(db) = postgres().await else { return };
    Migrator::up(&db, None).await.expect("up");
    let exec = |sql: &'static str, values: Vec<Value>| {
        let db = &db;
        async move {
            db.execute_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                sql,
                values,
            ))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
        }
    };

    exec(
        "INSERT INTO documents (id, filename, extension, sha256, byte_size, storage_path, \
         source_kind, status, created_at, updated_at) \
         VALUES ('doc_a', 'a.txt', 'txt', 'x', 1, 'p', 'upload', 'ready', 't', 't')",
        vec![],
    )
    .await;
    let pk = int(
        &rows(&db, "SELECT pk FROM documents WHERE id = 'doc_a'", vec![]).await[0],
        "pk",
    );

    // The index names stored texts; the views show their bodies and the vectors made of them.
    for (id, kind, body) in [
        ("text_cleaned", "cleaned", "Running shelves hold books"),
        ("text_raw", "raw", "running shelves"),
    ] {
        exec(
            "INSERT INTO document_texts (id, document_id, run_id, kind, body, chars, created_at) \
             VALUES ($1, 'doc_a', 'run_1', $2, $3, 1, 't')",
            vec![id.into(), kind.into(), body.into()],
        )
        .await;
    }
    exec(
        "INSERT INTO search_documents (pk, run_id, cleaned_text_id, raw_text_id) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (pk) DO UPDATE SET run_id = excluded.run_id, \
         cleaned_text_id = excluded.cleaned_text_id, raw_text_id = excluded.raw_text_id",
        vec![
            pk.into(),
            "run_1".into(),
            "text_cleaned".into(),
            "text_raw".into(),
        ],
    )
    .await;
    let hits = rows(
        &db,
        "SELECT rowid, body, run_id FROM search_cleaned \
         WHERE tsv @@ plainto_tsquery('english', $1)",
        vec!["book run".into()],
    )
    .await;
    assert_eq!(
        hits.len(),
        1,
        "stemmed words match through the vectors made of the text"
    );
    assert_eq!(int(&hits[0], "rowid"), pk);
    assert_eq!(text(&hits[0], "body"), "Running shelves hold books");
    // A text rewritten in place is indexed again; one that goes takes its document out.
    exec(
        "UPDATE document_texts SET body = 'shelves of cows' WHERE id = 'text_cleaned'",
        vec![],
    )
    .await;
    let cows = rows(
        &db,
        "SELECT rowid FROM search_cleaned WHERE tsv @@ plainto_tsquery('english', $1)",
        vec!["cow".into()],
    )
    .await;
    assert_eq!(cows.len(), 1, "the vector follows the rewritten text");
    exec("DELETE FROM document_texts WHERE id = 'text_raw'", vec![]).await;
    let left = rows(
        &db,
        "SELECT (SELECT count(*) FROM search_cleaned) + (SELECT count(*) FROM search_raw) \
         + (SELECT count(*) FROM search_documents) AS n",
        vec![],
    )
    .await;
    assert_eq!(int(&left[0], "n"), 0);
    exec("DELETE FROM document_texts", vec![]).await;

    // Two texts with the same timestamp: the later insert is the latest, as with SQLite's rowid.
    for id in ["text_first", "text_second"] {
        exec(
            "INSERT INTO document_texts (id, document_id, run_id, kind, body, chars, created_at) \
             VALUES ($1, 'doc_a', 'run_1', 'cleaned', 'b', 1, 'same time')",
            vec![id.into()],
        )
        .await;
    }
    let latest = rows(
        &db,
        "SELECT id AS name FROM document_texts WHERE document_id = $1 AND kind = $2 \
         ORDER BY created_at DESC, rowid DESC LIMIT 1",
        vec!["doc_a".into(), "cleaned".into()],
    )
    .await;
    assert_eq!(text(&latest[0], "name"), "text_second");

    // The texts go with their document, and the queue's lease columns hold 64-bit values.
    exec("DELETE FROM documents WHERE id = 'doc_a'", vec![]).await;
    let texts = rows(&db, "SELECT count(*) AS n FROM document_texts", vec![]).await;
    assert_eq!(int(&texts[0], "n"), 0);
    exec(
        "INSERT INTO runs (id, subject, pipeline, pipeline_yaml, pipeline_sha256, status, \
         due_at, enqueued_at, created_at, lease_token) \
         VALUES ('run_1', 'doc_a', 'default', 'y', 's', 'queued', $1, $1, 't', $1)",
        vec![i64::MAX.into()],
    )
    .await;
    let due = rows(
        &db,
        "SELECT due_at, rowid FROM runs WHERE status IN ('queued', 'running') ORDER BY due_at",
        vec![],
    )
    .await;
    assert_eq!(int(&due[0], "due_at"), i64::MAX);
    assert!(int(&due[0], "rowid") > 0);
}
