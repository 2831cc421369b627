//! The interruption contract's shared half: what becomes of a call that
//! started and whose outcome is unknown. A takeover after a crash and an
//! unknown outcome reported while the session runs (a timeout, a panic,
//! [`ToolError::Unknown`](crate::ToolError::Unknown) of a tool that is not
//! read-only) both end here: the consumer's reconciliation hook settles
//! the step, or it pauses on an `interrupted_side_effect` approval on the
//! same step. Nothing here runs the call again.

use std::sync::Arc;

use super::GateInner;
use super::session::{Allowed, Grant, Session, to_json};
use super::verdicts::build_approval;
use super::writes::{self, Draft, Settle};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::json::{Canonical, write_string};
use crate::model::{
    Approval, EventType, INTERRUPTED_SIDE_EFFECT, Observation, ObservationKind, PolicyDecision,
    Run, RunStatus, Step, StepStatus, TerminalReason, ToolRequest,
};
use crate::payload::{self, ViewCounts};
use crate::reconcile::{ReconcileError, Reconciled};
use crate::store::{LeaseChange, RunChange, StepChange, StepGuard, WriteTx};

/// What the operator is told about an interrupted side effect.
pub const INTERRUPTED_NOTICE: &str = "This call started before the run was interrupted; its outcome is unknown: \
it may or may not have taken effect. Approving runs these same arguments once more; rejecting ends the run.";

/// `{"args":…,"notice":…,"side_effect":…,"tool":…}` in canonical order.
fn presentation(request: &ToolRequest) -> Canonical {
    let mut out = String::with_capacity(request.args.as_str().len() + 256);
    out.push_str("{\"args\":");
    out.push_str(request.args.as_str());
    out.push_str(",\"notice\":");
    write_string(&mut out, INTERRUPTED_NOTICE);
    out.push_str(",\"side_effect\":");
    write_string(&mut out, request.spec.side_effect.as_str());
    out.push_str(",\"tool\":");
    write_string(&mut out, &request.spec.name);
    out.push('}');
    Canonical::assume_canonical(out)
}

/// What follows an interrupted step (or steps), as one write.
pub(crate) enum Next {
    /// Go on with a new step (`resumed`: write `run.resumed` first).
    Continue { resumed: bool },
    /// Pause the executing step for an operator.
    Pause(Box<Allowed>),
    /// End the run `reconcile_conflict`; `fail_step` fails the executing
    /// step as an invalid decision first.
    Conflict {
        detail: String,
        fail_step: Option<String>,
    },
    /// End the run COMPLETED (reconciled).
    Complete(Canonical),
    /// End the run `internal_error`.
    Internal(String),
}

/// What the follow-up write produced, for the session.
#[derive(Default)]
pub(crate) struct Followup {
    pub paused_step: Option<Step>,
    pub approval: Option<Approval>,
}

/// A pause that no policy decided (an interrupted side effect, a
/// reconciliation's `waiting`): `step.policy` carries no view and no
/// policy id.
fn non_policy_pause(
    run: &Run,
    request: ToolRequest,
    spec_hash: String,
    spec_json: Canonical,
    policy: PolicyDecision,
) -> Next {
    Next::Pause(Box::new(Allowed {
        view: ViewCounts::of(run, 0, 0),
        spec_hash,
        spec_json,
        policy,
        policy_at: Timestamp::from_unix_nanos(0),
        grant: Grant::Resumed {
            approval_id: String::new(),
            resumed_at: Timestamp::from_unix_nanos(0),
            granted_at: None,
            edit: None,
        },
        request,
        shadow: None,
    }))
}

/// The `interrupted_side_effect` pause of a call whose outcome is unknown:
/// capability `{tool, args}`, presentation `{tool, args, side_effect,
/// notice}`, and `reason` saying why the outcome is unknown. Approving it
/// runs the same request once more, through the normal resume path.
pub(crate) fn side_effect_pause(
    run: &Run,
    request: ToolRequest,
    spec_hash: String,
    spec_json: Canonical,
    reason: String,
) -> Next {
    let capability = crate::policy::tool_and_args(&request);
    let presentation = presentation(&request);
    let policy = PolicyDecision::need_approval(
        INTERRUPTED_SIDE_EFFECT,
        reason,
        Some(capability),
        Some(presentation),
    );
    non_policy_pause(run, request, spec_hash, spec_json, policy)
}

fn settle_failed(
    gate: &GateInner,
    tx: &mut WriteTx<'_>,
    draft: &mut Draft,
    reason: TerminalReason,
    detail: &str,
) -> Result<()> {
    writes::settle(
        gate,
        tx,
        draft,
        Settle {
            status: RunStatus::Failed,
            reason,
            detail: detail.to_owned(),
            result: None,
            from: RunStatus::Running,
        },
    )
}

impl Session {
    /// The hook's answer as the next write.
    pub(super) fn map_reconciled(
        &self,
        answer: std::result::Result<Reconciled, ReconcileError>,
        executing: Option<&Step>,
    ) -> Next {
        match answer {
            Err(e) => Next::Internal(format!("reconcile: {e}")),
            Ok(Reconciled::Continue) => Next::Continue { resumed: true },
            Ok(Reconciled::Conflict { detail }) => Next::Conflict {
                detail,
                fail_step: None,
            },
            Ok(Reconciled::Completed { result }) => match Canonical::parse(&result) {
                Ok(result) => Next::Complete(result),
                Err(e) => {
                    Next::Internal(format!("reconcile: the result is not acceptable JSON: {e}"))
                }
            },
            Ok(Reconciled::Waiting { decision }) => {
                if decision.outcome != crate::model::Outcome::RequireApproval {
                    return Next::Internal(format!(
                        "reconcile: waiting needs a require_approval decision, not {}",
                        decision.outcome
                    ));
                }
                let Some(step) = executing else {
                    return Next::Conflict {
                        detail: "reconcile asked to wait, but no call was executing".into(),
                        fail_step: None,
                    };
                };
                match self.interrupted_request(step) {
                    Err(next) => next,
                    Ok((request, registered_hash, spec_json)) => {
                        non_policy_pause(&self.run, request, registered_hash, spec_json, decision)
                    }
                }
            }
        }
    }

    /// The request an interrupted executing step made, rebuilt with the
    /// current spec; or why it cannot wait for an operator.
    pub(super) fn interrupted_request(
        &self,
        step: &Step,
    ) -> std::result::Result<(ToolRequest, String, Canonical), Next> {
        let Some(decision) = &step.decision else {
            return Err(Next::Conflict {
                detail: "the interrupted step has no recorded decision".into(),
                fail_step: None,
            });
        };
        let Some(registered) = self.gate.registry.get(&decision.tool) else {
            return Err(Next::Conflict {
                detail: format!(
                    "tool {:?} was executing when the run was interrupted and is no longer registered",
                    decision.tool
                ),
                fail_step: None,
            });
        };
        // An edited call ran with the arguments its grant approved.
        let granted = crate::approval::granted_args(&self.approvals, &step.id);
        let Some(args) = granted.or_else(|| decision.args.clone()).or_else(|| {
            decision
                .invalid_args
                .is_none()
                .then(Canonical::empty_object)
        }) else {
            return Err(Next::Conflict {
                detail: "the interrupted call's arguments were not JSON".into(),
                fail_step: None,
            });
        };
        if let Err(problem) = registered.schema.check(&args) {
            return Err(Next::Conflict {
                detail: format!(
                    "the interrupted call no longer passes its tool's schema: {problem}"
                ),
                fail_step: Some(problem),
            });
        }
        let request = ToolRequest {
            run_id: self.run.id.clone(),
            step_id: step.id.clone(),
            spec: registered.spec.clone(),
            args,
        };
        Ok((
            request,
            registered.spec_hash.clone(),
            registered.spec_json.clone(),
        ))
    }
}

/// Writes what follows the marks: the next step, the run's end, or the
/// pause of the executing step (`executing_id`, marked interrupted).
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_next(
    gate: &GateInner,
    run: &Run,
    tx: &mut WriteTx<'_>,
    draft: &mut Draft,
    history: &mut Vec<Arc<Step>>,
    executing_id: Option<&str>,
    next: &Next,
    out: &mut Followup,
) -> Result<()> {
    let run_id = run.id.clone();
    match next {
        Next::Continue { resumed } => {
            if *resumed {
                let at = gate.now();
                tx.append_event(
                    &run_id,
                    "",
                    &at,
                    EventType::RunResumed,
                    "{\"after\":\"interruption\"}",
                )?;
            }
            writes::open_next_or_settle(gate, tx, draft, history)
        }
        Next::Internal(detail) => {
            settle_failed(gate, tx, draft, TerminalReason::InternalError, detail)
        }
        Next::Complete(result) => writes::settle(
            gate,
            tx,
            draft,
            Settle {
                status: RunStatus::Completed,
                reason: TerminalReason::GoalCompleted,
                detail: "completed by reconciliation".into(),
                result: Some(result.clone()),
                from: RunStatus::Running,
            },
        ),
        Next::Conflict { detail, fail_step } => {
            if let (Some(problem), Some(step_id)) = (fail_step, executing_id) {
                let observation = Observation::runtime(
                    ObservationKind::InvalidDecision,
                    &[("error", problem)],
                    format!("invalid decision on resume: {problem}"),
                );
                let json = to_json(&observation);
                tx.update_step(
                    step_id,
                    &StepGuard {
                        statuses: &[StepStatus::Interrupted],
                        run: None,
                        granted_by: None,
                    },
                    &StepChange {
                        status: Some(StepStatus::Failed),
                        observation: Some((&json, &observation.content_hash)),
                        ..StepChange::default()
                    },
                )?;
                if let Some(slot) = history.iter_mut().find(|s| s.id == step_id) {
                    *slot = Arc::new(Step {
                        status: StepStatus::Failed,
                        observation: Some(observation),
                        ..(**slot).clone()
                    });
                }
            }
            settle_failed(gate, tx, draft, TerminalReason::ReconcileConflict, detail)
        }
        Next::Pause(allowed) => {
            let Some(step_id) = executing_id else {
                return Err(Error::RunState {
                    run: run_id,
                    status: RunStatus::Running,
                    detail: "no executing step to pause".into(),
                });
            };
            let policy_at = gate.now();
            let created_at = gate.now();
            let approval = build_approval(gate, run, step_id, allowed, created_at)?;
            let policy_json = to_json(&allowed.policy);
            let moved = tx.update_step(
                step_id,
                &StepGuard {
                    statuses: &[StepStatus::Interrupted],
                    run: None,
                    granted_by: None,
                },
                &StepChange {
                    status: Some(StepStatus::AwaitingApproval),
                    policy_json: Some(&policy_json),
                    policy_id: Some(""),
                    observation: Some(("", "")),
                    finished_at: Some(None),
                    ..StepChange::default()
                },
            )?;
            if !moved {
                return Err(Error::RunState {
                    run: run_id,
                    status: RunStatus::Running,
                    detail: "the interrupted step changed during the takeover".into(),
                });
            }
            tx.insert_approval(&approval)?;
            tx.insert_spec(&allowed.spec_hash, allowed.spec_json.as_str())?;
            let paused = tx.update_run(
                &run_id,
                &writes::running(gate),
                &RunChange {
                    status: Some(RunStatus::WaitingForApproval),
                    lease: LeaseChange::Clear,
                    ..RunChange::default()
                },
            )?;
            if !paused {
                return Err(writes::state_error(gate, tx, &run_id, "pause the run"));
            }
            let policy = payload::step_policy(&allowed.policy, "", &allowed.spec_hash, None);
            tx.append_event(&run_id, step_id, &policy_at, EventType::StepPolicy, &policy)?;
            let requested = payload::approval_requested(&approval, &allowed.policy.reason);
            tx.append_event(
                &run_id,
                step_id,
                &created_at,
                EventType::ApprovalRequested,
                &requested,
            )?;
            if let Some(position) = history.iter().position(|s| s.id == step_id) {
                let step = (*history.remove(position)).clone();
                out.paused_step = Some(Step {
                    status: StepStatus::AwaitingApproval,
                    policy: Some(allowed.policy.clone()),
                    policy_id: String::new(),
                    observation: None,
                    finished_at: None,
                    ..step
                });
            }
            draft.run.status = RunStatus::WaitingForApproval;
            draft.over = true;
            out.approval = Some(approval);
            Ok(())
        }
    }
}
