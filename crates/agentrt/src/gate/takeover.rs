//! The interruption contract: a RUNNING run whose owner is gone is taken
//! over. Steps left deciding or executing are marked interrupted; a step
//! that was executing a tool that is not read-only pauses as an
//! `interrupted_side_effect` approval (the first attempt may have taken
//! effect); read-only and deciding steps just continue. The runtime never
//! runs an interrupted step again by itself.

use std::sync::Arc;

use super::payload;
use super::session::{Allowed, Grant, Session, State, Verdict, VerdictOutcome, to_json};
use super::writes::{self, Draft, Settle};
use crate::error::{Error, Result};
use crate::json::{Canonical, write_string};
use crate::model::{
    EventType, INTERRUPTED_SIDE_EFFECT, Observation, ObservationKind, PolicyDecision, RunStatus,
    SideEffect, Step, StepStatus, TerminalReason, ToolRequest,
};
use crate::store::{LeaseChange, RunChange, RunGuard, StepChange, StepGuard, WriteTx};

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

/// The step that was executing: still `executing`, or already marked
/// interrupted from `executing` by a resume that died after marking.
fn executing_step(steps: &[Step]) -> Option<&Step> {
    let last = steps.last()?;
    match last.status {
        StepStatus::Executing => Some(last),
        StepStatus::Interrupted => {
            let o = last.observation.as_ref()?;
            let was = o.content.as_ref()?.to_value();
            (o.kind == ObservationKind::Interrupted && was["previous_status"] == "executing")
                .then_some(last)
        }
        _ => None,
    }
}

/// Takes the lease from `previous_owner` (compare-and-set) and records the
/// takeover.
pub(crate) fn take_lease(
    tx: &mut WriteTx<'_>,
    gate: &super::GateInner,
    run_id: &str,
    previous_owner: &str,
) -> Result<bool> {
    tx.update_run(
        run_id,
        &RunGuard {
            statuses: &[RunStatus::Running],
            lease_owner: Some(previous_owner),
            ..RunGuard::default()
        },
        &RunChange {
            lease: LeaseChange::Set {
                owner: &gate.owner,
                expires_at: gate.lease_expiry(),
            },
            ..RunChange::default()
        },
    )
}

enum Next {
    Continue,
    Pause(Box<Allowed>),
    Conflict(String),
}

impl Session {
    pub(crate) fn take_over(
        mut self,
        steps: Vec<Step>,
        previous_owner: String,
        previous_expires: String,
    ) -> Result<(Session, Verdict)> {
        let gate = Arc::clone(&self.gate);
        let run_id = self.run.id.clone();
        // What to do with the step that was executing, decided before the
        // write from the current registrations.
        let next = match executing_step(&steps) {
            None => Next::Continue,
            Some(step) => self.plan_interrupted(step),
        };
        let in_flight: Vec<Step> = steps
            .iter()
            .filter(|s| matches!(s.status, StepStatus::Deciding | StepStatus::Executing))
            .cloned()
            .collect();
        let executing_id = executing_step(&steps).map(|s| s.id.clone());
        let mut history: Vec<Arc<Step>> = Vec::with_capacity(steps.len());
        let mut paused_step = None;
        let mut draft = Draft::new(&self.run, None);
        let mut approval_out = None;
        let taken = gate.write(|tx| {
            if !take_lease(tx, &gate, &run_id, &previous_owner)? {
                return Ok(false);
            }
            let at = gate.now();
            if !previous_owner.is_empty() {
                let taken = serde_json::json!({
                    "previous_owner": previous_owner,
                    "previous_expires_at": previous_expires,
                    "owner": gate.owner,
                });
                tx.append_event(
                    &run_id,
                    "",
                    &at,
                    EventType::LeaseTakenOver,
                    &taken.to_string(),
                )?;
            }
            let mut marked: Vec<Step> = Vec::new();
            for step in &in_flight {
                let was = step.status.as_str();
                let observation = Observation::runtime(
                    ObservationKind::Interrupted,
                    &[("previous_status", was)],
                    format!("step interrupted while {was}"),
                );
                let json = to_json(&observation);
                let changed = tx.update_step(
                    &step.id,
                    &StepGuard {
                        statuses: &[step.status],
                        run: None,
                    },
                    &StepChange {
                        status: Some(StepStatus::Interrupted),
                        observation: Some((&json, &observation.content_hash)),
                        finished_at: Some(Some(at)),
                        ..StepChange::default()
                    },
                )?;
                if !changed {
                    return Err(Error::RunState {
                        run: run_id.clone(),
                        status: RunStatus::Running,
                        detail: "a step changed during the takeover".into(),
                    });
                }
                let payload = format!("{{\"previous_status\":\"{was}\"}}");
                tx.append_event(&run_id, &step.id, &at, EventType::StepInterrupted, &payload)?;
                marked.push(Step {
                    status: StepStatus::Interrupted,
                    observation: Some(observation),
                    finished_at: Some(at),
                    ..step.clone()
                });
            }
            for step in &steps {
                let current = marked
                    .iter()
                    .find(|m| m.id == step.id)
                    .cloned()
                    .unwrap_or_else(|| step.clone());
                history.push(Arc::new(current));
            }
            match &next {
                Next::Continue => writes::open_next_or_settle(&gate, tx, &mut draft, &history)?,
                Next::Conflict(detail) => writes::settle(
                    &gate,
                    tx,
                    &mut draft,
                    Settle {
                        status: RunStatus::Failed,
                        reason: TerminalReason::ReconcileConflict,
                        detail: detail.clone(),
                        result: None,
                        from: RunStatus::Running,
                    },
                )?,
                Next::Pause(allowed) => {
                    let Some(step_id) = &executing_id else {
                        return Err(Error::RunState {
                            run: run_id.clone(),
                            status: RunStatus::Running,
                            detail: "no executing step to pause".into(),
                        });
                    };
                    let policy_at = gate.now();
                    let created_at = gate.now();
                    let approval = self.new_approval(step_id, allowed, created_at)?;
                    let policy_json = to_json(&allowed.policy);
                    let moved = tx.update_step(
                        step_id,
                        &StepGuard {
                            statuses: &[StepStatus::Interrupted],
                            run: None,
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
                            run: run_id.clone(),
                            status: RunStatus::Running,
                            detail: "the interrupted step changed during the takeover".into(),
                        });
                    }
                    tx.insert_approval(&approval)?;
                    tx.insert_spec(&allowed.spec_hash, allowed.spec_json.as_str())?;
                    let paused = tx.update_run(
                        &run_id,
                        &writes::running(&gate),
                        &RunChange {
                            status: Some(RunStatus::WaitingForApproval),
                            lease: LeaseChange::Clear,
                            ..RunChange::default()
                        },
                    )?;
                    if !paused {
                        return Err(writes::state_error(&gate, tx, &run_id, "pause the run"));
                    }
                    let policy =
                        payload::step_policy(&allowed.policy, "", &allowed.spec_hash, None);
                    tx.append_event(&run_id, step_id, &policy_at, EventType::StepPolicy, &policy)?;
                    let requested = payload::approval_requested(
                        &approval.id,
                        &approval.kind,
                        &allowed.policy.reason,
                        &approval.capability,
                        &approval.presentation,
                        &approval.hash,
                    );
                    tx.append_event(
                        &run_id,
                        step_id,
                        &created_at,
                        EventType::ApprovalRequested,
                        &requested,
                    )?;
                    let position = history.iter().position(|s| &s.id == step_id);
                    if let Some(position) = position {
                        let step = (*history.remove(position)).clone();
                        paused_step = Some(Step {
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
                    approval_out = Some(approval);
                }
            }
            Ok(true)
        })?;
        if !taken {
            let (owner, expires_at) = gate.store.lease(&run_id)?;
            return Err(Error::RunLeased {
                run: run_id,
                owner,
                expires_at,
            });
        }
        self.history = Arc::new(history);
        let paused = paused_step.is_some();
        if let Some(step) = paused_step {
            draft.current = Some(step);
        }
        if let Some(approval) = &approval_out {
            draft.approvals.push(approval.clone());
        }
        self.apply(draft);
        let outcome = if paused {
            VerdictOutcome::Pending
        } else if self.state == State::Over {
            VerdictOutcome::Ended
        } else {
            self.hold_lease();
            VerdictOutcome::Open
        };
        let verdict = Verdict {
            outcome,
            request: None,
            observation: None,
            approval: approval_out,
            run: self.run.clone(),
        };
        Ok((self, verdict))
    }

    /// Whether the interrupted executing step continues (read-only), pauses
    /// for an operator, or cannot wait (tool gone, arguments unusable).
    fn plan_interrupted(&self, step: &Step) -> Next {
        let Some(decision) = &step.decision else {
            return Next::Conflict("the interrupted step has no recorded decision".into());
        };
        let Some(registered) = self.gate.registry.get(&decision.tool) else {
            return Next::Conflict(format!(
                "tool {:?} was executing when the run was interrupted and is no longer registered",
                decision.tool
            ));
        };
        if registered.spec.side_effect == SideEffect::ReadOnly {
            return Next::Continue;
        }
        let Some(args) = decision.args.clone().or_else(|| {
            decision
                .invalid_args
                .is_none()
                .then(Canonical::empty_object)
        }) else {
            return Next::Conflict("the interrupted call's arguments were not JSON".into());
        };
        if let Err(problem) = registered.schema.check(&args) {
            return Next::Conflict(format!(
                "the interrupted call no longer passes its tool's schema: {problem}"
            ));
        }
        let request = ToolRequest {
            run_id: self.run.id.clone(),
            step_id: step.id.clone(),
            spec: registered.spec.clone(),
            args,
        };
        let capability = crate::policy::tool_and_args(&request);
        let policy = PolicyDecision::need_approval(
            INTERRUPTED_SIDE_EFFECT,
            format!(
                "the run was interrupted while {} was executing; its outcome is unknown",
                registered.spec.name
            ),
            Some(capability),
            Some(presentation(&request)),
        );
        Next::Pause(Box::new(Allowed {
            view: super::payload::ViewCounts::of(&self.run, 0, 0),
            spec_hash: registered.spec_hash.clone(),
            spec_json: registered.spec_json.clone(),
            policy,
            policy_at: crate::clock::Timestamp::from_unix_nanos(0),
            grant: Grant::Resumed {
                approval_id: String::new(),
                resumed_at: crate::clock::Timestamp::from_unix_nanos(0),
                granted_at: None,
            },
            request,
        }))
    }
}
