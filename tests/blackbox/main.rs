//! Black-box tests of the real `shelf` binary: CLI commands, worker processes killed mid-run,
//! the HTTP API on a real port. One test binary for all of them.

mod admin;
mod api;
mod batch;
mod cli;
mod cluster;
mod container;
mod crash;
mod damage;
#[path = "../support/embedding_model.rs"]
mod embedding_model;
mod export;
mod fake_model;
mod formats;
mod fresh;
mod imports;
mod lifecycle;
mod limits;
#[path = "../support/llama_server.rs"]
mod llama_server;
mod metrics;
mod ocr;
mod okf;
mod on_failure;
mod pages;
#[path = "../support/pg_cluster.rs"]
mod pg_cluster;
mod pipes;
mod process_signals;
mod queue;
mod readiness;
mod real_model;
mod restore;
mod retention;
mod run_races;
mod secrets;
mod semantic;
mod storage;
mod support;
mod telemetry;
mod web;
