//! The engine's component tests, compiled into one binary: pipeline compilation, the executor
//! and the durable queue, on real SQLite files with real migrations; the PostgreSQL harness.

mod common;
mod executor;
mod lifecycle;
#[path = "../../../tests/support/pg_cluster.rs"]
mod pg_cluster;
mod pg_cluster_selftest;
mod pipeline;
mod postgres;
mod queue;
mod retention;
mod subject_sql;
