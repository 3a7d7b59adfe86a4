//! Structured output and the request's optional fields: the JSON schemas of classifications
//! and summaries, the forms of `response_format` servers take, and what this server (one
//! provider a process) was found to refuse, remembered so that it is asked so only once.
//!
//! Forms, in the order tried: OpenAI's `{"type": "json_schema", "json_schema": {...}}` (OpenAI,
//! Ollama, vLLM, llama.cpp's `llama-server`), then `{"type": "json_object", "schema": {...}}`
//! (llama-cpp-python's server, older llama.cpp), then none. A server that refuses a form
//! (HTTP 400 or 422 naming the field) is asked with the next; `stream_options` likewise.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value, json};

/// What a call's answer must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    Classification,
    Synopsis,
}

impl Schema {
    fn name(self) -> &'static str {
        match self {
            Schema::Classification => "dewey_classification",
            Schema::Synopsis => "document_synopsis",
        }
    }

    /// The JSON schema, in the subset OpenAI's strict mode accepts (every property required,
    /// no others) and llama.cpp's grammar converters read (patterns anchored with `^` and
    /// `$`, and no escapes: llama-cpp-python 0.3.36 turns `\.` into a grammar its parser
    /// refuses, and the server process then dies, so the dot is written `[.]`). What a schema
    /// cannot say portably (a title not blank, a code that is a real class) is checked when
    /// the answer is read.
    pub fn json(self) -> Value {
        match self {
            Schema::Classification => json!({
                "type": "object",
                "properties": {
                    "code": {
                        "type": "string",
                        "description": "A Dewey Decimal Classification number: three digits, optionally with decimals, such as 636.1",
                        "pattern": "^[0-9]{3}([.][0-9]+)?$"
                    },
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1}
                },
                "required": ["code", "confidence"],
                "additionalProperties": false
            }),
            Schema::Synopsis => json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "summary": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "suggested_stem": {"type": "string"}
                },
                "required": ["title", "summary", "tags", "suggested_stem"],
                "additionalProperties": false
            }),
        }
    }
}

impl Schema {
    /// [`Schema::json`] with bounds on every string and list, for the grammar form: llama.cpp
    /// turns the schema into a grammar that makes the model close a string at its bound, so
    /// a small model that rambles in a summary still ends its answer well within the call's
    /// `max_tokens` instead of being cut (seen with SmolLM2: a summary that never closed).
    /// OpenAI's strict mode refuses length keywords, so the `json_schema` form goes without.
    pub fn bounded_json(self) -> Value {
        let mut json = self.json();
        let string = |max: u64| json!({"type": "string", "maxLength": max});
        if let Schema::Synopsis = self {
            json["properties"] = json!({
                "title": string(150),
                "summary": string(600),
                "tags": {"type": "array", "items": string(40), "maxItems": 8},
                "suggested_stem": string(80),
            });
        }
        json
    }
}

/// The forms of `response_format` tried, in order; past the last, none is sent.
const FORMS: usize = 2;

/// The `response_format` of `form` (0: `json_schema`, 1: `json_object` with a schema) for
/// `schema`, or `None` past the forms.
pub fn response_format(form: usize, schema: Schema) -> Option<Value> {
    match form {
        0 => Some(json!({
            "type": "json_schema",
            "json_schema": {"name": schema.name(), "strict": true, "schema": schema.json()}
        })),
        1 => Some(json!({"type": "json_object", "schema": schema.bounded_json()})),
        _ => None,
    }
}

/// The name of a form, for logs and docs.
pub fn form_name(form: usize) -> &'static str {
    match form {
        0 => "json_schema",
        1 => "json_object with schema",
        _ => "none",
    }
}

/// An optional field a server refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    StreamOptions,
    /// The `response_format` form of this index.
    ResponseFormat(usize),
}

/// The optional fields one request carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub stream_options: bool,
    pub form: Option<usize>,
}

/// What a 400 or 422 refused, when it names an optional field the request carried; or a 500
/// that names `response_format` (llama-cpp-python 0.3.36 answers its validation error of a
/// `json_schema` form with HTTP 500). Only a refusal that names the field counts (every server
/// known to refuse one does: a FastAPI validation error's `loc`, vLLM's and OpenAI's
/// messages), so a request refused for another reason (the prompt too long for the model's
/// context) is not sent again without the field.
pub fn refused_field(status: u16, body: &[u8], sent: Sent) -> Option<Refused> {
    let names: &[&str] = match status {
        400 | 422 => &[
            "response_format",
            "json_schema",
            "json_object",
            "schema",
            "grammar",
        ],
        500 => &["response_format"],
        _ => return None,
    };
    let body = String::from_utf8_lossy(body).to_ascii_lowercase();
    if sent.stream_options && matches!(status, 400 | 422) && body.contains("stream_options") {
        return Some(Refused::StreamOptions);
    }
    let form = sent.form?;
    names
        .iter()
        .any(|name| body.contains(name))
        .then_some(Refused::ResponseFormat(form))
}

/// What this provider's server was found to take; shared by every call of the process.
#[derive(Debug, Default)]
pub struct Learned {
    /// The first `response_format` form still worth sending.
    form: AtomicUsize,
    /// Set once the server refused `stream_options`.
    no_stream_options: AtomicBool,
}

impl Learned {
    /// The form to send now, or `None` once the server refused them all.
    pub fn form(&self) -> Option<usize> {
        let form = self.form.load(Ordering::Relaxed);
        (form < FORMS).then_some(form)
    }

    pub fn stream_options(&self) -> bool {
        !self.no_stream_options.load(Ordering::Relaxed)
    }

    /// Remembers a refusal. Whether it taught anything new: concurrent calls refused alike
    /// advance the form once, not once each.
    pub fn refused(&self, refused: Refused) -> bool {
        match refused {
            Refused::StreamOptions => !self.no_stream_options.swap(true, Ordering::Relaxed),
            Refused::ResponseFormat(form) => {
                self.form.fetch_max(form + 1, Ordering::Relaxed) <= form
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_fall_back_in_order_and_are_remembered() {
        let learned = Learned::default();
        assert_eq!(learned.form(), Some(0));
        assert!(learned.stream_options());
        let sent = Sent {
            stream_options: true,
            form: Some(0),
        };
        let pydantic = br#"{"detail":[{"loc":["body","response_format","type"],"msg":"Input should be 'text' or 'json_object'"}]}"#;
        assert_eq!(
            refused_field(422, pydantic, sent),
            Some(Refused::ResponseFormat(0))
        );
        assert!(learned.refused(Refused::ResponseFormat(0)));
        assert!(!learned.refused(Refused::ResponseFormat(0)), "learned once");
        assert_eq!(learned.form(), Some(1));
        assert!(learned.refused(Refused::ResponseFormat(1)));
        assert_eq!(learned.form(), None);
        assert_eq!(
            refused_field(400, b"Unrecognized request argument: stream_options", sent),
            Some(Refused::StreamOptions)
        );
        assert!(learned.refused(Refused::StreamOptions));
        assert!(!learned.stream_options());
    }

    #[test]
    fn other_refusals_are_not_blamed_on_the_fields() {
        let sent = Sent {
            stream_options: true,
            form: Some(0),
        };
        let context = br#"{"error":{"message":"maximum context length is 4096 tokens","code":"context_length_exceeded"}}"#;
        assert_eq!(refused_field(400, context, sent), None);
        assert_eq!(refused_field(503, b"response_format", sent), None);
        assert_eq!(refused_field(500, b"json schema trouble", sent), None);
        // llama-cpp-python 0.3.36's answer to a `json_schema` form.
        let llama_cpp_python = br#"{"error":{"message":"1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type')}","type":"internal_server_error"}}"#;
        assert_eq!(
            refused_field(500, llama_cpp_python, sent),
            Some(Refused::ResponseFormat(0))
        );
        assert_eq!(
            refused_field(400, b"response_format", Sent::default()),
            None,
            "a field not sent is never blamed"
        );
    }

    #[test]
    fn schemas_are_strict() {
        for schema in [Schema::Classification, Schema::Synopsis] {
            let json = schema.json();
            let properties: Vec<&String> = json["properties"].as_object().unwrap().keys().collect();
            let required: Vec<&str> = json["required"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert_eq!(properties.len(), required.len());
            assert_eq!(json["additionalProperties"], false);
            assert_eq!(
                response_format(0, schema).unwrap()["json_schema"]["strict"],
                true
            );
            let bounded = response_format(1, schema).unwrap()["schema"].clone();
            assert_eq!(bounded["required"], json["required"]);
            assert_eq!(bounded, schema.bounded_json());
            assert_eq!(response_format(2, schema), None);
        }
    }
}
