//! Service routes: `/health`, `/ready`, `/version` (open), `/classifications`, `/config`
//! (write scope) and `/openapi.json`.

use axum::Json;
use axum::extract::State;

use crate::error::{ApiError, ErrorBody};
use crate::model::{Classifications, ConfigOut, Health, Ready, Version};
use crate::state::AppState;

/// Process health
///
/// Answers while the process serves requests; never authenticated.
#[utoipa::path(get, path = "/health", operation_id = "health", tag = "service", responses((status = 200, body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health {
        status: "healthy".into(),
    })
}

/// Readiness
///
/// Verifies the data directory is writable, the database passes `PRAGMA quick_check`, and its
/// migrations are exactly this binary's. 503 `service_unavailable` otherwise, with the reason.
#[utoipa::path(
    get, path = "/ready", operation_id = "ready", tag = "service",
    responses((status = 200, body = Ready), (status = 503, body = ErrorBody))
)]
pub async fn ready(State(state): State<AppState>) -> Result<Json<Ready>, ApiError> {
    let ready = state.shelf.readiness().await?;
    Ok(Json(Ready {
        status: "ready".into(),
        database: "ok".into(),
        storage: "ok".into(),
        applied_migrations: ready.applied_migrations,
    }))
}

/// The commit the binary was built from, set by build.rs.
pub const GIT_SHA: &str = env!("SHELF_GIT_SHA");

/// Open Knowledge Format version of exports (the application layer writes it).
pub const OKF_VERSION: &str = shelf_app::okf::OKF_VERSION;

/// What this binary is: the package version, the commit, the latest migration it knows (the
/// schema it expects) and the OKF version it writes. `/version` and `shelf --version` both
/// show this.
pub fn version_info() -> Version {
    Version {
        version: env!("CARGO_PKG_VERSION").into(),
        git_sha: GIT_SHA.into(),
        schema_version: shelf_migrations::known_migrations()
            .last()
            .cloned()
            .unwrap_or_default(),
        okf_version: OKF_VERSION.into(),
    }
}

/// Version
#[utoipa::path(get, path = "/version", operation_id = "version", tag = "service", responses((status = 200, body = Version)))]
pub async fn version() -> Json<Version> {
    Json(version_info())
}

/// Dewey classifications
///
/// The ten classes and hundred divisions with their labels, plus finer codes in use.
#[utoipa::path(
    get, path = "/classifications", operation_id = "list_classifications", tag = "service",
    responses((status = 200, body = Classifications))
)]
pub async fn classifications(
    State(state): State<AppState>,
) -> Result<Json<Classifications>, ApiError> {
    Ok(Json(Classifications {
        classifications: state.shelf.classifications().await?,
    }))
}

/// Effective settings
///
/// LLM, chunking, extraction, OCR, API limits and bind, storage; secrets excluded. Write scope.
#[utoipa::path(get, path = "/config", operation_id = "get_config", tag = "service", responses((status = 200, body = ConfigOut)))]
pub async fn config(State(state): State<AppState>) -> Json<ConfigOut> {
    Json(ConfigOut(state.shelf.settings.redacted()))
}

/// This OpenAPI document
///
/// Needs a credential when any is configured.
#[utoipa::path(
    get, path = "/openapi.json", operation_id = "get_openapi", tag = "service",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json", body = Object))
)]
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(crate::openapi::document())
}
