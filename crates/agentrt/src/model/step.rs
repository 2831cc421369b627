use super::decision::RecordedDecision;
use super::observation::Observation;
use super::policy_decision::PolicyDecision;
use super::text_enum;
use crate::clock::Timestamp;

text_enum! {
    /// Where a step stands.
    pub enum StepStatus {
        /// Started; the agent is deciding.
        Deciding => "deciding",
        /// Paused for an operator.
        AwaitingApproval => "awaiting_approval",
        /// The tool is running.
        Executing => "executing",
        /// Finished with success.
        Done => "done",
        /// Finished with a failure.
        Failed => "failed",
        /// Cut short by a crash; its outcome is unknown.
        Interrupted => "interrupted",
    }
}

/// One step of a run: a decision, the policy's verdict and what came of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The step id.
    pub id: String,
    /// The run.
    pub run_id: String,
    /// Position in the run, from 0, without gaps.
    pub index: u64,
    /// Where it stands.
    pub status: StepStatus,
    /// The decision as recorded.
    pub decision: Option<RecordedDecision>,
    /// The policy's verdict.
    pub policy: Option<PolicyDecision>,
    /// What came of it.
    pub observation: Option<Observation>,
    /// When it started (or was resumed).
    pub started_at: Timestamp,
    /// When it finished.
    pub finished_at: Option<Timestamp>,
    /// Hash of the registered spec of the tool named (empty otherwise).
    pub spec_hash: String,
    /// Id of the policy that decided (empty if it has none or did not decide).
    pub policy_id: String,
    /// Set when a stored column could not be read back.
    pub decode_error: Option<String>,
}
