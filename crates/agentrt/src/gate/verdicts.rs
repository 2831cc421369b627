//! Recording a proposal's verdict: invalid decisions, completions,
//! policy errors, denials and pauses, each one write group.

use std::sync::Arc;

use super::GateInner;
use super::session::{Allowed, Grant, Session, State, Verdict, VerdictOutcome, misuse, to_json};
use super::writes::{self, Settle, StepColumns, StepEnd, running};
use crate::approval::{approval_hash, approval_request};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::json::Canonical;
use crate::model::{
    Approval, ApprovalStatus, EventType, Observation, ObservationKind, Outcome, RecordedDecision,
    Run, RunStatus, Step, StepStatus, TerminalReason,
};
use crate::payload::{self};
use crate::policy::PolicyError;
use crate::store::{LeaseChange, RunChange, StepChange, StepGuard};

impl Session {
    /// After a guarded write found the run changed under it (an operator's
    /// cancel, a lost lease): re-read the run and end the session.
    pub(crate) async fn changed_under_us(&mut self) -> Result<Verdict> {
        let id = self.run.id.clone();
        let (run, (owner, _)) = self
            .gate
            .store
            .off_executor(move |store| Ok((store.get_run(&id)?, store.lease(&id)?)))
            .await?;
        if run.status == RunStatus::Running {
            if owner != self.gate.owner {
                self.state = State::Closed(Some("lost the lease".into()));
                return Err(Error::LeaseLost { run: run.id });
            }
            return Err(misuse(&run, "the step changed under this session"));
        }
        self.run = run;
        self.state = State::Over;
        Ok(Verdict::of(VerdictOutcome::Ended, &self.run))
    }

    /// The one write group of a decided step that ends at once (invalid,
    /// completed or failed, a policy error, a denial): the step ends,
    /// `step.decided`, then `step.policy` and `step.failed` when given,
    /// then the next step or the run's end. `false` when the run changed
    /// under the session (nothing written).
    async fn end_decided(&mut self, end: DecidedEnd) -> Result<bool> {
        let DecidedEnd {
            step,
            status,
            observation,
            decided_at,
            decision_json,
            extra,
            policy_event,
            failed_detail,
            then,
        } = end;
        let gate = Arc::clone(&self.gate);
        let history = Arc::clone(&self.history);
        let mut draft = self.draft();
        let run_id = self.run.id.clone();
        let step_id = step.id.clone();
        let g = Arc::clone(&gate);
        let r = self
            .write(move |tx| {
                let gate = g;
                let end_at = gate.now();
                let ended = writes::end_step(
                    tx,
                    &mut draft,
                    step,
                    end_at,
                    StepEnd {
                        status,
                        observation: observation.clone(),
                        from: &[StepStatus::Deciding],
                        run_guard: running(&gate),
                        extra: extra.change(),
                        count_active: true,
                        granted_by: None,
                    },
                )?;
                if ended.is_none() {
                    return Ok(None);
                }
                tx.append_event(
                    &run_id,
                    &step_id,
                    &decided_at,
                    EventType::StepDecided,
                    &decision_json,
                )?;
                if let Some((at, events)) = &policy_event {
                    writes::append_policy(tx, &run_id, &step_id, at, events)?;
                }
                if let Some(detail) = &failed_detail {
                    let failed = payload::step_failed(detail, observation.as_ref());
                    tx.append_event(&run_id, &step_id, &end_at, EventType::StepFailed, &failed)?;
                }
                match then {
                    Then::NextStep => writes::open_next_or_settle(&gate, tx, &mut draft, &history)?,
                    Then::End(settle) => writes::settle(&gate, tx, &mut draft, settle)?,
                }
                Ok(Some(draft))
            })
            .await;
        match self.closing(r)? {
            Some(draft) => {
                self.apply(draft);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// A decision that cannot be acted on: the step fails, the run goes on.
    pub(super) async fn record_invalid(
        &mut self,
        mut step: Step,
        recorded: RecordedDecision,
        spec_hash: String,
        decided_at: Timestamp,
        problem: String,
    ) -> Result<Verdict> {
        let observation = Observation::runtime(
            ObservationKind::InvalidDecision,
            &[("error", &problem)],
            format!("invalid decision: {problem}"),
        );
        let decision_json = to_json(&recorded);
        step.decision = Some(recorded);
        step.spec_hash = spec_hash.clone();
        let written = self
            .end_decided(DecidedEnd {
                step,
                status: StepStatus::Failed,
                observation: Some(observation.clone()),
                decided_at,
                decision_json: decision_json.clone(),
                extra: StepColumns {
                    decision_json: Some(decision_json),
                    spec_hash: Some(spec_hash),
                    ..StepColumns::default()
                },
                policy_event: None,
                failed_detail: Some(observation.summary.clone()),
                then: Then::NextStep,
            })
            .await?;
        if !written {
            return self.changed_under_us().await;
        }
        let mut verdict = Verdict::of(VerdictOutcome::Denied, &self.run);
        verdict.observation = Some(observation);
        Ok(verdict)
    }

    /// A `complete` or `fail` decision: the step is done and the run ends.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn record_end(
        &mut self,
        mut step: Step,
        recorded: RecordedDecision,
        decided_at: Timestamp,
        status: RunStatus,
        reason: TerminalReason,
        detail: String,
        result: Option<Canonical>,
    ) -> Result<Verdict> {
        let decision_json = to_json(&recorded);
        step.decision = Some(recorded);
        let written = self
            .end_decided(DecidedEnd {
                step,
                status: StepStatus::Done,
                observation: None,
                decided_at,
                decision_json: decision_json.clone(),
                extra: StepColumns {
                    decision_json: Some(decision_json),
                    ..StepColumns::default()
                },
                policy_event: None,
                failed_detail: None,
                then: Then::End(Settle {
                    status,
                    reason,
                    detail,
                    result,
                    from: RunStatus::Running,
                }),
            })
            .await?;
        if !written {
            return self.changed_under_us().await;
        }
        Ok(Verdict::of(VerdictOutcome::Ended, &self.run))
    }

    /// The policy failed: the step fails and the run ends `internal_error`
    /// (no `step.policy`: there was no evaluation).
    pub(super) async fn record_policy_error(
        &mut self,
        mut step: Step,
        recorded: RecordedDecision,
        spec_hash: String,
        decided_at: Timestamp,
        error: PolicyError,
    ) -> Result<Verdict> {
        let internal = format!("internal: policy: {error}");
        let observation = Observation::runtime(
            ObservationKind::InvalidDecision,
            &[("error", &internal)],
            internal.clone(),
        );
        let decision_json = to_json(&recorded);
        step.decision = Some(recorded);
        step.spec_hash = spec_hash.clone();
        let written = self
            .end_decided(DecidedEnd {
                step,
                status: StepStatus::Failed,
                observation: Some(observation.clone()),
                decided_at,
                decision_json: decision_json.clone(),
                extra: StepColumns {
                    decision_json: Some(decision_json),
                    spec_hash: Some(spec_hash),
                    ..StepColumns::default()
                },
                policy_event: None,
                failed_detail: Some(format!("policy error: {error}")),
                then: Then::End(Settle {
                    status: RunStatus::Failed,
                    reason: TerminalReason::InternalError,
                    detail: format!("policy: {error}"),
                    result: None,
                    from: RunStatus::Running,
                }),
            })
            .await?;
        if !written {
            return self.changed_under_us().await;
        }
        let mut verdict = Verdict::of(VerdictOutcome::Ended, &self.run);
        verdict.observation = Some(observation);
        Ok(verdict)
    }

    /// A denial (the run goes on) or an abort (the run ends).
    pub(super) async fn record_denied(
        &mut self,
        mut step: Step,
        allowed: Allowed,
    ) -> Result<Verdict> {
        let policy_id = self.gate.policy_id.clone();
        let policy_events = allowed.policy_events(&policy_id);
        let Grant::Fresh {
            decision,
            decided_at,
        } = allowed.grant
        else {
            return Err(misuse(
                &self.run,
                "a resumed request is denied through resume",
            ));
        };
        let abort = allowed.policy.outcome == Outcome::Abort;
        let reason = allowed.policy.reason.clone();
        let verb = if abort { "aborted" } else { "denied" };
        let observation = Observation::runtime(
            ObservationKind::PolicyDenied,
            &[("tool", &allowed.request.spec.name), ("reason", &reason)],
            format!("{verb}: {reason}"),
        );
        let decision_json = to_json(&decision);
        let policy_json = to_json(&allowed.policy);
        step.decision = Some(decision);
        step.policy = Some(allowed.policy.clone());
        step.spec_hash = allowed.spec_hash.clone();
        step.policy_id = policy_id.clone();
        let then = if abort {
            Then::End(Settle {
                status: RunStatus::Failed,
                reason: TerminalReason::PolicyAbort,
                detail: reason.clone(),
                result: None,
                from: RunStatus::Running,
            })
        } else {
            Then::NextStep
        };
        let written = self
            .end_decided(DecidedEnd {
                step,
                status: StepStatus::Failed,
                observation: Some(observation.clone()),
                decided_at,
                decision_json: decision_json.clone(),
                extra: StepColumns {
                    decision_json: Some(decision_json),
                    policy_json: Some(policy_json),
                    spec_hash: Some(allowed.spec_hash.clone()),
                    policy_id: Some(policy_id),
                },
                policy_event: Some((allowed.policy_at, policy_events)),
                failed_detail: Some(observation.summary.clone()),
                then,
            })
            .await?;
        if !written {
            return self.changed_under_us().await;
        }
        let outcome = if abort {
            VerdictOutcome::Ended
        } else {
            VerdictOutcome::Denied
        };
        let mut verdict = Verdict::of(outcome, &self.run);
        verdict.request = Some(allowed.request);
        verdict.observation = Some(observation);
        Ok(verdict)
    }

    /// Builds the approval a `require_approval` decision asks for.
    pub(crate) fn new_approval(
        &self,
        step_id: &str,
        allowed: &Allowed,
        created_at: Timestamp,
    ) -> Result<Approval> {
        build_approval(&self.gate, &self.run, step_id, allowed, created_at)
    }

    /// Pauses the run for an operator: the approval, the step awaiting it,
    /// the run WAITING (lease cleared), `step.policy`, `approval.requested`.
    pub(super) async fn pause(&mut self, mut step: Step, allowed: Allowed) -> Result<Verdict> {
        let Grant::Fresh {
            decision,
            decided_at,
        } = allowed.grant.clone()
        else {
            return Err(misuse(&self.run, "a resumed request pauses through resume"));
        };
        let gate = Arc::clone(&self.gate);
        let created_at = gate.now();
        let approval = self.new_approval(&step.id, &allowed, created_at)?;
        let decision_json = to_json(&decision);
        let policy_json = to_json(&allowed.policy);
        let policy_events = allowed.policy_events(&gate.policy_id);
        let requested = payload::approval_requested(&approval, &allowed.policy.reason);
        step.decision = Some(decision);
        step.policy = Some(allowed.policy.clone());
        step.spec_hash = allowed.spec_hash.clone();
        step.policy_id = gate.policy_id.clone();
        step.status = StepStatus::AwaitingApproval;
        let mut draft = self.draft();
        let run_id = self.run.id.clone();
        let step_id = step.id.clone();
        let g = Arc::clone(&gate);
        let inserted = approval.clone();
        let (spec_hash, policy_at) = (allowed.spec_hash.clone(), allowed.policy_at);
        let r = self
            .write(move |tx| {
                let gate = g;
                let approval = inserted;
                let guard = StepGuard {
                    statuses: &[StepStatus::Deciding],
                    run: Some((&run_id, running(&gate))),
                    granted_by: None,
                };
                let change = StepChange {
                    status: Some(StepStatus::AwaitingApproval),
                    decision_json: Some(&decision_json),
                    policy_json: Some(&policy_json),
                    spec_hash: Some(&spec_hash),
                    policy_id: Some(&gate.policy_id),
                    ..StepChange::default()
                };
                if !tx.update_step(&step_id, &guard, &change)? {
                    return Ok(false);
                }
                tx.insert_approval(&approval)?;
                let paused = tx.update_run(
                    &run_id,
                    &running(&gate),
                    &RunChange {
                        status: Some(RunStatus::WaitingForApproval),
                        lease: LeaseChange::Clear,
                        ..RunChange::default()
                    },
                )?;
                if !paused {
                    return Err(writes::state_error(&gate, tx, &run_id, "pause the run"));
                }
                tx.append_event(
                    &run_id,
                    &step_id,
                    &decided_at,
                    EventType::StepDecided,
                    &decision_json,
                )?;
                writes::append_policy(tx, &run_id, &step_id, &policy_at, &policy_events)?;
                tx.append_event(
                    &run_id,
                    &step_id,
                    &created_at,
                    EventType::ApprovalRequested,
                    &requested,
                )?;
                Ok(true)
            })
            .await;
        if !self.closing(r)? {
            return self.changed_under_us().await;
        }
        draft.run.status = RunStatus::WaitingForApproval;
        draft.current = Some(step);
        draft.approvals.push(approval.clone());
        draft.over = true;
        self.apply(draft);
        let mut verdict = Verdict::of(VerdictOutcome::Pending, &self.run);
        verdict.request = Some(allowed.request);
        verdict.approval = Some(approval);
        Ok(verdict)
    }
}

/// What follows a decided step's end in its write group.
enum Then {
    /// The next step (unless a limit ends the run).
    NextStep,
    /// The run's end.
    End(Settle),
}

/// A decided step that ends in the write group that records its decision.
struct DecidedEnd {
    /// The step, its decision (and policy) already set.
    step: Step,
    status: StepStatus,
    observation: Option<Observation>,
    decided_at: Timestamp,
    decision_json: String,
    /// The step columns written with the end.
    extra: StepColumns,
    /// `step.policy` at its time, for a policy's verdict.
    policy_event: Option<(Timestamp, writes::PolicyEvents)>,
    /// `step.failed` with this detail, for a failed step.
    failed_detail: Option<String>,
    then: Then,
}

/// Builds the approval a `require_approval` decision asks for.
pub(crate) fn build_approval(
    gate: &GateInner,
    run: &Run,
    step_id: &str,
    allowed: &Allowed,
    created_at: Timestamp,
) -> Result<Approval> {
    let request = approval_request(&allowed.request, allowed.policy.approvers)?;
    let capability = allowed
        .policy
        .capability
        .clone()
        .unwrap_or_else(Canonical::empty_object);
    let presentation = allowed
        .policy
        .presentation
        .clone()
        .unwrap_or_else(Canonical::empty_object);
    let hash = approval_hash(&allowed.policy.kind, &capability, &presentation, &request);
    let ttl = run.limits.approval_ttl_ms;
    Ok(Approval {
        id: gate.new_id(),
        run_id: run.id.clone(),
        step_id: step_id.to_owned(),
        kind: allowed.policy.kind.clone(),
        capability,
        presentation,
        request,
        hash,
        status: ApprovalStatus::Pending,
        created_at,
        expires_at: (ttl > 0).then(|| created_at.add(std::time::Duration::from_millis(ttl))),
        decided_at: None,
        decided_by: String::new(),
        note: String::new(),
        decode_error: None,
    })
}
