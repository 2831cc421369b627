use serde::Serialize;

macro_rules! event_types {
    ($($(#[$meta:meta])* $variant:ident => $text:literal),+ $(,)?) => {
        /// What an event records. `Unknown` keeps a type text this build
        /// does not know (a newer writer, or a damaged row), so reading a
        /// log never fails on one event.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum EventType {
            $($(#[$meta])* $variant,)+
            /// A type text this build does not know.
            Unknown(String),
        }

        impl EventType {
            /// Every known type, in declaration order.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant),+];

            /// The stored text.
            pub fn as_str(&self) -> &str {
                match self {
                    $(EventType::$variant => $text,)+
                    EventType::Unknown(text) => text,
                }
            }

            /// The type with this stored text; unknown texts are kept.
            pub fn from_text(text: &str) -> EventType {
                match text {
                    $($text => EventType::$variant,)+
                    other => EventType::Unknown(other.to_owned()),
                }
            }
        }
    };
}

event_types! {
    /// A run was created.
    RunCreated => "run.created",
    /// A run started.
    RunStarted => "run.started",
    /// A run reached a terminal status.
    RunFinished => "run.finished",
    /// A waiting or interrupted run resumed.
    RunResumed => "run.resumed",
    /// A step started.
    StepStarted => "step.started",
    /// A decision was recorded.
    StepDecided => "step.decided",
    /// A policy answered (or a non-policy pause was made).
    StepPolicy => "step.policy",
    /// A tool call started.
    StepToolStarted => "step.tool_started",
    /// A tool call finished.
    StepToolFinished => "step.tool_finished",
    /// A step failed.
    StepFailed => "step.failed",
    /// A step was cut short by a crash.
    StepInterrupted => "step.interrupted",
    /// An approval was requested.
    ApprovalRequested => "approval.requested",
    /// An approval was decided or expired.
    ApprovalDecided => "approval.decided",
    /// A first approver approved a request that needs two: it stays
    /// pending until a second, distinct approver decides (design §46).
    ApprovalEndorsed => "approval.endorsed",
    /// An operator edited a pending approval's arguments and approved the
    /// edited request: a new approval of the same step.
    ApprovalEdited => "approval.edited",
    /// On resume, the policy (or the tool's schema) refused an operator's
    /// edit: nothing ran, and the request the edit replaced waits again.
    ApprovalEditRefused => "approval.edit_refused",
    /// A limit ended the run.
    LimitExceeded => "limit.exceeded",
    /// A loop of identical outcomes ended the run.
    LoopDetected => "loop.detected",
    /// A session's grant was refused: a newer approval of the step
    /// superseded it before the tool started (nothing ran).
    ApprovalSuperseded => "approval.superseded",
    /// A run's lease was taken over.
    LeaseTakenOver => "lease.taken_over",
    /// A model call was sent.
    ModelDispatched => "model.dispatched",
    /// A model call completed.
    ModelCompleted => "model.completed",
    /// A model call failed.
    ModelFailed => "model.failed",
    /// The shadow policy's outcome differed from the policy's (written
    /// with the decision; it changed nothing).
    PolicyShadow => "policy.shadow",
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for EventType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One entry of the audit log, committed in the same transaction as the
/// state change it explains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Position in the log (across all runs), from 1.
    pub seq: i64,
    /// The run.
    pub run_id: String,
    /// The step, or empty.
    pub step_id: String,
    /// When, as stored (RFC 3339 UTC, nine fraction digits).
    pub at: String,
    /// What happened.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// Details, JSON text.
    pub payload: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_and_unknown_texts_are_kept() {
        for t in EventType::ALL {
            assert_eq!(&EventType::from_text(t.as_str()), t);
        }
        assert_eq!(
            EventType::from_text("run.exploded"),
            EventType::Unknown("run.exploded".into())
        );
        assert_eq!(EventType::Unknown("x.y".into()).as_str(), "x.y");
    }
}
