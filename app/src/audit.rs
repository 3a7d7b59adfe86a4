//! The audit trail of denied API requests (authentication failures, scope denials, rate-limit
//! denials) in `api_audit_events`: batched writes that prune rows past the retention period, and
//! the paged read behind `shelf admin api-audit`.

use chrono::{Duration, Utc};
use sea_orm::{DatabaseConnection, DbBackend, Statement, TransactionTrait};
use serde::Serialize;
use shelf_documents::{format_timestamp, now_timestamp};
use shelf_engine::sql::SqlExt;

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
}

impl DenialReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DenialReason::MissingCredential => "missing_credential",
            DenialReason::InvalidCredential => "invalid_credential",
            DenialReason::InsufficientScope => "insufficient_scope",
            DenialReason::RateLimited => "rate_limited",
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
    pub credential_present: bool,
    /// `read` or `write` when the credential matched a configured one.
    pub scope: Option<String>,
    pub reason: DenialReason,
    pub retry_after_seconds: Option<u64>,
}

/// Longest path stored; longer request paths are cut (a denial must not store unbounded input).
pub const MAX_PATH_CHARS: usize = 512;

/// A stored audit row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRow {
    pub id: i64,
    pub created_at: String,
    pub method: String,
    pub path: String,
    pub client_host: Option<String>,
    pub credential_present: bool,
    pub scope: Option<String>,
    pub reason: String,
    pub retry_after_seconds: Option<i64>,
}

/// A page of audit rows, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditPage {
    pub events: Vec<AuditRow>,
    pub total: u64,
    pub limit: u64,
    pub offset: u64,
}

fn stmt(sql: &str, values: Vec<sea_orm::Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

fn cap(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Writes denials in one transaction, then prunes rows older than `retention_days` (0 keeps
/// every row). Pruning on write keeps the table bounded without a scheduler.
pub async fn record(
    db: &DatabaseConnection,
    events: &[DenialEvent],
    retention_days: u32,
) -> Result<(), AppError> {
    if events.is_empty() {
        return Ok(());
    }
    let txn = db.begin().await?;
    let now = now_timestamp();
    for event in events {
        txn.execute_sql(stmt(
            "INSERT INTO api_audit_events (created_at, method, path, client_host, \
             credential_present, scope, reason, retry_after_seconds) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            vec![
                now.clone().into(),
                cap(&event.method, 16).into(),
                cap(&event.path, MAX_PATH_CHARS).into(),
                event.client_host.as_deref().map(|h| cap(h, 64)).into(),
                i64::from(event.credential_present).into(),
                event.scope.clone().into(),
                event.reason.as_str().into(),
                event
                    .retry_after_seconds
                    .map(|s| i64::try_from(s).unwrap_or(i64::MAX))
                    .into(),
            ],
        ))
        .await?;
    }
    if retention_days > 0 {
        let cutoff = format_timestamp(Utc::now() - Duration::days(i64::from(retention_days)));
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
    let total = match db
        .query_one_sql(stmt("SELECT count(*) AS n FROM api_audit_events", vec![]))
        .await?
    {
        Some(row) => u64::try_from(row.try_get::<i64>("", "n")?).unwrap_or(0),
        None => 0,
    };
    let rows = db
        .query_all_sql(stmt(
            "SELECT id, created_at, method, path, client_host, credential_present, scope, reason, \
             retry_after_seconds FROM api_audit_events ORDER BY id DESC LIMIT ? OFFSET ?",
            vec![to_i64(limit).into(), to_i64(offset).into()],
        ))
        .await?;
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        events.push(AuditRow {
            id: row.try_get("", "id")?,
            created_at: row.try_get("", "created_at")?,
            method: row.try_get("", "method")?,
            path: row.try_get("", "path")?,
            client_host: row.try_get("", "client_host")?,
            credential_present: row.try_get::<i64>("", "credential_present")? != 0,
            scope: row.try_get("", "scope")?,
            reason: row.try_get("", "reason")?,
            retry_after_seconds: row.try_get("", "retry_after_seconds")?,
        });
    }
    Ok(AuditPage {
        events,
        total,
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
        DenialEvent {
            method: "GET".into(),
            path: "/documents".into(),
            client_host: Some("127.0.0.1".into()),
            credential_present: false,
            scope: None,
            reason,
            retry_after_seconds: None,
        }
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
        assert_eq!(page.events[0].reason, "rate_limited");
        assert_eq!(page.events[1].reason, "missing_credential");
        let second = list(&db, 1, 1).await.expect("list");
        assert_eq!(second.events.len(), 1);
        assert_eq!(second.events[0].reason, "missing_credential");
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
        record(&db, &[event(DenialReason::InvalidCredential)], 0)
            .await
            .expect("keep all");
        assert_eq!(list(&db, 10, 0).await.expect("list").total, 2);
        record(&db, &[event(DenialReason::InvalidCredential)], 90)
            .await
            .expect("prune");
        let page = list(&db, 10, 0).await.expect("list");
        assert_eq!(page.total, 2);
        assert!(page.events.iter().all(|e| e.path != "/old"));
    }
}
