use serde::{Deserialize, Serialize};

use super::text_enum;
use crate::json::{Canonical, write_string};

text_enum! {
    /// What kind of outcome a step observed.
    pub enum ObservationKind {
        /// The tool ran and returned content.
        ToolResult => "tool_result",
        /// The tool failed (nothing happened), aborted or returned bad
        /// content; or a read-only tool timed out, panicked or reported an
        /// unknown outcome.
        ToolError => "tool_error",
        /// The policy (or an operator's rejection) refused the call.
        PolicyDenied => "policy_denied",
        /// The decision could not be acted on.
        InvalidDecision => "invalid_decision",
        /// The step was cut short (a crash, the caller's cancel), or a
        /// tool that is not read-only timed out, panicked or reported an
        /// unknown outcome: the call's outcome is unknown.
        Interrupted => "interrupted",
    }
}

text_enum! {
    /// Why a tool call failed, as the runtime records it in the `failure`
    /// field of a `tool_error` or `interrupted` observation. Readers (the
    /// proxy's history, the exporter) match this type, never the word.
    pub enum ToolFailure {
        /// The tool returned content that is not acceptable JSON or not
        /// UTF-8: it ran, but what it returned was not recorded as content.
        InvalidContent => "invalid_content",
        /// The tool reported a failure: it did not make its change.
        Failed => "error",
        /// The tool reported that the outcome of its call is unknown.
        UnknownOutcome => "unknown_outcome",
        /// The tool asked to end the run.
        Abort => "abort",
        /// No result within the tool's time limit: the outcome is unknown.
        Timeout => "timeout",
        /// The caller cancelled the call while it ran: the outcome is unknown.
        Cancelled => "cancelled",
    }
}

/// What a step observed: a tool's content, or an outcome the runtime wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The kind of outcome.
    pub kind: ObservationKind,
    /// The content, canonical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Canonical>,
    /// One line for people and for models beyond the recent window.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// Hash of the canonical content (empty without content).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content_hash: String,
    /// Set when the call that ran is an operator's edit of the model's:
    /// the model is told that the call changed, and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_edit: Option<OperatorEdit>,
}

/// An operator's edit of a call, as the step's observation carries it: the
/// arguments the call ran with instead of the model's, who edited them and
/// why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorEdit {
    /// The arguments the call ran with (canonical).
    pub args: Canonical,
    /// Who edited (an unverified label, as recorded with the approval).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub by: String,
    /// The editor's note.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl Observation {
    /// An observation with `content`; the hash is computed here.
    pub fn new(
        kind: ObservationKind,
        content: Option<Canonical>,
        summary: impl Into<String>,
    ) -> Observation {
        let content_hash = content.as_ref().map(Canonical::hash).unwrap_or_default();
        Observation {
            kind,
            content,
            summary: summary.into(),
            content_hash,
            operator_edit: None,
        }
    }

    /// An observation the runtime writes: content is an object of string
    /// fields.
    pub fn runtime(
        kind: ObservationKind,
        fields: &[(&str, &str)],
        summary: impl Into<String>,
    ) -> Observation {
        Observation::new(kind, Some(string_object(fields)), summary)
    }

    /// Why the tool call failed, as the runtime recorded it in the
    /// content's `failure` field of a `tool_error` or `interrupted`
    /// observation (`None` for a tool's own result, whatever its content
    /// says, a policy's refusal, a panic, or a word this version does not
    /// know).
    ///
    /// ```
    /// use agentrt::model::{Observation, ObservationKind, ToolFailure};
    ///
    /// let o = Observation::runtime(
    ///     ObservationKind::Interrupted,
    ///     &[("tool", "deploy"), ("failure", ToolFailure::Timeout.as_str())],
    ///     "deploy timeout",
    /// );
    /// assert_eq!(o.tool_failure(), Some(ToolFailure::Timeout));
    /// ```
    pub fn tool_failure(&self) -> Option<ToolFailure> {
        if !matches!(
            self.kind,
            ObservationKind::ToolError | ObservationKind::Interrupted
        ) {
            return None;
        }
        let value = self.content.as_ref()?.to_value();
        ToolFailure::parse(value.get("failure")?.as_str()?)
    }

    /// `true` unless the tool ran and returned content.
    pub fn is_failure(&self) -> bool {
        self.kind != ObservationKind::ToolResult
    }
}

/// A canonical JSON object of string members (keys sorted here, so the
/// result is canonical without a parse).
pub(crate) fn string_object(fields: &[(&str, &str)]) -> Canonical {
    let mut sorted: Vec<&(&str, &str)> = fields.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    sorted.dedup_by(|a, b| a.0 == b.0);
    let mut out = String::with_capacity(64);
    out.push('{');
    for (i, (k, v)) in sorted.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(&mut out, k);
        out.push(':');
        write_string(&mut out, v);
    }
    out.push('}');
    // Built from escaped strings with sorted unique keys: always canonical.
    Canonical::assume_canonical(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_content_is_sorted_and_hashed() {
        let o = Observation::runtime(
            ObservationKind::PolicyDenied,
            &[("tool", "rm"), ("reason", "no <deletes> & \"no\" undo")],
            "denied: no deletes",
        );
        let content = o.content.clone().unwrap();
        assert_eq!(
            content.as_str(),
            r#"{"reason":"no <deletes> & \"no\" undo","tool":"rm"}"#
        );
        assert_eq!(o.content_hash, content.hash());
        assert!(o.is_failure());
    }

    #[test]
    fn a_tool_failure_is_read_back_from_the_runtimes_observations_only() {
        for failure in ToolFailure::ALL {
            let o = Observation::runtime(
                ObservationKind::ToolError,
                &[("tool", "t"), ("failure", failure.as_str())],
                "failed",
            );
            assert_eq!(o.tool_failure(), Some(*failure));
        }
        let unknown =
            Observation::runtime(ObservationKind::Interrupted, &[("failure", "melted")], "?");
        assert_eq!(unknown.tool_failure(), None);
        // A tool's own content may say anything: it is not the runtime's word.
        let own =
            Observation::runtime(ObservationKind::ToolResult, &[("failure", "timeout")], "ok");
        assert_eq!(own.tool_failure(), None);
    }
}
