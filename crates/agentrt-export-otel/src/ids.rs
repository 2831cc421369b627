//! Trace and span ids derived from the run's own ids, so the same run
//! always gives the same trace (design §37; BLAKE3 in place of the
//! original's SHA-256 over the same input bytes, design §2).

use opentelemetry::trace::{SpanId, TraceId};

/// What a span id is derived for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKindName {
    /// A run.
    Run,
    /// A step.
    Step,
    /// A model attempt.
    Model,
    /// A tool's execution (id: the step's id, `#`, the seq of its
    /// `step.tool_started`).
    Tool,
    /// An approval wait.
    Approval,
    /// A tool that finished after its step had moved on.
    Late,
    /// An event shown as a span of its own.
    Event,
}

impl SpanKindName {
    fn as_str(self) -> &'static str {
        match self {
            SpanKindName::Run => "run",
            SpanKindName::Step => "step",
            SpanKindName::Model => "model",
            SpanKindName::Tool => "tool",
            SpanKindName::Approval => "approval",
            SpanKindName::Late => "late",
            SpanKindName::Event => "event",
        }
    }
}

/// The first bytes of BLAKE3 over `parts` joined by zero bytes; never all
/// zero (an all-zero id is invalid: its last byte becomes 1).
fn derive<const N: usize>(parts: &[&[u8]]) -> [u8; N] {
    let mut hasher = blake3::Hasher::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            hasher.update(&[0]);
        }
        hasher.update(part);
    }
    let mut out = [0u8; N];
    out.copy_from_slice(&hasher.finalize().as_bytes()[..N]);
    if out.iter().all(|b| *b == 0) {
        out[N - 1] = 1;
    }
    out
}

/// The run's trace: the first 16 bytes of BLAKE3(`agentrt/trace` 0x00
/// run id).
///
/// ```
/// use agentrt_export_otel::trace_id;
/// assert_eq!(trace_id("r1"), trace_id("r1"));
/// assert_ne!(trace_id("r1"), trace_id("r2"));
/// ```
pub fn trace_id(run_id: &str) -> TraceId {
    TraceId::from_bytes(derive(&[b"agentrt/trace", run_id.as_bytes()]))
}

/// A span: the first 8 bytes of BLAKE3(`agentrt/span` 0x00 kind 0x00 id),
/// the id being the run's, the step's, the model call's, the approval's,
/// or an event's seq in decimal.
pub fn span_id(kind: SpanKindName, id: &str) -> SpanId {
    SpanId::from_bytes(derive(&[
        b"agentrt/span",
        kind.as_str().as_bytes(),
        id.as_bytes(),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned: the same run gives the same ids in every release; each is
    /// the leading bytes of BLAKE3 over the parts joined by zero bytes.
    #[test]
    fn ids_are_pinned() {
        let leading = |input: &[u8], n: usize| blake3::hash(input).to_hex()[..2 * n].to_owned();
        assert_eq!(
            trace_id("r1").to_string(),
            leading(b"agentrt/trace\0r1", 16)
        );
        assert_eq!(
            span_id(SpanKindName::Run, "r1").to_string(),
            leading(b"agentrt/span\0run\0r1", 8)
        );
        assert_eq!(
            span_id(SpanKindName::Step, "s1").to_string(),
            leading(b"agentrt/span\0step\0s1", 8)
        );
        assert_eq!(
            trace_id("r1").to_string(),
            "38e4f832413565645544a3c116db1489"
        );
        assert_eq!(
            span_id(SpanKindName::Run, "r1").to_string(),
            "d16a9d7828a84626"
        );
        assert_ne!(
            span_id(SpanKindName::Run, "x"),
            span_id(SpanKindName::Step, "x")
        );
    }
}
