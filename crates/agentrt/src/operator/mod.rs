//! What an operator does to runs from outside the loop: approve or reject
//! a pending approval, cancel a run. Each is one transaction; the checks
//! run inside it.

use std::sync::Arc;

mod edit;
mod wait;

pub use wait::Awaited;

use crate::agent::Observer;
use crate::approval::{approvers_needed, first_approver};
use crate::clock::{Clock, Timestamp, system_clock};
use crate::error::{Error, Result};
use crate::expiry::write_expiry;
use crate::gate::SatelliteRows;
use crate::gate::resume_check_hash as check_hash;
use crate::ids::{IdSource, ordered_ids};
use crate::model::{
    Approval, ApprovalStatus, EventType, Observation, ObservationKind, Run, RunStatus, StepStatus,
    TerminalReason,
};
use crate::payload;
use crate::policy::Policy;
use crate::run_end::{self, RunEnd};
use crate::store::{ApprovalChange, Store, WriteTx};

/// Decides approvals and cancels runs with a chosen clock.
///
/// The free functions [`approve`], [`reject`] and [`cancel`] use the wall
/// clock and no observer.
#[derive(Clone)]
pub struct Operator {
    store: Store,
    observer: Option<Arc<dyn Observer>>,
    clock: Clock,
    policy: Option<Arc<dyn Policy>>,
    ids: IdSource,
}

/// What the operator decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Approve,
    Reject,
}

/// A decision, and the hash of the approval it applies to when that was
/// shown to the operator first.
#[derive(Debug, Clone, Default)]
pub struct DecideOptions<'a> {
    /// Who decides (an unverified label).
    pub by: &'a str,
    /// A note for the record.
    pub note: &'a str,
    /// The hash that was shown: the decision applies only if the stored
    /// approval still has it. `Some("")` is refused.
    pub shown_hash: Option<&'a str>,
}

enum Decided {
    Done(Box<Approval>),
    Expired(String),
}

impl Operator {
    /// An operator on `store` with the system clock.
    pub fn new(store: Store) -> Operator {
        Operator {
            store,
            observer: None,
            clock: system_clock(),
            policy: None,
            ids: ordered_ids(),
        }
    }

    /// Sets the clock.
    pub fn with_clock(mut self, clock: Clock) -> Operator {
        self.clock = clock;
        self
    }

    /// Sets the source of the ids of the approvals an edit writes.
    pub fn with_ids(mut self, ids: IdSource) -> Operator {
        self.ids = ids;
        self
    }

    /// Asks `policy` about an edited request before the edit is recorded
    /// (see [`Operator::approve_edited`]): an edit it denies is refused at
    /// once, and the approval it asks for is the one the edit binds. Give
    /// it the policy the run's program resumes with.
    pub fn with_policy(mut self, policy: impl Policy + 'static) -> Operator {
        self.policy = Some(Arc::new(policy));
        self
    }

    /// Sets the observer.
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Operator {
        self.observer = Some(observer);
        self
    }

    fn write<T>(&self, f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>) -> Result<T> {
        let (value, events) = self.store.write(f)?;
        self.deliver(&events);
        Ok(value)
    }

    fn deliver(&self, events: &[crate::model::Event]) {
        if let Some(observer) = &self.observer {
            for event in events {
                observer.observe(event);
            }
        }
    }

    /// Approves a pending approval. The run stays waiting until its
    /// consumer resumes it.
    pub fn approve(
        &self,
        run_id: &str,
        approval_id: &str,
        options: &DecideOptions<'_>,
    ) -> Result<Approval> {
        self.decide(run_id, approval_id, options, Verb::Approve, None)
    }

    /// Rejects a pending approval: the step fails and the run is cancelled
    /// (`approval_rejected`).
    pub fn reject(
        &self,
        run_id: &str,
        approval_id: &str,
        options: &DecideOptions<'_>,
    ) -> Result<Approval> {
        self.decide(run_id, approval_id, options, Verb::Reject, None)
    }

    /// [`Operator::approve`], with a satellite's rows written in the same
    /// transaction (explained by the decision's event). The rows are
    /// written first: their refusal comes before the operator's own checks
    /// (a channel refuses a request it has seen before in the very
    /// transaction that would act on it), and anything that refuses rolls
    /// the whole transaction back, rows and all. An expiry that commits
    /// commits the rows with it.
    ///
    /// ```
    /// # use agentrt::{Operator, DecideOptions, Store};
    /// # let store = Store::open(":memory:")?;
    /// let operator = Operator::new(store);
    /// let options = DecideOptions { by: "alice", ..DecideOptions::default() };
    /// let refused = operator.approve_with_rows("no-run", "a1", &options, Box::new(|_tx| Ok(())));
    /// assert!(matches!(refused, Err(agentrt::Error::NotFound { .. })));
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn approve_with_rows(
        &self,
        run_id: &str,
        approval_id: &str,
        options: &DecideOptions<'_>,
        rows: SatelliteRows,
    ) -> Result<Approval> {
        self.decide(run_id, approval_id, options, Verb::Approve, Some(rows))
    }

    /// [`Operator::reject`] with a satellite's rows, as
    /// [`Operator::approve_with_rows`].
    pub fn reject_with_rows(
        &self,
        run_id: &str,
        approval_id: &str,
        options: &DecideOptions<'_>,
        rows: SatelliteRows,
    ) -> Result<Approval> {
        self.decide(run_id, approval_id, options, Verb::Reject, Some(rows))
    }

    fn decide(
        &self,
        run_id: &str,
        approval_id: &str,
        options: &DecideOptions<'_>,
        verb: Verb,
        rows: Option<SatelliteRows>,
    ) -> Result<Approval> {
        let decided = self.write(|tx| {
            write_rows(tx, rows)?;
            let now = (self.clock)();
            let (run, approval) = match decidable(tx, run_id, approval_id, options, now)? {
                Decidable::Ready { run, approval } => (run, approval),
                Decidable::Expired(id) => return Ok(Decided::Expired(id)),
            };
            let status = match verb {
                Verb::Approve => ApprovalStatus::Approved,
                Verb::Reject => ApprovalStatus::Rejected,
            };
            // A request that needs two approvers (design §46): the first
            // approval is recorded and leaves it pending; the second must
            // be another person's.
            let needed = approvers_needed(&approval);
            let first = first_approver(&approval).map(str::to_owned);
            if verb == Verb::Approve && needed > 1 {
                match first.as_deref() {
                    None => {
                        endorse(tx, &approval, options, now, needed)?;
                        return Ok(Decided::Done(Box::new(Approval {
                            decided_at: Some(now),
                            decided_by: options.by.to_owned(),
                            note: options.note.to_owned(),
                            ..*approval
                        })));
                    }
                    Some(by) if by == options.by => {
                        return Err(Error::SameApprover {
                            approval: approval.id.clone(),
                            by: by.to_owned(),
                        });
                    }
                    Some(_) => {}
                }
            }
            set_decided(tx, &approval, status, options, now, first.as_deref())?;
            tx.append_event(
                run_id,
                &approval.step_id,
                &now,
                EventType::ApprovalDecided,
                &payload::approval_decided_after(
                    &approval.id,
                    status.as_str(),
                    options.by,
                    options.note,
                    first.as_deref(),
                ),
            )?;
            if verb == Verb::Reject {
                reject_run(tx, &run, &approval, options.note, now)?;
            }
            Ok(Decided::Done(Box::new(Approval {
                status,
                decided_at: Some(now),
                decided_by: options.by.to_owned(),
                note: options.note.to_owned(),
                ..*approval
            })))
        })?;
        match decided {
            Decided::Done(approval) => Ok(*approval),
            Decided::Expired(id) => Err(Error::ApprovalExpired { approval: id }),
        }
    }

    /// Cancels a run that has not finished: in-flight steps fail with the
    /// cancel observation, the run is CANCELLED (`operator_cancelled`).
    /// A live loop stops at its next write. Needs no lease.
    pub fn cancel(&self, run_id: &str, by: &str, note: &str) -> Result<Run> {
        self.cancel_run(run_id, by, note, None)
    }

    /// [`Operator::cancel`] with a satellite's rows, as
    /// [`Operator::approve_with_rows`].
    pub fn cancel_with_rows(
        &self,
        run_id: &str,
        by: &str,
        note: &str,
        rows: SatelliteRows,
    ) -> Result<Run> {
        self.cancel_run(run_id, by, note, Some(rows))
    }

    fn cancel_run(
        &self,
        run_id: &str,
        by: &str,
        note: &str,
        rows: Option<SatelliteRows>,
    ) -> Result<Run> {
        self.write(|tx| {
            write_rows(tx, rows)?;
            let run = tx.run(run_id)?.ok_or_else(|| Error::NotFound {
                what: "run",
                id: run_id.to_owned(),
            })?;
            if run.status.is_terminal() {
                return Err(Error::RunState {
                    run: run.id,
                    status: run.status,
                    detail: format!("already {}", run.status),
                });
            }
            let now = (self.clock)();
            let summary = format!("cancelled by operator: {note}");
            let observation = Observation::runtime(
                ObservationKind::Interrupted,
                &[("by", by), ("note", note)],
                summary,
            );
            let in_flight = [
                StepStatus::Deciding,
                StepStatus::AwaitingApproval,
                StepStatus::Executing,
            ];
            for step in tx
                .steps(run_id)?
                .into_iter()
                .filter(|s| in_flight.contains(&s.status))
            {
                run_end::fail_step(tx, &step.id, &in_flight, &observation, now)?;
            }
            let end = RunEnd {
                run: &run,
                from: &[RunStatus::Running, RunStatus::WaitingForApproval],
                reason: TerminalReason::OperatorCancelled,
                detail: note,
                by: Some(by),
                at: now,
                changed: "the run changed while it was being cancelled",
            };
            run_end::cancel_row(tx, &end)?;
            run_end::finished_event(tx, &end)?;
            Ok(run_end::ended(&end))
        })
    }
}

/// Writes a satellite's rows, if any, first in the operator's transaction.
fn write_rows(tx: &mut WriteTx<'_>, rows: Option<SatelliteRows>) -> Result<()> {
    match rows {
        Some(rows) => rows(tx),
        None => Ok(()),
    }
}

/// Records the first of the approvers `approval` needs: it stays
/// pending, with its first approver as its decider, if no one approved it
/// since it was read.
fn endorse(
    tx: &mut WriteTx<'_>,
    approval: &Approval,
    options: &DecideOptions<'_>,
    now: Timestamp,
    needed: u8,
) -> Result<()> {
    let changed = tx.update_approval(
        &approval.id,
        &ApprovalChange {
            status: ApprovalStatus::Pending,
            from: ApprovalStatus::Pending,
            hash: &approval.hash,
            decided_at: Some(now),
            decided_by: Some(options.by),
            note: Some(options.note),
            by_was: Some(""),
        },
    )?;
    if !changed {
        return Err(Error::NotPending {
            approval: approval.id.clone(),
            status: approval.status,
        });
    }
    tx.append_event(
        &approval.run_id,
        &approval.step_id,
        &now,
        EventType::ApprovalEndorsed,
        &payload::approval_endorsed(approval, options.by, options.note, needed),
    )
}

/// Moves `approval` from pending to `status`, who decided and why, if it
/// is still pending with its hash (and, after a first approver, still
/// `first`'s); refused as not pending otherwise.
fn set_decided(
    tx: &mut WriteTx<'_>,
    approval: &Approval,
    status: ApprovalStatus,
    options: &DecideOptions<'_>,
    now: Timestamp,
    first: Option<&str>,
) -> Result<()> {
    let changed = tx.update_approval(
        &approval.id,
        &ApprovalChange {
            status,
            from: ApprovalStatus::Pending,
            hash: &approval.hash,
            decided_at: Some(now),
            decided_by: Some(options.by),
            note: Some(options.note),
            by_was: Some(first.unwrap_or("")),
        },
    )?;
    if changed {
        Ok(())
    } else {
        Err(Error::NotPending {
            approval: approval.id.clone(),
            status: approval.status,
        })
    }
}

/// A pending approval an operator may decide now, or why not.
enum Decidable {
    Ready {
        run: Box<Run>,
        approval: Box<Approval>,
    },
    /// It lapsed: the expiry is written (and commits with the group).
    Expired(String),
}

/// The checks every decision makes inside its transaction: the run waits,
/// the approval is pending, still as it was shown, intact, the step's
/// latest, and not lapsed (a lapsed one is expired here).
fn decidable(
    tx: &mut WriteTx<'_>,
    run_id: &str,
    approval_id: &str,
    options: &DecideOptions<'_>,
    now: Timestamp,
) -> Result<Decidable> {
    let run = tx.run(run_id)?.ok_or_else(|| Error::NotFound {
        what: "run",
        id: run_id.to_owned(),
    })?;
    let approval = tx
        .approval(run_id, approval_id)?
        .ok_or_else(|| Error::NotFound {
            what: "approval",
            id: approval_id.to_owned(),
        })?;
    if run.status != RunStatus::WaitingForApproval {
        return Err(Error::RunState {
            run: run.id,
            status: run.status,
            detail: "only a run waiting for approval can have an approval decided".into(),
        });
    }
    match approval.status {
        ApprovalStatus::Pending => {}
        ApprovalStatus::Expired => {
            return Err(Error::ApprovalExpired {
                approval: approval.id,
            });
        }
        status => {
            return Err(Error::NotPending {
                approval: approval.id,
                status,
            });
        }
    }
    if let Some(shown) = options.shown_hash
        && (shown.is_empty() || shown != approval.hash)
    {
        return Err(Error::ApprovalChanged {
            approval: approval.id,
            shown: shown.to_owned(),
            stored: approval.hash,
        });
    }
    check_hash(&approval)?;
    let latest = tx
        .approvals(run_id)?
        .into_iter()
        .rev()
        .find(|a| a.step_id == approval.step_id)
        .map(|a| a.id);
    if let Some(latest) = latest
        && latest != approval.id
    {
        return Err(Error::ApprovalSuperseded {
            approval: approval.id,
            latest,
        });
    }
    if approval.expires_at.is_some_and(|e| now >= e) {
        write_expiry(tx, &approval, now)?;
        return Ok(Decidable::Expired(approval.id));
    }
    Ok(Decidable::Ready {
        run: Box::new(run),
        approval: Box::new(approval),
    })
}

/// A rejection: the step fails with the rejection observation (its
/// decision and policy untouched), the run is cancelled.
fn reject_run(
    tx: &mut WriteTx<'_>,
    run: &Run,
    approval: &Approval,
    note: &str,
    now: Timestamp,
) -> Result<()> {
    let observation = Observation::runtime(
        ObservationKind::PolicyDenied,
        &[("approval_id", &approval.id), ("note", note)],
        format!("approval rejected: {note}"),
    );
    let failed = run_end::fail_step(
        tx,
        &approval.step_id,
        &[StepStatus::AwaitingApproval],
        &observation,
        now,
    )?;
    if !failed {
        // The approval's step no longer awaits it: record nothing (the
        // transaction rolls back); `cancel` still ends the run.
        return Err(Error::RunState {
            run: run.id.clone(),
            status: run.status,
            detail: "the approval's step no longer awaits it; nothing was rejected".into(),
        });
    }
    let end = RunEnd {
        run,
        from: &[RunStatus::WaitingForApproval],
        reason: TerminalReason::ApprovalRejected,
        detail: note,
        by: None,
        at: now,
        changed: "the run changed while the rejection was recorded",
    };
    run_end::cancel_row(tx, &end)?;
    run_end::finished_event(tx, &end)
}

/// Approves with the wall clock. See [`Operator::approve`].
pub fn approve(
    store: &Store,
    run_id: &str,
    approval_id: &str,
    options: &DecideOptions<'_>,
) -> Result<Approval> {
    Operator::new(store.clone()).approve(run_id, approval_id, options)
}

/// Rejects with the wall clock. See [`Operator::reject`].
pub fn reject(
    store: &Store,
    run_id: &str,
    approval_id: &str,
    options: &DecideOptions<'_>,
) -> Result<Approval> {
    Operator::new(store.clone()).reject(run_id, approval_id, options)
}

/// Cancels with the wall clock. See [`Operator::cancel`].
pub fn cancel(store: &Store, run_id: &str, by: &str, note: &str) -> Result<Run> {
    Operator::new(store.clone()).cancel(run_id, by, note)
}
