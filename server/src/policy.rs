//! Which credential a request needs, from its method and path alone. The auth middleware and
//! the OpenAPI document both read this one function, so the schema's security requirements
//! cannot drift from what the server enforces.

use axum::http::Method;

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Never authenticated (probes and version).
    Open,
    /// Any configured credential.
    Read,
    /// A write-scope credential.
    Write,
}

/// Routes that never require a credential.
pub const OPEN_PATHS: &[&str] = &["/health", "/ready", "/version"];

/// POST routes that only read (search).
pub const READ_POSTS: &[&str] = &["/search", "/search/results", "/search/facets"];

/// Path prefixes that need write scope whatever the method.
pub const WRITE_ONLY_PREFIXES: &[&str] = &["/config", "/metrics", "/imports/page-manifest"];

/// True when `path` is `prefix` or lies below it (`/metrics/prometheus` under `/metrics`).
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The access `method path` needs. Paths are compared as received (percent-encoded); a path
/// that only matches a route after decoding matches no route at all, so it cannot slip past.
pub fn required_access(method: &Method, path: &str) -> Access {
    if OPEN_PATHS.contains(&path) {
        return Access::Open;
    }
    if WRITE_ONLY_PREFIXES.iter().any(|p| under(path, p)) {
        return Access::Write;
    }
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Access::Read;
    }
    if *method == Method::POST && READ_POSTS.contains(&path) {
        return Access::Read;
    }
    Access::Write
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_table_of_the_spec() {
        let cases = [
            (Method::GET, "/health", Access::Open),
            (Method::GET, "/ready", Access::Open),
            (Method::GET, "/version", Access::Open),
            (Method::GET, "/health/x", Access::Read),
            (Method::GET, "/documents", Access::Read),
            (Method::HEAD, "/documents/doc_1", Access::Read),
            (Method::GET, "/documents/doc_1/pages", Access::Read),
            (Method::OPTIONS, "/runs", Access::Read),
            (Method::GET, "/openapi.json", Access::Read),
            (Method::POST, "/search", Access::Read),
            (Method::POST, "/search/results", Access::Read),
            (Method::POST, "/search/facets", Access::Read),
            (Method::POST, "/search/other", Access::Write),
            (Method::GET, "/config", Access::Write),
            (Method::GET, "/metrics", Access::Write),
            (Method::GET, "/metrics/prometheus", Access::Write),
            (Method::GET, "/imports/page-manifest", Access::Write),
            (Method::GET, "/imports/status", Access::Read),
            (Method::GET, "/configuration", Access::Read),
            (Method::POST, "/documents", Access::Write),
            (Method::POST, "/documents/batch", Access::Write),
            (Method::DELETE, "/documents/doc_1", Access::Write),
            (Method::POST, "/runs/run_1/cancel", Access::Write),
        ];
        for (method, path, expected) in cases {
            assert_eq!(required_access(&method, path), expected, "{method} {path}");
        }
    }
}
