//! Lazy expiry of approvals and grants, on the next touch, by the
//! toucher's clock. Shared by resume and the operator's decisions.

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::gate::payload;
use crate::model::{
    Approval, ApprovalStatus, EventType, Observation, ObservationKind, RunStatus, StepStatus,
    TerminalReason,
};
use crate::store::{
    ApprovalChange, LeaseChange, RunChange, RunGuard, StepChange, StepGuard, WriteTx,
};

/// Expires `approval` (pending: decided now with note `expired`; a grant:
/// keeps its decider and time), fails the step waiting on it, and cancels
/// the WAITING run with `approval_expired`. Returns the run's step count.
pub(crate) fn write_expiry(tx: &mut WriteTx<'_>, approval: &Approval, at: Timestamp) -> Result<()> {
    let pending = approval.status == ApprovalStatus::Pending;
    let changed = tx.update_approval(
        &approval.id,
        &ApprovalChange {
            status: ApprovalStatus::Expired,
            from: approval.status,
            hash: &approval.hash,
            decided_at: pending.then_some(at),
            decided_by: None,
            note: pending.then_some("expired"),
        },
    )?;
    if !changed {
        return Err(Error::NotPending {
            approval: approval.id.clone(),
            status: approval.status,
        });
    }
    let detail = format!("approval {} expired", approval.id);
    let observation = Observation::runtime(
        ObservationKind::PolicyDenied,
        &[
            ("approval_id", &approval.id),
            ("reason", "approval expired"),
        ],
        detail.clone(),
    );
    let observation_json = serde_json::to_string(&observation).unwrap_or_default();
    tx.update_step(
        &approval.step_id,
        &StepGuard {
            statuses: &[StepStatus::AwaitingApproval],
            run: None,
            granted_by: None,
        },
        &StepChange {
            status: Some(StepStatus::Failed),
            observation: Some((&observation_json, &observation.content_hash)),
            finished_at: Some(Some(at)),
            ..StepChange::default()
        },
    )?;
    let cancelled = tx.update_run(
        &approval.run_id,
        &RunGuard {
            statuses: &[RunStatus::WaitingForApproval],
            ..RunGuard::default()
        },
        &RunChange {
            status: Some(RunStatus::Cancelled),
            reason: Some((TerminalReason::ApprovalExpired, &detail)),
            finished_at: Some(at),
            lease: LeaseChange::Clear,
            ..RunChange::default()
        },
    )?;
    let run = tx.run(&approval.run_id)?.ok_or_else(|| Error::NotFound {
        what: "run",
        id: approval.run_id.clone(),
    })?;
    if !cancelled {
        return Err(Error::RunState {
            run: run.id.clone(),
            status: run.status,
            detail: "cannot expire an approval of a run that is not waiting".into(),
        });
    }
    tx.append_event(
        &approval.run_id,
        &approval.step_id,
        &at,
        EventType::ApprovalDecided,
        &payload::approval_expired(&approval.id),
    )?;
    tx.append_event(
        &approval.run_id,
        "",
        &at,
        EventType::RunFinished,
        &payload::run_finished(
            RunStatus::Cancelled,
            TerminalReason::ApprovalExpired,
            &detail,
            run.step_count,
            None,
        ),
    )?;
    Ok(())
}
