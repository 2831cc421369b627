//! Lazy expiry of approvals and grants, on the next touch, by the
//! toucher's clock. Shared by resume and the operator's decisions.

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::model::{
    Approval, ApprovalStatus, EventType, Observation, ObservationKind, RunStatus, StepStatus,
    TerminalReason,
};
use crate::payload;
use crate::run_end::{self, RunEnd};
use crate::store::{ApprovalChange, WriteTx};

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
            // A first approver of a request that needed two decided
            // nothing: the expiry is no one's.
            decided_by: pending.then_some(""),
            note: pending.then_some("expired"),
            by_was: None,
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
    run_end::fail_step(
        tx,
        &approval.step_id,
        &[StepStatus::AwaitingApproval],
        &observation,
        at,
    )?;
    let run = tx.run(&approval.run_id)?.ok_or_else(|| Error::NotFound {
        what: "run",
        id: approval.run_id.clone(),
    })?;
    let end = RunEnd {
        run: &run,
        from: &[RunStatus::WaitingForApproval],
        reason: TerminalReason::ApprovalExpired,
        detail: &detail,
        by: None,
        at,
        changed: "cannot expire an approval of a run that is not waiting",
    };
    run_end::cancel_row(tx, &end)?;
    tx.append_event(
        &approval.run_id,
        &approval.step_id,
        &at,
        EventType::ApprovalDecided,
        &payload::approval_expired(&approval.id),
    )?;
    run_end::finished_event(tx, &end)
}
