//! Which credential a request needs. Each route declares its [`Policy`] where it registers its
//! handler (`routes::Resource::route`, in the resource's own file); this module resolves a
//! request's method and raw path against those declarations. The auth middleware and the
//! OpenAPI document both read [`required_access`], so the schema's security requirements
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
    /// A web page or asset (`/` and everything under `/ui`): the pages check the session
    /// themselves, sending a browser to the sign-in page rather than answering JSON.
    Page,
}

/// True for the web pages' paths (see [`Access::Page`]).
pub fn is_page_path(path: &str) -> bool {
    path == "/" || under(path, "/ui")
}

/// What a route declares next to its handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// No credential, whatever the method (so a probe sent with the wrong method still gets
    /// its `405` without a key): `/health`, `/ready`, `/version`.
    Open,
    /// Any configured credential.
    Read,
    /// A write-scope credential.
    Write,
    /// A write-scope credential whatever the method, on the path and on every path below it,
    /// routed or not: what a read key must never see, not even as a `404` or `405`
    /// (settings, metrics, page manifests).
    WriteOnly,
}

/// One declaration: `method path` (an axum template, `{id}` for a segment) needs `policy`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub method: Method,
    pub path: String,
    pub policy: Policy,
}

/// Every route's declaration, as collected from the resources' routers.
#[derive(Debug, Clone, Default)]
pub struct Policies(pub Vec<Rule>);

/// True when `path` is `prefix` or lies below it (`/metrics/prometheus` under `/metrics`).
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Whether the raw `path` is one `template` routes: literal segments compared as received,
/// a `{name}` segment taking any one non-empty segment (as the router does).
fn matches(template: &str, path: &str) -> bool {
    let mut want = template.split('/');
    let mut got = path.split('/');
    loop {
        match (want.next(), got.next()) {
            (None, None) => return true,
            (Some(w), Some(g)) if w.starts_with('{') && w.ends_with('}') => {
                if g.is_empty() {
                    return false;
                }
            }
            (Some(w), Some(g)) if w == g => {}
            _ => return false,
        }
    }
}

impl Policies {
    /// The access `method path` needs. Paths are compared as received (percent-encoded); a
    /// path that only matches a route after decoding matches no route at all, so it cannot
    /// slip past. A request no declaration covers (an unknown path, or a method its path does
    /// not route) needs read scope to read (`GET`, `HEAD`, `OPTIONS`) and write scope
    /// otherwise.
    pub fn access(&self, method: &Method, path: &str) -> Access {
        if is_page_path(path) {
            return Access::Page;
        }
        let declared = |policy: Policy| self.0.iter().filter(move |r| r.policy == policy);
        if declared(Policy::Open).any(|r| r.path == path) {
            return Access::Open;
        }
        if declared(Policy::WriteOnly).any(|r| under(path, &r.path)) {
            return Access::Write;
        }
        let rule = self
            .0
            .iter()
            .find(|r| r.method == *method && matches(&r.path, path));
        match rule.map(|r| r.policy) {
            Some(Policy::Read) => Access::Read,
            Some(Policy::Write | Policy::WriteOnly) => Access::Write,
            Some(Policy::Open) => Access::Open,
            None if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) => Access::Read,
            None => Access::Write,
        }
    }
}

/// The access `method path` needs (see [`Policies::access`]).
pub fn required_access(method: &Method, path: &str) -> Access {
    crate::routes::declared().policies.access(method, path)
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
            (Method::POST, "/health", Access::Open),
            (Method::GET, "/health/x", Access::Read),
            (Method::GET, "/documents", Access::Read),
            (Method::HEAD, "/documents/doc_1", Access::Read),
            (Method::GET, "/documents/doc_1/pages", Access::Read),
            (Method::OPTIONS, "/runs", Access::Read),
            (Method::GET, "/openapi.json", Access::Read),
            (Method::POST, "/search", Access::Read),
            (Method::POST, "/search/results", Access::Read),
            (Method::POST, "/search/facets", Access::Read),
            (Method::GET, "/search", Access::Read),
            (Method::POST, "/search/other", Access::Write),
            (Method::POST, "/search/results/x", Access::Write),
            (Method::GET, "/config", Access::Write),
            (Method::POST, "/config", Access::Write),
            (Method::GET, "/config/x", Access::Write),
            (Method::GET, "/metrics", Access::Write),
            (Method::GET, "/metrics/prometheus", Access::Write),
            (Method::GET, "/metrics/other", Access::Write),
            (Method::GET, "/imports/page-manifest", Access::Write),
            (Method::GET, "/imports/status", Access::Read),
            (Method::GET, "/configuration", Access::Read),
            (Method::POST, "/documents", Access::Write),
            (Method::PUT, "/documents", Access::Write),
            (Method::POST, "/documents/batch", Access::Write),
            (Method::DELETE, "/documents/doc_1", Access::Write),
            (Method::POST, "/runs/run_1/cancel", Access::Write),
            (Method::GET, "/runs//events", Access::Read),
            (Method::GET, "/", Access::Page),
            (Method::GET, "/ui", Access::Page),
            (Method::POST, "/ui/sign-in", Access::Page),
            (Method::GET, "/uix", Access::Read),
        ];
        for (method, path, expected) in cases {
            assert_eq!(required_access(&method, path), expected, "{method} {path}");
        }
    }

    /// The declarations that differ from the default (`GET` reads, anything else writes) are
    /// exactly the spec's: three open probes, three read-only POSTs, three write-only trees.
    #[test]
    fn only_the_spec_s_routes_differ_from_the_default() {
        let policies = crate::routes::api().policies;
        let mut special: Vec<String> = policies
            .0
            .iter()
            .filter(|r| {
                let default = if r.method == Method::GET {
                    Policy::Read
                } else {
                    Policy::Write
                };
                r.policy != default
            })
            .map(|r| format!("{:?} {} {}", r.policy, r.method, r.path))
            .collect();
        special.sort();
        assert_eq!(
            special,
            [
                "Open GET /health",
                "Open GET /ready",
                "Open GET /version",
                "Read POST /search",
                "Read POST /search/facets",
                "Read POST /search/results",
                "WriteOnly GET /config",
                "WriteOnly GET /imports/page-manifest",
                "WriteOnly GET /metrics",
                "WriteOnly GET /metrics/prometheus",
            ]
        );
    }

    #[test]
    fn templates_match_one_non_empty_segment() {
        assert!(matches("/runs/{id}", "/runs/run_1"));
        assert!(!matches("/runs/{id}", "/runs/"));
        assert!(!matches("/runs/{id}", "/runs/run_1/cancel"));
        assert!(!matches("/runs/{id}/cancel", "/runs/run_1"));
        assert!(matches("/runs/{id}/cancel", "/runs/run%2F1/cancel"));
    }
}
