//! The pipeline and worker section: which pipeline new runs use, and how a worker claims,
//! leases and polls for runs.

use std::path::PathBuf;

use super::llm::LlmProvider;
use super::reader::{COUNT, Reader};

#[derive(Debug, Clone)]
pub struct PipelineSettings {
    /// `SHELF_PIPELINE`: the pipeline of new runs.
    pub name: String,
    /// `SHELF_PIPELINES_DIR`: the operator's `<name>.yaml` pipelines.
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// `SHELF_WORKER_CONCURRENCY`: runs in flight, fixed; `None` lets them follow the model
    /// server's capacity (the default with a remote model).
    pub concurrency: Option<usize>,
    /// `SHELF_WORKER_MAX_RUNS`: the most runs a worker following the model keeps in flight.
    pub max_runs: usize,
    pub lease_seconds: u64,
    pub heartbeat_ms: u64,
    pub poll_ms: u64,
    pub max_reclaims: u32,
}

pub(super) fn parse_pipeline(r: &mut Reader) -> PipelineSettings {
    PipelineSettings {
        name: r.string("SHELF_PIPELINE", "default"),
        dir: r.optional("SHELF_PIPELINES_DIR").map(PathBuf::from),
    }
}

/// The worker section; its default concurrency depends on the provider.
pub(super) fn parse(r: &mut Reader, provider: LlmProvider) -> WorkerSettings {
    let worker = WorkerSettings {
        concurrency: match r.raw("SHELF_WORKER_CONCURRENCY") {
            None => provider.default_worker_concurrency(),
            Some(_) => Some(r.parse("SHELF_WORKER_CONCURRENCY", 1, COUNT)),
        },
        max_runs: r.parse("SHELF_WORKER_MAX_RUNS", 64, COUNT),
        lease_seconds: r.parse("SHELF_WORKER_LEASE_SECONDS", 30, COUNT),
        heartbeat_ms: r.parse("SHELF_WORKER_HEARTBEAT_MS", 1000, COUNT),
        poll_ms: r.parse("SHELF_WORKER_POLL_MS", 100, COUNT),
        max_reclaims: r.parse("SHELF_WORKER_MAX_RECLAIMS", 3, COUNT),
    };
    r.check(
        worker.concurrency != Some(0),
        "SHELF_WORKER_CONCURRENCY must be at least 1",
    );
    r.check(
        worker.max_runs != 0,
        "SHELF_WORKER_MAX_RUNS must be at least 1",
    );
    r.check(
        worker.lease_seconds != 0,
        "SHELF_WORKER_LEASE_SECONDS must be at least 1",
    );
    r.check(
        worker.heartbeat_ms != 0 && worker.heartbeat_ms < worker.lease_seconds.saturating_mul(1000),
        "SHELF_WORKER_HEARTBEAT_MS must be above 0 and below SHELF_WORKER_LEASE_SECONDS",
    );
    worker
}
