//! `/search`, `/search/results`, `/search/facets`: read-scope POSTs over the full-text index.
//! Validation (scope, status, window, query length) happens in the document domain before any
//! query runs.

use axum::Json;
use axum::extract::State;
use shelf_documents::{SearchBody, SearchRequest};
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::model::search::{FacetsIn, FacetsOut, SearchIdsOut, SearchIn, SearchResultsOut};
use crate::policy::Policy;
use crate::routes::Resource;
use crate::state::AppState;

/// Search is a POST (the body is too rich for a query string) that only reads: read scope.
pub fn routes() -> Resource {
    Resource::new()
        .route(Policy::Read, routes!(ids))
        .route(Policy::Read, routes!(results))
        .route(Policy::Read, routes!(facets))
}

fn request(body: SearchIn) -> Result<SearchRequest, ApiError> {
    body.check_declared()?;
    Ok(SearchBody::from(body).into_request()?)
}

/// Search documents
///
/// Matching document ids, best first (BM25, then newest, then id).
#[utoipa::path(
    post, path = "/search", operation_id = "search_documents", tag = "search", request_body = SearchIn,
    responses(
        (status = 200, body = SearchIdsOut),
        (status = 400, description = "`invalid_search_window`, `search_query_too_large`, `invalid_search_query`, `invalid_search_scope`, `invalid_document_status`", body = ErrorBody),
    )
)]
pub async fn ids(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SearchIn>,
) -> Result<Json<SearchIdsOut>, ApiError> {
    let request = request(body)?;
    Ok(Json(state.shelf.search_ids(&request).await?.into()))
}

/// Ranked search results
///
/// Results with snippets (`<mark>` highlights over escaped text) and scores. A hit whose
/// source is a transcript (SRT, WebVTT, SBV) carries `transcript_citation` when the query text
/// is found in its transcript (exact, normalized or fuzzy; see docs/export.md).
#[utoipa::path(
    post, path = "/search/results", operation_id = "search_results", tag = "search", request_body = SearchIn,
    responses(
        (status = 200, body = SearchResultsOut),
        (status = 400, description = "`invalid_search_window`, `search_query_too_large`, `invalid_search_query`, `invalid_search_scope`, `invalid_document_status`", body = ErrorBody),
    )
)]
pub async fn results(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SearchIn>,
) -> Result<Json<SearchResultsOut>, ApiError> {
    let request = request(body)?;
    Ok(Json(
        state.shelf.search_results_cited(&request).await?.into(),
    ))
}

/// Search facets
///
/// Counts by classification, document status, source and filename under the same filters.
#[utoipa::path(
    post, path = "/search/facets", operation_id = "search_facets", tag = "search", request_body = FacetsIn,
    responses(
        (status = 200, body = FacetsOut),
        (status = 400, description = "`invalid_search_window`, `search_query_too_large`, `invalid_search_query`, `invalid_search_scope`, `invalid_document_status`", body = ErrorBody),
    )
)]
pub async fn facets(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<FacetsIn>,
) -> Result<Json<FacetsOut>, ApiError> {
    if let Some(limit) = body.facet_limit
        && !(1..=500).contains(&limit)
    {
        return Err(ApiError::invalid(
            &["body", "facet_limit"],
            "Input should be between 1 and 500",
            "value_error",
        ));
    }
    let request = request(body.search)?;
    Ok(Json(
        state
            .shelf
            .search_facets(&request, body.facet_limit)
            .await?
            .into(),
    ))
}
