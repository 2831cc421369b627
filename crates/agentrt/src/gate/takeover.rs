//! The interruption contract: a RUNNING run whose owner is gone is taken
//! over. Steps left deciding or executing are marked interrupted; a step
//! that was executing a tool that is not read-only pauses as an
//! `interrupted_side_effect` approval (the first attempt may have taken
//! effect); read-only and deciding steps just continue. The runtime never
//! runs an interrupted step again by itself.

use std::sync::Arc;

use super::interruption::{Followup, Next, side_effect_pause, write_next};
use super::session::{Session, State, Verdict, VerdictOutcome, to_json};
use super::writes::Draft;
use super::{CrashPoint, GateInner};
use crate::error::{Error, Result};
use crate::model::{
    EventType, Observation, ObservationKind, RunStatus, SideEffect, Step, StepStatus,
};
use crate::store::{LeaseChange, RunChange, RunGuard, StepChange, StepGuard, WriteTx};

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
                expires_at: gate.lease_expiry_in(tx)?,
            },
            ..RunChange::default()
        },
    )
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
        tx.append_event(
            run_id,
            "",
            &at,
            EventType::LeaseTakenOver,
            &crate::payload::lease_taken_over(&gate.owner, previous_owner, previous_expires),
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
        let out: Followup;
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
                        let mut out = Followup::default();
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
                        let mut out = Followup::default();
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
            .off_executor(move |store| Ok((store.get_run(&id)?, store.lease_and_clock(&id))))
            .await;
        let (run, lease) = match read {
            Ok(read) => read,
            Err(e) => return e,
        };
        if run.status == RunStatus::Running
            && let Ok((owner, expires_at, engine_now)) = lease
            && self.gate.lease_held(&owner, &expires_at, engine_now)
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
        let reason = format!(
            "the run was interrupted while {} was executing; its outcome is unknown",
            request.spec.name
        );
        side_effect_pause(&self.run, request, spec_hash, spec_json, reason)
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
