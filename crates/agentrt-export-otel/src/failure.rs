//! What kind of failure an observation records, and the status that
//! says so: the words that may leave without `content`.

use std::borrow::Cow;

use agentrt::model::{ObservationKind, ToolFailure};
use opentelemetry::KeyValue;
use opentelemetry::trace::Status;
use serde_json::Value;

use crate::attributes::{ours, str_of, text};

/// What kind of failure an observation records: its kind and, for a tool
/// call, the runtime's word for how it failed. Only these fixed words
/// leave without `content`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Failure {
    kind: Option<ObservationKind>,
    failure: Option<ToolFailure>,
}

impl Failure {
    /// Read from an observation as the events carry it.
    pub(crate) fn of(observation: Option<&Value>) -> Failure {
        let Some(observation) = observation else {
            return Failure::default();
        };
        Failure {
            kind: str_of(observation, "kind").and_then(ObservationKind::parse),
            failure: observation
                .get("content")
                .and_then(|c| str_of(c, "failure"))
                // The runtime's fixed words only: any other value stays home.
                .and_then(ToolFailure::parse),
        }
    }

    /// `agentrt.step.observation` and `agentrt.tool.failure`.
    pub(crate) fn describe(&self, attributes: &mut Vec<KeyValue>) {
        if let Some(kind) = self.kind {
            attributes.push(ours("step.observation", kind.as_str()));
        }
        if let Some(failure) = self.failure {
            attributes.push(ours("tool.failure", failure.as_str()));
        }
    }

    /// `tool_error: timeout`, `policy_denied`, or `failed` when nothing
    /// is known.
    pub(crate) fn description(&self) -> String {
        match (self.kind, self.failure) {
            (Some(kind), Some(failure)) => format!("{kind}: {failure}"),
            (Some(kind), None) => kind.as_str().to_owned(),
            (None, Some(failure)) => failure.as_str().to_owned(),
            (None, None) => "failed".to_owned(),
        }
    }
}

/// An error status: the text when it may leave (`content`), else the
/// failure's kind.
pub(crate) fn failure_status(text_if_content: Option<&str>, kind: &str, max: usize) -> Status {
    let description = match text_if_content {
        Some(t) if !t.is_empty() => text(t, max),
        _ => kind.to_owned(),
    };
    Status::Error {
        description: Cow::Owned(description),
    }
}
