//! Re-checking one item: classify it, rebuild what the policy was handed,
//! ask the policy again and compare its answer with the one recorded.

use std::collections::HashMap;
use std::sync::Arc;

use super::read::{Item, ItemKind, Record, Recorded};
use super::rebuild::{self, Why};
use super::{Evaluation, RecheckResult, SpecSource};
use crate::approval::{approval_hash, approval_request};
use crate::error::{Error, Result};
use crate::json::Canonical;
use crate::model::{
    BoxFuture, DecisionKind, INTERRUPTED_SIDE_EFFECT, Outcome, PolicyDecision, RunStatus, Step,
    Tool, ToolCall, ToolError, ToolRequest, ToolResult, ToolSpec,
};
use crate::policy::{Policy, PolicyError};
use crate::registry::Registry;
use crate::store::Store;

/// The tools as registered now ([`super::RecheckOptions::tools`]),
/// checked as a gate registers them.
pub(super) struct Current {
    registry: Registry,
}

/// A spec standing in for a tool: a re-check never calls one.
struct SpecOnly(ToolSpec);

impl Tool for SpecOnly {
    fn spec(&self) -> ToolSpec {
        self.0.clone()
    }

    fn call(&self, _: ToolCall) -> BoxFuture<'_, std::result::Result<ToolResult, ToolError>> {
        Box::pin(async { Err(ToolError::failed("a re-check never calls a tool")) })
    }
}

impl Current {
    /// Registers `specs` as a gate would; a spec a gate refuses is refused.
    pub fn new(specs: &[ToolSpec]) -> Result<Current> {
        let tools = specs
            .iter()
            .map(|s| Arc::new(SpecOnly(s.clone())) as Arc<dyn Tool>)
            .collect();
        Ok(Current {
            registry: Registry::new(tools)?,
        })
    }

    /// `recorded` with the current spec of `tool`, or why the request would
    /// be refused before the policy.
    fn request(&self, tool: &str, recorded: &ToolRequest) -> std::result::Result<ToolRequest, Why> {
        let registered = self.registry.get(tool).ok_or_else(|| {
            format!(
                "tool {tool:?} is not among the current tools: the request would be refused before the policy"
            )
        })?;
        registered
            .schema
            .check(&recorded.args)
            .map_err(|e| format!("the arguments fail the current tool's schema: {e}"))?;
        Ok(ToolRequest {
            spec: registered.spec.clone(),
            ..recorded.clone()
        })
    }
}

/// The hash of the approval `decision` asks for over `request`.
fn hash_of(decision: &PolicyDecision, request: &ToolRequest) -> Result<String> {
    let empty = Canonical::empty_object();
    Ok(approval_hash(
        &decision.kind,
        decision.capability.as_ref().unwrap_or(&empty),
        decision.presentation.as_ref().unwrap_or(&empty),
        &approval_request(request, decision.approvers)?,
    ))
}

fn not_recheckable(mut out: Evaluation, why: impl std::fmt::Display) -> Evaluation {
    out.result = RecheckResult::NotRecheckable;
    out.detail = format!("not re-checkable: {why}");
    out
}

fn not_evaluation(mut out: Evaluation, what: &str) -> Evaluation {
    out.result = RecheckResult::NotAPolicyEvaluation;
    out.detail = format!("not a policy evaluation: {what}");
    out
}

fn different(mut out: Evaluation, detail: String) -> Evaluation {
    out.result = RecheckResult::Different;
    out.detail = detail;
    out
}

/// One re-check's state: the record, the policy and the specs read so far.
pub(super) struct Checker<'a> {
    store: &'a Store,
    record: &'a Record,
    policy: &'a dyn Policy,
    current: Option<&'a Current>,
    run_id: &'a str,
    specs: HashMap<String, std::result::Result<ToolSpec, Why>>,
}

impl<'a> Checker<'a> {
    pub fn new(
        store: &'a Store,
        record: &'a Record,
        run_id: &'a str,
        policy: &'a dyn Policy,
        current: Option<&'a Current>,
    ) -> Checker<'a> {
        Checker {
            store,
            record,
            policy,
            current,
            run_id,
            specs: HashMap::new(),
        }
    }

    /// Re-checks one item.
    pub fn check(&mut self, item: &Item) -> Result<Evaluation> {
        let step = self.record.step(&item.step_id);
        let out = self.blank(item, step);
        match &item.kind {
            ItemKind::PolicyFailed { error, again } => Ok(Evaluation {
                on_resume: *again,
                policy_id: step.map(|s| s.policy_id.clone()).unwrap_or_default(),
                ..not_recheckable_failed(out, error)
            }),
            ItemKind::Policy(decoded) => match decoded.as_ref() {
                Err(why) => Ok(not_recheckable(out, why)),
                Ok(recorded) => self.evaluation(out, item, step, recorded),
            },
        }
    }

    /// The evaluation's identifying fields, before it is classified.
    fn blank(&self, item: &Item, step: Option<&Step>) -> Evaluation {
        Evaluation {
            step_index: step
                .map(|s| s.index)
                .or_else(|| self.record.started.get(&item.step_id).copied()),
            step_id: item.step_id.clone(),
            seq: item.seq,
            tool: step
                .and_then(|s| s.decision.as_ref())
                .map(|d| d.tool.clone())
                .unwrap_or_default(),
            on_resume: false,
            result: RecheckResult::NotRecheckable,
            recorded: None,
            rechecked: None,
            recorded_hash: None,
            rechecked_hash: None,
            detail: String::new(),
            spec_source: None,
            policy_id: String::new(),
        }
    }

    /// A decoded `step.policy`: classify it, rebuild, ask, compare.
    fn evaluation(
        &mut self,
        mut out: Evaluation,
        item: &Item,
        step: Option<&Step>,
        recorded: &Recorded,
    ) -> Result<Evaluation> {
        out.recorded = Some(recorded.decision.clone());
        out.policy_id = recorded.policy_id.clone();
        let counts = match (&recorded.view, recorded.spec_hash.is_empty()) {
            (None, true) => {
                return Ok(not_recheckable(
                    out,
                    "recorded with neither a view nor a spec",
                ));
            }
            (None, false) if recorded.decision.kind == INTERRUPTED_SIDE_EFFECT => {
                return Ok(not_evaluation(out, "an interrupted side effect's pause"));
            }
            (None, false) => return Ok(not_evaluation(out, "a reconciliation's pause")),
            (Some(_), true) => return Ok(not_recheckable(out, "no spec is recorded")),
            (Some(v), false) => *v,
        };
        out.on_resume = counts.status == RunStatus::WaitingForApproval;
        let view = match rebuild::run_view(self.record, self.run_id, item, &counts) {
            Ok(view) => view,
            Err(why) => return Ok(not_recheckable(out, why)),
        };
        let recorded_request = match self.recorded_request(step, item, &recorded.spec_hash)? {
            Ok(request) => request,
            Err(why) => return Ok(not_recheckable(out, why)),
        };
        out.spec_source = Some(SpecSource::Recorded);
        let handed = match self.current {
            None => recorded_request.clone(),
            Some(current) => {
                out.spec_source = Some(SpecSource::Current);
                match current.request(&out.tool, &recorded_request) {
                    Ok(handed) => handed,
                    Err(why) => return Ok(different(out, why)),
                }
            }
        };
        let answer = crate::policy::evaluate_guarded(self.policy, &handed, &view);
        Ok(compare(
            out,
            &recorded.decision,
            &recorded_request,
            &handed,
            answer,
        ))
    }

    /// The request as recorded: the step's arguments (an operator's edit's
    /// when one stood) and the spec recorded with the evaluation; or why it
    /// cannot be rebuilt.
    fn recorded_request(
        &mut self,
        step: Option<&Step>,
        item: &Item,
        spec_hash: &str,
    ) -> Result<std::result::Result<ToolRequest, Why>> {
        let Some(step) = step else {
            return Ok(Err("its step is not recorded".into()));
        };
        if let Some(problem) = &step.decode_error {
            return Ok(Err(format!("step {}: {problem}", step.index)));
        }
        let decision = match &step.decision {
            Some(d) if d.kind == DecisionKind::ToolCall => d,
            _ => return Ok(Err(format!("step {} recorded no tool call", step.index))),
        };
        let spec = match self.spec(spec_hash)? {
            Ok(spec) => spec,
            Err(why) => return Ok(Err(why)),
        };
        let args = item
            .edited_args
            .clone()
            .unwrap_or_else(|| decision.args_or_empty());
        Ok(Ok(rebuild::request(self.run_id, step, args, spec)))
    }

    /// The spec recorded under `hash`, read once per re-check and verified
    /// against its hash; a missing or altered spec is a reason, not an
    /// error.
    fn spec(&mut self, hash: &str) -> Result<std::result::Result<ToolSpec, Why>> {
        if let Some(found) = self.specs.get(hash) {
            return Ok(found.clone());
        }
        let found = match self.store.tool_spec(hash) {
            Ok(spec) => Ok(spec),
            Err(Error::NotFound { .. }) => Err(format!("spec {hash} is not stored")),
            Err(Error::Corrupt { detail, .. }) => Err(format!("spec {hash}: {detail}")),
            Err(e) => return Err(e),
        };
        self.specs.insert(hash.to_owned(), found.clone());
        Ok(found)
    }
}

fn not_recheckable_failed(mut out: Evaluation, error: &str) -> Evaluation {
    out.result = RecheckResult::NotRecheckable;
    out.detail = format!("policy failed; no evaluation recorded: {error}");
    out
}

/// Compares the answer with the recorded decision: the outcome and, for
/// `require_approval`, the kind and the approval hash. The reason is never
/// compared; a policy error is a difference.
fn compare(
    mut out: Evaluation,
    recorded: &PolicyDecision,
    recorded_request: &ToolRequest,
    handed: &ToolRequest,
    answer: std::result::Result<PolicyDecision, PolicyError>,
) -> Evaluation {
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) => return different(out, format!("policy failed: {e}")),
    };
    out.rechecked = Some(answer.clone());
    if recorded.outcome == Outcome::RequireApproval {
        match hash_of(recorded, recorded_request) {
            Ok(hash) => out.recorded_hash = Some(hash),
            Err(e) => {
                return not_recheckable(out, format!("the recorded approval does not hash: {e}"));
            }
        }
    }
    if answer.outcome == Outcome::RequireApproval {
        match hash_of(&answer, handed) {
            Ok(hash) => out.rechecked_hash = Some(hash),
            Err(e) => {
                return different(out, format!("the policy's approval does not hash: {e}"));
            }
        }
    }
    if answer.outcome != recorded.outcome {
        return different(out, String::new());
    }
    if recorded.outcome == Outcome::RequireApproval {
        if answer.kind != recorded.kind {
            let detail = format!(
                "asks for approval kind {:?}, not {:?}",
                answer.kind, recorded.kind
            );
            return different(out, detail);
        }
        if out.recorded_hash != out.rechecked_hash {
            let detail =
                "asks for another approval: its capability, presentation or tool spec changed";
            return different(out, detail.to_owned());
        }
    }
    out.result = RecheckResult::Same;
    out
}
