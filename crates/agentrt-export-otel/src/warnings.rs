//! The OpenTelemetry crates' own warnings, written where the binary writes
//! its errors.
//!
//! `opentelemetry-otlp` reports some failures only as internal log events
//! (`tracing`, with its `internal-logs` feature): a receiver that accepts a
//! request but rejects spans in it (an OTLP partial success, which must
//! not be sent again) returns success to the caller and says so only
//! there. Without a subscriber those events go nowhere. [`OtelWarnings`]
//! is that subscriber: it writes each warning or error of the
//! `opentelemetry*` crates as one line with the event's name and its
//! numeric and boolean fields only. Text fields are left out: they hold
//! what a receiver answered (which may echo a request's headers) or an
//! environment variable's value.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber, span};

/// Where a line goes.
type Sink = Box<dyn Fn(&str) + Send + Sync>;

/// A `tracing` subscriber that writes the OpenTelemetry crates' warnings
/// and errors, without their text fields, one line each.
pub struct OtelWarnings {
    sink: Sink,
}

impl std::fmt::Debug for OtelWarnings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtelWarnings").finish_non_exhaustive()
    }
}

impl OtelWarnings {
    /// Lines to standard error, prefixed with the binary's name.
    pub fn to_stderr() -> OtelWarnings {
        OtelWarnings::to(|line| eprintln!("agentrt-export-otel: {line}"))
    }

    /// Lines to `sink`.
    pub fn to(sink: impl Fn(&str) + Send + Sync + 'static) -> OtelWarnings {
        OtelWarnings {
            sink: Box::new(sink),
        }
    }
}

/// The numeric and boolean fields of an event, as `name=value`.
#[derive(Default)]
struct Numbers(String);

impl Numbers {
    fn push(&mut self, field: &Field, value: impl std::fmt::Display) {
        let _ = write!(self.0, " {}={value}", field.name());
    }
}

impl Visit for Numbers {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value);
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.push(field, value);
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.push(field, value);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, value);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value);
    }
    // Strings, errors and anything else: left out (see the module).
    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl Subscriber for OtelWarnings {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if self.enabled(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event()
            && *metadata.level() <= Level::WARN
            && metadata.target().starts_with("opentelemetry")
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::WARN)
    }

    fn new_span(&self, _span: &span::Attributes<'_>) -> span::Id {
        // Spans are never enabled; an id is still owed.
        span::Id::from_u64(1)
    }

    fn record(&self, _span: &span::Id, _values: &span::Record<'_>) {}

    fn record_follows_from(&self, _span: &span::Id, _follows: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut numbers = Numbers::default();
        event.record(&mut numbers);
        let metadata = event.metadata();
        (self.sink)(&format!(
            "{} from {}: {}{}",
            metadata.level(),
            metadata.target(),
            metadata.name(),
            numbers.0
        ));
    }

    fn enter(&self, _span: &span::Id) {}

    fn exit(&self, _span: &span::Id) {}
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn a_warning_of_the_otel_crates_is_one_line_without_its_text_fields() {
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = Arc::clone(&lines);
        let subscriber = OtelWarnings::to(move |line| sink.lock().unwrap().push(line.to_owned()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(
                name: "HttpTraceClient.PartialSuccess",
                target: "opentelemetry-otlp",
                rejected_spans = 2i64,
                error_message = "s3cret echoed",
            );
            tracing::info!(target: "opentelemetry-otlp", "below the level");
            tracing::warn!(target: "agentrt", "not an OpenTelemetry crate");
        });
        let lines = lines.lock().unwrap();
        assert_eq!(
            *lines,
            ["WARN from opentelemetry-otlp: HttpTraceClient.PartialSuccess rejected_spans=2"]
        );
    }
}
