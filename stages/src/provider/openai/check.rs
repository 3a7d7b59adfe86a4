//! The model check before work starts: `GET {SHELF_LLM_BASE_URL}/models` once, and the
//! configured model (and `SHELF_OCR_LLM_MODEL`'s, when set) looked up in the list. A model
//! the list lacks, an unreachable server and a refused credential are errors naming the
//! setting to change; a server that keeps no list (servers that only implement the chat
//! endpoint) or answers one nobody can read leaves the model unverified, which is no error.

use std::time::Duration;

use serde_json::Value;

use super::OpenAiCompatibleProvider;
use super::client::{ReadError, fatal, io_reason, read_capped};
use crate::provider::{MODEL_NOT_FOUND, ModelCheck, ProviderError};

/// The check's whole wait for the list, connecting included...
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// ...of which connecting may take this much: no connection by then is an unreachable
/// server, while a connected one that is slow to list (llama-cpp-python answers `/models`
/// only between generations) leaves the model unverified.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a model list read.
const LIST_CAP: usize = 1024 * 1024;
/// Model ids a message lists at most.
const SHOWN_IDS: usize = 10;

/// One model a list offers.
struct Listed {
    id: String,
    owned_by: Option<String>,
}

impl OpenAiCompatibleProvider {
    pub(super) async fn check_models(&self) -> Result<ModelCheck, ProviderError> {
        let endpoint = self
            .endpoint
            .as_ref()
            .map_err(|m| fatal("provider_not_configured", m.clone()))?;
        let url = models_url(endpoint);
        let shown = super::client::shown_url(&url);
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CHECK_TIMEOUT)
            .user_agent(concat!("shelf/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                fatal(
                    "provider_not_configured",
                    format!("the HTTP client for the model check could not be set up ({e})"),
                )
            })?;
        let mut request = client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose());
        }
        let unreachable = |reason: &str| ProviderError {
            code: "provider_unreachable",
            message: format!(
                "cannot reach the language-model server {shown} ({reason}); check SHELF_LLM_BASE_URL and that the server is running"
            ),
            retryable: true,
        };
        let slow = || ModelCheck::Unverified {
            note: format!(
                "the language-model server did not list its models within {} s (GET {shown}); SHELF_LLM_MODEL is not verified",
                CHECK_TIMEOUT.as_secs()
            ),
        };
        let mut response = match request.send().await {
            Ok(response) => response,
            Err(e) if e.is_connect() => {
                return Err(unreachable(io_reason(&e).unwrap_or("connection failed")));
            }
            Err(e) if e.is_timeout() => return Ok(slow()),
            Err(e) => return Err(unreachable(io_reason(&e).unwrap_or("transport error"))),
        };
        let status = response.status();
        match status.as_u16() {
            200..=299 => {}
            401 | 403 => return Err(self.status_failure_error(status)),
            code => {
                let why = if matches!(code, 404 | 405 | 501) {
                    "the server keeps no model list"
                } else {
                    "the server did not list its models"
                };
                return Ok(ModelCheck::Unverified {
                    note: format!(
                        "{why} (GET {shown} answered HTTP {code}); SHELF_LLM_MODEL is not verified"
                    ),
                });
            }
        }
        let body = match read_capped(&mut response, LIST_CAP).await {
            Ok(body) => body,
            Err(ReadError::Transport(e)) if e.is_timeout() => return Ok(slow()),
            Err(ReadError::Transport(e)) => {
                return Err(unreachable(io_reason(&e).unwrap_or("transport error")));
            }
            Err(ReadError::TooLarge) => Vec::new(),
        };
        let Some(listed) = model_list(&body) else {
            return Ok(ModelCheck::Unverified {
                note: format!(
                    "the server's model list (GET {shown}) is not readable; SHELF_LLM_MODEL is not verified"
                ),
            });
        };
        if listed.is_empty() {
            return Ok(ModelCheck::Unverified {
                note: format!(
                    "the server lists no models (GET {shown}); SHELF_LLM_MODEL is not verified"
                ),
            });
        }
        if let [one] = listed.as_slice()
            && one.owned_by.as_deref() == Some("llamacpp")
        {
            // llama.cpp's own server serves its one model under whatever name a request gives.
            return Ok(ModelCheck::Unverified {
                note: format!(
                    "llama.cpp's server answers every model name with its one model ({}); SHELF_LLM_MODEL is not checked",
                    shown_id(&one.id)
                ),
            });
        }
        let mut wanted = vec![("SHELF_LLM_MODEL", self.config.model.trim())];
        if let Some(ocr) = self.config.correction_model.as_deref().map(str::trim)
            && !ocr.is_empty()
            && ocr != self.config.model.trim()
        {
            wanted.push(("SHELF_OCR_LLM_MODEL", ocr));
        }
        for (setting, model) in &wanted {
            if !listed.iter().any(|l| same_model(&l.id, model)) {
                return Err(missing(setting, model, &shown, &listed));
            }
        }
        Ok(ModelCheck::Verified {
            models: wanted.iter().map(|(_, m)| m.to_string()).collect(),
        })
    }
}

/// The model-not-found error: the setting, the model, and up to [`SHOWN_IDS`] models offered.
fn missing(setting: &str, model: &str, shown: &str, listed: &[Listed]) -> ProviderError {
    let mut ids: Vec<String> = listed
        .iter()
        .take(SHOWN_IDS)
        .map(|l| shown_id(&l.id))
        .collect();
    if listed.len() > SHOWN_IDS {
        ids.push(format!("and {} more", listed.len() - SHOWN_IDS));
    }
    fatal(
        MODEL_NOT_FOUND,
        format!(
            "the language-model server does not offer the model {} that {setting} names (GET {shown} lists {}); \
             set {setting} to one it offers",
            shown_id(model),
            ids.join(", ")
        ),
    )
}

/// A model id as shown in a message: printable, at most 100 characters.
fn shown_id(id: &str) -> String {
    id.chars().filter(|c| !c.is_control()).take(100).collect()
}

/// Whether a listed id is the configured model: equal, or Ollama's `name:latest` for `name`
/// (Ollama takes both).
fn same_model(listed: &str, model: &str) -> bool {
    listed == model
        || listed.strip_suffix(":latest") == Some(model)
        || model.strip_suffix(":latest") == Some(listed)
}

/// The models of an OpenAI-style list (`{"data": [{"id": ...}]}`), or of a `{"models": [...]}`
/// one, by `id` or `name`; `None` when the body is neither.
fn model_list(body: &[u8]) -> Option<Vec<Listed>> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let items = value
        .get("data")
        .or_else(|| value.get("models"))
        .and_then(Value::as_array)?;
    Some(
        items
            .iter()
            .filter_map(|item| {
                let id = item
                    .get("id")
                    .or_else(|| item.get("name"))
                    .and_then(Value::as_str)?;
                Some(Listed {
                    id: id.to_string(),
                    owned_by: item
                        .get("owned_by")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
            })
            .collect(),
    )
}

/// `{base}/models` from the chat-completions URL (its query, such as `?api-version=`, kept).
fn models_url(endpoint: &reqwest::Url) -> reqwest::Url {
    let mut url = endpoint.clone();
    let path = url.path().trim_end_matches('/');
    let base = path.strip_suffix("/chat/completions").unwrap_or(path);
    url.set_path(&format!("{base}/models"));
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_found_next_to_the_chat_endpoint() {
        let url = reqwest::Url::parse("https://x.test/v1/chat/completions?api-version=1").unwrap();
        assert_eq!(
            models_url(&url).as_str(),
            "https://x.test/v1/models?api-version=1"
        );
    }

    #[test]
    fn lists_are_read_in_both_shapes() {
        let ids = |body: &str| {
            model_list(body.as_bytes()).map(|l| l.into_iter().map(|m| m.id).collect::<Vec<_>>())
        };
        assert_eq!(
            ids(r#"{"object":"list","data":[{"id":"smollm2","owned_by":"me"},{"x":1}]}"#),
            Some(vec!["smollm2".to_string()])
        );
        assert_eq!(
            ids(r#"{"models":[{"name":"llama3:latest"}]}"#),
            Some(vec!["llama3:latest".to_string()])
        );
        assert_eq!(ids("<html>"), None);
        assert_eq!(ids(r#"{"data": 3}"#), None);
        assert!(same_model("llama3:latest", "llama3"));
        assert!(same_model("llama3", "llama3:latest"));
        assert!(!same_model("llama3:8b", "llama3"));
    }

    #[test]
    fn a_missing_model_names_the_setting_and_ten_offers() {
        let listed: Vec<Listed> = (0..12)
            .map(|i| Listed {
                id: format!("m{i}\u{7}"),
                owned_by: None,
            })
            .collect();
        let e = missing("SHELF_LLM_MODEL", "gpt-9", "http://h/v1/models", &listed);
        assert_eq!(e.code, MODEL_NOT_FOUND);
        assert!(!e.retryable);
        assert!(e.message.contains("SHELF_LLM_MODEL"), "{}", e.message);
        assert!(e.message.contains("gpt-9"));
        assert!(e.message.contains("m0, m1") && e.message.contains("m9, and 2 more"));
        assert!(!e.message.contains("m10") && !e.message.contains('\u{7}'));
    }
}
