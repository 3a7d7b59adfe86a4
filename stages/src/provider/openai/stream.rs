//! Reading a streamed chat completion (`stream: true`): the server-sent events parser, the
//! answer assembled from its `data:` events, and the time limits of a stream: the first token
//! within `SHELF_LLM_TIMEOUT_SECONDS`, then no gap longer than `SHELF_LLM_IDLE_TIMEOUT_SECONDS`,
//! and a total budget from the call's `max_tokens` at the rate the stream has shown.
//!
//! Every way of giving up returns, which drops the response and so closes the connection:
//! that is how llama.cpp, vLLM and Ollama learn to stop generating an answer nobody reads.

use std::time::{Duration, Instant};

use serde_json::Value;

/// A stream's budget is this many times the time its rate says `max_tokens` take...
const BUDGET_FACTOR: f64 = 2.0;
/// ...plus this, so the noisy rate of the first few tokens never cuts a stream short.
const BUDGET_SLACK: Duration = Duration::from_secs(30);
/// The longest budget ever computed (a rate of one token an hour must not overflow).
const LONGEST_BUDGET: Duration = Duration::from_secs(7 * 86_400);

/// A server-sent events parser (the WHATWG event-stream format, `data` fields only): bytes in
/// as they arrive, split anywhere, and each event's data out once its blank line has come.
/// Lines end in LF, CRLF or CR; comments (`:` lines) and other fields are skipped; several
/// `data` lines of one event are joined with LF.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The last byte was CR: an LF right after it ends the same line, not another.
    after_cr: bool,
}

impl SseParser {
    /// Feeds `bytes`; the data of every event they complete is pushed to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Vec<u8>>) {
        for &b in bytes {
            if std::mem::take(&mut self.after_cr) && b == b'\n' {
                continue;
            }
            match b {
                b'\n' => self.end_line(out),
                b'\r' => {
                    self.end_line(out);
                    self.after_cr = true;
                }
                _ => self.line.push(b),
            }
        }
    }

    /// The stream ended: its unfinished line and event count as finished (a server that
    /// closes after the last event without a blank line loses nothing).
    pub fn finish(&mut self, out: &mut Vec<Vec<u8>>) {
        if !self.line.is_empty() {
            self.end_line(out);
        }
        self.end_line(out);
        self.after_cr = false;
    }

    /// Bytes held for the event being read (its data and its unfinished line).
    pub fn pending(&self) -> usize {
        self.line.len() + self.data.len()
    }

    fn end_line(&mut self, out: &mut Vec<Vec<u8>>) {
        if self.line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                out.push(std::mem::take(&mut self.data));
            }
            return;
        }
        let line = std::mem::take(&mut self.line);
        if line.first() == Some(&b':') {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        self.line = line;
        self.line.clear();
    }
}

/// What one event did to the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Generated text arrived (content, or a reasoning model's thinking).
    Token,
    /// Anything else: the role, an empty delta, the finish reason, the usage.
    Other,
    /// `data: [DONE]`.
    Done,
}

/// Why an event ended the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventError {
    /// The content passed `SHELF_LLM_MAX_RESPONSE_CHARS`.
    TooLarge,
    /// An event that is not a chat-completion chunk.
    Unreadable,
    /// The server reported an error inside the stream (its short type or code, if any).
    Server(Option<String>),
}

/// The answer assembled from a stream's events.
#[derive(Debug, Default)]
pub struct Assembly {
    pub content: String,
    chars: usize,
    max_chars: usize,
    pub finish_reason: Option<String>,
    /// `(prompt_tokens, completion_tokens)` when the server reported them.
    pub usage: Option<(u64, u64)>,
    /// Events that carried generated text (about one a token on llama.cpp, vLLM and OpenAI).
    pub tokens: u64,
}

impl Assembly {
    pub fn new(max_chars: usize) -> Self {
        Assembly {
            max_chars,
            ..Assembly::default()
        }
    }

    /// Whether the answer has begun: a token or a finish reason came.
    pub fn started(&self) -> bool {
        self.tokens > 0 || self.finish_reason.is_some()
    }

    /// Reads one event's data.
    pub fn feed(&mut self, data: &[u8]) -> Result<Step, EventError> {
        if data.trim_ascii() == b"[DONE]" {
            return Ok(Step::Done);
        }
        let value: Value = serde_json::from_slice(data).map_err(|_| EventError::Unreadable)?;
        let Value::Object(event) = value else {
            return Err(EventError::Unreadable);
        };
        if let Some(error) = event.get("error").filter(|e| !e.is_null()) {
            return Err(EventError::Server(short_ident(error)));
        }
        if let Some(usage) = event.get("usage").filter(|u| u.is_object()) {
            let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Some((count("prompt_tokens"), count("completion_tokens")));
        }
        let mut step = Step::Other;
        let choice = event
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        if let Some(choice) = choice {
            let delta = choice.get("delta");
            let text = |key: &str| {
                delta
                    .and_then(|d| d.get(key))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            let content = text("content");
            if !content.is_empty() {
                self.chars += content.chars().count();
                if self.chars > self.max_chars {
                    return Err(EventError::TooLarge);
                }
                self.content.push_str(content);
                step = Step::Token;
            } else if !text("reasoning_content").is_empty() || !text("reasoning").is_empty() {
                // A reasoning model's thinking: tokens for the time limits, not the answer.
                step = Step::Token;
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_string());
            }
        }
        if step == Step::Token {
            self.tokens += 1;
        }
        Ok(step)
    }
}

/// The short type or code of an error object (never its free text, which may echo input).
pub(super) fn short_ident(error: &Value) -> Option<String> {
    let ident = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| {
                !s.is_empty()
                    && s.len() <= 64
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            })
            .map(str::to_string)
    };
    ident(error.get("code")).or_else(|| ident(error.get("type")))
}

/// A stream's total budget: the time `max_tokens` take at the rate seen since the first
/// token, times [`BUDGET_FACTOR`], plus [`BUDGET_SLACK`], counted from the first token (the
/// wait before it has its own limit). A slow server that keeps its pace always fits; one
/// that keeps sending without end (ignoring `max_tokens`, or sending empty events) does not.
#[derive(Debug, Clone)]
pub struct Budget {
    max_tokens: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    after_first: u64,
}

impl Budget {
    pub fn new(max_tokens: u32) -> Self {
        Budget {
            max_tokens: u64::from(max_tokens.max(1)),
            first: None,
            last: None,
            after_first: 0,
        }
    }

    /// One more event of generated text at `now`.
    pub fn token(&mut self, now: Instant) {
        if self.first.is_none() {
            self.first = Some(now);
        } else {
            self.after_first += 1;
            self.last = Some(now);
        }
    }

    /// When the stream must have ended, once two tokens have shown a rate.
    pub fn deadline(&self) -> Option<Instant> {
        let (first, last) = (self.first?, self.last?);
        let per_token = last.duration_since(first).as_secs_f64() / self.after_first as f64;
        let expected = per_token * self.max_tokens as f64 * BUDGET_FACTOR;
        let allowed = Duration::from_secs_f64(expected.min(LONGEST_BUDGET.as_secs_f64()))
            .saturating_add(BUDGET_SLACK);
        Some(first + allowed)
    }

    /// The budget as a length of time, for messages.
    pub fn allowed(&self) -> Option<Duration> {
        Some(self.deadline()?.duration_since(self.first?))
    }

    /// Whether the server sent far more than `max_tokens` (it ignores the bound): twice it,
    /// and some, since a few servers send a token in more than one event.
    pub fn overrun(&self, tokens: u64) -> bool {
        tokens > self.max_tokens.saturating_mul(2).saturating_add(64)
    }
}

/// The limits one streamed answer is read under.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    /// The first token must come by then (`SHELF_LLM_TIMEOUT_SECONDS` after sending).
    pub first_token_by: Instant,
    /// `SHELF_LLM_IDLE_TIMEOUT_SECONDS`.
    pub idle: Duration,
    pub max_tokens: u32,
    /// `SHELF_LLM_MAX_RESPONSE_CHARS`.
    pub max_chars: usize,
}

/// Why a stream was given up.
#[derive(Debug)]
pub enum StreamError {
    /// No token before `first_token_by`.
    FirstToken,
    /// No event for the idle timeout after the answer began.
    Idle,
    /// The total budget ran out; how long it was.
    Budget(Duration),
    Event(EventError),
    /// An event longer than any answer may be.
    LineTooLong,
    Transport(reqwest::Error),
    /// The connection closed before the answer finished.
    EndedEarly,
    /// `[DONE]` came before any finish reason: the server cut the answer short to serve
    /// another request (llama-cpp-python's server does so by default, `interrupt_requests`,
    /// whenever a second request waits for its one model). Not an answer: sent again.
    Interrupted,
}

/// A complete streamed answer.
#[derive(Debug)]
pub struct Streamed {
    pub content: String,
    /// Cut at `max_tokens` (`finish_reason: "length"`), or sent on far past it.
    pub truncated: bool,
    pub usage: Option<(u64, u64)>,
    pub tokens: u64,
}

/// Reads a streamed answer to its end under `limits`. Returning at all, with an answer or an
/// error, leaves the response to the caller, which drops it at once.
pub async fn read(
    response: &mut reqwest::Response,
    limits: StreamLimits,
) -> Result<Streamed, StreamError> {
    let mut parser = SseParser::default();
    let mut answer = Assembly::new(limits.max_chars);
    let mut budget = Budget::new(limits.max_tokens);
    let mut last_event = Instant::now();
    // An event carries one token's text, JSON-escaped (at most six bytes a character), in an
    // envelope of a few hundred bytes.
    let longest_event = limits.max_chars.saturating_mul(6).saturating_add(64 * 1024);
    let mut events = Vec::new();
    loop {
        let deadline = if answer.started() {
            let idle = last_event + limits.idle;
            budget.deadline().map_or(idle, |total| total.min(idle))
        } else {
            limits.first_token_by
        };
        let chunk = match tokio::time::timeout_at(deadline.into(), response.chunk()).await {
            Ok(Ok(chunk)) => chunk,
            Ok(Err(e)) => return Err(StreamError::Transport(e)),
            Err(_) if answer.finish_reason.is_some() => {
                // The answer finished and the server kept the stream open without `[DONE]`:
                // nothing more is coming that matters.
                return Ok(finished(answer, &budget));
            }
            Err(_) if !answer.started() => return Err(StreamError::FirstToken),
            Err(_) => {
                return Err(match budget.deadline() {
                    Some(total) if total <= Instant::now() => {
                        StreamError::Budget(budget.allowed().unwrap_or_default())
                    }
                    _ => StreamError::Idle,
                });
            }
        };
        let ended = chunk.is_none();
        match &chunk {
            Some(bytes) => parser.push(bytes, &mut events),
            None => parser.finish(&mut events),
        }
        for data in events.drain(..) {
            let now = Instant::now();
            match answer.feed(&data).map_err(StreamError::Event)? {
                Step::Done if answer.finish_reason.is_none() => {
                    return Err(StreamError::Interrupted);
                }
                Step::Done => return Ok(finished(answer, &budget)),
                Step::Token => budget.token(now),
                Step::Other => {}
            }
            last_event = now;
            if budget.overrun(answer.tokens) {
                // The server ignores `max_tokens`: the answer is cut here, as it should have been.
                let mut streamed = finished(answer, &budget);
                streamed.truncated = true;
                return Ok(streamed);
            }
        }
        if ended {
            return if answer.finish_reason.is_some() {
                Ok(finished(answer, &budget))
            } else {
                Err(StreamError::EndedEarly)
            };
        }
        if parser.pending() > longest_event {
            return Err(StreamError::LineTooLong);
        }
    }
}

fn finished(answer: Assembly, budget: &Budget) -> Streamed {
    Streamed {
        truncated: answer.finish_reason.as_deref() == Some("length")
            || budget.overrun(answer.tokens),
        content: answer.content,
        usage: answer.usage,
        tokens: answer.tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(parts: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        for part in parts {
            parser.push(part, &mut out);
        }
        parser.finish(&mut out);
        out
    }

    #[test]
    fn events_are_split_on_blank_lines_in_every_line_ending() {
        let stream = b": ping\r\ndata: {\"a\":1}\r\n\r\ndata:{\"b\":2}\n\nevent: x\ndata: one\ndata: two\n\nid: 7\n\ndata: [DONE]\r\r";
        assert_eq!(
            events(&[stream]),
            [
                b"{\"a\":1}".to_vec(),
                b"{\"b\":2}".to_vec(),
                b"one\ntwo".to_vec(),
                b"[DONE]".to_vec()
            ]
        );
        // A last event without its blank line still counts when the stream ends.
        assert_eq!(
            events(&[b"data: x\n\ndata: y"]),
            [b"x".to_vec(), b"y".to_vec()]
        );
        // CR then LF across two pushes is one line end, not an empty line.
        assert_eq!(
            events(&[b"data: a\r", b"\ndata: b\r\n\r\n"]),
            [b"a\nb".to_vec()]
        );
    }

    fn chunk(content: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"choices": [{"delta": {"content": content}}]}))
            .unwrap()
    }

    #[test]
    fn an_answer_is_assembled_with_its_finish_reason_and_usage() {
        let mut answer = Assembly::new(100);
        assert_eq!(
            answer.feed(br#"{"choices":[{"delta":{"role":"assistant"}}]}"#),
            Ok(Step::Other)
        );
        assert!(!answer.started());
        assert_eq!(answer.feed(&chunk("Hel")), Ok(Step::Token));
        assert_eq!(answer.feed(&chunk("lo")), Ok(Step::Token));
        assert_eq!(
            answer.feed(br#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#),
            Ok(Step::Other)
        );
        assert_eq!(
            answer.feed(br#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}"#),
            Ok(Step::Other)
        );
        assert_eq!(answer.feed(b" [DONE] "), Ok(Step::Done));
        assert_eq!(answer.content, "Hello");
        assert_eq!(answer.finish_reason.as_deref(), Some("length"));
        assert_eq!(answer.usage, Some((9, 2)));
        assert_eq!(answer.tokens, 2);
        assert_eq!(
            answer.feed(br#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#),
            Ok(Step::Token)
        );
        assert_eq!(answer.content, "Hello", "thinking is not the answer");
    }

    #[test]
    fn bad_events_end_the_stream() {
        let mut answer = Assembly::new(4);
        assert_eq!(answer.feed(b"{not json"), Err(EventError::Unreadable));
        assert_eq!(answer.feed(b"[1]"), Err(EventError::Unreadable));
        assert_eq!(
            answer.feed(br#"{"error":{"message":"your prompt: secret","type":"server_error"}}"#),
            Err(EventError::Server(Some("server_error".into())))
        );
        assert_eq!(answer.feed(&chunk("abc")), Ok(Step::Token));
        assert_eq!(answer.feed(&chunk("de")), Err(EventError::TooLarge));
    }

    #[test]
    fn the_budget_follows_the_observed_rate() {
        let start = Instant::now();
        let mut budget = Budget::new(100);
        assert_eq!(budget.deadline(), None);
        budget.token(start);
        assert_eq!(budget.deadline(), None, "one token shows no rate");
        // Ten tokens a second: 100 take 10 s; twice that plus 30 s.
        for i in 1..=10 {
            budget.token(start + Duration::from_millis(100 * i));
        }
        assert_eq!(budget.allowed(), Some(Duration::from_secs(50)));
        // The server slows down: the budget grows with it.
        budget.token(start + Duration::from_secs(11));
        assert!(budget.allowed().unwrap() > Duration::from_secs(150));
        assert!(!budget.overrun(264) && budget.overrun(265));
    }

    proptest::proptest! {
        /// Any bytes, split anywhere, give the events they give whole, and never panic.
        #[test]
        fn splitting_never_changes_the_events(
            bytes in proptest::collection::vec(proptest::prop_oneof![
                proptest::num::u8::ANY,
                proptest::sample::select(b"\r\n:data [DONE]{}".to_vec()),
            ], 0..400),
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let whole = events(&[&bytes]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut parts: Vec<&[u8]> = Vec::new();
            let mut from = 0;
            for cut in cuts {
                parts.push(&bytes[from..cut]);
                from = cut;
            }
            parts.push(&bytes[from..]);
            proptest::prop_assert_eq!(events(&parts), whole.clone());
            let mut answer = Assembly::new(1000);
            for data in &whole {
                let _ = answer.feed(data);
            }
        }
    }
}
