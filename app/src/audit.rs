//! The audit trail of denied API requests (authentication failures, scope denials, rate-limit
//! denials) in `api_audit_events`: batched writes that aggregate denials into one row per
//! client, minute and reason (with their count) and prune rows past the retention period, and
//! the paged read behind `shelf admin api-audit`. A flood of denials from one client thus
//! costs a row a minute, not a row a request.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use sea_orm::{DatabaseConnection, DbBackend, Statement};
use serde::Serialize;
use shelf_db::begin_write;
use shelf_db::sql::SqlExt;
use shelf_documents::format_timestamp;

use crate::error::AppError;

/// Why a request was denied. The stored and logged names are API: never renamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DenialReason {
    /// No credential on a protected route.
    MissingCredential,
    /// A credential that matches no configured key or hash.
    InvalidCredential,
    /// A read-scope credential on a write-scope route.
    InsufficientScope,
    /// The identity's fixed window is used up.
    RateLimited,
    /// A change authenticated by the web session cookie (or a sign-in) without this server's
    /// `Origin`.
    CrossOrigin,
}

impl DenialReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DenialReason::MissingCredential => "missing_credential",
            DenialReason::InvalidCredential => "invalid_credential",
            DenialReason::InsufficientScope => "insufficient_scope",
            DenialReason::RateLimited => "rate_limited",
            DenialReason::CrossOrigin => "cross_origin",
        }
    }
}

/// One denial, as the server saw it. Never holds key material: only whether a credential was
/// sent and, when it matched, its scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenialEvent {
    pub method: String,
    /// The request path without its query string, capped at [`MAX_PATH_CHARS`].
    pub path: String,
    pub client_host: Option<String>,
    /// The client the denial is counted against: an IPv4 address or an IPv6 network
    /// (`2001:db8:1:2::/64`), `unknown` without a peer address. Rows aggregate by it.
    pub client_key: String,
    pub credential_present: bool,
    /// `read` or `write` when the credential matched a configured one.
    pub scope: Option<String>,
    pub reason: DenialReason,
    pub retry_after_seconds: Option<u64>,
}

/// Longest path stored; longer request paths are cut (a denial must not store unbounded input).
pub const MAX_PATH_CHARS: usize = 512;

/// A stored audit row: the denials of one client for one reason within one minute. Method,
/// path, host, credential and scope are the first denial's; `count` says how many there were.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRow {
    pub id: i64,
    /// The first denial's time.
    pub created_at: String,
    /// The last denial's time (the first's for a row of one).
    pub last_at: String,
    pub method: String,
    pub path: String,
    pub client_host: Option<String>,
    /// See [`DenialEvent::client_key`]; none for rows written before aggregation.
    pub client_key: Option<String>,
    pub credential_present: bool,
    pub scope: Option<String>,
    pub reason: String,
    /// The latest denial's, when it had one.
    pub retry_after_seconds: Option<i64>,
    /// Denials the row stands for.
    pub count: i64,
}

/// A page of audit rows, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditPage {
    pub events: Vec<AuditRow>,
    /// Rows in the trail.
    pub total: u64,
    /// Denials in the trail (the sum of every row's `count`).
    pub denials: u64,
    pub limit: u64,
    pub offset: u64,
}

fn stmt(sql: &str, values: Vec<sea_orm::Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

fn cap(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// The minute `at` falls in, the key a row aggregates by: `YYYY-MM-DDTHH:MM` (UTC).
fn minute_of(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M").to_string()
}

/// Writes denials, then prunes rows older than `retention_days` (0 keeps every row). Pruning
/// on write keeps the table bounded without a scheduler.
pub async fn record(
    db: &DatabaseConnection,
    events: &[DenialEvent],
    retention_days: u32,
) -> Result<(), AppError> {
    record_at(db, events, retention_days, Utc::now()).await
}

/// [`record`] with the clock given: the denials counted at `now`. Denials of one client,
/// reason and minute are summed here first, then added to the row of that key (created when
/// missing), in one write transaction through the process's write gate.
pub async fn record_at(
    db: &DatabaseConnection,
    events: &[DenialEvent],
    retention_days: u32,
    now: DateTime<Utc>,
) -> Result<(), AppError> {
    if events.is_empty() {
        return Ok(());
    }
    // The first denial of each key, how many the batch holds and the latest retry-after, in
    // the order the keys first came (a new row's id says which client was denied first).
    let mut index: HashMap<(&str, &str), usize> = HashMap::new();
    let mut grouped: Vec<(&DenialEvent, i64, Option<u64>)> = Vec::new();
    for event in events {
        let at = *index
            .entry((event.client_key.as_str(), event.reason.as_str()))
            .or_insert_with(|| {
                grouped.push((event, 0, None));
                grouped.len() - 1
            });
        let entry = &mut grouped[at];
        entry.1 += 1;
        if event.retry_after_seconds.is_some() {
            entry.2 = event.retry_after_seconds;
        }
    }
    let at = format_timestamp(now);
    let minute = minute_of(now);
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let txn = begin_write(db).await?;
    for (event, count, retry_after) in grouped {
        txn.execute_sql(stmt(
            "INSERT INTO api_audit_events (created_at, last_at, minute, client_key, method, path, \
             client_host, credential_present, scope, reason, retry_after_seconds, denial_count) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (minute, client_key, reason) DO UPDATE SET \
             denial_count = api_audit_events.denial_count + excluded.denial_count, \
             last_at = excluded.last_at, \
             retry_after_seconds = COALESCE(excluded.retry_after_seconds, api_audit_events.retry_after_seconds)",
            vec![
                at.clone().into(),
                at.clone().into(),
                minute.clone().into(),
                cap(&event.client_key, 64).into(),
                cap(&event.method, 16).into(),
                cap(&event.path, MAX_PATH_CHARS).into(),
                event.client_host.as_deref().map(|h| cap(h, 64)).into(),
                i64::from(event.credential_present).into(),
                event.scope.clone().into(),
                event.reason.as_str().into(),
                retry_after.map(to_i64).into(),
                count.into(),
            ],
        ))
        .await?;
    }
    if retention_days > 0 {
        let cutoff = format_timestamp(now - Duration::days(i64::from(retention_days)));
        txn.execute_sql(stmt(
            "DELETE FROM api_audit_events WHERE created_at < ?",
            vec![cutoff.into()],
        ))
        .await?;
    }
    txn.commit().await?;
    Ok(())
}

/// A page of audit rows, newest first.
pub async fn list(db: &DatabaseConnection, limit: u64, offset: u64) -> Result<AuditPage, AppError> {
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    // CAST: PostgreSQL sums BIGINT into NUMERIC.
    let (total, denials) = match db
        .query_one_sql(stmt(
            "SELECT count(*) AS n, CAST(COALESCE(SUM(denial_count), 0) AS BIGINT) AS d \
             FROM api_audit_events",
            vec![],
        ))
        .await?
    {
        Some(row) => (
            u64::try_from(row.try_get::<i64>("", "n")?).unwrap_or(0),
            u64::try_from(row.try_get::<i64>("", "d")?).unwrap_or(0),
        ),
        None => (0, 0),
    };
    let rows = db
        .query_all_sql(stmt(
            "SELECT id, created_at, COALESCE(last_at, created_at) AS last_at, method, path, \
             client_host, client_key, credential_present, scope, reason, retry_after_seconds, \
             denial_count FROM api_audit_events ORDER BY id DESC LIMIT ? OFFSET ?",
            vec![to_i64(limit).into(), to_i64(offset).into()],
        ))
        .await?;
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        events.push(AuditRow {
            id: row.try_get("", "id")?,
            created_at: row.try_get("", "created_at")?,
            last_at: row.try_get("", "last_at")?,
            method: row.try_get("", "method")?,
            path: row.try_get("", "path")?,
            client_host: row.try_get("", "client_host")?,
            client_key: row.try_get("", "client_key")?,
            credential_present: row.try_get::<i64>("", "credential_present")? != 0,
            scope: row.try_get("", "scope")?,
            reason: row.try_get("", "reason")?,
            retry_after_seconds: row.try_get("", "retry_after_seconds")?,
            count: row.try_get("", "denial_count")?,
        });
    }
    Ok(AuditPage {
        events,
        total,
        denials,
        limit,
        offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn db() -> (tempfile::TempDir, DatabaseConnection) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = crate::db::connect(&dir.path().join("s.sqlite"), 2)
            .await
            .expect("connect");
        crate::db::migrate(&db).await.expect("migrate");
        (dir, db)
    }

    fn event(reason: DenialReason) -> DenialEvent {
        from(reason, "127.0.0.1")
    }

    fn from(reason: DenialReason, client: &str) -> DenialEvent {
        DenialEvent {
            method: "GET".into(),
            path: "/documents".into(),
            client_host: Some(client.into()),
            client_key: client.into(),
            credential_present: false,
            scope: None,
            reason,
            retry_after_seconds: None,
        }
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("time")
            .with_timezone(&Utc)
    }

    #[tokio::test]
    async fn rows_round_trip_newest_first() {
        let (_dir, db) = db().await;
        record(
            &db,
            &[
                event(DenialReason::MissingCredential),
                event(DenialReason::RateLimited),
            ],
            90,
        )
        .await
        .expect("record");
        let page = list(&db, 10, 0).await.expect("list");
        assert_eq!(page.total, 2);
        assert_eq!(page.denials, 2);
        assert_eq!(page.events[0].reason, "rate_limited");
        assert_eq!(page.events[1].reason, "missing_credential");
        assert_eq!(page.events[1].count, 1);
        assert_eq!(page.events[1].client_key.as_deref(), Some("127.0.0.1"));
        let second = list(&db, 1, 1).await.expect("list");
        assert_eq!(second.events.len(), 1);
        assert_eq!(second.events[0].reason, "missing_credential");
    }

    #[tokio::test]
    async fn denials_of_a_client_aggregate_per_minute_and_reason() {
        let (_dir, db) = db().await;
        let flood: Vec<DenialEvent> = (0..300)
            .map(|i| {
                let mut e = from(DenialReason::MissingCredential, "2001:db8:1:2::/64");
                e.client_host = Some(format!("2001:db8:1:2::{i:x}"));
                e
            })
            .collect();
        // Three batches in one minute, one in the next; another client and another reason.
        for (batch, time) in [
            (&flood[..100], "2026-11-26T10:31:00Z"),
            (&flood[100..200], "2026-11-26T10:31:30Z"),
            (&flood[200..250], "2026-11-26T10:31:59.999Z"),
            (&flood[250..], "2026-11-26T10:32:00Z"),
        ] {
            record_at(&db, batch, 90, at(time)).await.expect("record");
        }
        let mut limited = from(DenialReason::RateLimited, "2001:db8:1:2::/64");
        limited.retry_after_seconds = Some(42);
        let other = from(DenialReason::MissingCredential, "192.0.2.9");
        record_at(&db, &[limited, other], 90, at("2026-11-26T10:32:10Z"))
            .await
            .expect("record");

        let page = list(&db, 10, 0).await.expect("list");
        assert_eq!(page.denials, 302);
        assert_eq!(page.total, 4, "{page:#?}");
        let row = |client: &str, reason: &str, minute: &str| {
            page.events
                .iter()
                .find(|e| {
                    e.client_key.as_deref() == Some(client)
                        && e.reason == reason
                        && e.created_at.starts_with(minute)
                })
                .unwrap_or_else(|| panic!("{client} {reason} {minute}: {page:#?}"))
        };
        let first = row(
            "2001:db8:1:2::/64",
            "missing_credential",
            "2026-11-26T10:31",
        );
        assert_eq!(first.count, 250);
        assert_eq!(first.created_at, "2026-11-26T10:31:00.000Z");
        assert_eq!(first.last_at, "2026-11-26T10:31:59.999Z");
        // The first denial's host is kept: the row names the network, not every address.
        assert_eq!(first.client_host.as_deref(), Some("2001:db8:1:2::0"));
        assert_eq!(
            row(
                "2001:db8:1:2::/64",
                "missing_credential",
                "2026-11-26T10:32"
            )
            .count,
            50
        );
        let limited = row("2001:db8:1:2::/64", "rate_limited", "2026-11-26T10:32");
        assert_eq!((limited.count, limited.retry_after_seconds), (1, Some(42)));
        assert_eq!(
            row("192.0.2.9", "missing_credential", "2026-11-26T10:32").count,
            1
        );
    }

    #[tokio::test]
    async fn old_rows_are_pruned_on_write() {
        let (_dir, db) = db().await;
        db.execute_sql(stmt(
            "INSERT INTO api_audit_events (created_at, method, path, credential_present, reason) \
             VALUES ('2000-01-01T00:00:00.000Z', 'GET', '/old', 0, 'missing_credential')",
            vec![],
        ))
        .await
        .expect("insert");
        record_at(
            &db,
            &[event(DenialReason::InvalidCredential)],
            0,
            at("2026-11-26T10:00:00Z"),
        )
        .await
        .expect("keep all");
        let page = list(&db, 10, 0).await.expect("list");
        assert_eq!(page.total, 2);
        // A row from before aggregation reads as one denial.
        assert_eq!(page.events[1].count, 1);
        assert_eq!(page.events[1].last_at, "2000-01-01T00:00:00.000Z");
        record_at(
            &db,
            &[event(DenialReason::InvalidCredential)],
            90,
            at("2026-11-26T10:01:00Z"),
        )
        .await
        .expect("prune");
        let page = list(&db, 10, 0).await.expect("list");
        assert_eq!(page.total, 2);
        assert!(page.events.iter().all(|e| e.path != "/old"));
    }
}
