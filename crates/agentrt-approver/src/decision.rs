//! What a person decided, as a channel hands it over.

use serde::Deserialize;

use crate::error::ApproverError;

/// A decision on one approval: the run and approval it names, the hash of
/// the approval as it was shown, who decides and a note for the record.
///
/// The run, the approval and who decides are required
/// ([`ApproverError::is_incomplete`] otherwise, before the store is
/// touched); a missing hash is taken as a changed approval, so nothing is
/// decided without one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// The run.
    #[serde(default)]
    pub run_id: String,
    /// The approval.
    #[serde(default)]
    pub approval_id: String,
    /// The approval's hash as it was shown.
    #[serde(default)]
    pub hash: String,
    /// Who decides (a label the channel vouches for, or not).
    #[serde(default)]
    pub by: String,
    /// A note for the record.
    #[serde(default)]
    pub note: String,
}

impl Decision {
    /// Refuses a decision missing its run, approval or author.
    pub(crate) fn check(&self) -> Result<(), ApproverError> {
        for (value, what) in [
            (&self.run_id, "run_id"),
            (&self.approval_id, "approval_id"),
            (&self.by, "by"),
        ] {
            if value.is_empty() {
                return Err(ApproverError::Incomplete { missing: what });
            }
        }
        Ok(())
    }
}
