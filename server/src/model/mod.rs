//! The JSON shapes of the API (the objects docs/api.md describes), one module per resource,
//! as types that both serialize the responses and describe them in `/openapi.json`. Built
//! from the application's types with `From`, so the wire shape is owned here and the domain
//! stays free of HTTP; where the wire shape is the domain's own (the run, its stages, the
//! queue report), the application's type is served as it is.

pub mod documents;
pub mod events;
pub mod runs;
pub mod search;
pub mod service;
