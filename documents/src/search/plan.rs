//! What a request becomes before and while it meets the database: validation and filters
//! (before any access), the match-mode plans tried in order (all terms, then any term), the
//! dialect of each plan's expression, and the page and total of the plan that matches.

use shelf_db::sql::SqlExt;

use sea_orm::{ConnectionTrait, DbBackend, QueryResult, Value};

use crate::error::{DocumentsError, Result};
use crate::sql::{format_timestamp, get_u64, push_classification_prefix, stmt, to_i64};

use super::query::{NormalizedQuery, normalize_query};
use super::request::{
    DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, MatchMode, SearchRequest, SearchScope,
};
use super::{postgres, sqlite};

/// A plan's matching expression in the connection's dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Expression {
    /// An FTS5 query over quoted terms (SQLite).
    Fts5(String),
    /// A `tsquery` over the same terms (PostgreSQL).
    Ts(postgres::TsQuery),
}

impl Expression {
    /// The values of the match in a source clause, in order.
    fn values(&self) -> Vec<Value> {
        match self {
            Expression::Fts5(text) => vec![text.clone().into()],
            Expression::Ts(query) => query.values(),
        }
    }
}

/// An expression to try and the match mode it reports.
type Plan = (Expression, MatchMode);

/// Everything checked before the database is touched.
#[derive(Clone)]
pub(super) struct Prepared {
    pub(super) backend: DbBackend,
    table: &'static str,
    pub(super) scope: SearchScope,
    query: NormalizedQuery,
    filter_sql: String,
    filter_values: Vec<Value>,
    pub(super) limit: u64,
    pub(super) offset: u64,
}

/// Validates a request and builds its filters for `backend` (the few functions that differ:
/// `instr` is `strpos` on PostgreSQL).
pub(super) fn prepare(req: &SearchRequest, backend: DbBackend) -> Result<Prepared> {
    validate(req)?;
    let query = normalize_query(&req.query, req.phrase)?;
    let (filter_sql, filter_values) = filters(req, backend);
    Ok(Prepared {
        backend,
        table: req.scope.table(),
        scope: req.scope,
        query,
        filter_sql,
        filter_values,
        limit: req.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT),
        offset: req.offset,
    })
}

/// The checks every mode makes before the database: the query's length and the window.
pub(super) fn validate(req: &SearchRequest) -> Result<()> {
    if req.query.chars().nth(MAX_QUERY_CHARS).is_some() {
        return Err(DocumentsError::SearchQueryTooLarge {
            max: MAX_QUERY_CHARS,
        });
    }
    if let (Some(after), Some(before)) = (req.created_after, req.created_before)
        && after > before
    {
        return Err(DocumentsError::InvalidSearchWindow);
    }
    Ok(())
}

/// The request's filters as ` AND …` conditions on the documents (alias `d`) and their values.
pub(super) fn filters(req: &SearchRequest, backend: DbBackend) -> (String, Vec<Value>) {
    let mut filter_sql = String::new();
    let mut filter_values: Vec<Value> = Vec::new();
    let present = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    if let Some(code) = present(&req.classification_code) {
        filter_sql.push_str(" AND d.classification = ?");
        filter_values.push(code.into());
    }
    if let Some(prefix) = present(&req.classification_prefix) {
        push_classification_prefix(
            &mut filter_sql,
            &mut filter_values,
            "d.classification",
            &prefix,
        );
    }
    if let Some(status) = req.document_status {
        filter_sql.push_str(" AND d.status = ?");
        filter_values.push(status.as_str().into());
    }
    if let Some(needle) = present(&req.filename_contains) {
        filter_sql.push_str(if backend == DbBackend::Postgres {
            " AND strpos(lower(d.filename), lower(?)) > 0"
        } else {
            " AND instr(lower(d.filename), lower(?)) > 0"
        });
        filter_values.push(needle.into());
    }
    if let Some(after) = req.created_after {
        filter_sql.push_str(" AND d.created_at >= ?");
        filter_values.push(format_timestamp(after).into());
    }
    if let Some(before) = req.created_before {
        filter_sql.push_str(" AND d.created_at <= ?");
        filter_values.push(format_timestamp(before).into());
    }
    (filter_sql, filter_values)
}

impl Prepared {
    /// The same search for another page (hybrid reads the top of the keyword ranking).
    pub(super) fn with_page(&self, limit: u64, offset: u64) -> Prepared {
        Prepared {
            limit,
            offset,
            ..self.clone()
        }
    }

    /// `FROM … WHERE …` of the matching rows joined to their documents, with the filters.
    pub(super) fn source_clause(&self, expression: &Expression) -> String {
        match expression {
            Expression::Fts5(_) => sqlite::source_clause(self.table, &self.filter_sql),
            Expression::Ts(query) => query.source_clause(self.table, &self.filter_sql),
        }
    }

    /// The values of [`Self::source_clause`]: the match, then the filters.
    pub(super) fn values_with(&self, expression: &Expression) -> Vec<Value> {
        let mut values = expression.values();
        values.extend(self.filter_values.iter().cloned());
        values
    }

    /// Counts the matching documents once. Without filters the index alone answers (no join).
    async fn count(&self, conn: &impl ConnectionTrait, expression: &Expression) -> Result<u64> {
        let sql = match expression {
            _ if !self.filter_sql.is_empty() => {
                format!("SELECT count(*) AS n {}", self.source_clause(expression))
            }
            Expression::Fts5(_) => sqlite::count_sql(self.table),
            Expression::Ts(query) => query.count_sql(self.table),
        };
        let row = conn
            .query_one_sql(stmt(&sql, self.values_with(expression)))
            .await?;
        match row {
            Some(row) => Ok(get_u64(&row, "n")?),
            None => Ok(0),
        }
    }

    /// The expression to try first, with the mode it reports, and the relaxed one to try
    /// when the first matches nothing (then used even when it matches nothing either).
    fn plans(&self, requested: MatchMode) -> (Plan, Option<Plan>) {
        let q = &self.query;
        match requested {
            MatchMode::All => ((self.expression(false, false), MatchMode::All), None),
            MatchMode::Any => ((self.expression(true, true), MatchMode::Any), None),
            MatchMode::Auto if !q.is_keyword_query() => {
                ((self.expression(true, true), MatchMode::Any), None)
            }
            MatchMode::Auto => (
                (self.expression(true, false), MatchMode::All),
                (q.content_terms.len() > 1).then(|| (self.expression(true, true), MatchMode::Any)),
            ),
        }
    }

    /// Runs the first plan, and the relaxed one when the first finds nothing: the one rule
    /// of relaxation, shared by results and facets. `run` answers a plan's value and total.
    async fn first_matching<T, F>(
        &self,
        requested: MatchMode,
        mut run: impl FnMut(Expression) -> F,
    ) -> Result<(T, MatchMode, u64)>
    where
        F: Future<Output = Result<(T, u64)>>,
    {
        let ((expression, mode), relaxed) = self.plans(requested);
        let (value, total) = run(expression).await?;
        match relaxed {
            Some((expression, mode)) if total == 0 => {
                let (value, total) = run(expression).await?;
                Ok((value, mode, total))
            }
            _ => Ok((value, mode, total)),
        }
    }

    /// Every term (or the content terms) joined by AND (or OR when `any`) in the connection's
    /// dialect.
    fn expression(&self, content: bool, any: bool) -> Expression {
        let q = &self.query;
        let (terms, sources) = if content {
            (&q.content_terms, &q.content_sources)
        } else {
            (&q.terms, &q.sources)
        };
        if self.backend == DbBackend::Postgres {
            Expression::Ts(postgres::TsQuery::new(terms, sources, any))
        } else {
            Expression::Fts5(terms.join(if any { " OR " } else { " AND " }))
        }
    }

    /// The total when a page already tells it: a partial page is the last one.
    fn total_from_page(&self, rows: usize) -> Option<u64> {
        let rows = rows as u64;
        if self.limit == 0 {
            None
        } else if rows > 0 && rows < self.limit {
            Some(self.offset.saturating_add(rows))
        } else if rows == 0 && self.offset == 0 {
            Some(0)
        } else {
            None
        }
    }

    /// The page statement of the expression's dialect.
    fn page_sql(&self, expression: &Expression, with_snippets: bool, candidates: usize) -> String {
        match expression {
            Expression::Fts5(_) => sqlite::page_sql(
                self.table,
                self.scope,
                &self.source_clause(expression),
                with_snippets,
                candidates,
            ),
            Expression::Ts(query) => {
                query.page_sql(self.table, self.scope, &self.filter_sql, with_snippets)
            }
        }
    }

    /// Without filters, the top `offset + limit + 1` rows are ranked on the FTS index alone
    /// (no join per matching row, which is what stops concurrent searches of a large index
    /// from scaling: every connection would walk the documents table for every match). When
    /// the row after the cut has a different score, no tie crosses the cut and those rows
    /// are exactly the candidates; the page query then orders them by the full key. With
    /// filters, a tie across the cut, or a deep page, the page query ranks every match.
    ///
    /// PostgreSQL always takes the page query: its planner joins the matches to the documents
    /// by hash, so there is no per-row join to save.
    async fn candidates(
        &self,
        conn: &impl ConnectionTrait,
        expression: &Expression,
    ) -> Result<Option<Vec<(i64, f64)>>> {
        let wanted = self.offset.saturating_add(self.limit);
        let Expression::Fts5(expression) = expression else {
            return Ok(None);
        };
        if !self.filter_sql.is_empty() || wanted > sqlite::MAX_CANDIDATES {
            return Ok(None);
        }
        sqlite::candidates(conn, self.table, expression, wanted).await
    }

    async fn page(
        &self,
        conn: &impl ConnectionTrait,
        expression: &Expression,
        with_snippets: bool,
    ) -> Result<Vec<QueryResult>> {
        if self.limit == 0 {
            return Ok(Vec::new());
        }
        let candidates = self.candidates(conn, expression).await?;
        if candidates.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let candidates = candidates.unwrap_or_default();
        let mut values: Vec<Value> = Vec::new();
        if candidates.is_empty() {
            values.extend(self.values_with(expression));
        }
        for (rid, score) in &candidates {
            values.push((*rid).into());
            values.push((*score).into());
        }
        values.push(to_i64(self.limit).into());
        values.push(to_i64(self.offset).into());
        if with_snippets {
            values.extend(match expression {
                Expression::Fts5(text) => sqlite::snippet_values(text),
                Expression::Ts(query) => query.snippet_values(),
            });
        }
        Ok(conn
            .query_all_sql(stmt(
                &self.page_sql(expression, with_snippets, candidates.len()),
                values,
            ))
            .await?)
    }

    /// Runs the plans in order: a page, and the total (the page tells it when partial, else
    /// the count). Returns the rows, the mode used and the total.
    pub(super) async fn ranked(
        &self,
        conn: &impl ConnectionTrait,
        requested: MatchMode,
        with_snippets: bool,
    ) -> Result<(Vec<QueryResult>, MatchMode, u64)> {
        self.first_matching(requested, |expression| async move {
            // The count runs beside the page on another pooled connection (a reader of its
            // own under WAL), so a lone search waits for the slower of the two, not both; it
            // is wasted only when the page turns out partial and tells the total itself.
            let (rows, counted) = tokio::join!(
                self.page(conn, &expression, with_snippets),
                self.count(conn, &expression)
            );
            let rows = rows?;
            let total = match self.total_from_page(rows.len()) {
                Some(total) => total,
                None => counted?,
            };
            Ok((rows, total))
        })
        .await
    }

    /// The page of ids of the plan that matches, without the total (hybrid fuses the top of
    /// the ranking and needs no count): a plan matches when its page is not empty.
    pub(super) async fn top(
        &self,
        conn: &impl ConnectionTrait,
        requested: MatchMode,
    ) -> Result<(Vec<QueryResult>, MatchMode)> {
        let (rows, mode, _) = self
            .first_matching(requested, |expression| async move {
                let rows = self.page(conn, &expression, false).await?;
                let found = rows.len() as u64;
                Ok((rows, found))
            })
            .await?;
        Ok((rows, mode))
    }

    /// Picks the expression by counting, for facets.
    pub(super) async fn resolve(
        &self,
        conn: &impl ConnectionTrait,
        requested: MatchMode,
    ) -> Result<(Expression, MatchMode, u64)> {
        self.first_matching(requested, |expression| async move {
            let total = self.count(conn, &expression).await?;
            Ok((expression, total))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::request::parse_timestamp;

    #[test]
    fn validation_happens_before_the_database() {
        let long = SearchRequest {
            query: "a".repeat(MAX_QUERY_CHARS + 1),
            ..Default::default()
        };
        assert!(matches!(
            prepare(&long, DbBackend::Sqlite),
            Err(DocumentsError::SearchQueryTooLarge { .. })
        ));
        let exact = SearchRequest {
            query: "é".repeat(MAX_QUERY_CHARS),
            ..Default::default()
        };
        assert!(prepare(&exact, DbBackend::Sqlite).is_ok());
        let window = SearchRequest {
            query: "x".into(),
            created_after: parse_timestamp("created_after", "2026-02-01").ok(),
            created_before: parse_timestamp("created_before", "2026-01-01").ok(),
            ..Default::default()
        };
        assert!(matches!(
            prepare(&window, DbBackend::Sqlite),
            Err(DocumentsError::InvalidSearchWindow)
        ));
        let limit = SearchRequest {
            query: "x".into(),
            limit: Some(10_000),
            ..Default::default()
        };
        assert_eq!(
            prepare(&limit, DbBackend::Sqlite).map(|p| p.limit).ok(),
            Some(MAX_LIMIT)
        );
    }
}
