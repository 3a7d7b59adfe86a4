//! The one typed configuration of Shelf, built once from `SHELF_*` variables into sections
//! (storage, pipeline, worker, llm, chunking, extract, ocr, embedding, api, logging), each parsed by its
//! own file through one shared reader. Parsing takes the variables as input (tests never touch
//! the process environment), reports every bad variable at once, turns every enum-like setting
//! into its enum there, and keeps secrets in a wrapper that never prints.

mod api;
mod auth;
mod embedding;
mod extract;
mod llm;
mod logging;
mod ocr;
mod reader;
mod storage;
mod worker;

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

pub use api::{ApiSettings, IpNet, MAX_API_WORKERS};
pub use auth::{Credential, Scope, Secret};
pub use embedding::EmbeddingSettings;
pub use extract::ExtractSettings;
pub use llm::{
    CPU_RUNS, ChunkingSettings, ClassificationPromptVersion, CleaningPromptVersion, LlmProvider,
    LlmSettings,
};
pub use logging::{LogFormat, LoggingSettings};
pub use ocr::OcrSettings;
pub use shelf_stages::correct::CorrectionMode;
pub use storage::{JobBackend, StorageSettings};
pub use worker::{PipelineSettings, WorkerSettings};

use reader::Reader;

/// A database URL, or any text that may hold one (a driver's error), with every form of
/// password in it replaced by `***`: for `/config`, `--json`, messages and logs.
pub use shelf_db::secrets::without_password;

#[derive(Debug, Clone)]
pub struct Settings {
    pub storage: StorageSettings,
    pub pipeline: PipelineSettings,
    pub worker: WorkerSettings,
    pub llm: LlmSettings,
    pub chunking: ChunkingSettings,
    pub extract: ExtractSettings,
    pub ocr: OcrSettings,
    pub embedding: EmbeddingSettings,
    pub api: ApiSettings,
    pub logging: LoggingSettings,
    /// `SHELF_*` variables that name no setting (likely typos), reported as warnings.
    pub unknown_variables: Vec<String>,
}

/// Every bad variable, each with what was expected.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid configuration:\n  {}", .problems.join("\n  "))]
pub struct ConfigError {
    pub problems: Vec<String>,
}

impl Settings {
    /// The database this process opens: PostgreSQL when `SHELF_DATABASE_URL` is set, else the
    /// SQLite file.
    pub fn database_target(&self) -> shelf_db::DatabaseTarget {
        match &self.storage.database_url {
            Some(url) => shelf_db::DatabaseTarget::Postgres(url.expose().to_string()),
            None => shelf_db::DatabaseTarget::Sqlite(self.storage.database_path.clone()),
        }
    }

    /// Where the database is, for messages: the file, or the URL without its password.
    pub fn database_display(&self) -> String {
        match &self.storage.database_url {
            Some(url) => without_password(url.expose()),
            None => self.storage.database_path.display().to_string(),
        }
    }

    pub fn is_postgres(&self) -> bool {
        self.storage.database_url.is_some()
    }

    /// Settings from the process environment. Only binaries call this.
    pub fn from_process_env() -> Result<Settings, ConfigError> {
        let vars: HashMap<String, String> = std::env::vars().collect();
        Settings::from_vars(&vars)
    }

    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Settings, ConfigError> {
        let mut r = Reader::new(vars);
        let storage = storage::parse(&mut r);
        let provider = llm::parse_provider(&mut r);
        let settings = Settings {
            storage,
            pipeline: worker::parse_pipeline(&mut r),
            worker: worker::parse(&mut r, provider),
            llm: llm::parse(&mut r, provider),
            chunking: llm::parse_chunking(&mut r),
            extract: extract::parse(&mut r),
            ocr: ocr::parse(&mut r),
            embedding: embedding::parse(&mut r),
            api: api::parse(&mut r),
            logging: logging::parse(&mut r),
            unknown_variables: Vec::new(),
        };
        let mut problems = r.problems;
        problems.extend(r.checks);
        if !problems.is_empty() {
            return Err(ConfigError { problems });
        }
        let mut unknown: Vec<String> = vars
            .keys()
            .filter(|k| k.starts_with("SHELF_") && !r.used.contains(&k.as_str()))
            .cloned()
            .collect();
        unknown.sort();
        Ok(Settings {
            unknown_variables: unknown,
            ..settings
        })
    }

    /// Whether any API credential is configured (then every protected route needs one).
    pub fn auth_enabled(&self) -> bool {
        self.api.auth_enabled()
    }

    /// Every secret value the settings hold (API keys, the provider credential, OTLP header
    /// values), for the log redactor to remove wherever one would appear.
    pub fn secrets(&self) -> Vec<&str> {
        let keys = self.api.credentials.iter().filter_map(|c| match c {
            Credential::Key { key, .. } => Some(key.expose()),
            Credential::Hash { .. } => None,
        });
        keys.chain(self.llm.api_key.iter().map(Secret::expose))
            .chain(self.logging.otel_headers.iter().map(|(_, v)| v.expose()))
            .chain(self.storage.database_passwords.iter().map(Secret::expose))
            .collect()
    }

    /// The effective settings for `/config`, secrets excluded: keys show only how many there
    /// are, the provider credential only whether it is set.
    pub fn redacted(&self) -> Value {
        let scopes: BTreeMap<&str, usize> =
            self.api
                .credentials
                .iter()
                .fold(BTreeMap::new(), |mut m, c| {
                    *m.entry(match c.scope() {
                        Scope::Read => "read",
                        Scope::Write => "write",
                    })
                    .or_default() += 1;
                    m
                });
        let (storage, llm, ocr, api, logging) = (
            &self.storage,
            &self.llm,
            &self.ocr,
            &self.api,
            &self.logging,
        );
        json!({
            "storage": {
                "data_dir": storage.data_dir,
                "database_path": storage.database_path,
                "database_url": storage.database_url.as_ref().map(|u| without_password(u.expose())),
                "database_backend": if storage.database_url.is_some() { "postgres" } else { "sqlite" },
                "job_backend": storage.job_backend,
                "run_retention": storage.run_retention,
                "min_free_bytes": storage.min_free_bytes,
                "ready_full_check_seconds": storage.ready_full_check_seconds,
            },
            "pipelines": {
                "pipeline": self.pipeline.name,
                "pipelines_dir": self.pipeline.dir,
            },
            "worker": {
                "concurrency": self.worker.concurrency,
                "max_runs": self.worker.max_runs,
                "lease_seconds": self.worker.lease_seconds,
                "heartbeat_ms": self.worker.heartbeat_ms,
                "poll_ms": self.worker.poll_ms,
                "max_reclaims": self.worker.max_reclaims,
            },
            "llm": {
                "provider": llm.provider,
                "model": llm.model,
                "base_url": llm.base_url,
                "api_key_env": llm.api_key_env,
                "api_key_set": llm.api_key.is_some(),
                "timeout_seconds": llm.timeout_seconds,
                "idle_timeout_seconds": llm.idle_timeout_seconds,
                "max_concurrency": llm.max_concurrency.map_or(json!("auto"), |n| json!(n)),
                "min_concurrency": llm.min_concurrency,
                "push_back_seconds": llm.push_back_seconds,
                "max_prompt_chars": llm.max_prompt_chars,
                "max_response_chars": llm.max_response_chars,
                "prompt_cost_per_1k_tokens_usd": llm.prompt_cost_per_1k_tokens_usd,
                "completion_cost_per_1k_tokens_usd": llm.completion_cost_per_1k_tokens_usd,
                "cleaning_prompt_version": llm.cleaning_prompt_version,
                "classification_prompt_version": llm.classification_prompt_version,
            },
            "chunking": {
                "target_chars": self.chunking.target_chars,
                "overlap_chars": self.chunking.overlap_chars,
            },
            "extraction": {
                "max_bytes": self.extract.max_bytes,
                "timeout_seconds": self.extract.timeout_seconds,
                "cache": self.extract.cache,
                "engines": extraction_engines(),
                "universal_max_input_bytes": self.extract.universal_max_input_bytes,
                "universal_timeout_seconds": self.extract.universal_timeout_seconds,
            },
            "ocr": {
                "timeout_seconds": ocr.timeout_seconds,
                "languages": ocr.languages,
                "preserve_page_images": ocr.preserve_page_images,
                "rotation_retry": ocr.rotation_retry,
                "pdf_dpi": ocr.pdf_dpi,
                "pdf_max_pages": ocr.pdf_max_pages,
                "llm_correction": ocr.llm_correction,
                "llm_model": ocr.llm_model,
                "low_confidence_threshold": ocr.low_confidence_threshold,
                "page_concurrency": ocr.page_concurrency,
                "fail_on_page_error": ocr.fail_on_page_error,
            },
            "embedding": {
                "model_dir": self.embedding.model_dir,
                "threads": self.embedding.threads,
            },
            "api": {
                "host": api.host,
                "port": api.port,
                "credentials": scopes,
                "max_request_bytes": api.max_request_bytes,
                "max_upload_bytes": api.max_upload_bytes,
                "max_batch_files": api.max_batch_files,
                "max_batch_bytes": api.max_batch_bytes,
                "max_import_files": api.max_import_files,
                "max_import_bytes": api.max_import_bytes,
                "max_import_manifest_bytes": api.max_import_manifest_bytes,
                "max_content_chars": api.max_content_chars,
                "rate_limit_per_minute": api.rate_limit_per_minute,
                "client_ipv6_prefix": api.client_ipv6_prefix,
                "max_streams_per_client": api.max_streams_per_client,
                "stream_max_seconds": api.stream_max_seconds,
                "audit_retention_days": api.audit_retention_days,
                "import_root": api.import_root,
                "trusted_proxy_cidrs": api.trusted_proxy_cidrs.iter().map(|n| format!("{}/{}", n.addr, n.prefix)).collect::<Vec<_>>(),
                "header_read_timeout_seconds": api.header_read_timeout_seconds,
                "keep_alive_timeout_seconds": api.keep_alive_timeout_seconds,
                "workers": api.workers,
                "session_hours": api.session_hours,
            },
            "logging": {
                "format": logging.format,
                "level": logging.level,
                "otel_enabled": logging.otel_enabled,
                "otel_endpoint": logging.otel_endpoint,
                "otel_header_names": logging.otel_headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                "otel_service_name": logging.otel_service_name,
            },
        })
    }
}

/// Each accepted extension's extraction engine, for `/config`.
fn extraction_engines() -> serde_json::Map<String, serde_json::Value> {
    shelf_documents::formats::ACCEPTED_FORMATS
        .iter()
        .map(|format| (format.extension.to_string(), format.kind.engine().into()))
        .collect()
}

#[cfg(test)]
mod tests;
