//! Shelf's workflow engine: pipeline files compiled into checked stage DAGs, the `Stage` trait
//! and its registry, the run and stage state machines, checkpoints, run events, the durable
//! lease-based queue and the executor. It knows nothing of documents, HTTP, LLMs or the CLI.

pub mod clock;
mod effects;
pub mod error;
pub mod event_signal;
pub mod executor;
pub mod lifecycle;
pub mod pipeline;
pub mod queue_health;
pub mod registry;
pub mod retention;
pub mod stage;
pub mod state;
pub mod store;
pub mod subject_sql;
pub mod time;
pub mod wake;
pub mod warnings;
pub mod worker;

pub use error::EngineError;
pub use executor::{Engine, EngineConfig, RunHooks};
pub use pipeline::{CompiledPipeline, PipelineError, PipelineSource, RetryPolicy};
pub use registry::Registry;
pub use stage::{Stage, StageContext, StageError, StageInputs};
pub use state::{RunStatus, StageStatus};
pub use store::{Claim, EventRecord, NewRun, RunRecord, RunStore, StageRecord, SubjectGuard};
pub use warnings::RunWarning;
pub use worker::{ClaimGate, ClaimPacer, Worker, WorkerConfig};
