//! What a policy decided about one tool request: its outcome and the
//! decision as recorded with the step.

use serde::{Deserialize, Serialize};

use super::text_enum;
use crate::json::{Canonical, JsonError};

text_enum! {
    /// A policy's answer to a tool request.
    pub enum Outcome {
        /// Run the tool.
        Allow => "allow",
        /// Pause the run until an operator approves this exact request.
        RequireApproval => "require_approval",
        /// Refuse this call; the run continues.
        Deny => "deny",
        /// Refuse this call and end the run.
        Abort => "abort",
    }
}

/// What a policy decided about one tool request.
///
/// ```
/// use agentrt::{Outcome, PolicyDecision};
/// let d = PolicyDecision::deny("deletes are never allowed");
/// assert_eq!(d.outcome, Outcome::Deny);
/// let ask = PolicyDecision::need_approval_json(
///     "remote_mutation", "publishes", &serde_json::json!({"tool": "push"}), &serde_json::json!({"title": "Push"}),
/// ).unwrap();
/// assert_eq!(ask.capability.unwrap().as_str(), r#"{"tool":"push"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDecision {
    /// The answer.
    pub outcome: Outcome,
    /// Why, for people (never compared by a re-check).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The approval kind (`RequireApproval`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// What the approval grants, bound into its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<Canonical>,
    /// What the operator is shown, bound into its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presentation: Option<Canonical>,
    /// How many distinct people must approve (`RequireApproval`): 1, or
    /// [`MAX_APPROVERS`] for a request that needs two (design §46). Bound
    /// into the approval's hash, with its request.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub approvers: u8,
}

/// The most distinct approvers an approval may need.
pub const MAX_APPROVERS: u8 = 2;

fn one() -> u8 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_one(n: &u8) -> bool {
    *n == 1
}

impl PolicyDecision {
    fn with(outcome: Outcome, reason: impl Into<String>) -> PolicyDecision {
        PolicyDecision {
            outcome,
            reason: reason.into(),
            kind: String::new(),
            capability: None,
            presentation: None,
            approvers: 1,
        }
    }

    /// Allow the call.
    pub fn allow() -> PolicyDecision {
        PolicyDecision::with(Outcome::Allow, "")
    }

    /// Allow the call, saying why.
    pub fn allow_because(reason: impl Into<String>) -> PolicyDecision {
        PolicyDecision::with(Outcome::Allow, reason)
    }

    /// Refuse the call; the run continues.
    pub fn deny(reason: impl Into<String>) -> PolicyDecision {
        PolicyDecision::with(Outcome::Deny, reason)
    }

    /// Refuse the call and end the run.
    pub fn abort(reason: impl Into<String>) -> PolicyDecision {
        PolicyDecision::with(Outcome::Abort, reason)
    }

    /// Pause for an operator. Absent capability or presentation count as `{}`.
    pub fn need_approval(
        kind: impl Into<String>,
        reason: impl Into<String>,
        capability: Option<Canonical>,
        presentation: Option<Canonical>,
    ) -> PolicyDecision {
        PolicyDecision {
            kind: kind.into(),
            capability: Some(capability.unwrap_or_else(Canonical::empty_object)),
            presentation: Some(presentation.unwrap_or_else(Canonical::empty_object)),
            ..PolicyDecision::with(Outcome::RequireApproval, reason)
        }
    }

    /// Pause for an operator, with capability and presentation serialised
    /// from any serde value.
    pub fn need_approval_json<C: Serialize + ?Sized, P: Serialize + ?Sized>(
        kind: impl Into<String>,
        reason: impl Into<String>,
        capability: &C,
        presentation: &P,
    ) -> Result<PolicyDecision, JsonError> {
        Ok(PolicyDecision::need_approval(
            kind,
            reason,
            Some(Canonical::from_serialize(capability)?),
            Some(Canonical::from_serialize(presentation)?),
        ))
    }

    /// The same decision needing `approvers` distinct people to approve
    /// (two, for a request that matters; design §46). A first approval of
    /// such a request is recorded and leaves it pending; a second by
    /// another person grants it; one rejection rejects it.
    ///
    /// ```
    /// use agentrt::PolicyDecision;
    /// let ask = PolicyDecision::need_approval("deploy", "production", None, None).with_approvers(2);
    /// assert_eq!(ask.approvers, 2);
    /// ```
    pub fn with_approvers(mut self, approvers: u8) -> PolicyDecision {
        self.approvers = approvers;
        self
    }

    /// Decodes the presentation into `T`.
    pub fn decode_presentation<T: serde::de::DeserializeOwned>(
        &self,
    ) -> Result<T, serde_json::Error> {
        let text = self
            .presentation
            .as_ref()
            .map(Canonical::as_str)
            .unwrap_or("{}");
        serde_json::from_str(text)
    }
}
