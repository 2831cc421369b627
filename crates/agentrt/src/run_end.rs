//! Ending a run from outside its loop: the step (or steps) it was in
//! failed with an observation that says why, the run cancelled under a
//! guard on the status it was read in, and its `run.finished` event.
//! Shared by an operator's rejection and cancellation and by an
//! approval's expiry, which differ in the steps they fail, the statuses
//! they end from and the reason they record.

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::model::{EventType, Observation, Run, RunStatus, StepStatus, TerminalReason};
use crate::payload;
use crate::store::{LeaseChange, RunChange, RunGuard, StepChange, StepGuard, WriteTx};

/// How a run ends: cancelled, for `reason` with `detail`.
pub(crate) struct RunEnd<'a> {
    /// The run as read in this transaction.
    pub run: &'a Run,
    /// The statuses it may end from.
    pub from: &'a [RunStatus],
    /// Why it ends.
    pub reason: TerminalReason,
    /// The reason's text (an operator's note, what expired).
    pub detail: &'a str,
    /// Who ended it, if a person did.
    pub by: Option<&'a str>,
    /// When.
    pub at: Timestamp,
    /// What to say when the run is no longer in a status of `from`.
    pub changed: &'a str,
}

/// Fails step `step_id` with `observation` if it is in one of `statuses`;
/// whether it was.
pub(crate) fn fail_step(
    tx: &mut WriteTx<'_>,
    step_id: &str,
    statuses: &[StepStatus],
    observation: &Observation,
    at: Timestamp,
) -> Result<bool> {
    let observation_json = serde_json::to_string(observation).unwrap_or_default();
    tx.update_step(
        step_id,
        &StepGuard {
            statuses,
            run: None,
            granted_by: None,
        },
        &StepChange {
            status: Some(StepStatus::Failed),
            observation: Some((&observation_json, &observation.content_hash)),
            finished_at: Some(Some(at)),
            ..StepChange::default()
        },
    )
}

/// Cancels the run's row as `end` says; [`Error::RunState`] (nothing
/// written) when it is no longer in a status `end` ends from.
pub(crate) fn cancel_row(tx: &mut WriteTx<'_>, end: &RunEnd<'_>) -> Result<()> {
    let cancelled = tx.update_run(
        &end.run.id,
        &RunGuard {
            statuses: end.from,
            ..RunGuard::default()
        },
        &RunChange {
            status: Some(RunStatus::Cancelled),
            reason: Some((end.reason, end.detail)),
            finished_at: Some(end.at),
            lease: LeaseChange::Clear,
            ..RunChange::default()
        },
    )?;
    if cancelled {
        Ok(())
    } else {
        Err(Error::RunState {
            run: end.run.id.clone(),
            status: end.run.status,
            detail: end.changed.to_owned(),
        })
    }
}

/// The ended run's `run.finished` event.
pub(crate) fn finished_event(tx: &mut WriteTx<'_>, end: &RunEnd<'_>) -> Result<()> {
    tx.append_event(
        &end.run.id,
        "",
        &end.at,
        EventType::RunFinished,
        &payload::run_finished(
            RunStatus::Cancelled,
            end.reason,
            end.detail,
            end.run.step_count,
            end.by,
        ),
    )?;
    Ok(())
}

/// The run as `end` leaves it.
pub(crate) fn ended(end: &RunEnd<'_>) -> Run {
    Run {
        status: RunStatus::Cancelled,
        reason: Some(end.reason),
        reason_detail: end.detail.to_owned(),
        finished_at: Some(end.at),
        ..end.run.clone()
    }
}
