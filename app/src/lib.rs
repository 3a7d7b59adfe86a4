//! Shelf's application layer: the typed settings and the operations both front ends call
//! (ingest, runs, search, pipelines, workers). The CLI and the API are thin layers over
//! [`Shelf`]; neither re-implements the other.

pub mod admin;
pub mod audit;
pub mod backfill;
pub mod batch;
pub mod db;
pub mod disk;
pub mod documents_service;
pub mod embedding;
pub mod error;
pub mod export;
pub mod failures;
pub mod hooks;
pub mod imports;
pub mod llm_report;
pub mod metrics;
pub mod model_check;
pub mod okf;
pub mod pipelines;
pub mod providers;
pub mod queue;
pub mod readiness;
pub mod retention;
pub mod runs;
pub mod settings;
pub mod shelf;
pub mod telemetry;
pub mod uploads;
pub mod web_sessions;

pub use error::AppError;
pub use export::{Export, ExportFormat};
pub use queue::QueueReport;
pub use runs::{RunView, StageView};
pub use settings::Settings;
pub use shelf::{ProcessingMode, Shelf};
