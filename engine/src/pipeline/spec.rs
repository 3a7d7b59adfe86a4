//! The serde shape of a pipeline file. Unknown fields are refused so a typo never silently
//! disables a setting.

use indexmap::IndexMap;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PipelineFile {
    pub version: u32,
    #[serde(default)]
    pub description: String,
    /// Stage names are the keys, so they are unique by construction (the YAML parser refuses
    /// duplicate keys).
    pub stages: IndexMap<String, StageSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StageSpec {
    pub uses: String,
    #[serde(default)]
    pub needs: Vec<String>,
    pub when: Option<String>,
    pub retry: Option<RetrySpec>,
    pub timeout: Option<String>,
    /// `fail` or `continue`; checked in `compile` so a bad value is reported with the others.
    pub on_failure: Option<String>,
    #[serde(rename = "with")]
    pub options: Option<yaml_serde::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetrySpec {
    pub attempts: u32,
    pub backoff: Option<String>,
    pub max_backoff: Option<String>,
}
