//! The routes of the API, one file per resource. Each file registers its own handlers, with
//! their OpenAPI paths (`#[utoipa::path]`, collected by utoipa-axum's `routes!`) and their
//! [`Policy`], in a `routes()` function returning a [`Resource`]; [`api`] merges them. The
//! router, the `/openapi.json` paths and the auth middleware's scope table all come from
//! those registrations, so nothing lists the routes a second time.

pub mod documents;
pub mod events;
pub mod imports;
pub mod okf;
pub mod queue;
pub mod runs;
pub mod search;
pub mod service;

use std::sync::LazyLock;

use axum::Router;
use axum::http::Method;
use utoipa::openapi::path::PathItem;
use utoipa::openapi::{RefOr, Schema};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use crate::metrics;
use crate::middleware::not_found;
use crate::policy::{Policies, Policy, Rule};
use crate::state::AppState;

/// One resource's routes: handlers, their OpenAPI paths and schemas, and what each needs.
/// (Its router starts from an empty document: `OpenApiRouter::new` would fill in
/// utoipa-axum's own package info.)
#[derive(Default)]
pub struct Resource {
    router: OpenApiRouter<AppState>,
    policies: Policies,
}

impl Resource {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `handlers` (`routes!(a, b)`: handlers of one path) as needing `policy`.
    pub fn route(mut self, policy: Policy, handlers: UtoipaMethodRouter<AppState>) -> Self {
        for (path, item) in handlers.1.paths.iter() {
            for method in methods(item) {
                self.policies.0.push(Rule {
                    method,
                    path: path.clone(),
                    policy,
                });
            }
        }
        self.router = self.router.routes(handlers);
        self
    }

    /// Adds schemas that the document lists though no operation refers to them (a schema
    /// the operations' bodies reach is added by [`Resource::route`]).
    pub fn schemas(mut self, schemas: impl IntoIterator<Item = (String, RefOr<Schema>)>) -> Self {
        let components = self
            .router
            .get_openapi_mut()
            .components
            .get_or_insert_with(Default::default);
        for (name, schema) in schemas {
            components.schemas.entry(name).or_insert(schema);
        }
        self
    }

    fn merge(mut self, other: Resource) -> Self {
        self.router = self.router.merge(other.router);
        self.policies.0.extend(other.policies.0);
        self
    }
}

/// A schema as [`Resource::schemas`] takes it.
pub fn schema<T: utoipa::ToSchema>() -> (String, RefOr<Schema>) {
    (T::name().into_owned(), T::schema())
}

/// The methods a path item has operations for.
pub fn methods(item: &PathItem) -> Vec<Method> {
    [
        (Method::GET, item.get.is_some()),
        (Method::PUT, item.put.is_some()),
        (Method::POST, item.post.is_some()),
        (Method::DELETE, item.delete.is_some()),
        (Method::OPTIONS, item.options.is_some()),
        (Method::HEAD, item.head.is_some()),
        (Method::PATCH, item.patch.is_some()),
        (Method::TRACE, item.trace.is_some()),
    ]
    .into_iter()
    .filter_map(|(method, present)| present.then_some(method))
    .collect()
}

/// Every resource's routes, merged.
pub struct Api {
    pub router: OpenApiRouter<AppState>,
    pub policies: Policies,
}

/// Every resource. A new resource file adds its `routes()` here (and its `mod` line above).
pub fn api() -> Api {
    let all = [
        documents::routes(),
        okf::routes(),
        runs::routes(),
        queue::routes(),
        events::routes(),
        imports::routes(),
        search::routes(),
        service::routes(),
        metrics::routes(),
    ]
    .into_iter()
    .fold(Resource::new(), Resource::merge);
    Api {
        router: all.router,
        policies: all.policies,
    }
}

/// What the resources declare, built once per process: the routes, their policies and their
/// OpenAPI paths and schemas. Registering a handler generates its schemas, so the router, the
/// auth middleware's scope table and `/openapi.json` share this one build rather than each
/// generating every schema again (and keeping the memory that leaves behind).
pub struct Declared {
    router: Router<AppState>,
    pub policies: Policies,
    /// Taken by the one document `/openapi.json` serves (`crate::openapi`).
    openapi: std::sync::Mutex<Option<utoipa::openapi::OpenApi>>,
}

impl Declared {
    /// The routes' OpenAPI paths and schemas, for the document that serves them; built again
    /// only if asked twice.
    pub fn take_openapi(&self) -> utoipa::openapi::OpenApi {
        self.openapi
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
            .unwrap_or_else(|| api().router.into_openapi())
    }
}

static DECLARED: LazyLock<Declared> = LazyLock::new(|| {
    let Api { router, policies } = api();
    let (router, openapi) = router.split_for_parts();
    Declared {
        router,
        policies,
        openapi: std::sync::Mutex::new(Some(openapi)),
    }
});

/// The declarations of this server's routes (see [`Declared`]).
pub fn declared() -> &'static Declared {
    &DECLARED
}

/// Every route. Unknown paths answer `not_found`, known paths with another method
/// `method_not_allowed` (the error middleware gives that one its JSON body).
pub fn routes() -> Router<AppState> {
    declared()
        .router
        .clone()
        // Every route above: the response carries the matched template for the metrics.
        .route_layer(axum::middleware::from_fn(metrics::mark_route))
        .route_layer(axum::middleware::from_fn(crate::request_span::record_route))
        .fallback(not_found)
}
