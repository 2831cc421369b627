//! The proxy's policy (periphery §4.5): the configured outcome of each
//! class, a tool's own outcome in place of its class's, and approvals
//! bound to exactly what would run: the server, the tool (upstream and
//! registered names), its class, the arguments and the operator's fixed
//! values.

use std::collections::BTreeMap;

use agentrt::json::write_string;
use agentrt::{
    Canonical, Outcome, Policy, PolicyDecision, PolicyError, RunView, SideEffect, ToolRequest,
};

use crate::config::Config;
use crate::index::object;
use crate::policy_id::policy_id;

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
}

/// The proxy's policy over the registered tools.
#[derive(Debug, Clone)]
pub struct ProxyPolicy {
    classes: BTreeMap<SideEffect, Outcome>,
    tools: BTreeMap<String, ToolFacts>,
    id: String,
}

impl ProxyPolicy {
    /// The policy of `config` over `tools` (by registered name).
    pub fn new(config: &Config, tools: BTreeMap<String, ToolFacts>) -> ProxyPolicy {
        ProxyPolicy {
            classes: config.policy.clone(),
            tools,
            id: policy_id(config),
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
/// `{"args","fixed"(when any),"name","server","side_effect","tool"}`.
pub fn capability(request: &ToolRequest, facts: &ToolFacts) -> Canonical {
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
    let mut members: Vec<(&str, &str)> = vec![("args", request.args.as_str())];
    if let Some(fixed) = &fixed {
        members.push(("fixed", fixed));
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
        _view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        let name = &request.spec.name;
        let class = request.spec.side_effect;
        let facts = self
            .tools
            .get(name)
            .ok_or_else(|| PolicyError::new(format!("tool {name} is not one the proxy offers")))?;
        let (outcome, reason) = match (facts.outcome, self.classes.get(&class)) {
            (Some(o), _) => (o, format!("tool {name} is {o} by the operator's rule")),
            (None, Some(o)) => (*o, format!("side effect {class} is {o} by policy")),
            (None, None) => {
                return Ok(PolicyDecision::deny(format!(
                    "no policy for side effect {class}"
                )));
            }
        };
        Ok(match outcome {
            Outcome::Allow => PolicyDecision::allow_because(reason),
            Outcome::RequireApproval => {
                let capability = capability(request, facts);
                let question = string(&format!(
                    "May {} run {} on server {} with these arguments?",
                    name, facts.upstream, facts.server
                ));
                let reason_json = string(&reason);
                let mut members: Vec<(String, String)> = object_members(&capability);
                members.push(("question".into(), question));
                members.push(("reason".into(), reason_json));
                members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                let pairs: Vec<(&str, &str)> = members
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let presentation =
                    Canonical::parse_str(&object(&pairs)).unwrap_or_else(|_| capability.clone());
                PolicyDecision::need_approval(
                    class.as_str(),
                    reason,
                    Some(capability),
                    Some(presentation),
                )
            }
            // `abort` is refused by the configuration; deny it all the same.
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
