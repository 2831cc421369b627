use serde::Serialize;

use super::text_enum;

text_enum! {
    /// What an event records.
    pub enum EventType {
        RunCreated => "run.created",
        RunStarted => "run.started",
        RunFinished => "run.finished",
        RunResumed => "run.resumed",
        StepStarted => "step.started",
        StepDecided => "step.decided",
        StepPolicy => "step.policy",
        StepToolStarted => "step.tool_started",
        StepToolFinished => "step.tool_finished",
        StepFailed => "step.failed",
        StepInterrupted => "step.interrupted",
        ApprovalRequested => "approval.requested",
        ApprovalDecided => "approval.decided",
        LimitExceeded => "limit.exceeded",
        LoopDetected => "loop.detected",
        LeaseTakenOver => "lease.taken_over",
        ModelDispatched => "model.dispatched",
        ModelCompleted => "model.completed",
        ModelFailed => "model.failed",
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
