//! A call that started and whose outcome is unknown (the spec's timeout, a
//! panic, [`ToolError::Unknown`](crate::ToolError::Unknown)) of a tool that
//! is not read-only. The runtime does not retry it and the agent gets no
//! next step to ask for it again: the outcome is recorded
//! (`step.tool_finished`, the step marked interrupted from `executing`)
//! and the step follows the interruption contract. Without a
//! reconciliation hook it pauses on an `interrupted_side_effect` approval
//! in the same write group; with one, the hook is asked after that write
//! and its answer written in a second one, as a takeover does.

use std::sync::Arc;

use super::CrashPoint;
use super::interruption::{Followup, side_effect_pause, write_next};
use super::session::{Session, State};
use super::writes::{self, StepEnd, running};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::json::Canonical;
use crate::model::{EventType, Observation, Step, StepStatus, ToolRequest};
use crate::payload;
use crate::reconcile::ReconcileInput;
use crate::store::StepChange;

/// The executing step whose call ended with an unknown outcome.
pub(super) struct UnknownOutcome {
    /// The step, as it stood while executing.
    pub step: Step,
    /// The request that ran.
    pub request: ToolRequest,
    /// The spec it ran under (hash and canonical JSON).
    pub spec_hash: String,
    pub spec_json: Canonical,
    /// When the tool started (its `step.tool_started`).
    pub tool_started_at: Timestamp,
    /// The `interrupted` observation that says why the outcome is unknown.
    pub observation: Observation,
    /// The reason the operator is given.
    pub reason: String,
}

impl Session {
    /// Records an unknown outcome and hands the step to the interruption
    /// contract. Returns the observation; the session is over unless the
    /// reconciliation hook let the run continue.
    pub(super) async fn unknown_outcome(&mut self, unknown: UnknownOutcome) -> Result<Observation> {
        let UnknownOutcome {
            step,
            request,
            spec_hash,
            spec_json,
            tool_started_at,
            observation,
            reason,
        } = unknown;
        let gate = Arc::clone(&self.gate);
        let tool = request.spec.name.clone();
        let hook = gate.reconcile.clone();
        // Without a hook the pause is written with the outcome.
        let pause = hook
            .is_none()
            .then(|| side_effect_pause(&self.run, request, spec_hash, spec_json, reason));
        let mut history: Vec<Arc<Step>> = (*self.history).clone();
        let mut draft = self.draft();
        let g = Arc::clone(&gate);
        let run = self.run.clone();
        let (marking, observed, name) = (step.clone(), observation.clone(), tool.clone());
        let r = self
            .write(move |tx| {
                let gate = g;
                let end_at = gate.now();
                let marked = writes::end_step(
                    tx,
                    &mut draft,
                    marking,
                    end_at,
                    StepEnd {
                        status: StepStatus::Interrupted,
                        observation: Some(observed.clone()),
                        from: &[StepStatus::Executing],
                        run_guard: running(&gate),
                        extra: StepChange::default(),
                        count_active: true,
                        granted_by: None,
                    },
                )?;
                let Some(marked) = marked else {
                    return Ok(Err(end_at));
                };
                let duration = end_at.millis_since(&tool_started_at);
                tx.append_event(
                    &marked.run_id,
                    &marked.id,
                    &end_at,
                    EventType::StepToolFinished,
                    &payload::tool_finished(&name, duration, &observed, false),
                )?;
                // The marked step joins the history the contract's write
                // works on (a pause takes it back out as the open step).
                history.append(&mut draft.finished);
                let mut out = Followup::default();
                if let Some(next) = &pause {
                    write_next(
                        &gate,
                        &run,
                        tx,
                        &mut draft,
                        &mut history,
                        Some(&marked.id),
                        next,
                        &mut out,
                    )?;
                }
                Ok(Ok((draft, history, out, marked)))
            })
            .await;
        let (mut draft, mut history, mut out, marked) = match self.closing(r)? {
            Ok(written) => written,
            Err(end_at) => {
                return self
                    .record_late(&tool, &step, tool_started_at, Some(end_at), observation)
                    .await;
            }
        };
        self.gate.crash_point(CrashPoint::ToolFinished).await;

        if let Some(hook) = hook {
            // The outcome is committed: a session that dies in the hook
            // leaves the step marked, and the next takeover asks again.
            let input = ReconcileInput {
                run: draft.run.clone(),
                interrupted: vec![(*marked).clone()],
                approvals: (*self.approvals).clone(),
            };
            let answer = hook.reconcile(&input).await;
            let next = self.map_reconciled(answer, Some(&marked));
            let g = Arc::clone(&gate);
            let run = self.run.clone();
            let step_id = marked.id.clone();
            let r = self
                .write(move |tx| {
                    let mut out = Followup::default();
                    write_next(
                        &g,
                        &run,
                        tx,
                        &mut draft,
                        &mut history,
                        Some(&step_id),
                        &next,
                        &mut out,
                    )?;
                    Ok((draft, history, out))
                })
                .await;
            (draft, history, out) = self.closing(r)?;
        }

        self.history = Arc::new(history);
        if let Some(paused) = out.paused_step {
            draft.current = Some(paused);
        }
        if let Some(approval) = out.approval {
            draft.approvals.push(approval);
        }
        self.apply(draft);
        if self.cancel.is_cancelled() {
            self.state = State::Closed(Some("cancelled by the caller".into()));
            return Err(Error::Cancelled);
        }
        Ok(observation)
    }
}
