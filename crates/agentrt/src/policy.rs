//! Policies: code outside the model that answers every tool request.
//!
//! A policy is synchronous and pure over what it is handed (the request and
//! a view of the run): no store, no clock. That is what makes re-checking
//! old runs against a policy exact.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::json::{Canonical, write_string};
use crate::model::{Outcome, PolicyDecision, RunView, SideEffect, ToolRequest};

/// A policy failed to decide. The run ends with `internal_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PolicyError {
    /// What went wrong.
    pub message: String,
}

impl PolicyError {
    /// An error with this message.
    pub fn new(message: impl std::fmt::Display) -> PolicyError {
        PolicyError {
            message: message.to_string(),
        }
    }
}

/// Decides tool requests.
///
/// ```
/// use agentrt::{Outcome, Policy, PolicyDecision, PolicyError, RunView, ToolRequest};
/// struct NoShellAnd;
/// impl Policy for NoShellAnd {
///     fn evaluate(&self, req: &ToolRequest, _view: &RunView) -> Result<PolicyDecision, PolicyError> {
///         if req.args.as_str().contains("&&") {
///             return Ok(PolicyDecision::deny("no command chaining"));
///         }
///         Ok(PolicyDecision::allow())
///     }
///     fn policy_id(&self) -> Option<String> { Some("no-shell-and/1".into()) }
/// }
/// ```
pub trait Policy: Send + Sync {
    /// Answers one request. `view` holds the run as read, the steps before
    /// this one and the run's approvals.
    fn evaluate(
        &self,
        request: &ToolRequest,
        view: &RunView,
    ) -> Result<PolicyDecision, PolicyError>;

    /// A stable identity recorded with each decision (at most 256 bytes,
    /// no control characters). Read once, when the gate is built.
    fn policy_id(&self) -> Option<String> {
        None
    }
}

/// A shared policy decides as the policy it shares: one policy (a parsed
/// Cedar set, say) for several gates, or as one gate's policy and
/// another's shadow.
impl<P: Policy + ?Sized> Policy for Arc<P> {
    fn evaluate(
        &self,
        request: &ToolRequest,
        view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        (**self).evaluate(request, view)
    }

    fn policy_id(&self) -> Option<String> {
        (**self).policy_id()
    }
}

/// The text of a caught panic's payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Asks `policy`, turning a panic into a policy error: what the gate, a
/// re-check and the testkit all do, so they decide alike.
pub(crate) fn evaluate_guarded(
    policy: &dyn Policy,
    request: &ToolRequest,
    view: &RunView,
) -> Result<PolicyDecision, PolicyError> {
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        policy.evaluate(request, view)
    }))
    .unwrap_or_else(|panic| {
        Err(PolicyError::new(format!(
            "the policy panicked: {}",
            panic_text(panic.as_ref())
        )))
    })?;
    check_approvers(&decided)?;
    Ok(decided)
}

/// A decision's approver count must be 1, or up to
/// [`MAX_APPROVERS`](crate::model::MAX_APPROVERS) for an approval.
fn check_approvers(decision: &PolicyDecision) -> Result<(), PolicyError> {
    let n = decision.approvers;
    let max = crate::model::MAX_APPROVERS;
    if n == 1 {
        return Ok(());
    }
    if decision.outcome != crate::model::Outcome::RequireApproval {
        return Err(PolicyError::new(format!(
            "approvers {n} beside outcome {}: only an approval needs approvers",
            decision.outcome.as_str()
        )));
    }
    if n == 0 || n > max {
        return Err(PolicyError::new(format!(
            "approvers {n}: an approval needs 1 to {max} distinct approvers"
        )));
    }
    Ok(())
}

/// Checks a policy id: at most 256 bytes and no control characters.
pub(crate) fn check_policy_id(id: &str) -> Result<(), String> {
    if id.len() > 256 {
        return Err(format!("it is {} bytes long; the limit is 256", id.len()));
    }
    if id.chars().any(char::is_control) {
        return Err("it contains a control character".into());
    }
    Ok(())
}

/// `{"args":<args>,"tool":<name>}`: what the built-in policies put in an
/// approval's capability and presentation.
pub fn tool_and_args(request: &ToolRequest) -> Canonical {
    let mut out = String::with_capacity(request.args.as_str().len() + request.spec.name.len() + 20);
    out.push_str("{\"args\":");
    out.push_str(request.args.as_str());
    out.push_str(",\"tool\":");
    write_string(&mut out, &request.spec.name);
    out.push('}');
    // Canonical pieces in sorted key order make a canonical whole.
    Canonical::assume_canonical(out)
}

fn by_class(request: &ToolRequest, outcome: Outcome) -> PolicyDecision {
    let class = request.spec.side_effect.as_str();
    match outcome {
        Outcome::Allow => PolicyDecision::allow_because(format!("{class} tools are allowed")),
        Outcome::Deny => PolicyDecision::deny(format!("{class} tools are denied")),
        Outcome::Abort => PolicyDecision::abort(format!("{class} tools end the run")),
        Outcome::RequireApproval => {
            let both = tool_and_args(request);
            PolicyDecision::need_approval(
                class,
                format!("{class} tools need an operator's approval"),
                Some(both.clone()),
                Some(both),
            )
        }
    }
}

/// Allows read-only and local mutations, asks an operator for remote
/// mutations, denies destructive tools. It has no identity.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultPolicy;

impl Policy for DefaultPolicy {
    fn evaluate(
        &self,
        request: &ToolRequest,
        _view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        let outcome = match request.spec.side_effect {
            SideEffect::ReadOnly | SideEffect::LocalMutation => Outcome::Allow,
            SideEffect::RemoteMutation => Outcome::RequireApproval,
            SideEffect::Destructive => Outcome::Deny,
        };
        Ok(by_class(request, outcome))
    }
}

/// Maps each side-effect class to an outcome; an unmapped class is denied.
///
/// ```
/// use agentrt::{Outcome, SideEffect, SideEffectPolicy};
/// let policy = SideEffectPolicy::new()
///     .with(SideEffect::ReadOnly, Outcome::Allow)
///     .with(SideEffect::LocalMutation, Outcome::RequireApproval);
/// # let _ = policy;
/// ```
#[derive(Debug, Clone, Default)]
pub struct SideEffectPolicy {
    outcomes: BTreeMap<SideEffect, Outcome>,
    id: Option<String>,
}

impl SideEffectPolicy {
    /// A policy that denies every class until mapped.
    pub fn new() -> SideEffectPolicy {
        SideEffectPolicy::default()
    }

    /// Maps `class` to `outcome`.
    pub fn with(mut self, class: SideEffect, outcome: Outcome) -> SideEffectPolicy {
        self.outcomes.insert(class, outcome);
        self
    }

    /// Gives the policy an identity.
    pub fn with_id(mut self, id: impl Into<String>) -> SideEffectPolicy {
        self.id = Some(id.into());
        self
    }
}

impl Policy for SideEffectPolicy {
    fn evaluate(
        &self,
        request: &ToolRequest,
        _view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        match self.outcomes.get(&request.spec.side_effect) {
            Some(outcome) => Ok(by_class(request, *outcome)),
            None => Ok(PolicyDecision::deny(format!(
                "{} tools are not mapped by this policy",
                request.spec.side_effect
            ))),
        }
    }

    fn policy_id(&self) -> Option<String> {
        self.id.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Timestamp;
    use crate::model::{Limits, Run, ToolSpec};
    use std::sync::Arc;

    fn request(class: SideEffect) -> ToolRequest {
        ToolRequest {
            run_id: "r".into(),
            step_id: "s".into(),
            spec: ToolSpec::new("t", "", class),
            args: Canonical::parse_str(r#"{"a":1}"#).unwrap(),
        }
    }

    fn view() -> RunView {
        let run = Run::new_running(crate::model::NewRunFields {
            id: "r".into(),
            goal: "g".into(),
            limits: Limits::default(),
            labels: crate::model::Labels::new(),
            created_at: Timestamp::from_unix_nanos(0),
        });
        RunView {
            run,
            steps: Arc::new(Vec::new()),
            approvals: Arc::new(Vec::new()),
        }
    }

    #[test]
    fn the_default_policy_allows_reads_and_local_changes_asks_for_remote_and_denies_destruction() {
        let outcomes: Vec<Outcome> = SideEffect::ALL
            .iter()
            .map(|c| {
                DefaultPolicy
                    .evaluate(&request(*c), &view())
                    .unwrap()
                    .outcome
            })
            .collect();
        assert_eq!(
            outcomes,
            [
                Outcome::Allow,
                Outcome::Allow,
                Outcome::RequireApproval,
                Outcome::Deny
            ]
        );
        let ask = DefaultPolicy
            .evaluate(&request(SideEffect::RemoteMutation), &view())
            .unwrap();
        assert_eq!(ask.kind, "remote_mutation");
        let both = r#"{"args":{"a":1},"tool":"t"}"#;
        assert_eq!(ask.capability.unwrap().as_str(), both);
        assert_eq!(ask.presentation.unwrap().as_str(), both);
        assert_eq!(DefaultPolicy.policy_id(), None);
    }

    #[test]
    fn the_side_effect_policy_maps_classes_and_denies_unmapped_ones() {
        let policy = SideEffectPolicy::new()
            .with(SideEffect::ReadOnly, Outcome::Allow)
            .with(SideEffect::Destructive, Outcome::Abort)
            .with_id("classes/1");
        let answer = |c| policy.evaluate(&request(c), &view()).unwrap().outcome;
        assert_eq!(answer(SideEffect::ReadOnly), Outcome::Allow);
        assert_eq!(answer(SideEffect::Destructive), Outcome::Abort);
        assert_eq!(answer(SideEffect::LocalMutation), Outcome::Deny);
        assert_eq!(policy.policy_id().as_deref(), Some("classes/1"));
    }
}
