//! The interruption contract: a RUNNING run whose owner is gone is taken
//! over. Steps left deciding or executing are marked interrupted; a step
//! that was executing a tool that is not read-only pauses as an
//! `interrupted_side_effect` approval (the first attempt may have taken
//! effect); read-only and deciding steps just continue. The runtime never
//! runs an interrupted step again by itself.

use std::sync::Arc;

use super::payload;
use super::session::{Allowed, Grant, Session, State, Verdict, VerdictOutcome, to_json};
use super::verdicts::build_approval;
use super::writes::{self, Draft, Settle};
use super::{CrashPoint, GateInner};
use crate::error::{Error, Result};
use crate::json::{Canonical, write_string};
use crate::model::{
    Approval, EventType, INTERRUPTED_SIDE_EFFECT, Observation, ObservationKind, PolicyDecision,
    Run, RunStatus, SideEffect, Step, StepStatus, TerminalReason, ToolRequest,
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
struct Outcome {
    paused_step: Option<Step>,
    approval: Option<Approval>,
}

/// The lease taken, `lease.taken_over` if there was an owner, every
/// in-flight step marked interrupted (one clock reading). Returns the
/// run's steps as they now stand, or `None` if another resumer took the
/// lease first.
fn write_marks(
    gate: &GateInner,
    tx: &mut WriteTx<'_>,
    run_id: &str,
    previous_owner: &str,
    previous_expires: &str,
    steps: &[Step],
) -> Result<Option<Vec<Arc<Step>>>> {
    if !take_lease(tx, gate, run_id, previous_owner)? {
        return Ok(None);
    }
    let at = gate.now();
    if !previous_owner.is_empty() {
        let taken = serde_json::json!({
            "previous_owner": previous_owner,
            "previous_expires_at": previous_expires,
            "owner": gate.owner,
        });
        tx.append_event(
            run_id,
            "",
            &at,
            EventType::LeaseTakenOver,
            &taken.to_string(),
        )?;
    }
    let mut history = Vec::with_capacity(steps.len());
    for step in steps {
        if !matches!(step.status, StepStatus::Deciding | StepStatus::Executing) {
            history.push(Arc::new(step.clone()));
            continue;
        }
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
                granted_by: None,
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
                run: run_id.to_owned(),
                status: RunStatus::Running,
                detail: "a step changed during the takeover".into(),
            });
        }
        let payload = format!("{{\"previous_status\":\"{was}\"}}");
        tx.append_event(run_id, &step.id, &at, EventType::StepInterrupted, &payload)?;
        history.push(Arc::new(Step {
            status: StepStatus::Interrupted,
            observation: Some(observation),
            finished_at: Some(at),
            ..step.clone()
        }));
    }
    Ok(Some(history))
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
    pub(crate) async fn take_over(
        mut self,
        steps: Vec<Step>,
        previous_owner: String,
        previous_expires: String,
    ) -> Result<(Session, Verdict)> {
        let gate = Arc::clone(&self.gate);
        let run_id = self.run.id.clone();
        let executing = executing_step(&steps).cloned();
        let executing_id = executing.as_ref().map(|s| s.id.clone());
        let mut draft = Draft::new(&self.run, None);
        let out: Outcome;
        let was_in_flight = executing.is_some()
            || steps
                .iter()
                .any(|s| matches!(s.status, StepStatus::Deciding | StepStatus::Executing));

        let history = match gate.reconcile.clone() {
            Some(hook) if was_in_flight => {
                // Marks first, in a commit of their own: the hook may take
                // long, and a resume that dies now is detected next time.
                let g = Arc::clone(&gate);
                let (id, owner, expires, marking) = (
                    run_id.clone(),
                    previous_owner.clone(),
                    previous_expires.clone(),
                    steps.clone(),
                );
                let marked = gate
                    .write(move |tx| write_marks(&g, tx, &id, &owner, &expires, &marking))
                    .await?;
                let Some(mut history) = marked else {
                    return Err(self.leased_elsewhere().await);
                };
                gate.crash_point(CrashPoint::StepInterrupted).await;
                // The steps this takeover marked, and an executing step a
                // dead resume had already marked.
                let in_flight = |s: &Step| {
                    matches!(s.status, StepStatus::Deciding | StepStatus::Executing)
                        || Some(&s.id) == executing_id.as_ref()
                };
                let interrupted_ids: Vec<&str> = steps
                    .iter()
                    .filter(|s| in_flight(s))
                    .map(|s| s.id.as_str())
                    .collect();
                let input = crate::reconcile::ReconcileInput {
                    run: self.run.clone(),
                    interrupted: history
                        .iter()
                        .filter(|s| interrupted_ids.contains(&s.id.as_str()))
                        .map(|s| (**s).clone())
                        .collect(),
                    approvals: (*self.approvals).clone(),
                };
                let answer = hook.reconcile(&input).await;
                let next = self.map_reconciled(answer, executing.as_ref());
                let g = Arc::clone(&gate);
                let (run, executing) = (self.run.clone(), executing_id.clone());
                let written;
                (draft, history, written) = gate
                    .write(move |tx| {
                        let mut out = Outcome::default();
                        write_next(
                            &g,
                            &run,
                            tx,
                            &mut draft,
                            &mut history,
                            executing.as_deref(),
                            &next,
                            &mut out,
                        )?;
                        Ok((draft, history, out))
                    })
                    .await?;
                out = written;
                history
            }
            _ => {
                let next = match &executing {
                    None => Next::Continue { resumed: false },
                    Some(step) => self.plan_interrupted(step),
                };
                let g = Arc::clone(&gate);
                let run = self.run.clone();
                let (owner, expires, executing) = (
                    previous_owner.clone(),
                    previous_expires.clone(),
                    executing_id.clone(),
                );
                let written = gate
                    .write(move |tx| {
                        let Some(mut history) =
                            write_marks(&g, tx, &run.id, &owner, &expires, &steps)?
                        else {
                            return Ok(None);
                        };
                        let mut out = Outcome::default();
                        write_next(
                            &g,
                            &run,
                            tx,
                            &mut draft,
                            &mut history,
                            executing.as_deref(),
                            &next,
                            &mut out,
                        )?;
                        Ok(Some((draft, history, out)))
                    })
                    .await?;
                match written {
                    Some((written_draft, history, written_out)) => {
                        draft = written_draft;
                        out = written_out;
                        if was_in_flight {
                            gate.crash_point(CrashPoint::StepInterrupted).await;
                        }
                        history
                    }
                    None => return Err(self.leased_elsewhere().await),
                }
            }
        };
        self.history = Arc::new(history);
        let paused = out.paused_step.is_some();
        if let Some(step) = out.paused_step {
            draft.current = Some(step);
        }
        if let Some(approval) = &out.approval {
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
            approval: out.approval,
            run: self.run.clone(),
        };
        Ok((self, verdict))
    }

    /// Another resumer took the lease first: `RunLeased` while it holds a
    /// live lease, otherwise the run's new state.
    async fn leased_elsewhere(&self) -> Error {
        let id = self.run.id.clone();
        let read = self
            .gate
            .store
            .off_executor(move |store| Ok((store.get_run(&id)?, store.lease(&id))))
            .await;
        let (run, lease) = match read {
            Ok(read) => read,
            Err(e) => return e,
        };
        if run.status == RunStatus::Running
            && let Ok((owner, expires_at)) = lease
            && super::lease::held(&owner, &expires_at, self.gate.lease_now())
        {
            return Error::RunLeased {
                run: run.id,
                owner,
                expires_at,
            };
        }
        Error::RunState {
            run: run.id,
            status: run.status,
            detail: "another session took this run over first; nothing ran here".into(),
        }
    }

    /// The hook's answer as the next write.
    fn map_reconciled(
        &self,
        answer: std::result::Result<crate::reconcile::Reconciled, crate::reconcile::ReconcileError>,
        executing: Option<&Step>,
    ) -> Next {
        use crate::reconcile::Reconciled;
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
                    Ok((request, registered_hash, spec_json)) => Next::Pause(Box::new(Allowed {
                        view: super::payload::ViewCounts::of(&self.run, 0, 0),
                        spec_hash: registered_hash,
                        spec_json,
                        policy: decision,
                        policy_at: crate::clock::Timestamp::from_unix_nanos(0),
                        grant: Grant::Resumed {
                            approval_id: String::new(),
                            resumed_at: crate::clock::Timestamp::from_unix_nanos(0),
                            granted_at: None,
                        },
                        request,
                    })),
                }
            }
        }
    }

    /// The request an interrupted executing step made, rebuilt with the
    /// current spec; or why it cannot wait for an operator.
    fn interrupted_request(
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
        let Some(args) = decision.args.clone().or_else(|| {
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

    /// Whether the interrupted executing step continues (read-only), pauses
    /// for an operator, or cannot wait (tool gone, arguments unusable).
    fn plan_interrupted(&self, step: &Step) -> Next {
        let read_only = step
            .decision
            .as_ref()
            .and_then(|d| self.gate.registry.get(&d.tool))
            .is_some_and(|r| r.spec.side_effect == SideEffect::ReadOnly);
        if read_only {
            return Next::Continue { resumed: false };
        }
        let (request, spec_hash, spec_json) = match self.interrupted_request(step) {
            Ok(found) => found,
            Err(Next::Conflict { detail, .. }) => {
                return Next::Conflict {
                    detail,
                    fail_step: None,
                };
            }
            Err(other) => return other,
        };
        let capability = crate::policy::tool_and_args(&request);
        let policy = PolicyDecision::need_approval(
            INTERRUPTED_SIDE_EFFECT,
            format!(
                "the run was interrupted while {} was executing; its outcome is unknown",
                request.spec.name
            ),
            Some(capability),
            Some(presentation(&request)),
        );
        Next::Pause(Box::new(Allowed {
            view: super::payload::ViewCounts::of(&self.run, 0, 0),
            spec_hash,
            spec_json,
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

/// Writes what follows the marks.
#[allow(clippy::too_many_arguments)]
fn write_next(
    gate: &GateInner,
    run: &Run,
    tx: &mut WriteTx<'_>,
    draft: &mut Draft,
    history: &mut Vec<Arc<Step>>,
    executing_id: Option<&str>,
    next: &Next,
    out: &mut Outcome,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Timestamp;
    use crate::model::Limits;
    use crate::store::{NewRun, Store};
    use crate::{DefaultPolicy, Gate, GateConfig};

    #[test]
    fn the_lease_is_taken_only_from_the_owner_read_and_only_from_a_running_run() {
        let store = Store::open(":memory:").unwrap();
        let gate = Gate::new(GateConfig::new(store.clone(), DefaultPolicy, vec![])).unwrap();
        let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
        store
            .write(|tx| {
                tx.insert_run(&NewRun {
                    id: "r",
                    goal: "g",
                    limits_json: &to_json(&Limits::default()),
                    created_at: at,
                    lease_owner: "old",
                    lease_expires_at: at,
                })?;
                tx.append_event("r", "", &at, EventType::RunCreated, "{}")
            })
            .unwrap();
        let take = |from: &str| {
            store
                .write(|tx| take_lease(tx, &gate.inner, "r", from))
                .unwrap()
                .0
        };
        // Another owner than the one read: someone took it meanwhile.
        assert!(!take("someone"));
        assert_eq!(store.lease("r").unwrap().0, "old");
        assert!(take("old"));
        assert_eq!(store.lease("r").unwrap().0, gate.owner());

        // A run that stopped running is not taken, even from its owner.
        store
            .write(|tx| {
                tx.update_run(
                    "r",
                    &RunGuard::default(),
                    &RunChange {
                        status: Some(RunStatus::Cancelled),
                        lease: LeaseChange::Set {
                            owner: "ended",
                            expires_at: at,
                        },
                        ..RunChange::default()
                    },
                )?;
                tx.append_event("r", "", &at, EventType::RunFinished, "{}")
            })
            .unwrap();
        assert!(!take("ended"));
        assert_eq!(store.lease("r").unwrap().0, "ended");
    }
}
