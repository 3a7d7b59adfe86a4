//! The language-model section: the provider (an enum, parsed here once), its model, endpoint,
//! credential, limits and prices, the prompt versions, and how text is chunked for cleaning.

use serde::Serialize;
use shelf_stages::provider::openai::AUTO_MAX_CONCURRENCY;
use shelf_stages::provider::prompt_versions;

use super::auth::Secret;
use super::reader::{COUNT, Reader};

/// Runs a worker keeps at once when they are CPU work (the in-process providers), and the
/// runs a model-paced worker claims whatever the model's state.
pub const CPU_RUNS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LlmProvider {
    GenericCompatible,
    Mock,
    Local,
}

impl LlmProvider {
    /// Runs a worker executes at once unless `SHELF_WORKER_CONCURRENCY` says otherwise; none
    /// means as many as the model server takes (`SHELF_WORKER_MAX_RUNS` at most). With the
    /// in-process providers a run is CPU and SQLite work in short steps; four at once keep
    /// two cores busy while each waits for the single writer (docs/PERFORMANCE.md, Throughput:
    /// 2 → 4 raised runs/s by about a fifth). A remote model's stages wait on its server,
    /// whose capacity the limiter discovers, and the worker's runs follow it.
    pub fn default_worker_concurrency(self) -> Option<usize> {
        match self {
            LlmProvider::Mock | LlmProvider::Local => Some(CPU_RUNS),
            LlmProvider::GenericCompatible => None,
        }
    }

    /// Chunks one stage sends to the provider at once when `SHELF_LLM_MAX_CONCURRENCY` is
    /// `auto`: the in-process providers keep the old default; a remote one sends what the
    /// process's limiter lets out.
    pub fn auto_stage_concurrency(self) -> usize {
        match self {
            LlmProvider::Mock | LlmProvider::Local => 8,
            LlmProvider::GenericCompatible => AUTO_MAX_CONCURRENCY,
        }
    }
}

/// `SHELF_CLEANING_PROMPT_VERSION`. Runs record the version by name (`as_str`), which the
/// stages resolve to their prompt text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CleaningPromptVersion {
    CmosV1,
    CmosV2,
    CmosV3,
    CmosV4,
}

impl CleaningPromptVersion {
    const ALL: [(&'static str, Self); 4] = [
        (prompt_versions::CMOS_V1, Self::CmosV1),
        (prompt_versions::CMOS_V2, Self::CmosV2),
        (prompt_versions::CMOS_V3, Self::CmosV3),
        (prompt_versions::CMOS_V4, Self::CmosV4),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::CmosV1 => prompt_versions::CMOS_V1,
            Self::CmosV2 => prompt_versions::CMOS_V2,
            Self::CmosV3 => prompt_versions::CMOS_V3,
            Self::CmosV4 => prompt_versions::CMOS_V4,
        }
    }
}

/// `SHELF_CLASSIFICATION_PROMPT_VERSION`, recorded by name like the cleaning version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassificationPromptVersion {
    DeweyV1,
    DeweyV2,
}

impl ClassificationPromptVersion {
    const ALL: [(&'static str, Self); 2] = [
        (prompt_versions::DEWEY_V1, Self::DeweyV1),
        (prompt_versions::DEWEY_V2, Self::DeweyV2),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeweyV1 => prompt_versions::DEWEY_V1,
            Self::DeweyV2 => prompt_versions::DEWEY_V2,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LlmSettings {
    pub provider: LlmProvider,
    pub model: String,
    pub base_url: Option<String>,
    pub api_key_env: String,
    pub api_key: Option<Secret>,
    /// `SHELF_LLM_TIMEOUT_SECONDS`: the wait for an answer to begin (its first token).
    pub timeout_seconds: u64,
    /// `SHELF_LLM_IDLE_TIMEOUT_SECONDS`: once a streamed answer has begun, the longest gap
    /// between its events.
    pub idle_timeout_seconds: u64,
    /// `SHELF_LLM_MAX_CONCURRENCY`: the ceiling of the adaptive limit of requests in flight;
    /// `None` is `auto`.
    pub max_concurrency: Option<usize>,
    /// `SHELF_LLM_MIN_CONCURRENCY`: its floor (equal to the ceiling pins the limit).
    pub min_concurrency: usize,
    /// `SHELF_LLM_PUSH_BACK_SECONDS`: how long one call waits through the server's refusals
    /// before they count as failed attempts.
    pub push_back_seconds: u64,
    pub max_prompt_chars: usize,
    pub max_response_chars: usize,
    pub prompt_cost_per_1k_tokens_usd: f64,
    pub completion_cost_per_1k_tokens_usd: f64,
    pub mock_delay_ms: u64,
    pub cleaning_prompt_version: CleaningPromptVersion,
    pub classification_prompt_version: ClassificationPromptVersion,
}

#[derive(Debug, Clone)]
pub struct ChunkingSettings {
    pub target_chars: usize,
    pub overlap_chars: usize,
}

/// The provider alone: other sections' defaults depend on it.
pub(super) fn parse_provider(r: &mut Reader) -> LlmProvider {
    r.choice(
        "SHELF_LLM_PROVIDER",
        LlmProvider::GenericCompatible,
        &[
            ("generic-compatible", LlmProvider::GenericCompatible),
            ("mock", LlmProvider::Mock),
            ("local", LlmProvider::Local),
        ],
    )
}

pub(super) fn parse(r: &mut Reader, provider: LlmProvider) -> LlmSettings {
    let api_key_env = r.string("SHELF_LLM_API_KEY_ENV", "OPENAI_API_KEY");
    // The credential's variable is named by the operator, so it is not a `SHELF_*` name.
    let api_key = r
        .vars
        .get(&api_key_env)
        .filter(|v| !v.trim().is_empty())
        .map(|v| Secret::new(v.trim()));
    let llm = LlmSettings {
        provider,
        model: r.string("SHELF_LLM_MODEL", "gpt-4o-mini"),
        base_url: r.optional("SHELF_LLM_BASE_URL"),
        api_key_env,
        api_key,
        timeout_seconds: r.parse("SHELF_LLM_TIMEOUT_SECONDS", 120, COUNT),
        idle_timeout_seconds: r.parse("SHELF_LLM_IDLE_TIMEOUT_SECONDS", 60, COUNT),
        max_concurrency: parse_ceiling(r),
        min_concurrency: r.parse("SHELF_LLM_MIN_CONCURRENCY", 1, COUNT),
        push_back_seconds: r.parse("SHELF_LLM_PUSH_BACK_SECONDS", 600, COUNT),
        max_prompt_chars: r.parse("SHELF_LLM_MAX_PROMPT_CHARS", 2_097_152, COUNT),
        max_response_chars: r.parse("SHELF_LLM_MAX_RESPONSE_CHARS", 2_097_152, COUNT),
        prompt_cost_per_1k_tokens_usd: r.parse(
            "SHELF_LLM_PROMPT_COST_PER_1K_TOKENS_USD",
            0.0,
            "a number",
        ),
        completion_cost_per_1k_tokens_usd: r.parse(
            "SHELF_LLM_COMPLETION_COST_PER_1K_TOKENS_USD",
            0.0,
            "a number",
        ),
        mock_delay_ms: r.parse("SHELF_LLM_MOCK_DELAY_MS", 0, COUNT),
        cleaning_prompt_version: r.choice(
            "SHELF_CLEANING_PROMPT_VERSION",
            CleaningPromptVersion::CmosV4,
            &CleaningPromptVersion::ALL,
        ),
        classification_prompt_version: r.choice(
            "SHELF_CLASSIFICATION_PROMPT_VERSION",
            ClassificationPromptVersion::DeweyV2,
            &ClassificationPromptVersion::ALL,
        ),
    };
    r.check(
        llm.max_concurrency != Some(0),
        "SHELF_LLM_MAX_CONCURRENCY must be auto or at least 1",
    );
    r.check(
        llm.min_concurrency >= 1
            && llm
                .max_concurrency
                .is_none_or(|max| llm.min_concurrency <= max),
        "SHELF_LLM_MIN_CONCURRENCY must be at least 1 and at most SHELF_LLM_MAX_CONCURRENCY",
    );
    llm
}

/// `SHELF_LLM_MAX_CONCURRENCY`: `auto` (the default) or a whole number.
fn parse_ceiling(r: &mut Reader) -> Option<usize> {
    match r.raw("SHELF_LLM_MAX_CONCURRENCY") {
        None => None,
        Some(text) if text.eq_ignore_ascii_case("auto") => None,
        Some(text) => match text.replace('_', "").parse() {
            Ok(n) => Some(n),
            Err(_) => {
                r.problems.push(format!(
                    "SHELF_LLM_MAX_CONCURRENCY={text}: expected auto or a whole number"
                ));
                None
            }
        },
    }
}

impl LlmSettings {
    /// The ceiling of the limit: the setting, or [`AUTO_MAX_CONCURRENCY`] for `auto`.
    pub fn concurrency_ceiling(&self) -> usize {
        self.max_concurrency.unwrap_or(AUTO_MAX_CONCURRENCY)
    }

    /// Chunks one stage sends to the provider at once.
    pub fn stage_concurrency(&self) -> usize {
        self.max_concurrency
            .unwrap_or_else(|| self.provider.auto_stage_concurrency())
    }
}

pub(super) fn parse_chunking(r: &mut Reader) -> ChunkingSettings {
    let chunking = ChunkingSettings {
        target_chars: r.parse("SHELF_CHUNK_TARGET_CHARS", 12_000, COUNT),
        overlap_chars: r.parse("SHELF_CHUNK_OVERLAP_CHARS", 800, COUNT),
    };
    r.check(
        chunking.target_chars >= 100 && chunking.overlap_chars < chunking.target_chars,
        "SHELF_CHUNK_TARGET_CHARS must be at least 100 and above SHELF_CHUNK_OVERLAP_CHARS",
    );
    chunking
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings accept exactly the prompt versions the providers have prompts for: a new
    /// version in `prompt_versions` without its variant here (or the reverse) fails.
    #[test]
    fn the_accepted_prompt_versions_are_the_stages_own() {
        let cleaning: Vec<&str> = CleaningPromptVersion::ALL.iter().map(|(n, _)| *n).collect();
        assert_eq!(cleaning, prompt_versions::CLEANING_PROMPT_VERSIONS);
        let classification: Vec<&str> = ClassificationPromptVersion::ALL
            .iter()
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(
            classification,
            prompt_versions::CLASSIFICATION_PROMPT_VERSIONS
        );
        for (name, version) in CleaningPromptVersion::ALL {
            assert_eq!(version.as_str(), name);
        }
        for (name, version) in ClassificationPromptVersion::ALL {
            assert_eq!(version.as_str(), name);
        }
    }
}
