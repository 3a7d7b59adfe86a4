//! Search facets: the classification, status, source and filename buckets of the documents a
//! search matches, under the same query, filters and match mode as its results (in semantic
//! and hybrid modes, of its ranked candidates).

use shelf_db::sql::SqlExt;

use sea_orm::{ConnectionTrait, DbBackend, Value};

use crate::dewey;
use crate::error::Result;
use crate::sql::{get_u64, stmt, to_i64};

use super::plan::prepare;
use super::request::{
    DEFAULT_FACET_LIMIT, FacetCount, MAX_FACET_LIMIT, SearchFacets, SearchRequest,
};
use super::semantic;

/// Facet counts under the same query and filters: classifications and filenames (at most
/// `facet_limit` buckets each, default 50, at most 500), statuses, and the searched source
/// with the full matching count.
pub async fn search_facets(
    conn: &impl ConnectionTrait,
    req: &SearchRequest,
    facet_limit: Option<u64>,
) -> Result<SearchFacets> {
    let bucket_limit = facet_limit
        .unwrap_or(DEFAULT_FACET_LIMIT)
        .min(MAX_FACET_LIMIT);
    if req.mode.is_dense() {
        return semantic::facets(conn, req, bucket_limit).await;
    }
    let prepared = prepare(req, conn.get_database_backend())?;
    let (expression, match_mode, total) = prepared.resolve(conn, req.effective_mode()).await?;
    let (classifications, statuses, filenames) = if total > 0 {
        buckets(
            conn,
            &prepared.source_clause(&expression),
            prepared.values_with(&expression),
            bucket_limit,
        )
        .await?
    } else {
        Default::default()
    };
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

/// The classification, status and filename buckets of the documents (alias `d`) of `source`
/// (a `FROM … WHERE …` clause) with its `values`: at most `bucket_limit` classifications and
/// filenames.
pub(super) async fn buckets(
    conn: &impl ConnectionTrait,
    source: &str,
    values: Vec<Value>,
    bucket_limit: u64,
) -> Result<(Vec<FacetCount>, Vec<FacetCount>, Vec<FacetCount>)> {
    let backend = conn.get_database_backend();
    let group = |column: &str, with_limit: bool| {
        // Byte order on PostgreSQL too, as SQLite's BINARY collation sorts the values.
        let value_order = if backend == DbBackend::Postgres {
            format!("{column} COLLATE \"C\"")
        } else {
            "value".to_string()
        };
        format!(
            "SELECT {column} AS value, count(*) AS n, max(d.classification_label) AS label {source} \
             AND {column} IS NOT NULL GROUP BY {column} ORDER BY n DESC, {value_order} ASC{}",
            if with_limit { " LIMIT ?" } else { "" }
        )
    };
    let mut classifications = Vec::new();
    let mut statuses = Vec::new();
    let mut filenames = Vec::new();
    let mut limited = values.clone();
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
        .query_all_sql(stmt(&group("d.status", false), values))
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
    Ok((classifications, statuses, filenames))
}
