//! Reading the `generic-compatible` provider's answers: cleaned text freed of echoed wrappers,
//! and the JSON of classifications and synopses found, validated and normalized. A bad answer
//! is a retryable `invalid_response`.

use serde_json::Value;
use shelf_documents::dewey;

use super::client::invalid;
use crate::provider::{Classification, ProviderError, Synopsis, slug};

/// The cleaned text of an answer: a code fence or echoed markers around the whole answer,
/// and an echoed context at its start, are removed.
pub fn tidy_cleaned_answer(answer: &str, context: &str) -> String {
    let mut text = answer.trim();
    if let Some(inner) = strip_fence(text) {
        text = inner.trim();
    }
    if let Some(rest) = text.strip_prefix("<<<TEXT") {
        text = rest.trim_start_matches([' ', '\t']);
        text = text.strip_prefix('\n').unwrap_or(text);
        text = text.strip_suffix("TEXT>>>").unwrap_or(text).trim_end();
    }
    if let Some(rest) = text.strip_prefix("<<<CONTEXT")
        && let Some(end) = rest.find("CONTEXT>>>")
    {
        text = rest[end + "CONTEXT>>>".len()..].trim_start();
        if let Some(rest) = text.strip_prefix("<<<TEXT") {
            text = rest.trim_start();
            text = text.strip_suffix("TEXT>>>").unwrap_or(text).trim_end();
        }
    }
    let context = context.trim();
    if context.chars().count() >= 40
        && let Some(rest) = text.strip_prefix(context)
    {
        text = rest.trim_start();
    }
    text.to_string()
}

/// The inside of a code fence that wraps the whole text.
fn strip_fence(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("```")?;
    let body_start = rest.find('\n')? + 1;
    let body = rest[body_start..].trim_end();
    body.strip_suffix("```")
}

/// The first JSON object in an answer, skipping code fences and prose before or after it.
pub fn extract_json_object(answer: &str) -> Option<serde_json::Map<String, Value>> {
    let text = answer.trim();
    let text = strip_fence(text).unwrap_or(text);
    for (tried, (start, _)) in text.match_indices('{').enumerate() {
        if tried >= 64 {
            break;
        }
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(map))) = values.next() {
            return Some(map);
        }
    }
    None
}

/// A Dewey code from a JSON string or number (`636.1`, `"636.1"`, `"DDC 636.1"`, `6` → `006`).
fn dewey_code(value: &Value) -> Option<String> {
    let raw = match value {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let raw = raw
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()?
        .trim_end_matches('.')
        .to_string();
    let (head, tail) = match raw.split_once('.') {
        Some((h, t)) => (h.to_string(), Some(t.to_string())),
        None => (raw.clone(), None),
    };
    if head.is_empty() || head.len() > 3 {
        return None;
    }
    let mut code = format!("{head:0>3}");
    if let Some(tail) = tail.filter(|t| !t.is_empty()) {
        code.push('.');
        code.push_str(&tail);
    }
    dewey::is_valid_code(&code).then_some(code)
}

/// A classification answer, validated: a real Dewey code and a confidence in 0..=1
/// (percentages are accepted). Anything else is a retryable `invalid_response`.
pub fn parse_classification(answer: &str) -> Result<Classification, ProviderError> {
    let map = extract_json_object(answer)
        .ok_or_else(|| invalid("the classification answer contains no JSON object"))?;
    let code = map
        .get("code")
        .or_else(|| map.get("dewey"))
        .or_else(|| map.get("class"))
        .and_then(dewey_code)
        .ok_or_else(|| invalid("the classification answer has no valid Dewey code"))?;
    let confidence = match map.get("confidence") {
        None | Some(Value::Null) => 0.5,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(Value::String(s)) => s.trim().trim_end_matches('%').parse().unwrap_or(f64::NAN),
        Some(_) => f64::NAN,
    };
    let confidence = if confidence > 1.0 && confidence <= 100.0 {
        confidence / 100.0
    } else {
        confidence
    };
    if !(0.0..=1.0).contains(&confidence) {
        return Err(invalid(
            "the classification answer's confidence is not a number from 0 to 1",
        ));
    }
    Ok(Classification { code, confidence })
}

/// A summary answer, validated: a non-empty title, a summary, tags (an array, or one
/// comma-separated string) and a safe stem (derived from the title when missing).
pub fn parse_synopsis(answer: &str) -> Result<Synopsis, ProviderError> {
    let map = extract_json_object(answer)
        .ok_or_else(|| invalid("the summary answer contains no JSON object"))?;
    let string = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let title = string("title")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| invalid("the summary answer has no title"))?;
    let summary = string("summary").ok_or_else(|| invalid("the summary answer has no summary"))?;
    let tags: Vec<String> = match map.get("tags") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty())
            .collect(),
        Some(Value::String(list)) => list
            .split(',')
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty())
            .collect(),
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err(invalid("the summary answer's tags are not a list")),
    };
    let stem = string("suggested_stem").unwrap_or_default();
    let suggested_stem = slug(if stem.is_empty() { &title } else { &stem });
    Ok(Synopsis {
        title,
        summary,
        tags,
        suggested_stem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_in_fences_and_prose() {
        let c = parse_classification("```json\n{\"code\": \"636.1\", \"confidence\": 0.8}\n```")
            .unwrap();
        assert_eq!(c.code, "636.1");
        assert!((c.confidence - 0.8).abs() < 1e-9);
        let c = parse_classification(
            "Sure! Based on the text {it is about horses}, here you go: {\"code\": 636, \"confidence\": \"85%\"} Hope that helps.",
        )
        .unwrap();
        assert_eq!(c.code, "636");
        assert!((c.confidence - 0.85).abs() < 1e-9);
        let c = parse_classification("{\"code\": \"DDC 4.678\"}").unwrap();
        assert_eq!(c.code, "004.678");
        assert_eq!(c.confidence, 0.5);
    }

    #[test]
    fn bad_classifications_are_retryable() {
        for bad in [
            "I think it is about horses.",
            "{\"code\": \"horses\", \"confidence\": 0.9}",
            "{\"code\": \"6361\", \"confidence\": 0.9}",
            "{\"code\": \"636\", \"confidence\": 7000}",
            "{\"code\": \"636\", \"confidence\": -0.1}",
            "{\"code\": [636]}",
        ] {
            let e = parse_classification(bad).unwrap_err();
            assert!(e.retryable, "{bad}");
            assert_eq!(e.code, "invalid_response");
        }
    }

    #[test]
    fn synopses_are_validated() {
        let s = parse_synopsis(
            "Here it is:\n{\"title\": \"Horse  Care\", \"summary\": \"How to keep horses.\", \"tags\": \"Horses, Care\", \"suggested_stem\": \"../../etc/passwd\"}",
        )
        .unwrap();
        assert_eq!(s.title, "Horse Care");
        assert_eq!(s.tags, ["horses", "care"]);
        assert_eq!(s.suggested_stem, "etc-passwd");
        let s = parse_synopsis("{\"title\": \"Horse Care\", \"summary\": \"x\", \"tags\": []}")
            .unwrap();
        assert_eq!(s.suggested_stem, "horse-care");
        assert!(
            parse_synopsis("{\"summary\": \"x\"}")
                .unwrap_err()
                .retryable
        );
        assert!(
            parse_synopsis("{\"title\": \"t\", \"summary\": \"x\", \"tags\": 3}")
                .unwrap_err()
                .retryable
        );
    }

    #[test]
    fn cleaned_answers_lose_wrappers_and_echoed_context() {
        let context = "This is the preceding paragraph, long enough to be recognised.";
        assert_eq!(
            tidy_cleaned_answer("```\nHello there.\n```", context),
            "Hello there."
        );
        assert_eq!(
            tidy_cleaned_answer("<<<TEXT\nHello there.\nTEXT>>>", context),
            "Hello there."
        );
        assert_eq!(
            tidy_cleaned_answer(&format!("{context}\n\nHello there."), context),
            "Hello there."
        );
    }
}
