//! The data the web pages read, on a real SQLite file and on the test process's PostgreSQL
//! cluster (skipped with a message when PostgreSQL is absent): sign-in sessions (tokens stored
//! as digests, server-side expiry, sign-out, malformed cookies, pruning) and the operations
//! page's failed runs counted by code. Every time is given, never read from the wall clock.

#[path = "../../tests/support/pg_cluster.rs"]
mod pg_cluster;

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use sea_orm::{DbBackend, Statement};
use sha2::{Digest, Sha256};
use shelf_app::failures::FailureCount;
use shelf_app::settings::Scope;
use shelf_app::{ProcessingMode, Settings, Shelf};
use shelf_db::sql::SqlExt;
use tempfile::TempDir;

/// A Shelf on a new data directory with `extra` settings: its SQLite file, or a fresh
/// PostgreSQL database.
async fn shelf(postgres: Option<String>, extra: &[(&str, &str)]) -> (TempDir, Shelf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut vars = HashMap::from([
        (
            "SHELF_DATA_DIR".to_string(),
            dir.path().join("data").display().to_string(),
        ),
        ("SHELF_LLM_PROVIDER".to_string(), "mock".to_string()),
    ]);
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    if let Some(url) = postgres {
        vars.insert("SHELF_DATABASE_URL".to_string(), url);
    }
    let settings = Settings::from_vars(&vars).expect("settings");
    (dir, Shelf::open(settings).await.expect("open"))
}

fn postgres_url(prefix: &str) -> Option<String> {
    match pg_cluster::PgCluster::shared() {
        Some(cluster) => Some(cluster.create_database(prefix)),
        None => {
            eprintln!("skipped on PostgreSQL: no PostgreSQL binaries");
            None
        }
    }
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("time")
        .with_timezone(&Utc)
}

async fn count(shelf: &Shelf, sql: &str, values: Vec<sea_orm::Value>) -> i64 {
    shelf
        .db
        .query_one_sql(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            sql,
            values,
        ))
        .await
        .expect("count")
        .expect("a row")
        .try_get::<i64>("", "n")
        .expect("n")
}

async fn sessions_live_until_their_server_side_expiry(postgres: Option<String>) {
    let (_dir, shelf) = shelf(postgres, &[("SHELF_API_SESSION_HOURS", "2")]).await;
    let t0 = at("2026-11-27T10:00:00Z");
    let token = shelf
        .create_web_session(Scope::Write, "tag-w", t0)
        .await
        .expect("create");
    assert_eq!(token.len(), 64);
    assert!(
        token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "{token}"
    );
    let other = shelf
        .create_web_session(Scope::Read, "tag-r", t0)
        .await
        .expect("create");
    assert_ne!(token, other);

    // Only the digest is stored: the token itself is in no row.
    let digest = hex::encode(Sha256::digest(token.as_bytes()));
    let by = |column: &str, value: &str| {
        let sql = format!("SELECT count(*) AS n FROM web_sessions WHERE {column} = ?");
        let value = value.to_string();
        let shelf = shelf.clone();
        async move { count(&shelf, &sql, vec![value.into()]).await }
    };
    assert_eq!(by("token_sha256", &digest).await, 1);
    assert_eq!(by("token_sha256", &token).await, 0);

    let expires = at("2026-11-27T12:00:00Z");
    let session = shelf
        .web_session(&token, t0)
        .await
        .expect("lookup")
        .expect("live");
    assert_eq!(session.scope, Scope::Write);
    assert_eq!(session.credential_tag, "tag-w");
    assert_eq!(session.expires_at, expires);
    let read = shelf
        .web_session(&other, t0)
        .await
        .expect("lookup")
        .expect("live");
    assert_eq!(
        (read.scope, read.credential_tag.as_str()),
        (Scope::Read, "tag-r")
    );

    // Live up to the last millisecond before its expiry, gone at it.
    assert!(
        shelf
            .web_session(&token, expires - Duration::milliseconds(1))
            .await
            .expect("lookup")
            .is_some()
    );
    assert_eq!(
        shelf.web_session(&token, expires).await.expect("lookup"),
        None
    );

    // Signing out ends one session, not the other; ending it again is no error.
    shelf.end_web_session(&token).await.expect("end");
    assert_eq!(shelf.web_session(&token, t0).await.expect("lookup"), None);
    shelf.end_web_session(&token).await.expect("end again");
    assert!(
        shelf
            .web_session(&other, t0)
            .await
            .expect("lookup")
            .is_some()
    );
}

async fn malformed_tokens_are_no_session(postgres: Option<String>) {
    let (_dir, shelf) = shelf(postgres, &[]).await;
    let t0 = at("2026-11-27T10:00:00Z");
    let token = shelf
        .create_web_session(Scope::Write, "tag", t0)
        .await
        .expect("create");
    let digest = hex::encode(Sha256::digest(token.as_bytes()));
    for bad in [
        String::new(),
        "abc".to_string(),
        token[..63].to_string(),
        format!("{token}0"),
        token.to_uppercase(),
        format!("{}g", &token[..63]),
        format!("{}é", &token[..62]),
        "' OR 1=1 --".to_string(),
        // The stored digest is not a token either: it names a session only once hashed.
        digest,
    ] {
        assert_eq!(
            shelf.web_session(&bad, t0).await.expect("no query error"),
            None,
            "{bad:?}"
        );
        shelf.end_web_session(&bad).await.expect("end is a no-op");
    }
    assert!(
        shelf
            .web_session(&token, t0)
            .await
            .expect("lookup")
            .is_some()
    );
}

async fn expired_sessions_are_pruned_on_create(postgres: Option<String>) {
    let (_dir, shelf) = shelf(postgres, &[("SHELF_API_SESSION_HOURS", "1")]).await;
    let t0 = at("2026-11-27T10:00:00Z");
    for _ in 0..3 {
        shelf
            .create_web_session(Scope::Read, "tag", t0)
            .await
            .expect("create");
    }
    let later = shelf
        .create_web_session(Scope::Read, "tag", t0 + Duration::minutes(30))
        .await
        .expect("create");
    let rows = |shelf: Shelf| async move {
        count(&shelf, "SELECT count(*) AS n FROM web_sessions", vec![]).await
    };
    assert_eq!(rows(shelf.clone()).await, 4);
    // At t0 + 1 h the first three have expired: a sign-in then deletes them.
    let t1 = t0 + Duration::hours(1);
    let newest = shelf
        .create_web_session(Scope::Read, "tag", t1)
        .await
        .expect("create");
    assert_eq!(rows(shelf.clone()).await, 2);
    for token in [&later, &newest] {
        assert!(
            shelf
                .web_session(token, t1)
                .await
                .expect("lookup")
                .is_some()
        );
    }
}

/// A document whose run fails with a known code: `source_changed` for an imported file
/// rewritten after its import, `file_too_large` for one over `SHELF_EXTRACT_MAX_BYTES`.
async fn failed_run(
    dir: &TempDir,
    shelf: &Shelf,
    name: &str,
    bytes: &[u8],
    tamper: bool,
) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("write");
    let id = shelf.ingest_path(&path).await.expect("ingest").document.id;
    if tamper {
        std::fs::write(&path, b"changed behind Shelf's back").expect("tamper");
    }
    let run = shelf
        .process(&id, None, ProcessingMode::Process)
        .await
        .expect("process")
        .expect("a run");
    let run = shelf.run(&run.id).await.expect("run");
    assert_eq!(run.status.as_str(), "failed", "{:?}", run.error);
    run.id
}

async fn failures_are_counted_by_code_in_their_window(postgres: Option<String>) {
    let (dir, shelf) = shelf(postgres, &[("SHELF_EXTRACT_MAX_BYTES", "100")]).await;
    let big = [b'x'; 300];
    let changed = failed_run(&dir, &shelf, "changed.txt", b"small text\n", true).await;
    let large_a = failed_run(&dir, &shelf, "a.txt", &big, false).await;
    let large_b = failed_run(&dir, &shelf, "b.txt", &[b'y'; 300], false).await;
    let large_old = failed_run(&dir, &shelf, "c.txt", &[b'z'; 300], false).await;
    let uncoded = failed_run(&dir, &shelf, "d.txt", &[b'w'; 300], false).await;
    // The finish times, and for one run an error no stage wrote (as when reclaims run out),
    // set by hand: the window is decided by construction.
    for (id, finished, error) in [
        (&changed, "2026-11-27T09:50:00.000Z", None),
        (&large_a, "2026-11-27T09:40:00.000Z", None),
        (&large_b, "2026-11-27T09:20:00.000Z", None),
        (&large_old, "2026-11-27T08:59:59.999Z", None),
        (
            &uncoded,
            "2026-11-27T09:55:00.000Z",
            Some("gave up after 3 reclaims"),
        ),
    ] {
        shelf
            .db
            .execute_sql(Statement::from_sql_and_values(
                DbBackend::Sqlite,
                "UPDATE runs SET finished_at = ?, error = COALESCE(?, error) WHERE id = ?",
                [finished.into(), error.into(), id.clone().into()],
            ))
            .await
            .expect("finish time");
    }
    let now = at("2026-11-27T10:00:00Z");
    let count = |code: &str, count: u64, run: &String, at: &str| FailureCount {
        code: code.into(),
        count,
        latest_run_id: run.clone(),
        latest_at: at.into(),
    };
    // The last hour: the old run is out; most frequent first, then by code.
    assert_eq!(
        shelf
            .failures_by_code(now, Duration::hours(1))
            .await
            .expect("failures"),
        vec![
            count("file_too_large", 2, &large_a, "2026-11-27T09:40:00.000Z"),
            count("source_changed", 1, &changed, "2026-11-27T09:50:00.000Z"),
            count("unknown", 1, &uncoded, "2026-11-27T09:55:00.000Z"),
        ]
    );
    // A window starting exactly at a finish time includes that run.
    assert_eq!(
        shelf
            .failures_by_code(now, Duration::milliseconds(3_600_001))
            .await
            .expect("failures")[0],
        count("file_too_large", 3, &large_a, "2026-11-27T09:40:00.000Z")
    );
    // Ties are ordered by code.
    assert_eq!(
        shelf
            .failures_by_code(now, Duration::minutes(25))
            .await
            .expect("failures")
            .iter()
            .map(|f| (f.code.as_str(), f.count))
            .collect::<Vec<_>>(),
        vec![("file_too_large", 1), ("source_changed", 1), ("unknown", 1)]
    );
    assert!(
        shelf
            .failures_by_code(now, Duration::minutes(1))
            .await
            .expect("failures")
            .is_empty()
    );
}

macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name(None).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    if let Some(url) = super::postgres_url(stringify!($name)) {
                        super::$name(Some(url)).await;
                    }
                }
            }
        )+
    };
}

on_both_backends!(
    sessions_live_until_their_server_side_expiry,
    malformed_tokens_are_no_session,
    expired_sessions_are_pruned_on_create,
    failures_are_counted_by_code_in_their_window,
);
