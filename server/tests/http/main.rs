//! In-process HTTP tests of the router (`tower::ServiceExt::oneshot`): every route and every
//! error code the API can answer with, on a real SQLite file with real migrations.

mod auth;
mod common;
mod docs;
mod documents;
mod envelope;
mod events;
mod export;
mod imports;
mod okf;
mod pages;
mod runs;
mod search;
mod service;
