//! Service routes: `/health`, `/ready`, `/version` (open; `/ready` under the rate limit),
//! `/classifications`, `/config` (write scope) and `/openapi.json`.

use axum::Json;
use axum::extract::{Request, State};
use shelf_app::audit::{DenialEvent, DenialReason};
use utoipa_axum::routes;

use crate::auth::presented_credential;
use crate::client_ip::{client_ip, client_key};
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::model::service::{Classifications, ConfigOut, Health, ModelReady, Ready, Version};
use crate::policy::Policy;
use crate::routes::Resource;
use crate::state::AppState;

pub fn routes() -> Resource {
    Resource::new()
        // Probes and the version: never authenticated (load balancers hold no key).
        .route(Policy::Open, routes!(health))
        .route(Policy::Open, routes!(ready))
        .route(Policy::Open, routes!(version))
        .route(Policy::Read, routes!(classifications))
        // The effective settings describe the deployment: not for read keys.
        .route(Policy::WriteOnly, routes!(config))
        .route(Policy::Read, routes!(openapi))
}

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
/// Verifies that the data directory and `uploads/` take a durable write, that every volume
/// Shelf writes to keeps `SHELF_MIN_FREE_BYTES`, that the database opens on a fresh
/// connection and passed its last `PRAGMA quick_check` (run at most every
/// `SHELF_READY_FULL_CHECK_SECONDS`), and that its migrations are exactly this binary's. 503
/// `service_unavailable` otherwise, with the reason. `model` reports the language-model check
/// the process made when it started (a process whose model is missing never starts). Counted against
/// `SHELF_API_RATE_LIMIT_PER_MINUTE` per client, apart from the client's other requests.
#[utoipa::path(
    get, path = "/ready", operation_id = "ready", tag = "service",
    responses(
        (status = 200, body = Ready),
        (status = 429, description = "`rate_limited` (with `Retry-After`)", body = ErrorBody),
        (status = 503, body = ErrorBody),
    )
)]
pub async fn ready(State(state): State<AppState>, req: Request) -> Result<Json<Ready>, ApiError> {
    limit_probes(&state, &req)?;
    let ready = state.shelf.readiness().await?;
    Ok(Json(Ready {
        status: "ready".into(),
        database: "ok".into(),
        storage: "ok".into(),
        applied_migrations: ready.applied_migrations,
        model: {
            let model = state.shelf.model_status();
            ModelReady {
                status: model.status.to_string(),
                detail: model.detail,
            }
        },
    }))
}

/// `/ready` needs no key (a load balancer probes it), yet each call opens the database and
/// fsyncs two probe files, so it is not free: it counts against the rate limit per client, under
/// an identity of its own (`ready:<client>`), so that probes neither use up the window of the
/// client's other requests nor ride on it.
fn limit_probes(state: &AppState, req: &Request) -> Result<(), ApiError> {
    if !state.limiter.enabled() {
        return Ok(());
    }
    let settings = &state.shelf.settings;
    let client = client_ip(req, &settings.api.trusted_proxy_cidrs);
    let key = client.map_or_else(
        || "unknown".to_string(),
        |ip| client_key(ip, settings.api.client_ipv6_prefix),
    );
    if let crate::rate_limit::Verdict::Limited { retry_after } =
        state.limiter.check(&format!("ready:{key}"))
    {
        state.audit.deny(DenialEvent {
            method: req.method().as_str().to_string(),
            path: "/ready".to_string(),
            client_host: client.map(|ip| ip.to_string()),
            client_key: key,
            credential_present: presented_credential(req.headers()).is_some(),
            scope: None,
            reason: DenialReason::RateLimited,
            retry_after_seconds: Some(retry_after),
        });
        return Err(
            ApiError::new(ErrorCode::RateLimited, "Rate limit exceeded; retry later")
                .retry_after(retry_after),
        );
    }
    Ok(())
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
pub async fn openapi() -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        crate::openapi::document_json(),
    )
}
