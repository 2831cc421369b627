//! The approver's errors: the core's, kept whole, and a few of its own.

/// Why an approver call did nothing, or (for [`ApproverError::Expired`])
/// did only the expiry.
#[derive(Debug, thiserror::Error)]
pub enum ApproverError {
    /// The decision lacks a required field; nothing was read or written.
    #[error("the decision has no {missing}")]
    Incomplete {
        /// The missing field's name.
        missing: &'static str,
    },
    /// A rejection carried edited arguments: only an approval may carry an
    /// edit; nothing was read or written.
    #[error("a rejection takes no arguments: only an approval may carry an edit")]
    ArgsOnReject,
    /// The approval's expiry had passed when it was decided: the core's
    /// expiry path ran (the approval is `expired`, the run cancelled
    /// `approval_expired`). `core` is the core's approval-expired error.
    #[error("{core}")]
    Expired {
        /// The core's error.
        core: agentrt::Error,
    },
    /// The request's signature was recorded with an earlier decision;
    /// nothing was decided.
    #[error("signature already used")]
    Replayed,
    /// The login link's nonce was taken before (also by another process
    /// on the same database, or before a restart); nobody was signed in.
    #[error("login link already used")]
    LinkUsed,
    /// What the core refused or failed (not found, run state, not pending,
    /// approval changed, approval hash, the database).
    #[error(transparent)]
    Core(agentrt::Error),
}

impl From<agentrt::Error> for ApproverError {
    fn from(core: agentrt::Error) -> ApproverError {
        match core {
            agentrt::Error::ApprovalExpired { .. } => ApproverError::Expired { core },
            agentrt::Error::ClaimHeld { claim, .. } if claim == crate::signatures::USED => {
                ApproverError::Replayed
            }
            agentrt::Error::ClaimHeld { claim, .. } if claim == crate::login_nonces::LINK_USED => {
                ApproverError::LinkUsed
            }
            core => ApproverError::Core(core),
        }
    }
}

impl ApproverError {
    /// The core's error, for [`ApproverError::Expired`] too (the core's
    /// approval-expired error); `None` for an incomplete decision.
    pub fn core(&self) -> Option<&agentrt::Error> {
        match self {
            ApproverError::Incomplete { .. }
            | ApproverError::ArgsOnReject
            | ApproverError::Replayed
            | ApproverError::LinkUsed => None,
            ApproverError::Expired { core } | ApproverError::Core(core) => Some(core),
        }
    }

    /// The decision lacks a required field.
    pub fn is_incomplete(&self) -> bool {
        matches!(self, ApproverError::Incomplete { .. })
    }

    /// The approval had expired.
    pub fn is_expired(&self) -> bool {
        matches!(self, ApproverError::Expired { .. })
    }

    /// The run or the approval does not exist (or the approval belongs to
    /// another run).
    pub fn is_not_found(&self) -> bool {
        matches!(self.core(), Some(agentrt::Error::NotFound { .. }))
    }
}
