//! The language-model check before work starts: `shelf api`, `worker`, `import` and `process`
//! ask the provider once whether its server answers and has the configured model(s), stop with
//! the provider's error (naming the setting to change) when not, and keep what they found for
//! `/ready` to report. Asked once, not per probe: llama-cpp-python answers `GET /models` under
//! the lock its generations hold, and by default a request waiting for that lock interrupts the
//! answer being streamed, so a check per probe would cut the process's own answers short.

use std::sync::{Arc, Mutex};

use serde::Serialize;
use shelf_stages::Provider;
use shelf_stages::provider::{ModelCheck, ProviderError};

/// What the process knows of its model, as `/ready` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelStatus {
    /// `verified` (the server listed the model), `unverified` (it could not say: the first
    /// call will tell), `not_needed` (the `mock` and `local` providers call no server) or
    /// `unchecked` (this process does no model work and did not ask).
    pub status: &'static str,
    /// Why it is unverified, or the models verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ModelStatus {
    fn of(check: &ModelCheck) -> ModelStatus {
        match check {
            ModelCheck::NotNeeded => ModelStatus {
                status: "not_needed",
                detail: None,
            },
            ModelCheck::Verified { models } => ModelStatus {
                status: "verified",
                detail: Some(models.join(", ")),
            },
            ModelCheck::Unverified { note } => ModelStatus {
                status: "unverified",
                detail: Some(note.clone()),
            },
        }
    }

    fn unchecked() -> ModelStatus {
        ModelStatus {
            status: "unchecked",
            detail: None,
        }
    }
}

/// The provider to check and the outcome of the one check made.
#[derive(Clone)]
pub(crate) struct ModelGate {
    provider: Arc<dyn Provider>,
    found: Arc<Mutex<Option<ModelStatus>>>,
}

impl ModelGate {
    pub(crate) fn new(provider: Arc<dyn Provider>) -> ModelGate {
        ModelGate {
            provider,
            found: Arc::default(),
        }
    }

    /// Asks the provider; an error stops the caller's work before it starts.
    pub(crate) async fn check(&self) -> Result<ModelStatus, ProviderError> {
        let check = self.provider.check().await?;
        let status = ModelStatus::of(&check);
        match &check {
            ModelCheck::Unverified { note } => {
                tracing::warn!(provider = self.provider.name(), "{note}");
            }
            ModelCheck::Verified { models } => {
                tracing::info!(provider = self.provider.name(), models = %models.join(", "), "language model verified");
            }
            ModelCheck::NotNeeded => {}
        }
        if let Ok(mut found) = self.found.lock() {
            *found = Some(status.clone());
        }
        Ok(status)
    }

    /// What the check found, or `unchecked`.
    pub(crate) fn status(&self) -> ModelStatus {
        self.found
            .lock()
            .ok()
            .and_then(|f| f.clone())
            .unwrap_or_else(ModelStatus::unchecked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shelf_stages::provider::MockProvider;

    #[tokio::test]
    async fn a_provider_without_a_server_needs_no_check_and_the_result_is_kept() {
        let gate = ModelGate::new(Arc::new(MockProvider::default()));
        assert_eq!(gate.status().status, "unchecked");
        assert_eq!(gate.check().await.unwrap().status, "not_needed");
        assert_eq!(gate.status().status, "not_needed");
    }

    #[test]
    fn every_check_outcome_has_its_status() {
        let verified = ModelStatus::of(&ModelCheck::Verified {
            models: vec!["smollm2".into()],
        });
        assert_eq!(
            (verified.status, verified.detail.as_deref()),
            ("verified", Some("smollm2"))
        );
        let unverified = ModelStatus::of(&ModelCheck::Unverified {
            note: "no list".into(),
        });
        assert_eq!(unverified.status, "unverified");
    }
}
