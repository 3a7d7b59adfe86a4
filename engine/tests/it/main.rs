//! The engine's component tests, compiled into one binary: pipeline compilation, the executor
//! and the durable queue, on real SQLite files with real migrations.

mod common;
mod executor;
mod pipeline;
mod queue;
