//! Small helpers for raw SQL through sea-orm: statements, IMMEDIATE write transactions (and
//! the per-document lock that stands in for them on PostgreSQL), integer conversions and the
//! RFC 3339 timestamps stored as text.

use chrono::{DateTime, SecondsFormat, Utc};
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, DbErr, QueryResult, Statement, Value,
};
use shelf_db::WriteTxn;
use shelf_db::sql::SqlExt;

/// First key of the documents' advisory locks ("SHLF"), so they never meet another user's
/// two-key locks; the second key is a hash of the document id.
const DOCUMENT_LOCK_SPACE: i32 = 0x5348_4C46;

/// A SQLite statement with positional `?` values.
pub(crate) fn stmt(sql: &str, values: impl IntoIterator<Item = Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

/// Begins a write transaction that takes the write lock at once (`BEGIN IMMEDIATE`), in the
/// engine's queue of this process's writers (`shelf_db::begin_write`).
pub(crate) async fn begin_immediate(db: &DatabaseConnection) -> Result<WriteTxn, DbErr> {
    shelf_db::begin_write(db).await
}

/// Serializes the transactions that ingest or delete one document, as SQLite's single writer
/// does: on PostgreSQL a transaction-scoped advisory lock on the id (held until commit or
/// rollback), so a second ingest of the same bytes waits for the first and then finds its row
/// (a duplicate, never a key violation), and a re-upload waits for a delete in flight. Nothing
/// on SQLite, where `BEGIN IMMEDIATE` already holds the write lock. Take it first in the
/// transaction, before any other write, so it is never awaited while holding row locks.
pub(crate) async fn lock_document(conn: &impl ConnectionTrait, id: &str) -> Result<(), DbErr> {
    if let Some(lock) = lock_document_statement(conn.get_database_backend(), id) {
        conn.execute_sql(lock).await?;
    }
    Ok(())
}

/// The statement of [`lock_document`] on `backend` (none on SQLite), for a transaction built
/// elsewhere: a run's creation takes it first, so it waits for a delete of its document in
/// flight, or the delete waits for it and then removes the new run too.
pub fn lock_document_statement(backend: DbBackend, id: &str) -> Option<Statement> {
    (backend == DbBackend::Postgres).then(|| {
        stmt(
            "SELECT pg_advisory_xact_lock(?, hashtext(?))",
            [DOCUMENT_LOCK_SPACE.into(), id.to_string().into()],
        )
    })
}

/// Appends ` AND {column} starts with prefix` to a filter: what a classification prefix means
/// everywhere (search, facets, the document list). A plain string prefix: `636` matches `636`
/// and `636.1…`, `6` the whole class; an unclassified document (NULL) never matches.
pub(crate) fn push_classification_prefix(
    sql: &mut String,
    values: &mut Vec<Value>,
    column: &str,
    prefix: &str,
) {
    sql.push_str(&format!(" AND substr({column}, 1, ?) = ?"));
    // An INTEGER length: PostgreSQL has no substr(text, int, bigint).
    let length = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
    values.push(length.into());
    values.push(prefix.to_string().into());
}

/// Stored timestamp format: RFC 3339 UTC with milliseconds and `Z`, sortable as text.
pub fn format_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Now, in the stored timestamp format.
pub fn now_timestamp() -> String {
    format_timestamp(Utc::now())
}

/// A count or size for a SQLite INTEGER (saturating).
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A SQLite INTEGER as a count or size (negative values read as 0).
pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Reads an INTEGER column as `u64`.
pub(crate) fn get_u64(row: &QueryResult, col: &str) -> Result<u64, DbErr> {
    Ok(to_u64(row.try_get::<i64>("", col)?))
}
