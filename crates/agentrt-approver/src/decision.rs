//! What a channel hands over: a person's decision, a cancellation, a
//! sign-in with a login link.

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
    /// The arguments to approve instead of the request's (an edit; an
    /// approval only): a JSON object, checked against the tool's schema
    /// and bound by hash as a new approval of the same step
    /// ([`agentrt::Operator::approve_edited`]).
    #[serde(default)]
    pub args: Option<agentrt::Canonical>,
    /// The signature of the request that carried the decision, when the
    /// channel has one (never read from a body): recorded in the
    /// decision's own transaction, so a request whose signature was
    /// recorded before is refused ([`ApproverError::Replayed`]), also
    /// after a restart.
    #[serde(skip)]
    pub request_signature: Option<String>,
}

/// A request to end a run: which run, who asks, a note for the record.
/// The run and who asks are required.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cancellation {
    /// The run.
    #[serde(default)]
    pub run_id: String,
    /// Who asks.
    #[serde(default)]
    pub by: String,
    /// A note for the record.
    #[serde(default)]
    pub note: String,
    /// As [`Decision::request_signature`].
    #[serde(skip)]
    pub request_signature: Option<String>,
}

/// A login link being taken: the run it opens, who it signs in, and its
/// nonce (each link's own, random). All three are required.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignIn {
    /// The run the link opens (and the only run its session may decide).
    pub run_id: String,
    /// Who signs in (recorded as the decider).
    pub by: String,
    /// The link's nonce: taken once, ever.
    pub nonce: String,
}

impl SignIn {
    /// Refuses a sign-in missing its run, author or nonce.
    pub(crate) fn check(&self) -> Result<(), ApproverError> {
        required(&[
            (&self.run_id, "run_id"),
            (&self.by, "by"),
            (&self.nonce, "nonce"),
        ])
    }
}

impl Cancellation {
    /// Refuses a cancellation missing its run or author.
    pub(crate) fn check(&self) -> Result<(), ApproverError> {
        required(&[(&self.run_id, "run_id"), (&self.by, "by")])
    }
}

/// The first of `fields` that is empty, as an incomplete request.
fn required(fields: &[(&String, &'static str)]) -> Result<(), ApproverError> {
    match fields.iter().find(|(value, _)| value.is_empty()) {
        Some((_, missing)) => Err(ApproverError::Incomplete { missing }),
        None => Ok(()),
    }
}

impl Decision {
    /// Refuses a decision missing its run, approval or author.
    pub(crate) fn check(&self) -> Result<(), ApproverError> {
        required(&[
            (&self.run_id, "run_id"),
            (&self.approval_id, "approval_id"),
            (&self.by, "by"),
        ])
    }
}
