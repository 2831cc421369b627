//! The proxy's policy (design §31): the configured outcome of each
//! class, a tool's own outcome in place of its class's, and approvals
//! bound to exactly what would run: the server, the tool (upstream and
//! registered names), its class, the arguments and the operator's fixed
//! values.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agentrt::json::write_string;
use agentrt::{
    Canonical, Outcome, Policy, PolicyDecision, PolicyError, RunView, SideEffect, ToolRequest,
};

use agentrt_cedar::CedarPolicy;

use crate::config::Config;
use crate::index::object;
use crate::policy_id::policy_id_with;
use crate::repeat::Attempt;

/// What the policy knows of one registered tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFacts {
    /// The server's name.
    pub server: String,
    /// The server's own name for the tool.
    pub upstream: String,
    /// The tool's own outcome, in place of its class's.
    pub outcome: Option<Outcome>,
    /// The operator's fixed values.
    pub fixed: BTreeMap<String, Canonical>,
    /// How many distinct people must approve a call that needs approval
    /// (the rule's `"approvers"`, else 1).
    pub approvers: u8,
}

/// Runs that re-run an attempt whose outcome is unknown (rule 6), by run
/// id: facts gathered before the run's request is proposed, so the policy
/// reads them without I/O.
pub type Reruns = Arc<Mutex<BTreeMap<String, Attempt>>>;

/// The reason an interruption approval gives.
const INTERRUPTED_REASON: &str = "interrupted while executing; outcome unknown";

/// The proxy's policy over the registered tools.
#[derive(Debug, Clone)]
pub struct ProxyPolicy {
    classes: BTreeMap<SideEffect, Outcome>,
    tools: BTreeMap<String, ToolFacts>,
    reruns: Reruns,
    cedar: Option<Arc<CedarPolicy>>,
    id: String,
}

impl ProxyPolicy {
    /// The policy of `config` over `tools` (by registered name).
    pub fn new(config: &Config, tools: BTreeMap<String, ToolFacts>, reruns: Reruns) -> ProxyPolicy {
        ProxyPolicy::with_cedar(config, tools, reruns, None)
    }

    /// The policy of `config` over `tools` with `cedar` (the configuration's
    /// Cedar policy, see [`crate::load_cedar`]) deciding each call in place
    /// of the class outcomes. Rule 6 and what an approval is bound to stay
    /// the proxy's.
    pub fn with_cedar(
        config: &Config,
        tools: BTreeMap<String, ToolFacts>,
        reruns: Reruns,
        cedar: Option<CedarPolicy>,
    ) -> ProxyPolicy {
        let id = policy_id_with(config, cedar.as_ref().map(CedarPolicy::identity));
        ProxyPolicy {
            classes: config.policy.clone(),
            tools,
            reruns,
            cedar: cedar.map(Arc::new),
            id,
        }
    }

    /// The facts of a registered tool.
    pub fn facts(&self, name: &str) -> Option<&ToolFacts> {
        self.tools.get(name)
    }
}

fn string(text: &str) -> String {
    let mut out = String::new();
    write_string(&mut out, text);
    out
}

/// The capability an approval is bound to:
/// `{"args","fixed"(when any),"interrupted"(a re-run),"name","server",
/// "side_effect","tool"}`.
pub fn capability(request: &ToolRequest, facts: &ToolFacts, rerun: Option<&Attempt>) -> Canonical {
    let fixed = (!facts.fixed.is_empty()).then(|| {
        let members: Vec<(&str, &str)> = facts
            .fixed
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        object(&members)
    });
    let (name, server) = (string(&request.spec.name), string(&facts.server));
    let (class, tool) = (
        string(request.spec.side_effect.as_str()),
        string(&facts.upstream),
    );
    let interrupted = rerun.map(|a| {
        let (ended, run, started, step) = (
            string(a.ended),
            string(&a.run_id),
            string(&a.started_at),
            string(&a.step_id),
        );
        object(&[
            ("ended", &ended),
            ("run_id", &run),
            ("started_at", &started),
            ("step_id", &step),
        ])
    });
    let mut members: Vec<(&str, &str)> = vec![("args", request.args.as_str())];
    if let Some(fixed) = &fixed {
        members.push(("fixed", fixed));
    }
    if let Some(interrupted) = &interrupted {
        members.push(("interrupted", interrupted));
    }
    members.extend([
        ("name", name.as_str()),
        ("server", server.as_str()),
        ("side_effect", class.as_str()),
        ("tool", tool.as_str()),
    ]);
    // Keys in sorted order, values canonical: the text is canonical.
    Canonical::parse_str(&object(&members)).unwrap_or_else(|_| request.args.clone())
}

impl Policy for ProxyPolicy {
    fn evaluate(
        &self,
        request: &ToolRequest,
        view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        let name = &request.spec.name;
        let class = request.spec.side_effect;
        let facts = self
            .tools
            .get(name)
            .ok_or_else(|| PolicyError::new(format!("tool {name} is not one the proxy offers")))?;
        let rerun = self
            .reruns
            .lock()
            .ok()
            .and_then(|r| r.get(&request.run_id).cloned());
        let mut approvers = facts.approvers;
        let (outcome, reason) = match (&self.cedar, facts.outcome, self.classes.get(&class)) {
            (Some(cedar), _, _) => {
                let decided = cedar.evaluate(request, view)?;
                approvers = decided.approvers;
                (decided.outcome, decided.reason)
            }
            (None, Some(o), _) => (o, format!("tool {name} is {o} by the operator's rule")),
            (None, None, Some(o)) => (*o, format!("side effect {class} is {o} by policy")),
            (None, None, None) => {
                return Ok(PolicyDecision::deny(format!(
                    "no policy for side effect {class}"
                )));
            }
        };
        // Rule 6: a re-run of an attempt whose outcome is unknown is asked
        // about, whatever the policy says short of deny.
        let (outcome, reason) = match (&rerun, outcome) {
            (Some(_), Outcome::Allow | Outcome::RequireApproval) => {
                (Outcome::RequireApproval, INTERRUPTED_REASON.to_owned())
            }
            _ => (outcome, reason),
        };
        Ok(match outcome {
            Outcome::Allow => PolicyDecision::allow_because(reason),
            Outcome::RequireApproval => {
                let capability = capability(request, facts, rerun.as_ref());
                let question = string(&format!(
                    "May {} run {} on server {} with these arguments?",
                    name, facts.upstream, facts.server
                ));
                let reason_json = string(&reason);
                let mut members: Vec<(String, String)> = object_members(&capability);
                members.push(("question".into(), question));
                members.push(("reason".into(), reason_json));
                if rerun.is_some() {
                    members.push((
                        "notice".into(),
                        string("an earlier attempt of this request was cut off or got no answer; it may have taken effect"),
                    ));
                }
                members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                let pairs: Vec<(&str, &str)> = members
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let presentation =
                    Canonical::parse_str(&object(&pairs)).unwrap_or_else(|_| capability.clone());
                let kind = if rerun.is_some() {
                    "interrupted_side_effect"
                } else {
                    class.as_str()
                };
                // A question about an attempt whose outcome is unknown is
                // one operator's (design §38); the policy's approval may
                // need two people (design §46).
                let approvers = if rerun.is_some() { 1 } else { approvers };
                PolicyDecision::need_approval(kind, reason, Some(capability), Some(presentation))
                    .with_approvers(approvers)
            }
            // Each call is its own run: ending it is what a deny does (the
            // configuration refuses `abort`; a Cedar `@abort` denies).
            Outcome::Deny | Outcome::Abort => PolicyDecision::deny(reason),
        })
    }

    fn policy_id(&self) -> Option<String> {
        Some(self.id.clone())
    }
}

/// The members of a canonical object, as (key, canonical value text).
fn object_members(object: &Canonical) -> Vec<(String, String)> {
    agentrt::json::object_members(object)
        .map(|members| {
            members
                .into_iter()
                .map(|(k, v)| (k, v.into_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// The attempt a run's approvals name in their capability, if any: rule
/// 6's fact rebuilt from the record (a re-check, a restarted proxy).
pub(crate) fn named_attempt(
    store: &agentrt::Store,
    run_id: &str,
) -> agentrt::Result<Option<Attempt>> {
    Ok(named_in(&crate::run_rows::approvals(store, run_id)?))
}

/// The attempt the first interruption approval of `approvals` names, if
/// any (its capability's `interrupted`).
pub(crate) fn named_in(approvals: &[agentrt::Approval]) -> Option<Attempt> {
    for approval in approvals {
        let value: serde_json::Value =
            serde_json::from_str(approval.capability.as_str()).unwrap_or_default();
        let Some(named) = value.get("interrupted") else {
            continue;
        };
        let text = |k: &str| named.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        let ended = match text("ended").as_deref() {
            Some("cut_off") => "cut_off",
            Some("timed_out") => "timed_out",
            _ => "no_answer",
        };
        if let (Some(run), Some(step), Some(started)) =
            (text("run_id"), text("step_id"), text("started_at"))
        {
            return Some(Attempt {
                run_id: run,
                step_id: step,
                started_at: started,
                ended,
            });
        }
    }
    None
}
