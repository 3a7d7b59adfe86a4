//! Trace context across processes: the W3C `traceparent` of a span (stored with a run, sent by
//! clients) and spans that continue one. Without an OpenTelemetry layer installed (tracing
//! off) spans carry no context, so nothing is stored and nothing is continued.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

const TRACEPARENT: &str = "traceparent";

/// The `traceparent` of `span`, if it belongs to a trace being exported.
pub fn traceparent_of(span: &Span) -> Option<String> {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// The `traceparent` of the span the caller is in.
pub fn current_traceparent() -> Option<String> {
    traceparent_of(&Span::current())
}

/// Makes `span` (just created, not yet entered) a child of the remote span `traceparent`
/// names. A missing or malformed value leaves the span where it was: a trace that cannot be
/// continued is not a reason to fail work.
pub fn continue_trace(span: &Span, traceparent: Option<&str>) {
    let Some(value) = traceparent else { return };
    let carrier = HashMap::from([(TRACEPARENT.to_string(), value.to_string())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        // Fails only when no OpenTelemetry layer is installed, where there is nothing to join.
        let _ = span.set_parent(cx);
    }
}

/// Renames `span` for the trace backend once its name is known (a request's route is known
/// only after routing). `otel.name` recorded late is ignored once the span has started.
pub fn rename(span: &Span, name: String) {
    span.context().span().update_name(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_tracing_layer_nothing_is_stored_or_continued() {
        let span = tracing::info_span!("test");
        assert_eq!(traceparent_of(&span), None);
        continue_trace(
            &span,
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        continue_trace(&span, Some("not a traceparent"));
        assert_eq!(traceparent_of(&span), None);
    }
}
