//! Open Knowledge Format: one document's concept (`/documents/{id}/okf`) and a bounded bundle
//! (`/export/okf`). The layout is the application layer's (`shelf_app::okf`); docs/okf.md.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use shelf_app::okf::{OkfBundle, OkfFile, OkfFilter};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiPath, ApiQuery, page_limit};
use crate::policy::Policy;
use crate::routes::Resource;
use crate::state::AppState;

pub fn routes() -> Resource {
    Resource::new()
        .route(Policy::Read, routes!(concept))
        .route(Policy::Read, routes!(bundle))
}

/// Default and largest `limit` of a bundle: the server builds it in memory.
pub const DEFAULT_BUNDLE_LIMIT: u64 = 100;
pub const MAX_BUNDLE_LIMIT: u64 = 1000;
/// Longest accepted `classification_prefix` and `tag`.
const MAX_PREFIX_CHARS: usize = 32;
const MAX_TAG_CHARS: usize = 200;

/// A concept file: its path in a bundle and its Markdown.
// A mirror of `OkfFile`, which is any file of a bundle (index files too): this type and its
// schema text are for concept files only.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OkfConceptOut {
    /// Relative path, `/`-separated (`600-technology/630-agriculture/horses.md`).
    pub path: String,
    /// YAML front matter, `> synopsis`, the cleaned text, `## Related`.
    pub content: String,
}

impl From<OkfFile> for OkfConceptOut {
    fn from(f: OkfFile) -> Self {
        OkfConceptOut {
            path: f.path,
            content: f.content,
        }
    }
}

/// A document's OKF concept
///
/// The concept file the document has in every bundle, at the same path. `## Related` links the
/// 20 newest other processed documents with the same Dewey code.
#[utoipa::path(
    get, path = "/documents/{id}/okf", operation_id = "get_document_okf", tag = "export",
    params(("id" = String, Path, description = "Document id")),
    responses(
        (status = 200, body = OkfConceptOut),
        (status = 404, description = "`not_found`: no such document, or no cleaned output or classification yet", body = ErrorBody),
    )
)]
pub async fn concept(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<OkfConceptOut>, ApiError> {
    Ok(Json(state.shelf.okf_concept(&id).await?.into()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BundleQuery {
    /// Only Dewey codes starting with this (`636` matches `636` and `636.1`); digits and `.`,
    /// empty for no filter.
    #[param(max_length = 32, pattern = r"^[0-9.]*$")]
    pub classification_prefix: Option<String>,
    /// Only documents with this tag (ASCII case-insensitive; surrounding spaces are ignored,
    /// empty for no filter).
    #[param(max_length = 200)]
    pub tag: Option<String>,
    /// Most concepts (default 100, at most 1000); skipped documents are bounded the same way.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
}

/// An empty value means no filter.
fn present(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// OKF bundle
///
/// Processed documents as an Open Knowledge Format v0.1 bundle, ordered by Dewey code then
/// newest first: concept files at their Dewey paths and an `index.md` in every folder.
/// Matching documents without cleaned output or classification are listed in `skipped`. The
/// bundle is built in memory, so it is bounded by `limit`; `shelf export --okf DIR` streams a
/// whole library to disk.
#[utoipa::path(
    get, path = "/export/okf", operation_id = "export_okf", tag = "export", params(BundleQuery),
    responses(
        (status = 200, body = OkfBundle),
        (status = 422, description = "`validation_error`: `limit` outside 1 to 1000, a `classification_prefix` other than digits and `.` or over 32 characters, a `tag` over 200 characters", body = ErrorBody),
    )
)]
pub async fn bundle(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<BundleQuery>,
) -> Result<Json<OkfBundle>, ApiError> {
    let limit = page_limit("limit", q.limit, DEFAULT_BUNDLE_LIMIT, MAX_BUNDLE_LIMIT)?;
    // Checked as sent, as the schema states it (a prefix has no spaces to trim).
    if let Some(prefix) = &q.classification_prefix
        && (prefix.chars().count() > MAX_PREFIX_CHARS
            || !prefix.chars().all(|c| c.is_ascii_digit() || c == '.'))
    {
        return Err(ApiError::invalid(
            &["query", "classification_prefix"],
            format!(
                "Expected digits and `.` (a Dewey code prefix), at most {MAX_PREFIX_CHARS} characters"
            ),
            "value_error",
        ));
    }
    let classification_prefix = present(q.classification_prefix);
    // The length as sent, as the schema's `maxLength` counts it; the spaces around go after.
    if q.tag
        .as_ref()
        .is_some_and(|t| t.chars().count() > MAX_TAG_CHARS)
    {
        return Err(ApiError::invalid(
            &["query", "tag"],
            format!("String should have at most {MAX_TAG_CHARS} characters"),
            "string_too_long",
        ));
    }
    let tag = present(q.tag);
    let bundle = state
        .shelf
        .okf_bundle(OkfFilter {
            classification_prefix,
            tag,
            limit: Some(limit),
        })
        .await?;
    Ok(Json(bundle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::mirror::{assert_mirrors, keys};

    /// The same fields: the mirror exists because the API's type is a concept file only.
    #[test]
    fn okf_concept_out_mirrors_okf_file() {
        let file = OkfFile {
            path: "600-technology/630-agriculture/goats.md".into(),
            content: "---\n---\n".into(),
        };
        assert_mirrors(
            "OkfFile",
            keys(&file),
            keys(&OkfConceptOut::from(file.clone())),
            &[],
            &[],
        );
    }
}
