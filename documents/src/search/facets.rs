//! Search facets: the classification, status, source and filename buckets of the documents a
//! search matches, under the same query, filters and match mode as its results.

use shelf_db::sql::SqlExt;

use sea_orm::{ConnectionTrait, DbBackend};

use crate::dewey;
use crate::error::Result;
use crate::sql::{get_u64, stmt, to_i64};

use super::plan::prepare;
use super::request::{
    DEFAULT_FACET_LIMIT, FacetCount, MAX_FACET_LIMIT, SearchFacets, SearchRequest,
};

/// Facet counts under the same query and filters: classifications and filenames (at most
/// `facet_limit` buckets each, default 50, at most 500), statuses, and the searched source
/// with the full matching count.
pub async fn search_facets(
    conn: &impl ConnectionTrait,
    req: &SearchRequest,
    facet_limit: Option<u64>,
) -> Result<SearchFacets> {
    let prepared = prepare(req, conn.get_database_backend())?;
    let bucket_limit = facet_limit
        .unwrap_or(DEFAULT_FACET_LIMIT)
        .min(MAX_FACET_LIMIT);
    let (expression, match_mode, total) = prepared.resolve(conn, req.effective_mode()).await?;
    let group = |column: &str, with_limit: bool| {
        // Byte order on PostgreSQL too, as SQLite's BINARY collation sorts the values.
        let value_order = if prepared.backend == DbBackend::Postgres {
            format!("{column} COLLATE \"C\"")
        } else {
            "value".to_string()
        };
        format!(
            "SELECT {column} AS value, count(*) AS n, max(d.classification_label) AS label {} \
             AND {column} IS NOT NULL GROUP BY {column} ORDER BY n DESC, {value_order} ASC{}",
            prepared.source_clause(&expression),
            if with_limit { " LIMIT ?" } else { "" }
        )
    };
    let mut classifications = Vec::new();
    let mut statuses = Vec::new();
    let mut filenames = Vec::new();
    if total > 0 {
        let mut limited = prepared.values_with(&expression);
        limited.push(to_i64(bucket_limit).into());
        for row in conn
            .query_all_sql(stmt(&group("d.classification", true), limited.clone()))
            .await?
        {
            let value: String = row.try_get("", "value")?;
            let stored: Option<String> = row.try_get("", "label")?;
            let label = stored.or_else(|| dewey::label(&value).map(str::to_string));
            classifications.push(FacetCount {
                count: get_u64(&row, "n")?,
                value,
                label,
            });
        }
        for row in conn
            .query_all_sql(stmt(
                &group("d.status", false),
                prepared.values_with(&expression),
            ))
            .await?
        {
            statuses.push(FacetCount {
                value: row.try_get("", "value")?,
                count: get_u64(&row, "n")?,
                label: None,
            });
        }
        for row in conn
            .query_all_sql(stmt(&group("d.filename", true), limited))
            .await?
        {
            filenames.push(FacetCount {
                value: row.try_get("", "value")?,
                count: get_u64(&row, "n")?,
                label: None,
            });
        }
    }
    Ok(SearchFacets {
        classifications,
        statuses,
        sources: vec![FacetCount {
            value: prepared.scope.as_str().to_string(),
            count: total,
            label: None,
        }],
        filenames,
        match_mode,
    })
}
