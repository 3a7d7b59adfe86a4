//! The JSON shapes of the service routes: health, readiness, version, classifications and
//! the effective settings.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// Always `healthy` when the process answers.
    pub status: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Ready {
    pub status: String,
    pub database: String,
    pub storage: String,
    pub applied_migrations: Vec<String>,
    /// What the language-model check at start found (it is not repeated per probe).
    pub model: ModelReady,
}

/// The language-model check made when the process started (`shelf api --workers N` checks;
/// an API without workers does no model work and says `unchecked`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ModelReady {
    /// `verified` (the server listed the configured model), `unverified` (it could not say;
    /// the first call will tell), `not_needed` (`mock` and `local` call no server) or
    /// `unchecked`.
    #[schema(example = "verified")]
    pub status: String,
    /// The models verified, or why the model is unverified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Version {
    pub version: String,
    /// The commit the binary was built from (`unknown` outside a git checkout).
    pub git_sha: String,
    /// The newest migration this binary knows.
    pub schema_version: String,
    /// Open Knowledge Format version of exports.
    pub okf_version: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Classifications {
    /// Dewey code to label: the ten classes, the hundred divisions, and finer codes in use.
    pub classifications: BTreeMap<String, String>,
}

/// `GET /config`: the effective settings, secrets excluded (keys appear only as counts per
/// scope, the provider credential only as `api_key_set`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(value_type = Object)]
pub struct ConfigOut(pub Value);
