//! Attaching to an existing run. A run waiting for approval is resumed:
//! the step's latest approval must be granted and still match its hash,
//! the arguments must pass the current schema, and the policy is asked
//! again; only then may the request run, once.

use std::sync::Arc;

use super::session::{
    Allowed, Grant, Session, State, Verdict, VerdictOutcome, evaluate, misuse, to_json,
};
use super::writes::{self, Draft, Settle, StepEnd};
use super::{Claim, GateInner};
use crate::approval::{approval_hash, granted_args, last_edited};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::expiry::write_expiry;
use crate::model::{
    Approval, ApprovalStatus, EventType, INTERRUPTED_SIDE_EFFECT, Observation, ObservationKind,
    OperatorEdit, Outcome, RunStatus, RunView, Step, StepStatus, TerminalReason, ToolRequest,
};
use crate::payload::{self, ViewCounts};
use crate::store::{LeaseChange, RunChange, RunGuard, StepChange, StepGuard};

/// Expires an approval or grant of the session's run and ends the session.
pub(crate) async fn expire(
    session: &mut Session,
    approval_id: &str,
    at: Timestamp,
    _grant: bool,
) -> Result<()> {
    let approval = session
        .approvals
        .iter()
        .find(|a| a.id == approval_id)
        .cloned()
        .ok_or_else(|| Error::NotFound {
            what: "approval",
            id: approval_id.to_owned(),
        })?;
    let gate = Arc::clone(&session.gate);
    gate.write(move |tx| write_expiry(tx, &approval, at))
        .await?;
    session.run = session.reread_run().await?;
    session.state = State::Over;
    session.allowed = None;
    Ok(())
}

/// The guard and change that take a WAITING run back to RUNNING under
/// this gate's lease.
fn wake(gate: &GateInner, expires_at: Timestamp) -> (RunGuard<'_>, RunChange<'_>) {
    (
        RunGuard {
            statuses: &[RunStatus::WaitingForApproval],
            ..RunGuard::default()
        },
        RunChange {
            status: Some(RunStatus::Running),
            lease: LeaseChange::Set {
                owner: &gate.owner,
                expires_at,
            },
            ..RunChange::default()
        },
    )
}

/// The guard of a write on a step that still awaits `granted_by` (when
/// given) while its run still waits: a second program may have resumed or
/// paused it again since this one read it.
fn still_awaiting<'a>(run_id: &'a str, granted_by: Option<&'a str>) -> StepGuard<'a> {
    StepGuard {
        statuses: &[StepStatus::AwaitingApproval],
        run: Some((
            run_id,
            RunGuard {
                statuses: &[RunStatus::WaitingForApproval],
                ..RunGuard::default()
            },
        )),
        granted_by,
    }
}

impl Session {
    pub(crate) async fn attach(gate: Arc<GateInner>, run_id: &str) -> Result<(Session, Verdict)> {
        let claim = Claim::take(&gate, run_id)?;
        let id = run_id.to_owned();
        let (run, lease) = gate
            .store
            .off_executor(move |store| Ok((store.get_run(&id)?, store.lease_and_clock(&id)?)))
            .await?;
        if run.status.is_terminal() {
            return Err(misuse(&run, "the run is finished; nothing to resume"));
        }
        // A live lease of another owner: refuse before reading anything else.
        let mut previous = None;
        if run.status == RunStatus::Running {
            let (owner, expires, engine_now) = lease;
            if gate.lease_held(&owner, &expires, engine_now) && owner != gate.owner {
                return Err(Error::RunLeased {
                    run: run_id.to_owned(),
                    owner,
                    expires_at: expires,
                });
            }
            previous = Some((owner, expires));
        }
        let id = run_id.to_owned();
        let (steps, approvals) = gate
            .store
            .off_executor(move |store| Ok((store.list_steps(&id)?, store.list_approvals(&id)?)))
            .await?;
        let mut session = Session::new(Arc::clone(&gate), run, claim);
        session.approvals = Arc::new(approvals);
        let damaged = session
            .run
            .decode_error
            .clone()
            .map(|e| format!("run: {e}"))
            .or_else(|| {
                steps.iter().find_map(|s| {
                    s.decode_error
                        .as_ref()
                        .map(|e| format!("step {}: {e}", s.index))
                })
            });
        if let Some(problem) = damaged {
            let owner = previous.map(|(owner, _)| owner);
            return session.fail_damaged(problem, owner).await;
        }
        match previous {
            None => session.resume_waiting(steps).await,
            Some((owner, expires)) => session.take_over(steps, owner, expires).await,
        }
    }

    /// A stored row of the run cannot be read: fail the run without
    /// rewriting the damaged rows.
    async fn fail_damaged(
        mut self,
        problem: String,
        lease_owner: Option<String>,
    ) -> Result<(Session, Verdict)> {
        let gate = Arc::clone(&self.gate);
        let mut draft = Draft::new(&self.run, None);
        let from = self.run.status;
        let run_id = self.run.id.clone();
        let g = Arc::clone(&gate);
        let draft = gate
            .write(move |tx| {
                let gate = g;
                if let Some(owner) = &lease_owner
                    && !super::takeover::take_lease(tx, &gate, &run_id, owner)?
                {
                    return Err(writes::state_error(&gate, tx, &run_id, "take over the run"));
                }
                writes::settle(
                    &gate,
                    tx,
                    &mut draft,
                    Settle {
                        status: RunStatus::Failed,
                        reason: TerminalReason::InternalError,
                        detail: format!("stored data cannot be read: {problem}"),
                        result: None,
                        from,
                    },
                )?;
                Ok(draft)
            })
            .await?;
        self.apply(draft);
        let verdict = Verdict {
            outcome: VerdictOutcome::Ended,
            request: None,
            observation: None,
            approval: None,
            run: self.run.clone(),
        };
        Ok((self, verdict))
    }

    fn verdict(&self, outcome: VerdictOutcome) -> Verdict {
        Verdict {
            outcome,
            request: None,
            observation: None,
            approval: None,
            run: self.run.clone(),
        }
    }

    async fn resume_waiting(mut self, mut steps: Vec<Step>) -> Result<(Session, Verdict)> {
        let gate = Arc::clone(&self.gate);
        let Some(position) = steps
            .iter()
            .rposition(|s| s.status == StepStatus::AwaitingApproval)
        else {
            // Read the run again: another session may have resumed it
            // between our two reads.
            let now = self.reread_run().await?;
            return Err(misuse(
                &now,
                "no step awaits an approval; another session may have resumed the run",
            ));
        };
        let step = steps.remove(position);
        steps.truncate(position);
        self.history = Arc::new(steps.into_iter().map(Arc::new).collect());
        let Some(grant) = self
            .approvals
            .iter()
            .rev()
            .find(|a| a.step_id == step.id)
            .cloned()
        else {
            return Err(misuse(&self.run, "the awaiting step has no approval"));
        };
        self.current = Some(step.clone());
        self.handed_out = true;

        let now = gate.now();
        if grant.status == ApprovalStatus::Pending && grant.expires_at.is_some_and(|e| now >= e) {
            expire(&mut self, &grant.id, now, false).await?;
            let verdict = self.verdict(VerdictOutcome::Ended);
            return Ok((self, verdict));
        }
        if grant.status != ApprovalStatus::Approved {
            return Err(misuse(
                &self.run,
                &format!(
                    "approval {} is {}; the run resumes once it is approved",
                    grant.id, grant.status
                ),
            ));
        }
        check_hash(&grant)?;
        let Some(decision) = step.decision.clone() else {
            return Err(Error::ApprovalHash {
                approval: grant.id.clone(),
                detail: "the awaiting step has no recorded decision".into(),
            });
        };
        let Some(registered) = gate.registry.get(&decision.tool) else {
            return self
                .end_on_resume(
                    &grant.id,
                    step,
                    None,
                    TerminalReason::ReconcileConflict,
                    format!(
                        "tool {:?} is no longer registered; the approved call cannot run",
                        decision.tool
                    ),
                )
                .await;
        };
        let grant_ttl = self.run.limits.grant_ttl_ms;
        if let Some(granted) = grant.decided_at
            && grant_ttl > 0
            && now > granted.add(std::time::Duration::from_millis(grant_ttl))
        {
            expire(&mut self, &grant.id, now, true).await?;
            let verdict = self.verdict(VerdictOutcome::Ended);
            return Ok((self, verdict));
        }
        let model_args = decision.args_or_empty();
        // The call the grant approved: an operator's edit may have changed
        // the model's arguments (design §44).
        let args = granted_args(&self.approvals, &step.id).unwrap_or_else(|| model_args.clone());
        let edit = (args != model_args).then(|| {
            let editor = last_edited(&self.approvals, &step.id).unwrap_or(&grant);
            OperatorEdit {
                args: args.clone(),
                by: editor.decided_by.clone(),
                note: editor.note.clone(),
            }
        });
        if let Err(problem) = registered.schema.check(&args) {
            if edit.is_some() {
                return self.refuse_edit(step, &grant, None, problem).await;
            }
            return self.invalid_on_resume(step, &grant, now, problem).await;
        }
        let request = ToolRequest {
            run_id: self.run.id.clone(),
            step_id: step.id.clone(),
            spec: registered.spec.clone(),
            args,
        };
        let view = RunView {
            run: self.run.clone(),
            steps: Arc::clone(&self.history),
            approvals: Arc::clone(&self.approvals),
        };
        let counts = ViewCounts::of(&self.run, self.history.len(), self.approvals.len());
        let answer = evaluate(&gate, &request, &view);
        let shadow = super::session::shadow_disagreement(&gate, &request, &view, &answer);
        drop(view);
        let edited = edit.is_some();
        let allowed = |policy| Allowed {
            request: request.clone(),
            spec_hash: registered.spec_hash.clone(),
            spec_json: registered.spec_json.clone(),
            policy,
            view: counts,
            policy_at: now,
            grant: Grant::Resumed {
                approval_id: grant.id.clone(),
                resumed_at: now,
                granted_at: grant.decided_at,
                edit: edit.clone(),
            },
            shadow: shadow.clone(),
        };
        let policy = match answer {
            Err(e) if edited => {
                return self
                    .refuse_edit(step, &grant, None, format!("the policy failed: {e}"))
                    .await;
            }
            Err(e) => {
                return self
                    .end_on_resume(
                        &grant.id,
                        step,
                        None,
                        TerminalReason::InternalError,
                        format!("policy: {e}"),
                    )
                    .await;
            }
            Ok(p) => p,
        };
        let candidate = allowed(policy);
        match candidate.policy.outcome {
            Outcome::Allow => Ok(self.grant(candidate)),
            Outcome::RequireApproval => {
                let wanted = self.new_approval(&step.id, &candidate, now)?;
                // An operator who wrote the arguments approved that request;
                // the policy's approval for it stands if it is of the kind
                // the operator was asked to decide.
                let edit_of =
                    |a: &Approval| edited && a.kind == wanted.kind && a.request == wanted.request;
                // An approved re-run of an interrupted side effect stands
                // with the approval the step was granted before it started.
                let earlier_grant = grant.kind == INTERRUPTED_SIDE_EFFECT
                    && self.approvals.iter().any(|a| {
                        a.step_id == step.id
                            && a.status == ApprovalStatus::Approved
                            && (a.hash == wanted.hash || edit_of(a))
                    });
                let edit_of_kind = edit_of(&grant);
                let wanted = wanted.hash;
                let same = wanted == grant.hash || earlier_grant || edit_of_kind;
                if same {
                    Ok(self.grant(candidate))
                } else {
                    self.repause(step, candidate).await
                }
            }
            Outcome::Deny | Outcome::Abort if edited => {
                let reason = format!(
                    "the policy {}: {}",
                    if candidate.policy.outcome == Outcome::Deny {
                        "denies it"
                    } else {
                        "would end the run on it"
                    },
                    candidate.policy.reason
                );
                self.refuse_edit(step, &grant, Some(candidate), reason)
                    .await
            }
            Outcome::Deny => self.denied_on_resume(step, &grant, candidate).await,
            Outcome::Abort => {
                let reason = candidate.policy.reason.clone();
                self.end_on_resume(
                    &grant.id,
                    step,
                    Some(candidate),
                    TerminalReason::PolicyAbort,
                    reason,
                )
                .await
            }
        }
    }

    /// The policy (or the tool's schema) refuses an operator's edit: the
    /// run stays waiting, nothing runs, and the request the edit replaced
    /// waits again under a new pending approval with its fields (and so its
    /// hash): `step.policy` (when the policy answered),
    /// `approval.edit_refused`, `approval.requested`.
    async fn refuse_edit(
        mut self,
        mut step: Step,
        grant: &Approval,
        evaluated: Option<Allowed>,
        reason: String,
    ) -> Result<(Session, Verdict)> {
        let Some(replaced) = last_edited(&self.approvals, &step.id).cloned() else {
            return Err(Error::ApprovalHash {
                approval: grant.id.clone(),
                detail:
                    "its arguments differ from the model's, but no edit of the step is recorded"
                        .into(),
            });
        };
        let gate = Arc::clone(&self.gate);
        let created_at = gate.now();
        let ttl = self.run.limits.approval_ttl_ms;
        let restored = Approval {
            id: gate.new_id(),
            status: ApprovalStatus::Pending,
            created_at,
            expires_at: (ttl > 0).then(|| created_at.add(std::time::Duration::from_millis(ttl))),
            decided_at: None,
            decided_by: String::new(),
            note: String::new(),
            ..replaced
        };
        let refused = payload::approval_edit_refused(&grant.id, &reason, &restored.id);
        let requested = payload::approval_requested(
            &restored,
            &format!(
                "the operator's edit was refused ({reason}); the request it replaced waits again"
            ),
        );
        let run_id = self.run.id.clone();
        let step_id = step.id.clone();
        let grant_id = grant.id.clone();
        let g = Arc::clone(&gate);
        let inserted = restored.clone();
        let policy = evaluated.as_ref().map(|a| {
            (
                a.spec_hash.clone(),
                a.spec_json.clone(),
                a.policy_at,
                a.policy_events(&gate.policy_id),
            )
        });
        gate.write(move |tx| {
            let (gate, approval) = (g, inserted);
            let held = tx.update_step(
                &step_id,
                &still_awaiting(&run_id, Some(&grant_id)),
                &StepChange::default(),
            )?;
            if !held {
                return Err(writes::state_error(
                    &gate,
                    tx,
                    &run_id,
                    "refuse the operator's edit",
                ));
            }
            if let Some((spec_hash, spec_json, policy_at, events)) = &policy {
                tx.insert_spec(spec_hash, spec_json.as_str())?;
                writes::append_policy(tx, &run_id, &step_id, policy_at, events)?;
            }
            tx.insert_approval(&approval)?;
            tx.append_event(
                &run_id,
                &step_id,
                &created_at,
                EventType::ApprovalEditRefused,
                &refused,
            )?;
            tx.append_event(
                &run_id,
                &step_id,
                &created_at,
                EventType::ApprovalRequested,
                &requested,
            )?;
            Ok(())
        })
        .await?;
        step.status = StepStatus::AwaitingApproval;
        self.current = Some(step);
        Arc::make_mut(&mut self.approvals).push(restored.clone());
        self.state = State::Over;
        let mut verdict = self.verdict(VerdictOutcome::Pending);
        verdict.observation = Some(Observation::runtime(
            ObservationKind::PolicyDenied,
            &[("approval_id", &grant.id), ("reason", &reason)],
            format!("the operator's edit was refused: {reason}"),
        ));
        verdict.approval = Some(restored);
        Ok((self, verdict))
    }

    fn grant(mut self, allowed: Allowed) -> (Session, Verdict) {
        let mut verdict = self.verdict(VerdictOutcome::Allowed);
        verdict.request = Some(allowed.request.clone());
        self.allowed = Some(allowed);
        self.state = State::Active;
        (self, verdict)
    }

    /// The policy now asks for a different approval: pause again on the
    /// same step.
    async fn repause(mut self, mut step: Step, allowed: Allowed) -> Result<(Session, Verdict)> {
        let gate = Arc::clone(&self.gate);
        let created_at = gate.now();
        let approval = self.new_approval(&step.id, &allowed, created_at)?;
        let policy_json = to_json(&allowed.policy);
        let policy_events = allowed.policy_events(&gate.policy_id);
        let requested = payload::approval_requested(&approval, &allowed.policy.reason);
        let run_id = self.run.id.clone();
        let step_id = step.id.clone();
        let granted_by = match &allowed.grant {
            Grant::Resumed { approval_id, .. } => Some(approval_id.clone()),
            Grant::Fresh { .. } => None,
        };
        let g = Arc::clone(&gate);
        let inserted = approval.clone();
        let (spec_hash, spec_json, policy_at) = (
            allowed.spec_hash.clone(),
            allowed.spec_json.clone(),
            allowed.policy_at,
        );
        gate.write(move |tx| {
            let (gate, approval) = (g, inserted);
            let moved = tx.update_step(
                &step_id,
                &still_awaiting(&run_id, granted_by.as_deref()),
                &StepChange {
                    policy_json: Some(&policy_json),
                    policy_id: Some(&gate.policy_id),
                    ..StepChange::default()
                },
            )?;
            if !moved {
                return Err(writes::state_error(
                    &gate,
                    tx,
                    &run_id,
                    "pause the run again",
                ));
            }
            tx.insert_spec(&spec_hash, spec_json.as_str())?;
            tx.insert_approval(&approval)?;
            writes::append_policy(tx, &run_id, &step_id, &policy_at, &policy_events)?;
            tx.append_event(
                &run_id,
                &step_id,
                &created_at,
                EventType::ApprovalRequested,
                &requested,
            )?;
            Ok(())
        })
        .await?;
        step.policy = Some(allowed.policy.clone());
        step.policy_id = gate.policy_id.clone();
        self.current = Some(step);
        Arc::make_mut(&mut self.approvals).push(approval.clone());
        self.state = State::Over;
        let mut verdict = self.verdict(VerdictOutcome::Pending);
        verdict.request = Some(allowed.request);
        verdict.approval = Some(approval);
        Ok((self, verdict))
    }

    /// The approved arguments no longer pass the tool's schema: the run
    /// resumes and the step fails as an invalid decision.
    async fn invalid_on_resume(
        self,
        step: Step,
        grant: &Approval,
        now: Timestamp,
        problem: String,
    ) -> Result<(Session, Verdict)> {
        let observation = Observation::runtime(
            ObservationKind::InvalidDecision,
            &[("error", &problem)],
            format!("invalid decision on resume: {problem}"),
        );
        self.fail_step_on_resume(step, grant, now, None, observation)
            .await
    }

    async fn denied_on_resume(
        self,
        step: Step,
        grant: &Approval,
        allowed: Allowed,
    ) -> Result<(Session, Verdict)> {
        let reason = allowed.policy.reason.clone();
        let observation = Observation::runtime(
            ObservationKind::PolicyDenied,
            &[("tool", &allowed.request.spec.name), ("reason", &reason)],
            format!("denied on resume: {reason}"),
        );
        let now = allowed.policy_at;
        self.fail_step_on_resume(step, grant, now, Some(allowed), observation)
            .await
    }

    /// WAITING → RUNNING, `run.resumed`, (`step.policy`), the step failed,
    /// and the next step opened.
    async fn fail_step_on_resume(
        mut self,
        step: Step,
        grant: &Approval,
        resumed_at: Timestamp,
        allowed: Option<Allowed>,
        observation: Observation,
    ) -> Result<(Session, Verdict)> {
        let gate = Arc::clone(&self.gate);
        let history = Arc::clone(&self.history);
        let mut draft = Draft::new(&self.run, None);
        let run_id = self.run.id.clone();
        let step_id = step.id.clone();
        let resumed = payload::run_resumed_approval(&grant.id);
        let g = Arc::clone(&gate);
        let (grant_id, observed) = (grant.id.clone(), observation.clone());
        let draft = gate
            .write(move |tx| {
                let (gate, observation) = (g, observed);
                let (guard, change) = wake(&gate, gate.lease_expiry_in(tx)?);
                if !tx.update_run(&run_id, &guard, &change)? {
                    return Err(writes::state_error(&gate, tx, &run_id, "resume the run"));
                }
                draft.run.status = RunStatus::Running;
                tx.append_event(&run_id, "", &resumed_at, EventType::RunResumed, &resumed)?;
                if let Some(a) = &allowed {
                    tx.insert_spec(&a.spec_hash, a.spec_json.as_str())?;
                    let events = a.policy_events(&gate.policy_id);
                    writes::append_policy(tx, &run_id, &step_id, &a.policy_at, &events)?;
                }
                let end_at = gate.now();
                let ended = writes::end_step(
                    tx,
                    &mut draft,
                    step,
                    end_at,
                    StepEnd {
                        status: StepStatus::Failed,
                        observation: Some(observation.clone()),
                        from: &[StepStatus::AwaitingApproval],
                        run_guard: writes::running(&gate),
                        extra: StepChange::default(),
                        count_active: false,
                        granted_by: Some(&grant_id),
                    },
                )?;
                if ended.is_none() {
                    return Err(writes::state_error(
                        &gate,
                        tx,
                        &run_id,
                        "fail the awaiting step",
                    ));
                }
                tx.append_event(
                    &run_id,
                    &step_id,
                    &end_at,
                    EventType::StepFailed,
                    &payload::step_failed(&observation.summary, Some(&observation)),
                )?;
                writes::open_next_or_settle(&gate, tx, &mut draft, &history)?;
                Ok(draft)
            })
            .await?;
        self.state = State::Active;
        self.apply(draft);
        self.hold_lease();
        let outcome = if self.state == State::Over {
            VerdictOutcome::Ended
        } else {
            VerdictOutcome::Open
        };
        let mut verdict = self.verdict(outcome);
        verdict.observation = Some(observation);
        Ok((self, verdict))
    }

    /// The run ends from WAITING: the awaiting step fails and the run is
    /// FAILED with `reason`.
    async fn end_on_resume(
        mut self,
        grant: &str,
        step: Step,
        allowed: Option<Allowed>,
        reason: TerminalReason,
        detail: String,
    ) -> Result<(Session, Verdict)> {
        let gate = Arc::clone(&self.gate);
        let mut draft = Draft::new(&self.run, None);
        let run_id = self.run.id.clone();
        let step_id = step.id.clone();
        let (kind, summary) = match reason {
            TerminalReason::PolicyAbort => (
                ObservationKind::PolicyDenied,
                format!("aborted on resume: {detail}"),
            ),
            _ => (
                ObservationKind::InvalidDecision,
                format!("internal: {detail}"),
            ),
        };
        let observation = match kind {
            ObservationKind::PolicyDenied => Observation::runtime(
                kind,
                &[
                    (
                        "tool",
                        &step
                            .decision
                            .as_ref()
                            .map(|d| d.tool.clone())
                            .unwrap_or_default(),
                    ),
                    ("reason", &detail),
                ],
                summary,
            ),
            _ => Observation::runtime(kind, &[("error", &summary)], summary.clone()),
        };
        let failed_detail = match reason {
            TerminalReason::InternalError if detail.starts_with("policy: ") => {
                format!("policy error: {}", &detail["policy: ".len()..])
            }
            _ => observation.summary.clone(),
        };
        let g = Arc::clone(&gate);
        let (grant, observed) = (grant.to_owned(), observation.clone());
        let draft = gate
            .write(move |tx| {
                let (gate, observation) = (g, observed);
                if let Some(a) = &allowed {
                    tx.insert_spec(&a.spec_hash, a.spec_json.as_str())?;
                    let events = a.policy_events(&gate.policy_id);
                    writes::append_policy(tx, &run_id, &step_id, &a.policy_at, &events)?;
                }
                let end_at = gate.now();
                let ended = writes::end_step(
                    tx,
                    &mut draft,
                    step,
                    end_at,
                    StepEnd {
                        status: StepStatus::Failed,
                        observation: Some(observation.clone()),
                        from: &[StepStatus::AwaitingApproval],
                        run_guard: RunGuard {
                            statuses: &[RunStatus::WaitingForApproval],
                            ..RunGuard::default()
                        },
                        extra: StepChange::default(),
                        count_active: false,
                        granted_by: Some(&grant),
                    },
                )?;
                if ended.is_none() {
                    return Err(writes::state_error(&gate, tx, &run_id, "end the run"));
                }
                tx.append_event(
                    &run_id,
                    &step_id,
                    &end_at,
                    EventType::StepFailed,
                    &payload::step_failed(&failed_detail, Some(&observation)),
                )?;
                writes::settle(
                    &gate,
                    tx,
                    &mut draft,
                    Settle {
                        status: RunStatus::Failed,
                        reason,
                        detail: detail.clone(),
                        result: None,
                        from: RunStatus::WaitingForApproval,
                    },
                )?;
                Ok(draft)
            })
            .await?;
        self.apply(draft);
        let mut verdict = self.verdict(VerdictOutcome::Ended);
        verdict.observation = Some(observation);
        Ok((self, verdict))
    }
}

/// The stored approval must still hash to its recorded hash.
pub(crate) fn check_hash(approval: &Approval) -> Result<()> {
    if let Some(problem) = &approval.decode_error {
        return Err(Error::ApprovalHash {
            approval: approval.id.clone(),
            detail: format!("the stored approval cannot be read: {problem}"),
        });
    }
    let recomputed = approval_hash(
        &approval.kind,
        &approval.capability,
        &approval.presentation,
        &approval.request,
    );
    if recomputed != approval.hash {
        return Err(Error::ApprovalHash {
            approval: approval.id.clone(),
            detail: format!(
                "its fields hash to {recomputed}, not the recorded {}",
                approval.hash
            ),
        });
    }
    Ok(())
}
