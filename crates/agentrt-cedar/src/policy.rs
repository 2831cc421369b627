//! [`CedarPolicy`]: a Cedar policy set as the core's [`Policy`], validated
//! against a schema made from the tools it decides.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;

use agentrt::json::{Canonical, hash_hex};
use agentrt::model::StepStatus;
use agentrt::{
    Outcome, Policy, PolicyDecision, PolicyError, RunView, SideEffect, ToolRequest, ToolSpec,
};
use cedar_policy as cedar;
use serde_json::{Map, Value, json};

use crate::error::CedarError;
use crate::facts::{Facts, RunFacts};
use crate::outcome::{Answer, Determining, decide};
use crate::shape::Shape;

/// The Cedar namespace of agentrt's entity types and actions:
/// `Agentrt::Caller`, `Agentrt::Resource`, `Agentrt::Action::"<tool>"`.
pub const NAMESPACE: &str = "Agentrt";

/// The run label a request's principal is read from unless
/// [`CedarPolicy::with_principal_label`] names another.
pub const PRINCIPAL_LABEL: &str = "principal";

/// The principal of a run without the principal label.
pub const ANONYMOUS: &str = "anonymous";

/// A window's count is read from the run label `recent.<window>` (a whole
/// number; absent or unreadable: 0). The proxy writes them; a Rust
/// program may too.
pub const RECENT_LABEL_PREFIX: &str = "recent.";

/// What a [`CedarPolicy`] decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The outcome.
    pub outcome: Outcome,
    /// Its reason, naming the policies that decided (see
    /// [`crate::outcome`]).
    pub reason: String,
    /// The policies whose `@approval` asked, by id (for an approval's
    /// presentation).
    pub asked_by: Vec<String>,
    /// How many distinct people must approve: the most any asking
    /// policy's `@approvers` says (1 without one; design §46).
    pub approvers: u8,
}

/// A Cedar policy set deciding tool requests.
///
/// Each request is put to Cedar as:
///
/// - principal `Agentrt::Caller::"<id>"`: the value of the run's principal
///   label (`principal` unless [`with_principal_label`](Self::with_principal_label)
///   names another), or `anonymous`;
/// - action `Agentrt::Action::"<tool name>"`;
/// - resource `Agentrt::Resource::"<id>"`: the value of the resource label
///   when [`with_resource_label`](Self::with_resource_label) names one the
///   run carries (the proxy names its server's), else the tool's own
///   resource ([`with_tool_resource`](Self::with_tool_resource): its MCP
///   server in a Rust program), else the tool's side-effect class
///   (`read_only`, `local_mutation`, `remote_mutation`, `destructive`);
/// - context `{args, side_effect, labels, run}`: the arguments, typed by
///   the tool's schema (see the crate's documentation for what Cedar can
///   hold); the side-effect class; the run's labels as a set of
///   `"key=value"`; and what the run did before this step: `steps`,
///   `failed_steps`, `calls_of_tool` (earlier steps that called this
///   tool), `approvals`, `model_calls`, `input_tokens`, `output_tokens`,
///   `cost_micros`.
///
/// The outcome follows [`crate::outcome`]. The policy's identity, recorded
/// with every decision, is the hash of the policies' text and the schema.
///
/// ```
/// use agentrt::{Outcome, SideEffect, ToolSpec};
/// use agentrt_cedar::CedarPolicy;
/// let write = ToolSpec::new("write_file", "Write a file", SideEffect::LocalMutation)
///     .with_schema_str(r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#)?;
/// let policy = CedarPolicy::new(
///     r#"
///     @id("drafts")
///     permit(principal, action == Agentrt::Action::"write_file", resource)
///     when { context.args.path like "notes/drafts/*" };
///     "#,
///     &[write],
/// )?;
/// assert!(policy.identity().starts_with("cedar:"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CedarPolicy {
    /// Each tool's policies: those whose action scope can match its
    /// action. Cedar reads every policy of a set for each request; a
    /// policy scoped to another action can never be satisfied, so leaving
    /// it out changes no answer and saves its evaluation.
    by_tool: HashMap<String, cedar::PolicySet>,
    shapes: BTreeMap<String, (Shape, SideEffect)>,
    annotations: HashMap<String, (Option<String>, Option<String>)>,
    /// Each `@approval` policy's `@approvers` count, when it has one.
    approvers: HashMap<String, u8>,
    identity: String,
    principal_label: String,
    resource_label: Option<String>,
    /// Each tool's resource (its MCP server, say), when no label names one.
    tool_resources: BTreeMap<String, String>,
    /// The identity of the policies and the schema alone; `identity`
    /// adds how requests are put to them when that differs from the
    /// defaults.
    base_identity: String,
    /// The windows named in the schema (`context.recent`).
    windows: Vec<String>,
    authorizer: cedar::Authorizer,
    entities: cedar::Entities,
    /// `Agentrt::Caller`, `Agentrt::Action`, `Agentrt::Resource`, parsed
    /// once.
    types: [cedar::EntityTypeName; 3],
}

impl std::fmt::Debug for CedarPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CedarPolicy")
            .field("identity", &self.identity)
            .field("tools", &self.shapes.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl CedarPolicy {
    /// Parses `text` (Cedar policies; an `@id("…")` annotation names a
    /// policy in reasons), makes the schema of `tools` and validates the
    /// policies against it strictly: a policy that names an argument a
    /// tool does not have, or compares one with a value of another type,
    /// is refused with Cedar's diagnostic.
    ///
    /// # Errors
    ///
    /// [`CedarError`]: the text does not parse, two policies share an
    /// `@id`, the schema is refused, or the policies do not validate.
    pub fn new(text: &str, tools: &[ToolSpec]) -> Result<CedarPolicy, CedarError> {
        CedarPolicy::with_windows(text, tools, &[])
    }

    /// [`CedarPolicy::new`] with `context.recent`: a record of one whole
    /// number per window named (`context.recent.hour`), read from the
    /// run's `recent.<window>` labels: how many calls of this tool this
    /// principal made within the window, as whoever begins the run counts
    /// them (the proxy, across runs). A name is 1 to 32 of `a-z`, `0-9`
    /// and `_`, starting with a letter.
    ///
    /// # Errors
    ///
    /// As [`CedarPolicy::new`]; a window name that is not one is
    /// [`CedarError::Schema`].
    ///
    /// ```
    /// use agentrt::{SideEffect, ToolSpec};
    /// use agentrt_cedar::{CedarPolicy, Facts};
    /// let write = ToolSpec::new("write", "Write", SideEffect::LocalMutation);
    /// let policy = CedarPolicy::with_windows(
    ///     r#"permit(principal, action, resource) when { context.recent.hour < 20 };"#,
    ///     &[write.clone()],
    ///     &["hour"],
    /// )?;
    /// let mut facts = Facts::new("write", "{}")?;
    /// facts.recent.insert("hour".into(), 20);
    /// assert_eq!(policy.decide(&facts).outcome, agentrt::Outcome::Deny);
    /// // Without the window, the policy does not validate.
    /// assert!(CedarPolicy::new("permit(principal, action, resource) when { context.recent.hour < 20 };", &[write]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_windows(
        text: &str,
        tools: &[ToolSpec],
        windows: &[&str],
    ) -> Result<CedarPolicy, CedarError> {
        for name in windows {
            let plain = (1..=32).contains(&name.len())
                && name.starts_with(|c: char| c.is_ascii_lowercase())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !plain {
                return Err(CedarError::Schema(format!(
                    "window {name:?}: 1 to 32 of a-z, 0-9 and _, starting with a letter"
                )));
            }
        }
        let windows: Vec<String> = {
            let mut w: Vec<String> = windows.iter().map(|w| (*w).to_owned()).collect();
            w.sort();
            w.dedup();
            w
        };
        let policies = named(text)?;
        let (schema_json, shapes) = schema_of(tools, &windows);
        let schema = cedar::Schema::from_json_value(schema_json.clone())
            .map_err(|e| CedarError::Schema(e.to_string()))?;
        // The schema validates the policies; a request is not checked
        // against it again: its context is built from the same shapes.
        let validated =
            cedar::Validator::new(schema).validate(&policies, cedar::ValidationMode::Strict);
        if !validated.validation_passed() {
            let diagnostics: Vec<String> = validated
                .validation_errors()
                .map(|e| format!("- {e}"))
                .collect();
            return Err(CedarError::Validation(diagnostics.join("\n")));
        }
        let annotations = policies
            .policies()
            .map(|p| {
                let text = |key: &str| p.annotation(key).map(str::to_owned);
                (p.id().to_string(), (text("approval"), text("abort")))
            })
            .collect();
        let approvers = approvers_of(&policies)?;
        let identity = identity(&policies, &schema_json);
        let entity_type = |kind: &str| {
            cedar::EntityTypeName::from_str(&format!("{NAMESPACE}::{kind}"))
                .map_err(|e| CedarError::Schema(e.to_string()))
        };
        let types = [
            entity_type("Caller")?,
            entity_type("Action")?,
            entity_type("Resource")?,
        ];
        let by_tool = by_tool(&policies, &types[1], shapes.keys())?;
        Ok(CedarPolicy {
            types,
            by_tool,
            shapes,
            annotations,
            approvers,
            base_identity: identity.clone(),
            identity,
            principal_label: PRINCIPAL_LABEL.to_owned(),
            resource_label: None,
            tool_resources: BTreeMap::new(),
            windows,
            authorizer: cedar::Authorizer::new(),
            entities: cedar::Entities::empty(),
        })
    }

    /// Reads the principal from run label `key` instead of `principal`.
    pub fn with_principal_label(mut self, key: impl Into<String>) -> CedarPolicy {
        self.principal_label = key.into();
        self.reidentify()
    }

    /// Reads the resource from run label `key` when the run carries it
    /// (else the tool's resource, else its side-effect class).
    pub fn with_resource_label(mut self, key: impl Into<String>) -> CedarPolicy {
        self.resource_label = Some(key.into());
        self.reidentify()
    }

    /// The resource of every request for `tool` (a Rust program's MCP
    /// server of the tool, say: one run may call several servers) when no
    /// resource label says otherwise.
    ///
    /// The mapping is part of the identity recorded with each decision:
    ///
    /// ```
    /// use agentrt::{SideEffect, ToolSpec};
    /// use agentrt_cedar::CedarPolicy;
    /// let read = ToolSpec::new("docs_read", "Read", SideEffect::ReadOnly);
    /// let text = r#"permit(principal, action, resource == Agentrt::Resource::"docs");"#;
    /// let plain = CedarPolicy::new(text, &[read.clone()])?;
    /// let mapped = CedarPolicy::new(text, &[read])?.with_tool_resource("docs_read", "docs");
    /// assert_ne!(plain.identity(), mapped.identity());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_tool_resource(
        mut self,
        tool: impl Into<String>,
        resource: impl Into<String>,
    ) -> CedarPolicy {
        self.tool_resources.insert(tool.into(), resource.into());
        self.reidentify()
    }

    /// The identity after a change of how requests are put to Cedar: the
    /// base identity when every choice is the default, else a hash of it
    /// and the choices, so a re-check knows a decision by another mapping.
    fn reidentify(mut self) -> CedarPolicy {
        let defaults = self.principal_label == PRINCIPAL_LABEL
            && self.resource_label.is_none()
            && self.tool_resources.is_empty();
        self.identity = if defaults {
            self.base_identity.clone()
        } else {
            let mut text = format!(
                "{}\nprincipal:{}\nresource:{}\n",
                self.base_identity,
                self.principal_label,
                self.resource_label.as_deref().unwrap_or("")
            );
            for (tool, resource) in &self.tool_resources {
                text.push_str(&format!(
                    "{}:{tool}={}:{resource}\n",
                    tool.len(),
                    resource.len()
                ));
            }
            format!("cedar:{}", hash_hex(text.as_bytes()))
        };
        self
    }

    /// The policy set's identity: `cedar:` and the BLAKE3 hash of its
    /// policies (each by id, in id order, as Cedar prints it) and of the
    /// schema it was validated against.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// What a request and its run's view put to Cedar (see
    /// [`CedarPolicy`]): the principal and resource from the labels this
    /// policy reads them from.
    pub fn facts(&self, request: &ToolRequest, view: &RunView) -> Facts {
        let labels = &view.run.labels;
        let tool = &request.spec.name;
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let long = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let steps = &view.steps;
        let run = &view.run;
        Facts {
            tool: tool.clone(),
            args: request.args.clone(),
            principal: labels
                .get(&self.principal_label)
                .unwrap_or(ANONYMOUS)
                .to_owned(),
            resource: self
                .resource_label
                .as_deref()
                .and_then(|key| labels.get(key))
                .or_else(|| self.tool_resources.get(tool).map(String::as_str))
                .map(str::to_owned),
            labels: labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            recent: self
                .windows
                .iter()
                .map(|w| {
                    let count = labels
                        .get(&format!("{RECENT_LABEL_PREFIX}{w}"))
                        .and_then(|v| v.parse::<i64>().ok())
                        .unwrap_or(0);
                    (w.clone(), count)
                })
                .collect(),
            run: RunFacts {
                steps: count(steps.len()),
                failed_steps: count(
                    steps
                        .iter()
                        .filter(|s| s.status == StepStatus::Failed)
                        .count(),
                ),
                calls_of_tool: count(
                    steps
                        .iter()
                        .filter(|s| s.decision.as_ref().is_some_and(|d| &d.tool == tool))
                        .count(),
                ),
                approvals: count(view.approvals.len()),
                model_calls: long(run.model_calls),
                input_tokens: long(run.usage.input_tokens),
                output_tokens: long(run.usage.output_tokens),
                cost_micros: run.estimated_cost_micros,
            },
        }
    }

    /// What [`Policy::evaluate`] decides from a request and its run, for a
    /// request stated outside any run (a policy's test cases). A request
    /// that cannot be put to Cedar (a tool the schema does not know,
    /// arguments of another shape) is denied, saying why.
    ///
    /// ```
    /// use agentrt::{Outcome, SideEffect, ToolSpec};
    /// use agentrt_cedar::{CedarPolicy, Facts};
    /// let send = ToolSpec::new("send", "Send mail", SideEffect::RemoteMutation)
    ///     .with_schema_str(r#"{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}"#)?;
    /// let policy = CedarPolicy::new(
    ///     r#"@id("inside") permit(principal, action == Agentrt::Action::"send", resource)
    ///        when { context.args.to like "*@example.com" };"#,
    ///     &[send],
    /// )?;
    /// let facts = Facts::new("send", r#"{"to":"ann@example.com"}"#)?;
    /// let decided = policy.decide(&facts);
    /// assert_eq!(decided.outcome, Outcome::Allow);
    /// assert_eq!(decided.reason, "permitted by cedar policy inside");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decide(&self, facts: &Facts) -> Decided {
        let answer = match self.answer(facts) {
            Ok(answer) => answer,
            Err(reason) => {
                return Decided {
                    outcome: Outcome::Deny,
                    reason,
                    asked_by: Vec::new(),
                    approvers: 1,
                };
            }
        };
        let (outcome, reason) = decide(&answer, &facts.tool);
        let asked_by = answer
            .determining
            .iter()
            .filter(|p| p.approval.is_some())
            .map(|p| p.id.clone())
            .collect::<Vec<_>>();
        let approvers = asked_by
            .iter()
            .filter_map(|id| self.approvers.get(id).copied())
            .max()
            .unwrap_or(1);
        Decided {
            outcome,
            reason,
            asked_by,
            approvers,
        }
    }

    /// Cedar's answer for `facts`, read as [`crate::outcome`] reads it;
    /// `Err` with the reason when the request cannot be put to Cedar.
    fn answer(&self, facts: &Facts) -> Result<Answer, String> {
        let tool = &facts.tool;
        let not_in_schema = || format!("tool {tool} is not in the cedar schema");
        let (shape, side_effect) = self.shapes.get(tool).ok_or_else(not_in_schema)?;
        let policies = self.by_tool.get(tool).ok_or_else(not_in_schema)?;
        let args = shape
            .cut(&facts.args.to_value())
            .ok_or_else(|| format!("the arguments of {tool} do not fit its cedar schema"))?;
        let resource = facts.resource.as_deref().unwrap_or(side_effect.as_str());
        let [caller, action_type, resource_type] = &self.types;
        let action = uid(action_type, tool);
        let context = context_of(facts, *side_effect, &args, &self.windows)?;
        let cedar_request = cedar::Request::new(
            uid(caller, &facts.principal),
            action,
            uid(resource_type, resource),
            context,
            None,
        )
        .map_err(|e| format!("the request: {e}"))?;
        let response = self
            .authorizer
            .is_authorized(&cedar_request, policies, &self.entities);
        let determining = response
            .diagnostics()
            .reason()
            .map(|id| {
                let id = id.to_string();
                let (approval, abort) = self.annotations.get(&id).cloned().unwrap_or_default();
                Determining {
                    id,
                    approval,
                    abort,
                }
            })
            .collect();
        let errors = response
            .diagnostics()
            .errors()
            .map(|e| {
                let cedar::AuthorizationError::PolicyEvaluationError(e) = e;
                (e.policy_id().to_string(), e.to_string())
            })
            .collect();
        Ok(Answer {
            permitted: response.decision() == cedar::Decision::Allow,
            determining: sorted(determining),
            errors,
        })
    }
}

impl Policy for CedarPolicy {
    fn evaluate(
        &self,
        request: &ToolRequest,
        view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        let Decided {
            outcome,
            reason,
            asked_by,
            approvers,
        } = self.decide(&self.facts(request, view));
        Ok(match outcome {
            Outcome::Allow => PolicyDecision::allow_because(reason),
            Outcome::Deny => PolicyDecision::deny(reason),
            Outcome::Abort => PolicyDecision::abort(reason),
            Outcome::RequireApproval => {
                let capability = agentrt::policy::tool_and_args(request);
                let presentation = Canonical::from_serialize(&json!({
                    "args": request.args.to_value(),
                    "policies": asked_by,
                    "reason": reason,
                    "tool": request.spec.name,
                }))
                .map_err(PolicyError::new)?;
                PolicyDecision::need_approval(
                    request.spec.side_effect.as_str(),
                    reason,
                    Some(capability),
                    Some(presentation),
                )
                .with_approvers(approvers)
            }
        })
    }

    fn policy_id(&self) -> Option<String> {
        Some(self.identity.clone())
    }
}

/// Each policy's `@approvers("2")` (design §46): only beside `@approval`,
/// and 1 to [`agentrt::MAX_APPROVERS`].
fn approvers_of(policies: &cedar::PolicySet) -> Result<HashMap<String, u8>, CedarError> {
    let mut counts = HashMap::new();
    for policy in policies.policies() {
        let Some(text) = policy.annotation("approvers") else {
            continue;
        };
        let id = policy.id().to_string();
        let refused = |detail: String| CedarError::PolicyId {
            id: id.clone(),
            detail,
        };
        if policy.annotation("approval").is_none() {
            return Err(refused(
                "@approvers goes with @approval: only an approval needs approvers".into(),
            ));
        }
        let count = text
            .parse::<u8>()
            .ok()
            .filter(|n| (1..=agentrt::MAX_APPROVERS).contains(n))
            .ok_or_else(|| {
                refused(format!(
                    "@approvers({text:?}): 1 to {} distinct approvers",
                    agentrt::MAX_APPROVERS
                ))
            })?;
        counts.insert(id, count);
    }
    Ok(counts)
}

/// The determining policies in id order (Cedar gives them as a set).
fn sorted(mut determining: Vec<Determining>) -> Vec<Determining> {
    determining.sort_by(|a, b| a.id.cmp(&b.id));
    determining
}

/// For each tool, the policies whose action scope can match its action
/// (any action, the action itself, or a list holding it: the schema
/// declares no action groups, so `in` is membership).
fn by_tool<'a>(
    policies: &cedar::PolicySet,
    action_type: &cedar::EntityTypeName,
    tools: impl Iterator<Item = &'a String>,
) -> Result<HashMap<String, cedar::PolicySet>, CedarError> {
    let mut by_tool = HashMap::new();
    for tool in tools {
        let action = uid(action_type, tool);
        let mut set = cedar::PolicySet::new();
        for policy in policies.policies() {
            let applies = match policy.action_constraint() {
                cedar::ActionConstraint::Any => true,
                cedar::ActionConstraint::Eq(a) => a == action,
                cedar::ActionConstraint::In(list) => list.contains(&action),
            };
            if applies {
                set.add(policy.clone()).map_err(|e| CedarError::PolicyId {
                    id: policy.id().to_string(),
                    detail: e.to_string(),
                })?;
            }
        }
        by_tool.insert(tool.clone(), set);
    }
    Ok(by_tool)
}

/// `<type>::"<id>"`.
fn uid(entity_type: &cedar::EntityTypeName, id: &str) -> cedar::EntityUid {
    cedar::EntityUid::from_type_name_and_id(entity_type.clone(), cedar::EntityId::new(id))
}

/// The policies of `text`, each renamed by its `@id` annotation if it has
/// one.
fn named(text: &str) -> Result<cedar::PolicySet, CedarError> {
    let parsed = cedar::PolicySet::from_str(text).map_err(|e| CedarError::Parse(e.to_string()))?;
    if parsed.templates().next().is_some() {
        return Err(CedarError::Parse(
            "policy templates are not supported; write each policy out".into(),
        ));
    }
    let mut named = cedar::PolicySet::new();
    for policy in parsed.policies() {
        let policy = match policy.annotation("id") {
            Some("") => {
                return Err(CedarError::PolicyId {
                    id: String::new(),
                    detail: "an @id may not be empty".into(),
                });
            }
            Some(id) => policy.new_id(cedar::PolicyId::new(id)),
            None => policy.clone(),
        };
        let id = policy.id().to_string();
        named.add(policy).map_err(|e| CedarError::PolicyId {
            id,
            detail: e.to_string(),
        })?;
    }
    Ok(named)
}

/// The Cedar schema of `tools` (JSON format), and each tool's argument
/// shape.
fn schema_of(
    tools: &[ToolSpec],
    windows: &[String],
) -> (Value, BTreeMap<String, (Shape, SideEffect)>) {
    let mut shapes = BTreeMap::new();
    let mut actions = Map::new();
    for tool in tools {
        let shape = Shape::of_arguments(&tool.input_schema.to_value());
        let long = || json!({"type": "Long", "required": true});
        let mut context = json!({
            "type": "Record",
            "attributes": {
                "args": shape.cedar_attribute(true),
                "side_effect": {"type": "String", "required": true},
                "labels": {"type": "Set", "element": {"type": "String"}, "required": true},
                "run": {"type": "Record", "required": true, "attributes": {
                    "steps": long(),
                    "failed_steps": long(),
                    "calls_of_tool": long(),
                    "approvals": long(),
                    "model_calls": long(),
                    "input_tokens": long(),
                    "output_tokens": long(),
                    "cost_micros": long(),
                }},
            }
        });
        if !windows.is_empty() {
            let recent: Map<String, Value> = windows.iter().map(|w| (w.clone(), long())).collect();
            if let Some(attributes) = context["attributes"].as_object_mut() {
                attributes.insert(
                    "recent".into(),
                    json!({"type": "Record", "required": true, "attributes": recent}),
                );
            }
        }
        actions.insert(
            tool.name.clone(),
            json!({"appliesTo": {
                "principalTypes": ["Caller"],
                "resourceTypes": ["Resource"],
                "context": context,
            }}),
        );
        shapes.insert(tool.name.clone(), (shape, tool.side_effect));
    }
    let mut schema = Map::new();
    schema.insert(
        NAMESPACE.to_owned(),
        json!({
            "entityTypes": {"Caller": {}, "Resource": {}},
            "actions": actions,
        }),
    );
    let schema = Value::Object(schema);
    (schema, shapes)
}

/// The request's context (see [`CedarPolicy`]), built as Cedar values
/// directly: reading it from JSON costs Cedar more than deciding.
fn context_of(
    facts: &Facts,
    side_effect: SideEffect,
    args: &Value,
    windows: &[String],
) -> Result<cedar::Context, String> {
    type Expr = cedar::RestrictedExpression;
    let record = |fields: Vec<(String, Expr)>| {
        Expr::new_record(fields).map_err(|e| format!("the request's context: {e}"))
    };
    let run = &facts.run;
    let counts = [
        ("steps", run.steps),
        ("failed_steps", run.failed_steps),
        ("calls_of_tool", run.calls_of_tool),
        ("approvals", run.approvals),
        ("model_calls", run.model_calls),
        ("input_tokens", run.input_tokens),
        ("output_tokens", run.output_tokens),
        ("cost_micros", run.cost_micros),
    ];
    let mut pairs = vec![
        ("args".to_owned(), restricted(args)?),
        (
            "side_effect".to_owned(),
            Expr::new_string(side_effect.as_str().to_owned()),
        ),
        (
            "labels".to_owned(),
            Expr::new_set(facts.labels.iter().map(|l| Expr::new_string(l.clone()))),
        ),
        (
            "run".to_owned(),
            record(
                counts
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Expr::new_long(*v)))
                    .collect(),
            )?,
        ),
    ];
    if !windows.is_empty() {
        let recent = windows
            .iter()
            .map(|w| {
                let count = facts.recent.get(w).copied().unwrap_or(0);
                (w.clone(), Expr::new_long(count))
            })
            .collect();
        pairs.push(("recent".to_owned(), record(recent)?));
    }
    cedar::Context::from_pairs(pairs).map_err(|e| format!("the request's context: {e}"))
}

/// Arguments already cut to their Cedar shape, as a Cedar value.
fn restricted(value: &Value) -> Result<cedar::RestrictedExpression, String> {
    type Expr = cedar::RestrictedExpression;
    Ok(match value {
        Value::String(s) => Expr::new_string(s.clone()),
        Value::Bool(b) => Expr::new_bool(*b),
        Value::Number(n) => Expr::new_long(
            n.as_i64()
                .ok_or_else(|| format!("{n} is not a whole number Cedar can hold"))?,
        ),
        Value::Array(items) => Expr::new_set(
            items
                .iter()
                .map(restricted)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Value::Object(fields) => Expr::new_record(
            fields
                .iter()
                .map(|(k, v)| Ok((k.clone(), restricted(v)?)))
                .collect::<Result<Vec<_>, String>>()?,
        )
        .map_err(|e| e.to_string())?,
        Value::Null => return Err("null has no Cedar value".into()),
    })
}

/// `cedar:` and the hash of the policies (by id, as Cedar prints them) and
/// the schema's canonical JSON.
fn identity(policies: &cedar::PolicySet, schema: &Value) -> String {
    let mut printed: Vec<(String, String)> = policies
        .policies()
        .map(|p| (p.id().to_string(), p.to_string()))
        .collect();
    printed.sort();
    let mut bytes = String::new();
    for (id, text) in printed {
        bytes.push_str(&format!("{}:{id}\n{}:{text}\n", id.len(), text.len()));
    }
    let schema = Canonical::from_serialize(schema)
        .map(|c| c.as_str().to_owned())
        .unwrap_or_default();
    bytes.push_str(&schema);
    format!("cedar:{}", hash_hex(bytes.as_bytes()))
}
