//! `/openapi.json`: generated from the handlers' annotations (utoipa, OpenAPI 3.1), whose
//! paths and schemas the resources' routers collect as they register them
//! ([`crate::routes::api`]); this module adds the info, the tags and the envelope. Security
//! requirements and the shared error responses are added by one modifier from
//! [`crate::policy::required_access`], the function the auth middleware enforces, so the
//! document cannot promise anything the server does not do.

use std::sync::LazyLock;

use axum::http::Method;
use utoipa::openapi::link::Link;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder, Schema};
use utoipa::{Modify, OpenApi};

use crate::error::{ErrorBody, ErrorDetail, LocSegment, ValidationIssue};
use crate::policy::{Access, required_access};
use crate::routes::imports;

/// Names of the two security schemes; either one satisfies a protected operation.
pub const API_KEY_SCHEME: &str = "api_key";
pub const BEARER_SCHEME: &str = "bearer";

/// What the document holds beyond the routes: its info, its tags, and the error body every
/// operation can answer. The paths and their schemas come from the resources' routers
/// ([`crate::routes::api`]).
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Shelf API",
        description = "Document ingestion, cleaning and search. Errors are `{detail, code}`; \
                       see docs/errors.md for every code.",
    ),
    components(schemas(ErrorBody, ErrorDetail, ValidationIssue, LocSegment)),
    tags(
        (name = "documents", description = "Uploads and stored documents"),
        (name = "imports", description = "Server-side imports under SHELF_API_IMPORT_ROOT, their manifests and page manifests"),
        (name = "runs", description = "Processing runs"),
        (name = "events", description = "Run events: pages and server-sent event streams"),
        (name = "search", description = "Full-text search (read scope)"),
        (name = "export", description = "Open Knowledge Format concepts and bundles (read scope)"),
        (name = "service", description = "Health, readiness, version, settings, metrics"),
    )
)]
struct ApiDoc;

/// The document, assembled once from the routers' declarations and kept as its JSON text:
/// the structures it is built from are dropped, and a request copies nothing.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    let mut document = ApiDoc::openapi();
    document.merge(crate::routes::declared().take_openapi());
    Envelope.modify(&mut document);
    serde_json::to_string(&document).unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot serialize the OpenAPI document");
        "{}".to_string()
    })
});

/// The document served at `/openapi.json`, as JSON text.
pub fn document_json() -> &'static str {
    &DOCUMENT
}

fn error_response(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
        .into()
}

/// Adds the security schemes, each operation's requirement, and the error responses any
/// operation can give.
struct Envelope;

impl Modify for Envelope {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            API_KEY_SCHEME,
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "x-api-key",
                "A configured key (SHELF_API_KEY, SHELF_API_KEYS, or one whose SHA-256 is configured)",
            ))),
        );
        components.add_security_scheme(
            BEARER_SCHEME,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The same key as `Authorization: Bearer <key>`"))
                    .build(),
            ),
        );
        for (path, item) in openapi.paths.paths.iter_mut() {
            for (method, operation) in operations(item) {
                decorate(&method, path, operation);
            }
        }
        add_links(openapi);
        if let Some(RefOr::T(Schema::Object(import))) = openapi
            .components
            .as_mut()
            .and_then(|c| c.schemas.get_mut("ImportIn"))
        {
            // utoipa has no field for `allOf` with `if`/`then` on an object schema; its
            // extensions are written flat into the object, so they carry the keywords.
            import
                .extensions
                .get_or_insert_with(Default::default)
                .insert("allOf".to_string(), imports::import_in_conditions());
        }
    }
}

/// The operations a new document's id (`/documents/{id}...`) or a new run's id
/// (`/runs/{id}...`) is for, as OpenAPI links on the responses that carry one, so a client
/// (and schemathesis' stateful phase) can follow them with ids that exist.
fn add_links(openapi: &mut utoipa::openapi::OpenApi) {
    let targets = |prefix: &str| -> Vec<String> {
        let mut ids = Vec::new();
        for (path, item) in openapi.paths.paths.iter() {
            if path != prefix && !path.starts_with(&format!("{prefix}/")) {
                continue;
            }
            let mut item = item.clone();
            for (_, operation) in operations(&mut item) {
                ids.extend(operation.operation_id.clone());
            }
        }
        ids
    };
    let by_id = |target: &str| {
        Link::builder()
            .operation_id(target)
            .parameter("path.id", "$response.body#/id")
            .build()
    };
    let document_links: Vec<(String, Link)> = targets("/documents/{id}")
        .iter()
        .map(|target| (target.clone(), by_id(target)))
        .chain([
            (
                "create_run".to_string(),
                Link::builder()
                    .operation_id("create_run")
                    .request_body(Some(
                        serde_json::json!({"document_id": "$response.body#/id"}),
                    ))
                    .build(),
            ),
            (
                "list_runs".to_string(),
                Link::builder()
                    .operation_id("list_runs")
                    .parameter("query.document_id", "$response.body#/id")
                    .build(),
            ),
        ])
        .collect();
    let run_links: Vec<(String, Link)> = targets("/runs/{id}")
        .iter()
        .map(|target| (target.clone(), by_id(target)))
        .collect();
    for (path, method, statuses, links) in [
        (
            "/documents",
            Method::POST,
            &["200", "201"][..],
            &document_links,
        ),
        ("/runs", Method::POST, &["201"][..], &run_links),
        (
            "/documents/{id}/reprocess",
            Method::POST,
            &["201"][..],
            &run_links,
        ),
        ("/runs/{id}/retry", Method::POST, &["201"][..], &run_links),
    ] {
        let Some(item) = openapi.paths.paths.get_mut(path) else {
            continue;
        };
        for (m, operation) in operations(item) {
            if m != method {
                continue;
            }
            for status in statuses {
                if let Some(RefOr::T(response)) = operation.responses.responses.get_mut(*status) {
                    for (name, link) in links {
                        response.links.insert(name.clone(), RefOr::T(link.clone()));
                    }
                }
            }
        }
    }
}

fn operations(item: &mut PathItem) -> Vec<(Method, &mut Operation)> {
    [
        (Method::GET, item.get.as_mut()),
        (Method::PUT, item.put.as_mut()),
        (Method::POST, item.post.as_mut()),
        (Method::DELETE, item.delete.as_mut()),
        (Method::OPTIONS, item.options.as_mut()),
        (Method::HEAD, item.head.as_mut()),
        (Method::PATCH, item.patch.as_mut()),
        (Method::TRACE, item.trace.as_mut()),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.map(|op| (method, op)))
    .collect()
}

fn decorate(method: &Method, path: &str, operation: &mut Operation) {
    let responses = &mut operation.responses.responses;
    // OpenAPI requires a description on every response: annotations that give none get the
    // status's reason phrase.
    for (status, response) in responses.iter_mut() {
        if let RefOr::T(response) = response
            && response.description.is_empty()
        {
            response.description = status
                .parse::<u16>()
                .ok()
                .and_then(|s| axum::http::StatusCode::from_u16(s).ok())
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Response")
                .to_string();
        }
    }
    let mut add = |status: u16, description: &str| {
        responses
            .entry(status.to_string())
            .or_insert_with(|| error_response(description));
    };
    let access = required_access(method, path);
    if access != Access::Open {
        operation.security = Some(vec![
            SecurityRequirement::new::<_, [&str; 0], &str>(API_KEY_SCHEME, []),
            SecurityRequirement::new::<_, [&str; 0], &str>(BEARER_SCHEME, []),
        ]);
        add(
            401,
            "`invalid_api_key`: missing or wrong credential (with `WWW-Authenticate: Bearer`)",
        );
        add(
            429,
            "`rate_limited`: the identity's window is used up (with `Retry-After`)",
        );
        if access == Access::Write {
            add(
                403,
                "`insufficient_scope`: a read-scope key on a write route",
            );
        }
    }
    if access == Access::Write && !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        add(
            503,
            "`service_unavailable`: the database is busy (another process held its write lock \
             past the busy timeout; with `Retry-After`, nothing kept), or `database_corrupt`",
        );
    }
    let takes_input = operation.request_body.is_some()
        || operation.parameters.as_ref().is_some_and(|p| !p.is_empty());
    if takes_input {
        add(
            422,
            "`validation_error`: detail is a list of `{loc, msg, type}`",
        );
    }
    if operation.request_body.is_some() {
        add(413, "`request_too_large`: body over the request limit");
    }
    add(
        500,
        "`server_error`: `Internal server error`; the cause is logged",
    );
}
