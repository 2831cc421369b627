use serde::{Deserialize, Serialize};

use super::labels::Labels;
use super::limits::Limits;
use super::text_enum;
use crate::clock::Timestamp;
use crate::json::Canonical;

text_enum! {
    /// Where a run stands. The last three are terminal.
    pub enum RunStatus {
        /// The loop is (or may be) running it; a lease names the owner.
        Running => "RUNNING",
        /// Paused until an operator decides a pending approval.
        WaitingForApproval => "WAITING_FOR_APPROVAL",
        /// Finished by reaching its goal.
        Completed => "COMPLETED",
        /// Finished by a failure or a limit.
        Failed => "FAILED",
        /// Finished by an operator, a rejection or an expiry.
        Cancelled => "CANCELLED",
    }
}

impl RunStatus {
    /// `true` for COMPLETED, FAILED and CANCELLED: nothing changes a terminal run.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

text_enum! {
    /// Why a run ended.
    pub enum TerminalReason {
        /// The agent completed the goal.
        GoalCompleted => "goal_completed",
        /// The agent gave up on the goal.
        GoalFailed => "goal_failed",
        /// The step limit was reached.
        LimitSteps => "limit_steps",
        /// The model-call limit was reached.
        LimitModelCalls => "limit_model_calls",
        /// The token limit was reached.
        LimitTokens => "limit_tokens",
        /// The cost limit was reached.
        LimitCost => "limit_cost",
        /// The active-time limit was reached.
        LimitActiveTime => "limit_active_time",
        /// The elapsed-time limit was reached.
        LimitElapsedTime => "limit_elapsed_time",
        /// An approval the run waited for expired.
        ApprovalExpired => "approval_expired",
        /// The model could not be reached within its retries.
        ModelUnavailable => "model_unavailable",
        /// Tools failed too many times in a row.
        RepeatedToolFailures => "repeated_tool_failures",
        /// The same call with the same outcome repeated too often.
        LoopDetected => "loop_detected",
        /// The policy ended the run.
        PolicyAbort => "policy_abort",
        /// A tool ended the run.
        ToolAbort => "tool_abort",
        /// An operator rejected an approval the run waited for.
        ApprovalRejected => "approval_rejected",
        /// An operator cancelled the run.
        OperatorCancelled => "operator_cancelled",
        /// An interrupted side effect could not be reconciled.
        ReconcileConflict => "reconcile_conflict",
        /// The agent failed.
        AgentError => "agent_error",
        /// The runtime failed.
        InternalError => "internal_error",
    }
}

impl TerminalReason {
    /// `true` for the reasons that a limit caused (they write `limit.exceeded`).
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            TerminalReason::LimitSteps
                | TerminalReason::LimitModelCalls
                | TerminalReason::LimitTokens
                | TerminalReason::LimitCost
                | TerminalReason::LimitActiveTime
                | TerminalReason::LimitElapsedTime
                | TerminalReason::RepeatedToolFailures
        )
    }
}

/// Token counts of model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// The part of `input_tokens` served from a cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
}

impl Usage {
    /// `true` when every count is zero.
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }
}

/// One governed run of an agent towards a goal.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The run id (caller-chosen or random).
    pub id: String,
    /// What the agent was asked to do.
    pub goal: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// Why it ended (terminal runs only).
    pub reason: Option<TerminalReason>,
    /// Detail of the reason, for people.
    pub reason_detail: String,
    /// The limits the run was started with.
    pub limits: Limits,
    /// The labels the run was begun with (empty when none).
    pub labels: Labels,
    /// Steps started, the current one included.
    pub step_count: u64,
    /// When the run was created (and started).
    pub created_at: Timestamp,
    /// When it reached a terminal status.
    pub finished_at: Option<Timestamp>,
    /// The result of a completed run.
    pub result: Option<Canonical>,
    /// Model call attempts charged to the run.
    pub model_calls: u64,
    /// Tokens charged to the run.
    pub usage: Usage,
    /// Estimated spend in micro-dollars.
    pub estimated_cost_micros: i64,
    /// Sum of finished step durations, in milliseconds.
    pub active_ms: u64,
    /// Set when a stored column could not be read back; the other fields
    /// then hold what could be read.
    pub decode_error: Option<String>,
}

/// The fields of a run as it is created.
pub(crate) struct NewRunFields {
    pub id: String,
    pub goal: String,
    pub limits: Limits,
    pub labels: Labels,
    pub created_at: Timestamp,
}

impl Run {
    /// A run as inserted: RUNNING, nothing counted yet.
    pub(crate) fn new_running(f: NewRunFields) -> Run {
        Run {
            id: f.id,
            goal: f.goal,
            status: RunStatus::Running,
            reason: None,
            reason_detail: String::new(),
            limits: f.limits,
            labels: f.labels,
            step_count: 0,
            created_at: f.created_at,
            finished_at: None,
            result: None,
            model_calls: 0,
            usage: Usage::default(),
            estimated_cost_micros: 0,
            active_ms: 0,
            decode_error: None,
        }
    }
}
