//! One SQL text for both backends: statements are written once with SQLite's positional `?`
//! and fitted to the connection they run on (`$1, $2, …` on PostgreSQL) at execution time, so
//! the code that builds a statement never needs to know which database it will meet.

use std::future::Future;
use std::pin::Pin;

use sea_orm::{ConnectionTrait, DbBackend, DbErr, ExecResult, QueryResult, Statement};

type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, DbErr>> + Send + 'a>>;

/// Rewrites `stmt` for `backend`: on PostgreSQL every `?` outside quotes becomes `$n`.
/// Statements already built for the backend pass through untouched.
pub fn fit(backend: DbBackend, stmt: Statement) -> Statement {
    if backend == stmt.db_backend || backend != DbBackend::Postgres {
        return stmt;
    }
    Statement {
        sql: numbered_placeholders(&stmt.sql),
        values: stmt.values,
        db_backend: backend,
    }
}

/// `?` → `$1, $2, …`, skipping quoted strings and identifiers (`'…'`, `"…"`), where a `?`
/// is text rather than a parameter.
fn numbered_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut quote: Option<char> = None;
    let mut next = 1usize;
    for c in sql.chars() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
                out.push(c);
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(c);
            }
            None if c == '?' => {
                out.push('$');
                out.push_str(&next.to_string());
                next += 1;
            }
            None => out.push(c),
        }
    }
    out
}

/// Runs statements fitted to the connection's backend. Every raw statement of Shelf goes
/// through these three methods instead of `execute_raw`, `query_one_raw` and `query_all_raw`.
pub trait SqlExt: ConnectionTrait {
    fn execute_sql(&self, stmt: Statement) -> Pending<'_, ExecResult> {
        self.execute_raw(fit(self.get_database_backend(), stmt))
    }

    fn query_one_sql(&self, stmt: Statement) -> Pending<'_, Option<QueryResult>> {
        self.query_one_raw(fit(self.get_database_backend(), stmt))
    }

    fn query_all_sql(&self, stmt: Statement) -> Pending<'_, Vec<QueryResult>> {
        self.query_all_raw(fit(self.get_database_backend(), stmt))
    }

    /// Runs `stmts` in order, their results unread. On SQLite they go to the connection as one
    /// multi-statement text with their values concatenated (sqlx binds each statement's `?`
    /// from where the previous one stopped): one round trip through sqlx's connection thread
    /// instead of one per statement. PostgreSQL takes one parameterized statement at a time.
    fn execute_all_sql(&self, stmts: Vec<Statement>) -> Pending<'_, ()>
    where
        Self: Sync,
    {
        Box::pin(async move {
            if self.get_database_backend() == DbBackend::Postgres || stmts.len() < 2 {
                for stmt in stmts {
                    self.execute_sql(stmt).await?;
                }
                return Ok(());
            }
            self.execute_raw(joined(stmts)).await?;
            Ok(())
        })
    }
}

/// One SQLite text of `stmts`, in order, and their values in the same order.
fn joined(stmts: Vec<Statement>) -> Statement {
    let mut sql = String::new();
    let mut values = Vec::new();
    for stmt in stmts {
        sql.push_str(stmt.sql.trim_end().trim_end_matches(';'));
        sql.push_str(";\n");
        if let Some(v) = stmt.values {
            values.extend(v.0);
        }
    }
    Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)
}

impl<C: ConnectionTrait + ?Sized> SqlExt for C {}

/// Whether `conn` is a PostgreSQL connection (for the few statements whose SQL differs).
pub fn is_postgres(conn: &impl ConnectionTrait) -> bool {
    conn.get_database_backend() == DbBackend::Postgres
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_placeholders_outside_quotes() {
        assert_eq!(
            numbered_placeholders("SELECT '?' AS q, \"a?\" FROM t WHERE a = ? AND b IN (?, ?)"),
            "SELECT '?' AS q, \"a?\" FROM t WHERE a = $1 AND b IN ($2, $3)"
        );
        assert_eq!(numbered_placeholders("SELECT 1"), "SELECT 1");
    }

    #[tokio::test]
    async fn statements_run_together_bind_their_own_values_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = crate::connect::connect(&dir.path().join("all.sqlite"), 1)
            .await
            .expect("connect");
        db.execute_unprepared("CREATE TABLE t (a INTEGER, b TEXT)")
            .await
            .expect("create");
        let insert = |a: i64, b: &str| {
            Statement::from_sql_and_values(
                DbBackend::Sqlite,
                "INSERT INTO t (a, b) VALUES (?, ?);",
                [a.into(), b.into()],
            )
        };
        db.execute_all_sql(vec![
            insert(1, "one; two"),
            Statement::from_string(DbBackend::Sqlite, "UPDATE t SET a = a + 10"),
            insert(2, "?"),
            Statement::from_sql_and_values(
                DbBackend::Sqlite,
                "DELETE FROM t WHERE a = ? OR b = ?",
                [99i64.into(), "none".into()],
            ),
        ])
        .await
        .expect("run together");
        let rows = db
            .query_all_sql(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT a, b FROM t ORDER BY a",
            ))
            .await
            .expect("read");
        let got: Vec<(i64, String)> = rows
            .iter()
            .map(|r| (r.try_get("", "a").unwrap(), r.try_get("", "b").unwrap()))
            .collect();
        assert_eq!(got, vec![(2, "?".into()), (11, "one; two".into())]);
        // A failing statement fails the call, and what ran before it stays for the caller's
        // transaction to roll back.
        let failed = db
            .execute_all_sql(vec![
                insert(3, "three"),
                Statement::from_string(DbBackend::Sqlite, "INSERT INTO missing VALUES (1)"),
            ])
            .await;
        assert!(failed.is_err());
    }

    #[test]
    fn sqlite_statements_stay_as_written() {
        let s = Statement::from_sql_and_values(DbBackend::Sqlite, "SELECT ?", [1i64.into()]);
        assert_eq!(fit(DbBackend::Sqlite, s.clone()).sql, "SELECT ?");
        let pg = fit(DbBackend::Postgres, s);
        assert_eq!(pg.sql, "SELECT $1");
        assert_eq!(pg.db_backend, DbBackend::Postgres);
    }
}
