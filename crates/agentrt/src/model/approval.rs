use serde::Serialize;

use super::text_enum;
use crate::clock::Timestamp;
use crate::json::Canonical;

/// The approval kind the runtime uses for a side effect interrupted by a
/// crash.
pub const INTERRUPTED_SIDE_EFFECT: &str = "interrupted_side_effect";

text_enum! {
    /// Where an approval stands.
    pub enum ApprovalStatus {
        /// Waiting for an operator.
        Pending => "pending",
        /// Granted; the run executes it on resume.
        Approved => "approved",
        /// Refused; the run was cancelled.
        Rejected => "rejected",
        /// Lapsed before a decision, or a grant lapsed before its resume.
        Expired => "expired",
        /// Replaced by an operator's edit: the approval of the edited
        /// request follows it on the same step (`approval.edited`).
        Edited => "edited",
    }
}

/// A request paused for an operator, bound by hash to the exact request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approval {
    /// The approval id.
    pub id: String,
    /// The run it belongs to.
    pub run_id: String,
    /// The step it pauses.
    pub step_id: String,
    /// The policy's approval kind.
    pub kind: String,
    /// What it grants.
    pub capability: Canonical,
    /// What the operator is shown.
    pub presentation: Canonical,
    /// The request: `{run_id, step_id, spec, args}`, canonical.
    pub request: Canonical,
    /// The hash binding kind, capability, presentation and request.
    pub hash: String,
    /// Where it stands.
    pub status: ApprovalStatus,
    /// When it was requested.
    pub created_at: Timestamp,
    /// When a pending approval lapses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// When it was decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<Timestamp>,
    /// Who decided (an unverified label).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub decided_by: String,
    /// The decider's note.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// Set when a stored column could not be read back; such an approval
    /// cannot be decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_error: Option<String>,
}
