//! [`Shelf`]: one handle on the database, the document store and the engine, with the
//! operations the CLI and the API expose.

use shelf_stages::embed::Embeddings;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sea_orm::DatabaseConnection;
use serde::{Deserialize, Serialize};
use serde_json::json;
use shelf_documents::{DocumentStore, Ingested, SearchIds, SearchPage, SearchRequest};
use shelf_engine::executor::snapshot_source;
use shelf_engine::store::CancelOutcome;
use shelf_engine::{
    CompiledPipeline, Engine, EngineConfig, EventRecord, PipelineSource, RunRecord, RunStatus,
    RunStore, Worker, WorkerConfig,
};
use shelf_stages::StageDeps;
use shelf_stages::chunk::ChunkSettings;
use shelf_stages::correct::CorrectionSettings;
use shelf_stages::extract::{ExtractionSettings, Limits};
use shelf_stages::ocr::{OcrSettings, OcrStageSettings};
use shelf_stages::provider::limiter::{Limiter, ModelPacer};
use tokio_util::sync::CancellationToken;

use crate::db;
use crate::error::AppError;
use crate::hooks::DocumentHooks;
use crate::metrics::{Metrics, TokenPrices};
use crate::pipelines;
use crate::runs::RunView;
use crate::settings::{CPU_RUNS, Settings};

/// What happens to a new run: queued for a worker, processed here and now, or not made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ProcessingMode {
    #[default]
    Process,
    Queue,
    None,
}

impl ProcessingMode {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "process" => Some(Self::Process),
            "queue" => Some(Self::Queue),
            "none" => Some(Self::None),
            _ => None,
        }
    }
}

/// A run with its stages and one page of events.
#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    #[serde(flatten)]
    pub run: RunView,
    pub events: Vec<EventRecord>,
}

#[derive(Clone)]
pub struct Shelf {
    pub settings: Arc<Settings>,
    pub db: DatabaseConnection,
    pub documents: DocumentStore,
    pub engine: Engine,
    /// This process's metrics (`/metrics`, a worker's `--metrics-port`).
    pub metrics: Arc<Metrics>,
    /// How documents are extracted, for conversions outside a run (imports).
    pub extraction: ExtractionSettings,
    /// What `/ready` keeps between calls (`crate::readiness`).
    pub(crate) readiness: Arc<crate::readiness::ReadinessCache>,
    /// The limiter of this process's language-model requests, with a remote model.
    pub llm_limiter: Option<Arc<Limiter>>,
    /// The local embedding model (`SHELF_EMBEDDING_MODEL_DIR`), for `embed` and search.
    pub embeddings: Option<Embeddings>,
    /// The language model's check before work, and what it found (`crate::model_check`).
    model_gate: crate::model_check::ModelGate,
}

impl Shelf {
    /// Opens Shelf for any command or service: creates the data directory and the database
    /// when missing and applies pending migrations (under the write lock, see [`db::migrate`]),
    /// so `shelf api`, `shelf worker` and `shelf import` work on a new data directory. A
    /// database written by a newer Shelf is refused.
    pub async fn open(settings: Settings) -> Result<Shelf, AppError> {
        let db = db::connect_settings(&settings, settings.storage.database_max_connections).await?;
        db::migrate(&db).await?;
        let embeddings = crate::embedding::load(&settings.embedding).await?;
        Ok(Self::assemble(settings, db, embeddings))
    }

    fn assemble(
        settings: Settings,
        db: DatabaseConnection,
        embeddings: Option<Embeddings>,
    ) -> Shelf {
        let documents = DocumentStore::new(db.clone(), settings.storage.data_dir.clone());
        let extraction = ExtractionSettings {
            max_bytes: settings.extract.max_bytes,
            limits: Limits {
                timeout: Duration::from_secs(settings.extract.timeout_seconds),
                universal_max_input_bytes: settings.extract.universal_max_input_bytes,
                universal_timeout: Duration::from_secs(settings.extract.universal_timeout_seconds),
                ..Limits::default()
            },
            cache: settings.extract.cache,
        };
        let provider = crate::providers::build(&settings);
        let deps = StageDeps {
            documents: documents.clone(),
            provider: provider.provider.clone(),
            chunking: ChunkSettings {
                target_chars: settings.chunking.target_chars,
                overlap_chars: settings.chunking.overlap_chars,
            },
            llm_concurrency: settings.llm.stage_concurrency(),
            extraction: extraction.clone(),
            ocr: OcrStageSettings {
                recognition: OcrSettings {
                    languages: settings.ocr.languages.clone(),
                    pdf_dpi: settings.ocr.pdf_dpi,
                    page_timeout: Duration::from_secs(settings.ocr.timeout_seconds),
                    rotation_retry: settings.ocr.rotation_retry,
                    low_confidence_threshold: settings.ocr.low_confidence_threshold as f32,
                    ..OcrSettings::default()
                },
                page_concurrency: settings.ocr.page_concurrency,
                max_pages: settings.ocr.pdf_max_pages,
                fail_on_page_error: settings.ocr.fail_on_page_error,
                preserve_page_images: settings.ocr.preserve_page_images,
            },
            correction: CorrectionSettings {
                mode: settings.ocr.llm_correction,
                model: settings.ocr.llm_model.clone(),
                low_confidence_threshold: settings.ocr.low_confidence_threshold,
            },
            cleaning_prompt_version: settings.llm.cleaning_prompt_version.as_str().to_string(),
            classification_prompt_version: settings
                .llm
                .classification_prompt_version
                .as_str()
                .to_string(),
            embeddings: embeddings.clone(),
        };
        let config = EngineConfig {
            lease: Duration::from_secs(settings.worker.lease_seconds),
            heartbeat: Duration::from_millis(settings.worker.heartbeat_ms),
            max_reclaims: settings.worker.max_reclaims,
        };
        let metrics = Metrics::new(TokenPrices::from_settings(&settings));
        // The configured provider's series exist from the start, at 0 (see docs/operations.md).
        shelf_stages::metrics::declare_llm_provider(deps.provider.name());
        metrics.watch_free_space(crate::disk::DiskSpace::of(&settings));
        if let Some(limiter) = &provider.limiter {
            metrics.watch_llm_limiter(limiter);
        }
        let readiness = Arc::new(crate::readiness::ReadinessCache::new(Duration::from_secs(
            settings.storage.ready_full_check_seconds,
        )));
        let engine = Engine::new(
            RunStore::new(db.clone(), config.lease),
            shelf_stages::registry(&deps),
            Arc::new(DocumentHooks {
                metrics: metrics.clone(),
            }),
            config,
        );
        Shelf {
            settings: Arc::new(settings),
            db,
            documents,
            engine,
            metrics,
            extraction,
            readiness,
            llm_limiter: provider.limiter,
            embeddings,
            model_gate: crate::model_check::ModelGate::new(provider.provider),
        }
    }

    // ---- the language model ----

    /// Checks once, before model work starts, that the language-model server answers and has
    /// the configured model(s); the error names the setting to change. `/ready` shows the
    /// outcome ([`Shelf::model_status`]).
    pub async fn check_model(
        &self,
    ) -> Result<crate::model_check::ModelStatus, shelf_stages::provider::ProviderError> {
        self.model_gate.check().await
    }

    /// What [`Shelf::check_model`] found, or `unchecked`.
    pub fn model_status(&self) -> crate::model_check::ModelStatus {
        self.model_gate.status()
    }

    // ---- pipelines ----

    pub fn pipeline_source(&self, name: &str) -> Result<PipelineSource, AppError> {
        Ok(pipelines::find(
            name,
            self.settings.pipeline.dir.as_deref(),
        )?)
    }

    pub fn load_pipeline(&self, name: &str) -> Result<CompiledPipeline, AppError> {
        Ok(self.engine.compile(&self.pipeline_source(name)?)?)
    }

    pub fn check_pipeline_file(&self, path: &Path) -> Result<CompiledPipeline, AppError> {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("pipeline")
            .to_string();
        Ok(self.engine.compile(&pipelines::read_file(path, &name)?)?)
    }

    // ---- documents ----

    /// Ingests one local file in place (content-addressed: the same bytes give the same
    /// document).
    pub async fn ingest_path(&self, path: &Path) -> Result<Ingested, AppError> {
        Ok(self.documents.ingest_path(path).await?)
    }

    // ---- runs ----

    /// Creates a run of `pipeline` (default: `SHELF_PIPELINE`) for a document, then queues it
    /// for a worker or processes it in this process.
    pub async fn process(
        &self,
        document_id: &str,
        pipeline: Option<&str>,
        mode: ProcessingMode,
    ) -> Result<Option<RunRecord>, AppError> {
        self.process_until(document_id, pipeline, mode, CancellationToken::new())
            .await
    }

    /// [`Shelf::process`] that stops processing when `shutdown` trips (Ctrl-C in the CLI): the
    /// run then goes back to the queue with its checkpoints, for `shelf worker` to finish.
    pub async fn process_until(
        &self,
        document_id: &str,
        pipeline: Option<&str>,
        mode: ProcessingMode,
        shutdown: CancellationToken,
    ) -> Result<Option<RunRecord>, AppError> {
        self.process_with(document_id, pipeline, mode, shutdown, false)
            .await
    }

    /// [`Shelf::process_until`] for a resumed import: when the document's latest run is of the
    /// same pipeline (same YAML) and succeeded or has not ended, that run is taken over instead
    /// of a new one. An import killed after it submitted a run, or after the run ended but
    /// before its manifest said so, then processes no document twice.
    pub async fn resume_or_process_until(
        &self,
        document_id: &str,
        pipeline: Option<&str>,
        mode: ProcessingMode,
        shutdown: CancellationToken,
    ) -> Result<Option<RunRecord>, AppError> {
        self.process_with(document_id, pipeline, mode, shutdown, true)
            .await
    }

    async fn process_with(
        &self,
        document_id: &str,
        pipeline: Option<&str>,
        mode: ProcessingMode,
        shutdown: CancellationToken,
        take_over: bool,
    ) -> Result<Option<RunRecord>, AppError> {
        if mode == ProcessingMode::None {
            return Ok(None);
        }
        // A first look, for a 404 before the pipeline is loaded; the check that counts is in
        // the run's creating transaction (`submit_run`).
        self.documents.get(document_id).await?;
        let pipeline = self.load_pipeline(pipeline.unwrap_or(&self.settings.pipeline.name))?;
        if mode == ProcessingMode::Process {
            // Refused before a run is created: nothing is left queued by a refusal.
            self.admit_new_work()?;
        }
        let earlier = match take_over {
            true => self.run_to_take_over(document_id, &pipeline).await?,
            false => None,
        };
        let run = match earlier {
            Some(run) => run,
            None => self.submit_run(document_id, &pipeline).await?,
        };
        match mode {
            ProcessingMode::Process => Ok(Some(self.run_here_until(&run.id, shutdown).await?)),
            _ => Ok(Some(run)),
        }
    }

    /// Creates a queued run of `pipeline` for a document. The document is checked in the
    /// transaction that inserts the run (see `DocumentHooks::subject_guard`), so a delete of it
    /// at any moment leaves no orphan: it either came first (`NotFound`, nothing written) or
    /// finds the new run and removes it with the document.
    pub async fn submit_run(
        &self,
        document_id: &str,
        pipeline: &CompiledPipeline,
    ) -> Result<RunRecord, AppError> {
        self.engine
            .submit(document_id, pipeline, json!({ "document_id": document_id }))
            .await
            .map_err(|e| match e {
                // Gone before the insert: the document's 404, as if it had been gone at once.
                shelf_engine::EngineError::SubjectNotFound(id) => {
                    AppError::Documents(shelf_documents::DocumentsError::NotFound { id })
                }
                // Created, then removed with its document before it was read back: the
                // document is gone all the same.
                shelf_engine::EngineError::RunNotFound(_) => {
                    AppError::Documents(shelf_documents::DocumentsError::NotFound {
                        id: document_id.to_string(),
                    })
                }
                other => AppError::RunSubmission(other.to_string()),
            })
    }

    /// The document's latest run when it is of `pipeline` and succeeded, queued or running.
    async fn run_to_take_over(
        &self,
        document_id: &str,
        pipeline: &CompiledPipeline,
    ) -> Result<Option<RunRecord>, AppError> {
        let (latest, _) = self
            .engine
            .store()
            .list_runs(Some(document_id), 1, 0)
            .await?;
        Ok(latest.into_iter().next().filter(|run| {
            run.pipeline_sha256 == pipeline.sha256
                && matches!(
                    run.status,
                    RunStatus::Succeeded | RunStatus::Queued | RunStatus::Running
                )
        }))
    }

    /// Runs an existing run to its end in this process, with the same engine a worker uses.
    pub async fn run_here(&self, run_id: &str) -> Result<RunRecord, AppError> {
        self.run_here_until(run_id, CancellationToken::new()).await
    }

    /// Like [`Shelf::run_here`], but stops when `shutdown` trips: the run then goes back to the
    /// queue with its checkpoints, resumable by any worker. Below the free-space floor the run
    /// is not claimed here (`insufficient_storage`), as a worker would not claim it: it stays
    /// queued for when space returns.
    pub async fn run_here_until(
        &self,
        run_id: &str,
        shutdown: CancellationToken,
    ) -> Result<RunRecord, AppError> {
        self.admit_new_work()?;
        let worker = format!("inprocess-{}", std::process::id());
        Ok(self
            .engine
            .run_in_process(run_id, &worker, shutdown)
            .await?)
    }

    pub async fn run(&self, run_id: &str) -> Result<RunRecord, AppError> {
        self.engine
            .store()
            .get_run(run_id)
            .await?
            .ok_or_else(|| AppError::NotFound(format!("Run not found: {run_id}")))
    }

    pub async fn run_view(&self, run_id: &str) -> Result<RunView, AppError> {
        let run = self.run(run_id).await?;
        let stages = self.engine.store().stages(run_id).await?;
        let parts = self.engine.store().part_counts(run_id).await?;
        Ok(RunView::detail(&run, &stages, &parts))
    }

    pub async fn run_detail(&self, run_id: &str, events_limit: u64) -> Result<RunDetail, AppError> {
        let run = self.run_view(run_id).await?;
        let events = self.engine.store().events(run_id, 0, events_limit).await?;
        Ok(RunDetail { run, events })
    }

    pub async fn list_runs(
        &self,
        document_id: Option<&str>,
        limit: u64,
        offset: u64,
    ) -> Result<(Vec<RunView>, u64), AppError> {
        let (runs, total) = self
            .engine
            .store()
            .list_runs(document_id, limit, offset)
            .await?;
        let mut warnings = self.engine.store().warnings(&runs).await?;
        let views = runs
            .iter()
            .map(|run| RunView::summary(run, warnings.remove(&run.id).unwrap_or_default()))
            .collect();
        Ok((views, total))
    }

    /// Events after `offset` (sequences are gap-free from 1, so offset N starts at N + 1).
    pub async fn events(
        &self,
        run_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<EventRecord>, AppError> {
        self.run(run_id).await?;
        let after = i64::try_from(offset).unwrap_or(i64::MAX);
        Ok(self.engine.store().events(run_id, after, limit).await?)
    }

    pub async fn cancel(&self, run_id: &str) -> Result<(CancelOutcome, RunRecord), AppError> {
        let outcome = self.engine.cancel(run_id).await?;
        Ok((outcome, self.run(run_id).await?))
    }

    /// Replays a failed run as a new queued run on the same pipeline snapshot.
    pub async fn retry(&self, run_id: &str) -> Result<RunRecord, AppError> {
        Ok(self.engine.retry(run_id).await?)
    }

    /// The compiled pipeline a run was created with.
    pub fn run_pipeline(&self, run: &RunRecord) -> Result<CompiledPipeline, AppError> {
        Ok(self.engine.compile(&snapshot_source(run))?)
    }

    /// Prunes superseded runs (`SHELF_RUN_RETENTION` per document) every few minutes until
    /// `shutdown` trips: the background task of `shelf worker` and `shelf api`.
    pub async fn prune_runs_periodically(&self, shutdown: CancellationToken) {
        crate::retention::prune_periodically(
            self.engine.store().clone(),
            self.settings.storage.run_retention,
            shutdown,
        )
        .await;
    }

    /// Runs a queue worker until `shutdown` trips. It claims no new run while a volume Shelf
    /// writes to is below `SHELF_MIN_FREE_BYTES` (`crate::disk`), and resumes by itself.
    ///
    /// `concurrency` fixes the runs in flight. Without it they follow the model server: the
    /// worker claims another run while the limiter of language-model calls has room and few
    /// calls wait (`ModelPacer`), up to `SHELF_WORKER_MAX_RUNS`, and logs the limiter's state
    /// every minute. With an in-process provider (no limiter) it keeps [`CPU_RUNS`].
    pub async fn work(&self, concurrency: Option<usize>, shutdown: CancellationToken) {
        let paced = match (concurrency, &self.llm_limiter) {
            (None, Some(limiter)) => Some(limiter.clone()),
            _ => None,
        };
        let runs = match (concurrency, &paced) {
            (Some(n), _) => n,
            (None, Some(_)) => self.settings.worker.max_runs,
            (None, None) => CPU_RUNS,
        };
        let mut config = WorkerConfig::new(runs);
        config.poll_interval = Duration::from_millis(self.settings.worker.poll_ms.max(1));
        let mut worker = Worker::new(self.engine.clone(), config).with_gate(self.claim_gate());
        let mut reporter = None;
        if let Some(limiter) = paced {
            worker = worker.with_pacer(Arc::new(ModelPacer::new(limiter.clone(), CPU_RUNS)));
            reporter = Some(tokio::spawn(crate::llm_report::every_minute(
                limiter,
                shutdown.clone(),
            )));
        }
        worker.run(shutdown).await;
        if let Some(reporter) = reporter {
            let _ = reporter.await;
        }
    }

    // ---- search ----

    pub async fn search_ids(&self, request: &SearchRequest) -> Result<SearchIds, AppError> {
        let request = self.with_query_vector(request).await?;
        Ok(shelf_documents::search_ids(&self.db, &request).await?)
    }

    pub async fn search_results(&self, request: &SearchRequest) -> Result<SearchPage, AppError> {
        let request = self.with_query_vector(request).await?;
        Ok(shelf_documents::search_results(&self.db, &request).await?)
    }

    /// `request` with its query's vector when its mode needs one and this process has a model
    /// (without a model, the search answers `embedding_unavailable`).
    pub async fn with_query_vector<'a>(
        &self,
        request: &'a SearchRequest,
    ) -> Result<std::borrow::Cow<'a, SearchRequest>, AppError> {
        let Some(embeddings) = &self.embeddings else {
            return Ok(std::borrow::Cow::Borrowed(request));
        };
        if !request.mode.is_dense() || request.query_vector.is_some() {
            return Ok(std::borrow::Cow::Borrowed(request));
        }
        let values = embeddings
            .embed_query(&request.query)
            .await
            .map_err(|e| AppError::Internal(format!("embedding the query: {e}")))?;
        let mut owned = request.clone();
        owned.query_vector = Some(shelf_documents::QueryVector {
            model: embeddings.identity().to_string(),
            values,
        });
        Ok(std::borrow::Cow::Owned(owned))
    }
}
