//! Small helpers for raw SQL on SQLite through sea-orm: statements, IMMEDIATE write
//! transactions, integer conversions and the RFC 3339 timestamps stored as text.

use chrono::{DateTime, SecondsFormat, Utc};
use sea_orm::{DatabaseConnection, DbBackend, DbErr, QueryResult, Statement, Value};
use shelf_engine::db::WriteTxn;

/// A SQLite statement with positional `?` values.
pub(crate) fn stmt(sql: &str, values: impl IntoIterator<Item = Value>) -> Statement {
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

/// Begins a write transaction that takes the write lock at once (`BEGIN IMMEDIATE`), in the
/// engine's queue of this process's writers (`shelf_engine::db::begin_write`).
pub(crate) async fn begin_immediate(db: &DatabaseConnection) -> Result<WriteTxn, DbErr> {
    shelf_engine::db::begin_write(db).await
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
