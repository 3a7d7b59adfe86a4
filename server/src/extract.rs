//! Extractors whose rejections use the API's error body: JSON bodies and query strings fail
//! with `validation_error` and a FastAPI-style `[{loc, msg, type}]` detail; a body over the
//! request limit fails with `request_too_large`.

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{ApiError, ErrorCode, ValidationIssue};

/// JSON bodies are small (search and run requests): anything larger is refused rather than
/// buffered, whatever `SHELF_API_MAX_REQUEST_BYTES` allows for uploads.
pub const MAX_JSON_BODY_BYTES: usize = 1 << 20;

/// Whether an error (or any error it wraps) is a body-length limit being hit.
pub fn is_length_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = current {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        current = e.source();
    }
    false
}

pub fn request_too_large() -> ApiError {
    ApiError::new(
        ErrorCode::RequestTooLarge,
        "Request body exceeds the configured limit",
    )
}

/// Reads a whole (small) body.
async fn read_body(body: Body, limit: usize) -> Result<bytes::Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        if is_length_limit(&e) {
            request_too_large()
        } else {
            ApiError::new(ErrorCode::BadRequest, "Could not read the request body").with_cause(e)
        }
    })
}

/// `body` parsed as JSON into `T`, with the path of the first problem.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid(&["body"], "Field required", "missing"));
    }
    // serde's derived structs also read a JSON array as their fields in order; every body
    // of this API is an object, as the schema says, so an array is a type error.
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            return Err(ApiError::invalid(
                &["body"],
                strip_position(&e.to_string()),
                "json_invalid",
            ));
        }
        return Err(ApiError::invalid(
            &["body"],
            "invalid type: sequence, expected an object",
            "type_error",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: T = match serde_path_to_error::deserialize(&mut de) {
        Ok(value) => value,
        Err(e) => {
            let message = strip_position(&e.inner().to_string());
            let kind = json_error_kind(e.inner());
            let mut loc = vec![Value::from("body")];
            if kind != "json_invalid" {
                loc.extend(path_segments(e.path()));
            }
            if kind == "missing"
                && let Some(field) = backticked(&message)
            {
                loc.push(Value::from(field));
            }
            return Err(ApiError::validation(vec![ValidationIssue {
                loc,
                msg: message,
                kind: kind.to_string(),
            }]));
        }
    };
    de.end().map_err(|e| {
        ApiError::invalid(&["body"], strip_position(&e.to_string()), "json_invalid")
    })?;
    Ok(value)
}

fn json_error_kind(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Syntax
        | serde_json::error::Category::Eof
        | serde_json::error::Category::Io => "json_invalid",
        serde_json::error::Category::Data => data_error_kind(&e.to_string()),
    }
}

fn data_error_kind(message: &str) -> &'static str {
    if message.starts_with("missing field") {
        "missing"
    } else if message.starts_with("invalid type") {
        "type_error"
    } else if message.starts_with("unknown variant") {
        "enum"
    } else if message.starts_with("unknown field") {
        "extra_forbidden"
    } else {
        "value_error"
    }
}

/// serde_json appends " at line L column C"; clients get the path in `loc` instead.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message.get(..at).unwrap_or(message).to_string(),
        None => message.to_string(),
    }
}

fn backticked(message: &str) -> Option<&str> {
    let start = message.find('`')?;
    let rest = message.get(start + 1..)?;
    let end = rest.find('`')?;
    rest.get(..end)
}

fn path_segments(path: &serde_path_to_error::Path) -> Vec<Value> {
    path.iter()
        .filter_map(|segment| match segment {
            serde_path_to_error::Segment::Seq { index } => Some(Value::from(*index)),
            serde_path_to_error::Segment::Map { key } => Some(Value::from(key.as_str())),
            serde_path_to_error::Segment::Enum { variant } => Some(Value::from(variant.as_str())),
            serde_path_to_error::Segment::Unknown => None,
        })
        .collect()
}

/// A JSON body. Content-Type is not required (clients that forget it still get their body
/// read); the size is capped at [`MAX_JSON_BODY_BYTES`].
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(req.into_body(), MAX_JSON_BODY_BYTES).await?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// An optional JSON body: an empty body and `null` are `None`.
pub struct OptionalJson<T>(pub Option<T>);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(req.into_body(), MAX_JSON_BODY_BYTES).await?;
        // No bytes at all is no body; white space alone is a body that is not JSON (`422`).
        if bytes.is_empty() {
            return Ok(OptionalJson(None));
        }
        // The schema declares these bodies optional, which clients (and generators) express
        // as `null` as often as by sending nothing.
        parse_json::<Option<T>>(&bytes).map(OptionalJson)
    }
}

/// A query string.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(ApiQuery)
            .map_err(|e| {
                let message = e.inner().to_string();
                let mut loc = vec![Value::from("query")];
                loc.extend(path_segments(e.path()));
                let kind = if message.starts_with("missing field") {
                    if let Some(field) = backticked(&message) {
                        loc.push(Value::from(field));
                    }
                    "missing"
                } else if message.contains("invalid digit") || message.contains("invalid type") {
                    "int_parsing"
                } else {
                    "value_error"
                };
                ApiError::validation(vec![ValidationIssue {
                    loc,
                    msg: message,
                    kind: kind.to_string(),
                }])
            })
    }
}

/// Path parameters (ids are plain strings; a rejection means undecodable percent-encoding).
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e| ApiError::invalid(&["path"], e.body_text(), "value_error"))
    }
}

/// The largest offset (and content `limit`) accepted: JavaScript's largest safe integer, so
/// every client can represent it, and below SQLite's `i64`.
pub const MAX_OFFSET: u64 = 9_007_199_254_740_991;

/// An offset within `0..=MAX_OFFSET` (default 0), as the schema declares.
pub fn page_offset(loc: &[&str], value: Option<u64>) -> Result<u64, ApiError> {
    let offset = value.unwrap_or(0);
    if offset > MAX_OFFSET {
        return Err(ApiError::invalid(
            loc,
            format!("Input should be less than or equal to {MAX_OFFSET}"),
            "less_than_equal",
        ));
    }
    Ok(offset)
}

/// A page of a listing: `limit` within `1..=max` (default `default`), `offset` from 0.
pub fn page_limit(name: &str, value: Option<u64>, default: u64, max: u64) -> Result<u64, ApiError> {
    let limit = value.unwrap_or(default);
    if limit == 0 {
        return Err(ApiError::invalid(
            &["query", name],
            "Input should be greater than or equal to 1",
            "greater_than_equal",
        ));
    }
    if limit > max {
        return Err(ApiError::invalid(
            &["query", name],
            format!("Input should be less than or equal to {max}"),
            "less_than_equal",
        ));
    }
    Ok(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Body {
        document_id: String,
        items: Option<Vec<u32>>,
    }

    fn issue(body: &str) -> serde_json::Value {
        let err = parse_json::<Body>(body.as_bytes()).expect_err("invalid");
        assert_eq!(err.code, ErrorCode::ValidationError);
        serde_json::to_value(err.body()).expect("json")["detail"][0].clone()
    }

    #[test]
    fn validation_issues_name_the_field() {
        let missing = issue("{}");
        assert_eq!(missing["loc"], serde_json::json!(["body", "document_id"]));
        assert_eq!(missing["type"], "missing");
        let wrong = issue(r#"{"document_id": 5}"#);
        assert_eq!(wrong["loc"], serde_json::json!(["body", "document_id"]));
        assert_eq!(wrong["type"], "type_error");
        let nested = issue(r#"{"document_id": "d", "items": [1, "x"]}"#);
        assert_eq!(nested["loc"], serde_json::json!(["body", "items", 1]));
        let syntax = issue(r#"{"document_id": "#);
        assert_eq!(syntax["loc"], serde_json::json!(["body"]));
        assert_eq!(syntax["type"], "json_invalid");
        let trailing = issue(r#"{"document_id": "d"} x"#);
        assert_eq!(trailing["type"], "json_invalid");
        let empty = issue("  ");
        assert_eq!(empty["type"], "missing");
        // A struct is an object on the wire, never an array of its fields.
        let array = issue(r#" ["d", null]"#);
        assert_eq!(array["loc"], serde_json::json!(["body"]));
        assert_eq!(array["type"], "type_error");
        assert!(parse_json::<Option<Body>>(b"[null, null]").is_err());
        assert_eq!(issue(r#"["d""#)["type"], "json_invalid");
        assert!(!missing["msg"].as_str().unwrap_or("").contains("line"));
    }

    #[test]
    fn limits_are_checked() {
        assert_eq!(page_limit("limit", None, 500, 1000).ok(), Some(500));
        assert!(page_limit("limit", Some(1001), 500, 1000).is_err());
        assert!(page_limit("limit", Some(0), 500, 1000).is_err());
        assert_eq!(page_offset(&["query", "offset"], None).ok(), Some(0));
        assert!(page_offset(&["query", "offset"], Some(MAX_OFFSET)).is_ok());
        assert!(page_offset(&["query", "offset"], Some(MAX_OFFSET + 1)).is_err());
    }
}
