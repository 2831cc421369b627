//! Write-group building blocks shared by the loop, the gate and resume.
//! Each works on a [`Draft`] of the session's cached state, applied only
//! after the transaction commits.

use std::sync::Arc;

use super::GateInner;
use super::limits::{self, Stop};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::json::Canonical;
use crate::model::{
    Approval, ApprovalStatus, EventType, Observation, Run, RunStatus, Step, StepStatus,
    TerminalReason,
};
use crate::payload;
use crate::store::{LeaseChange, NewStep, RunChange, RunGuard, StepChange, StepGuard, WriteTx};

/// The session state a write group produces.
#[derive(Debug, Clone)]
pub(crate) struct Draft {
    pub run: Run,
    /// Steps that ended in this group, to append to the history.
    pub finished: Vec<Arc<Step>>,
    /// The open step after the group.
    pub current: Option<Step>,
    /// Approvals created or changed in this group (changed ones replace
    /// the cached copy with the same id).
    pub approvals: Vec<Approval>,
    /// The run paused or ended: the session is over.
    pub over: bool,
}

impl Draft {
    pub fn new(run: &Run, current: Option<Step>) -> Draft {
        Draft {
            run: run.clone(),
            finished: Vec::new(),
            current,
            approvals: Vec::new(),
            over: false,
        }
    }
}

/// The error for a compare-and-set on the run that did not apply.
pub(crate) fn state_error(gate: &GateInner, tx: &WriteTx<'_>, run_id: &str, doing: &str) -> Error {
    match tx.run(run_id) {
        Ok(Some(run)) => {
            if run.status == RunStatus::Running
                && let Ok(Some((owner, _))) = tx.lease(run_id)
                && owner != gate.owner
            {
                return Error::LeaseLost {
                    run: run_id.to_owned(),
                };
            }
            Error::RunState {
                run: run_id.to_owned(),
                status: run.status,
                detail: format!("cannot {doing}"),
            }
        }
        Ok(None) => Error::NotFound {
            what: "run",
            id: run_id.to_owned(),
        },
        Err(e) => e,
    }
}

/// Why a resumed tool start did not apply.
pub(crate) enum ResumedStart {
    /// The step moved to executing: the tool may run.
    Started,
    /// The run no longer waits (another resumer, an operator): nothing ran.
    Taken,
    /// The run still waits, but the grant is no longer the step's latest
    /// approved approval; the refusal was appended to the log.
    Superseded {
        /// The step's latest approval.
        latest: String,
    },
}

/// After a resumed tool start's guard failed: tells a taken run from a
/// superseded grant, and records the refusal of the latter
/// (`approval.superseded`, in the same write group).
pub(crate) fn refuse_stale_grant(
    tx: &mut WriteTx<'_>,
    gate: &GateInner,
    run_id: &str,
    step_id: &str,
    grant: &str,
    at: &Timestamp,
) -> Result<ResumedStart> {
    let waiting = tx
        .run(run_id)?
        .is_some_and(|r| r.status == RunStatus::WaitingForApproval);
    if !waiting {
        return Ok(ResumedStart::Taken);
    }
    let latest = tx
        .approvals(run_id)?
        .into_iter()
        .rev()
        .find(|a| a.step_id == step_id);
    let Some(latest) = latest else {
        return Ok(ResumedStart::Taken);
    };
    if latest.id == grant && latest.status == ApprovalStatus::Approved {
        // The grant still stands: the step itself moved on.
        return Ok(ResumedStart::Taken);
    }
    let payload = payload::approval_superseded(grant, &latest.id, &gate.owner);
    tx.append_event(run_id, step_id, at, EventType::ApprovalSuperseded, &payload)?;
    Ok(ResumedStart::Superseded { latest: latest.id })
}

/// The run guard of a loop write: RUNNING and leased to this gate.
pub(crate) fn running<'a>(gate: &'a GateInner) -> RunGuard<'a> {
    RunGuard {
        statuses: &[RunStatus::Running],
        lease_owner: Some(&gate.owner),
        ..RunGuard::default()
    }
}

/// How a run ends.
pub(crate) struct Settle {
    pub status: RunStatus,
    pub reason: TerminalReason,
    pub detail: String,
    pub result: Option<Canonical>,
    /// The status the run must be in now.
    pub from: RunStatus,
}

/// Ends the run: run row terminal (lease cleared), `limit.exceeded` for a
/// limit, then `run.finished`. Reads the clock once.
pub(crate) fn settle(
    gate: &GateInner,
    tx: &mut WriteTx<'_>,
    draft: &mut Draft,
    s: Settle,
) -> Result<()> {
    let at = gate.now();
    let run_id = draft.run.id.clone();
    let from = [s.from];
    let guard = RunGuard {
        statuses: &from,
        lease_owner: (s.from == RunStatus::Running).then_some(gate.owner.as_str()),
        ..RunGuard::default()
    };
    let change = RunChange {
        status: Some(s.status),
        reason: Some((s.reason, &s.detail)),
        finished_at: Some(at),
        result: s.result.as_ref(),
        lease: LeaseChange::Clear,
        ..RunChange::default()
    };
    if !tx.update_run(&run_id, &guard, &change)? {
        return Err(state_error(gate, tx, &run_id, "end the run"));
    }
    if s.reason.is_limit() {
        tx.append_event(
            &run_id,
            "",
            &at,
            EventType::LimitExceeded,
            &payload::limit_exceeded(s.reason, &s.detail),
        )?;
    }
    tx.append_event(
        &run_id,
        "",
        &at,
        EventType::RunFinished,
        &payload::run_finished(s.status, s.reason, &s.detail, draft.run.step_count, None),
    )?;
    draft.run.status = s.status;
    draft.run.reason = Some(s.reason);
    draft.run.reason_detail = s.detail;
    draft.run.finished_at = Some(at);
    draft.run.result = s.result;
    draft.over = true;
    Ok(())
}

/// Opens the next step, unless a limit ends the run first.
pub(crate) fn open_next_or_settle(
    gate: &GateInner,
    tx: &mut WriteTx<'_>,
    draft: &mut Draft,
    history: &[Arc<Step>],
) -> Result<()> {
    let steps = history.iter().chain(draft.finished.iter());
    match limits::check(&draft.run, steps, || gate.now()) {
        Some(Stop::Limit { reason, detail }) => settle(
            gate,
            tx,
            draft,
            Settle {
                status: RunStatus::Failed,
                reason,
                detail,
                result: None,
                from: RunStatus::Running,
            },
        ),
        Some(Stop::Loop {
            repeats,
            tool,
            args_hash,
            observation_hash,
        }) => {
            let at = gate.now();
            let run_id = draft.run.id.clone();
            tx.append_event(
                &run_id,
                "",
                &at,
                EventType::LoopDetected,
                &payload::loop_detected(repeats, &tool, &args_hash, &observation_hash),
            )?;
            settle(
                gate,
                tx,
                draft,
                Settle {
                    status: RunStatus::Failed,
                    reason: TerminalReason::LoopDetected,
                    detail: format!(
                        "{tool} was called {repeats} times in a row with the same arguments and outcome"
                    ),
                    result: None,
                    from: RunStatus::Running,
                },
            )
        }
        None => start_step(gate, tx, draft),
    }
}

/// Starts the next step: the run's step count by compare-and-set (the
/// lease renewed), the step row, `step.started`.
pub(crate) fn start_step(gate: &GateInner, tx: &mut WriteTx<'_>, draft: &mut Draft) -> Result<()> {
    let (step_id, at) = (gate.new_id(), gate.now());
    start_step_as(gate, tx, draft, step_id, at)
}

/// The step [`start_step_as`] opens, as the draft holds it after.
pub(crate) fn opened_step(draft: &mut Draft, step_id: String, at: Timestamp) {
    let index = draft.run.step_count;
    draft.run.step_count = index + 1;
    draft.current = Some(Step {
        id: step_id,
        run_id: draft.run.id.clone(),
        index,
        status: StepStatus::Deciding,
        decision: None,
        policy: None,
        observation: None,
        started_at: at,
        finished_at: None,
        spec_hash: String::new(),
        policy_id: String::new(),
        decode_error: None,
    });
}

/// [`start_step`] with the step's id and start time chosen by the caller.
pub(crate) fn start_step_as(
    gate: &GateInner,
    tx: &mut WriteTx<'_>,
    draft: &mut Draft,
    step_id: String,
    at: Timestamp,
) -> Result<()> {
    let index = draft.run.step_count;
    let run_id = draft.run.id.clone();
    let guard = RunGuard {
        step_count: Some(index),
        ..running(gate)
    };
    let change = RunChange {
        step_count_add: 1,
        lease: LeaseChange::Set {
            owner: &gate.owner,
            expires_at: gate.lease_expiry_in(tx)?,
        },
        ..RunChange::default()
    };
    if !tx.update_run(&run_id, &guard, &change)? {
        return Err(state_error(gate, tx, &run_id, "start a step"));
    }
    tx.insert_step(&NewStep {
        id: &step_id,
        run_id: &run_id,
        index,
        status: StepStatus::Deciding,
        started_at: at,
    })?;
    tx.append_event(
        &run_id,
        &step_id,
        &at,
        EventType::StepStarted,
        &payload::step_started(index),
    )?;
    opened_step(draft, step_id, at);
    Ok(())
}

/// How a step ends.
/// Step columns a write group sets beside a step's end or pause, owned so
/// the group can be handed to the writer thread.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepColumns {
    pub decision_json: Option<String>,
    pub policy_json: Option<String>,
    pub spec_hash: Option<String>,
    pub policy_id: Option<String>,
}

impl StepColumns {
    /// The columns as a store change.
    pub fn change(&self) -> StepChange<'_> {
        StepChange {
            decision_json: self.decision_json.as_deref(),
            policy_json: self.policy_json.as_deref(),
            spec_hash: self.spec_hash.as_deref(),
            policy_id: self.policy_id.as_deref(),
            ..StepChange::default()
        }
    }
}

pub(crate) struct StepEnd<'a> {
    pub status: StepStatus,
    pub observation: Option<Observation>,
    /// The statuses the step may be in now.
    pub from: &'a [StepStatus],
    /// The run's guard (checked in the same statement).
    pub run_guard: RunGuard<'a>,
    /// Other columns written with the end (decision, policy…).
    pub extra: StepChange<'a>,
    /// Add the step's duration to the run's active time.
    pub count_active: bool,
    /// The approval the step's end acts on, which must still be its latest
    /// and approved (see [`StepGuard::granted_by`]).
    pub granted_by: Option<&'a str>,
}

/// Ends the current step at `at`; `Ok(None)` if the step or run no longer
/// meets the guard (nothing written). Returns the ended step.
pub(crate) fn end_step(
    tx: &mut WriteTx<'_>,
    draft: &mut Draft,
    step: Step,
    at: Timestamp,
    end: StepEnd<'_>,
) -> Result<Option<Arc<Step>>> {
    let observation_json = end
        .observation
        .as_ref()
        .map(|o| serde_json::to_string(o).unwrap_or_default());
    let observation_hash = end
        .observation
        .as_ref()
        .map(|o| o.content_hash.clone())
        .unwrap_or_default();
    let change = StepChange {
        status: Some(end.status),
        observation: observation_json
            .as_deref()
            .map(|j| (j, observation_hash.as_str())),
        finished_at: Some(Some(at)),
        ..end.extra.clone()
    };
    let guard = StepGuard {
        statuses: end.from,
        run: Some((&step.run_id, end.run_guard.clone())),
        granted_by: end.granted_by,
    };
    if !tx.update_step(&step.id, &guard, &change)? {
        return Ok(None);
    }
    let duration = at.millis_since(&step.started_at);
    if end.count_active && duration > 0 {
        tx.update_run(
            &step.run_id,
            &RunGuard::default(),
            &RunChange {
                active_ms_add: duration,
                ..RunChange::default()
            },
        )?;
        draft.run.active_ms = draft.run.active_ms.saturating_add(duration);
    }
    let ended = Arc::new(Step {
        status: end.status,
        observation: end.observation,
        finished_at: Some(at),
        ..step
    });
    draft.finished.push(Arc::clone(&ended));
    Ok(Some(ended))
}

/// A decision's events: `step.policy`, and `policy.shadow` when the
/// shadow policy disagreed (design §42).
#[derive(Debug, Clone)]
pub(crate) struct PolicyEvents {
    pub policy: String,
    pub shadow: Option<String>,
}

/// The decision's events, side by side in its write group.
pub(crate) fn append_policy(
    tx: &mut WriteTx<'_>,
    run_id: &str,
    step_id: &str,
    at: &Timestamp,
    events: &PolicyEvents,
) -> Result<()> {
    tx.append_event(run_id, step_id, at, EventType::StepPolicy, &events.policy)?;
    if let Some(shadow) = &events.shadow {
        tx.append_event(run_id, step_id, at, EventType::PolicyShadow, shadow)?;
    }
    Ok(())
}
