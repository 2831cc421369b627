//! An approval as a channel shows it.

use agentrt::view::{bound_approval, bound_text};
use agentrt::{Approval, Timestamp};
use serde::Serialize;

/// One approval as a person is shown it: the core's approval with its
/// capability, presentation and request bounded (long strings cut in the
/// middle, the hash untouched), the policy's reason for asking, and
/// whether its expiry had passed when it was read (nothing is written by
/// reading).
///
/// Its JSON is the core approval's (`id`, `run_id`, `hash`, `kind`,
/// `status`, `presentation`, …) with `reason` (left out when empty) and
/// `expired` (left out when false).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pending {
    /// The approval, bounded.
    #[serde(flatten)]
    pub approval: Approval,
    /// The policy's reason from the decision that paused the step,
    /// bounded.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The approval's expiry had passed by the approver's clock.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub expired: bool,
}

impl Pending {
    /// `approval` as shown at `now`, with the policy's `reason`.
    pub(crate) fn new(approval: &Approval, reason: &str, now: Timestamp) -> Pending {
        Pending {
            approval: bound_approval(approval),
            reason: bound_text(reason).into_owned(),
            expired: approval.expires_at.is_some_and(|e| now >= e),
        }
    }
}
