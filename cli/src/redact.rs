//! Secret redaction for log output: a `MakeWriter` wrapper that rewrites every formatted line
//! before it reaches stderr, so no event, field or span of any crate can leak a secret past it.
//! It removes the secret values the settings hold (verbatim), API-key assignments
//! (`api_key=…`, `SHELF_API_KEYS=…`, `"x-api-key": "…"`, a query's `?api_key=…`), bearer
//! tokens and provider-style keys (`sk-…`, `sk-proj-…`), and database passwords in every form
//! a URL or connection string holds them (`shelf_app::settings::without_password`).

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::Arc;

use regex::Regex;
use tracing_subscriber::fmt::MakeWriter;

pub const REDACTED: &str = "[REDACTED]";

/// Any run of ANSI colour codes: the text format styles field names apart from their values.
const ANSI: &str = r"(?:\x1b\[[0-9;]*m)*";

/// Known secrets shorter than this are not searched for verbatim (a one-letter key would
/// blank every line); the patterns still catch them where they are assigned.
const MIN_KNOWN_SECRET: usize = 4;

pub struct Redactor {
    /// The settings' secret values, longest first, as one alternation.
    known: Option<Regex>,
    /// `(name, separator)` kept, value replaced.
    assignment: Regex,
    bearer: Regex,
    /// The character before the key is kept.
    provider_key: Regex,
}

impl Redactor {
    pub fn new<'a>(known_secrets: impl IntoIterator<Item = &'a str>) -> Redactor {
        let mut known: Vec<&str> = known_secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_KNOWN_SECRET)
            .collect();
        known.sort_by_key(|s| std::cmp::Reverse(s.len()));
        known.dedup();
        let known = (!known.is_empty()).then(|| {
            let alternation: Vec<String> = known.iter().map(|s| regex::escape(s)).collect();
            compile(&alternation.join("|"))
        });
        Redactor {
            known,
            assignment: compile(&format!(
                r#"(?i)([a-z0-9_.-]*api[_-]?key[a-z0-9_.-]*{ANSI}(?:\\?["'])?{ANSI}\s*[=:]{ANSI}\s*(?:\\?["'])?)[^\s"'\\&;\x1b]+"#
            )),
            bearer: compile(&format!(
                r#"(?i)\b(bearer{ANSI}(?:\s|%20|\+)+)[^\s"'\\,;&\x1b]+"#
            )),
            provider_key: compile(r"(^|[^A-Za-z0-9])sk-[A-Za-z0-9_-]{8,}"),
        }
    }

    /// `line` with every secret replaced by `[REDACTED]`.
    pub fn redact<'a>(&self, line: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(line);
        if let Some(known) = &self.known {
            text = replace(text, known, REDACTED);
        }
        text = replace(text, &self.assignment, &format!("${{1}}{REDACTED}"));
        text = replace(text, &self.bearer, &format!("${{1}}{REDACTED}"));
        text = replace(text, &self.provider_key, &format!("${{1}}sk-{REDACTED}"));
        let masked = shelf_app::settings::without_password(&text);
        if masked != *text {
            text = Cow::Owned(masked);
        }
        text
    }
}

fn compile(pattern: &str) -> Regex {
    // The patterns are constants and escaped literals: a failure is a bug in this file, caught
    // by its tests.
    Regex::new(pattern).expect("redaction pattern compiles")
}

fn replace<'a>(text: Cow<'a, str>, pattern: &Regex, with: &str) -> Cow<'a, str> {
    match pattern.replace_all(&text, with) {
        Cow::Borrowed(_) => text,
        Cow::Owned(changed) => Cow::Owned(changed),
    }
}

/// Wraps the formatter's writer: every writer it makes redacts what passes through it.
pub struct RedactingMakeWriter<M> {
    inner: M,
    redactor: Arc<Redactor>,
}

impl<M> RedactingMakeWriter<M> {
    pub fn new(inner: M, redactor: Redactor) -> Self {
        RedactingMakeWriter {
            inner,
            redactor: Arc::new(redactor),
        }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for RedactingMakeWriter<M> {
    type Writer = RedactingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter {
            inner: self.inner.make_writer(),
            redactor: self.redactor.clone(),
            pending: Vec::new(),
        }
    }
}

/// Buffers bytes until a line is complete, then writes it redacted. The formatter makes one
/// writer per event and writes the whole line at once; the buffer makes a secret split across
/// two writes no less redacted. What is left without a newline goes out on flush or drop.
pub struct RedactingWriter<W: Write> {
    inner: W,
    redactor: Arc<Redactor>,
    pending: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    fn emit(&mut self, upto: usize) -> io::Result<()> {
        let chunk: Vec<u8> = self.pending.drain(..upto).collect();
        let text = String::from_utf8_lossy(&chunk);
        self.inner.write_all(self.redactor.redact(&text).as_bytes())
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(newline) = self.pending.iter().position(|b| *b == b'\n') {
            self.emit(newline + 1)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.emit(self.pending.len())?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        // Logging has nowhere to report its own write failure.
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use proptest::prelude::*;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    fn redact(line: &str) -> String {
        Redactor::new(["configured-key-123"])
            .redact(line)
            .into_owned()
    }

    #[test]
    fn each_rule_redacts_and_keeps_the_rest() {
        let cases = [
            (
                "GET /search?q=horses&api_key=abc123&x=1",
                "GET /search?q=horses&api_key=[REDACTED]&x=1",
            ),
            (
                "SHELF_API_KEYS=read:k1,write:k2 next",
                "SHELF_API_KEYS=[REDACTED] next",
            ),
            (
                r#"{"x-api-key":"abc","n":1}"#,
                r#"{"x-api-key":"[REDACTED]","n":1}"#,
            ),
            (
                r#"{"msg":"x-api-key: \"abc\""}"#,
                r#"{"msg":"x-api-key: \"[REDACTED]\""}"#,
            ),
            (
                "authorization: Bearer eyJhbGciOi.x.y done",
                "authorization: Bearer [REDACTED] done",
            ),
            (
                "using key sk-proj-AbCdEf0123456789 now",
                "using key sk-[REDACTED] now",
            ),
            (r#"{"k":"sk-test-0123456789"}"#, r#"{"k":"sk-[REDACTED]"}"#),
            ("uses configured-key-123 raw", "uses [REDACTED] raw"),
            (
                "cannot open postgres://u@h:1/db?password=SECRETX: refused",
                // A value runs to white space: punctuation after it may be the password's.
                "cannot open postgres://u@h:1/db?password=*** refused",
            ),
            (
                r#"{"error":"postgres://u:SECRETX@h/db","n":1}"#,
                r#"{"error":"postgres://u:***@h/db","n":1}"#,
            ),
            ("host=h password=SECRETX", "host=h password=***"),
            (
                "SHELF_OPENAI_API_KEY=xyz",
                "SHELF_OPENAI_API_KEY=[REDACTED]",
            ),
            (
                "\x1b[3mapi_key\x1b[0m\x1b[2m=\x1b[0mabc def",
                "\x1b[3mapi_key\x1b[0m\x1b[2m=\x1b[0m[REDACTED] def",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redact(input), expected, "input: {input}");
        }
    }

    #[test]
    fn ordinary_lines_pass_unchanged() {
        for line in [
            r#"{"level":"INFO","fields":{"message":"run_stage_finished","stage":"clean","duration_ms":12}}"#,
            "task-manager keys=3 bearers: none",
            "risk-assessment document_id=doc_0123456789abcdef",
        ] {
            assert_eq!(redact(line), line);
        }
    }

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    fn log_through(json: bool) -> String {
        let captured = Captured::default();
        let writer = RedactingMakeWriter::new(captured.clone(), Redactor::new(["k-settings-9"]));
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(!json);
        let subscriber = tracing_subscriber::registry();
        let run = || {
            let span = tracing::info_span!("request", uri = "/runs?api_key=in-span-secret");
            span.in_scope(|| {
                tracing::info!(
                    header = "Bearer in-field-secret",
                    provider = "sk-in-field-secret-0001",
                    "configured k-settings-9 and SHELF_API_KEYS=write:in-message-secret"
                );
            });
        };
        if json {
            tracing::subscriber::with_default(subscriber.with(fmt.json()), run);
        } else {
            tracing::subscriber::with_default(subscriber.with(fmt), run);
        }
        let bytes = captured.0.lock().expect("lock").clone();
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn the_writer_redacts_messages_fields_and_spans_in_both_formats() {
        for json in [true, false] {
            let out = log_through(json);
            for secret in [
                "in-span-secret",
                "in-field-secret",
                "in-message-secret",
                "k-settings-9",
            ] {
                assert!(
                    !out.contains(secret),
                    "{secret} leaked (json: {json}): {out}"
                );
            }
            assert!(out.contains(REDACTED), "{out}");
            if json {
                let value: serde_json::Value =
                    serde_json::from_str(out.trim()).expect("still one JSON object");
                assert_eq!(value["level"], "INFO");
            }
        }
    }

    #[test]
    fn a_secret_split_across_writes_is_still_redacted() {
        let captured = Captured::default();
        let writer = RedactingMakeWriter::new(captured.clone(), Redactor::new([]));
        {
            let mut w = writer.make_writer();
            w.write_all(b"token Bearer abc").expect("write");
            w.write_all(b"def123\nnext line sk-").expect("write");
            w.write_all(b"0123456789abcdef").expect("write");
        }
        let out = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
        assert_eq!(out, "token Bearer [REDACTED]\nnext line sk-[REDACTED]");
    }

    /// Text around a secret: anything, then a delimiter a log line could have before it.
    fn context() -> impl Strategy<Value = String> {
        "[ -~]{0,30}"
    }

    proptest! {
        #[test]
        fn redacted_output_never_contains_the_secret(
            before in context(),
            after in context(),
            secret in "[A-Za-z0-9_-]{8,40}",
            form in 0usize..7,
            delimiter in prop::sample::select(vec![" ", "\"", "?", "&", "(", ",", "\t", "\\\""]),
        ) {
            let embedded = match form {
                0 => format!("api_key={secret}"),
                1 => format!("SHELF_API_KEYS=read:{secret}"),
                2 => format!("Bearer {secret}"),
                3 => format!("sk-{secret}"),
                4 => format!("sk-proj-{secret}"),
                5 => format!("\"x-api-key\":\"{secret}\""),
                _ => format!("authorization: Bearer {secret}"),
            };
            let line = format!("{before}{delimiter}{embedded}{delimiter}{after}");
            let out = Redactor::new([]).redact(&line).into_owned();
            // The secret may also occur by chance in the surrounding text; count only ours.
            let expected_elsewhere =
                before.matches(secret.as_str()).count() + after.matches(secret.as_str()).count();
            prop_assert!(
                out.matches(secret.as_str()).count() <= expected_elsewhere,
                "{line:?} -> {out:?}"
            );
        }

        #[test]
        fn known_secrets_never_survive(
            before in context(),
            after in context(),
            secret in "[A-Za-z0-9_.~+/=]{4,30}",
        ) {
            // A secret inside the marker itself would be "found" in any redacted line.
            prop_assume!(!REDACTED.contains(secret.as_str()));
            let line = format!("{before}{secret}{after}");
            let out = Redactor::new([secret.as_str()]).redact(&line).into_owned();
            prop_assert!(!out.contains(secret.as_str()), "{line:?} -> {out:?}");
        }
    }
}
