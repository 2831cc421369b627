//! The state of one request key (design §30 rules 1–3), as an
//! explicit machine: what the key's open row and its run say
//! ([`classify`]), and what a new call of the key does in each state
//! ([`on_call`]). Rules 4–7 apply only when a new run may begin.
//!
//! ```text
//!   Settled ──call──▶ (rules 4–7) ──▶ Claimed ──tool ran──▶ Settled
//!                                       │  └─asks──▶ Pending ──approved──▶ Approved ──collected──▶ Settled
//!                                       │             └─rejected/expired──▶ Settled
//!                                       ├─outcome unknown──▶ Unknown ──approved──▶ Approved
//!                                       └─owner died──▶ Abandoned ──taken over──▶ Unknown | Settled
//! ```

use agentrt::{ApprovalStatus, RunStatus, Store, Timestamp};

use crate::index;

/// The kind of approval that asks about an attempt whose outcome is
/// unknown.
pub const INTERRUPTION: &str = "interrupted_side_effect";

/// Where a request key stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState {
    /// No run of the key is open: a new run may begin. `previous` is the
    /// run of the key's newest row (finished), closed (if still open)
    /// when the next begins.
    Settled {
        /// The key's last finished run, if any.
        previous: Option<String>,
    },
    /// Its run began and decides or executes under a live lease.
    Claimed {
        /// The run.
        run_id: String,
    },
    /// Its run was left running by an owner whose lease expired.
    Abandoned {
        /// The run.
        run_id: String,
    },
    /// Its run waits for an operator's approval of the request.
    Pending {
        /// The run.
        run_id: String,
        /// The approval it waits for.
        approval_id: String,
    },
    /// Its run waits for an operator to decide whether an attempt whose
    /// outcome is unknown may run again.
    Unknown {
        /// The run.
        run_id: String,
        /// The approval it waits for.
        approval_id: String,
    },
    /// Its approval was granted and not yet collected.
    Approved {
        /// The run.
        run_id: String,
    },
}

/// What a new call of the key does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnCall {
    /// Hold on the approval up to `hold` (rule 1).
    Hold {
        /// The run.
        run_id: String,
        /// The approval to hold on.
        approval_id: String,
        /// Whether it asks about an attempt whose outcome is unknown.
        interruption: bool,
    },
    /// Attach and run the recorded request (rule 1).
    Collect {
        /// The run.
        run_id: String,
    },
    /// The same request is executing (rule 2).
    InProgress,
    /// Take the run over first (rule 3).
    TakeOver {
        /// The run.
        run_id: String,
    },
    /// Rules 4–7, then a new run (closing `previous`).
    NewRun {
        /// The key's last finished run, closed (if still open) when the new
        /// one begins.
        previous: Option<String>,
    },
}

/// The facts [`classify`] reads: the key's newest row's run, its latest
/// approval, and whether its lease expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowFacts {
    /// The run.
    pub run_id: String,
    /// Its status.
    pub status: RunStatus,
    /// Its latest approval: id, status, kind.
    pub latest_approval: Option<(String, ApprovalStatus, String)>,
    /// Whether its lease expired (by the wall clock).
    pub lease_expired: bool,
}

/// The key's state from its newest row's facts (`None`: no row).
pub fn classify(facts: Option<RowFacts>) -> KeyState {
    let Some(facts) = facts else {
        return KeyState::Settled { previous: None };
    };
    let run_id = facts.run_id;
    match facts.status {
        RunStatus::Running if facts.lease_expired => KeyState::Abandoned { run_id },
        RunStatus::Running => KeyState::Claimed { run_id },
        RunStatus::WaitingForApproval => match facts.latest_approval {
            Some((_, ApprovalStatus::Approved, _)) => KeyState::Approved { run_id },
            Some((approval_id, _, kind)) if kind == INTERRUPTION => KeyState::Unknown {
                run_id,
                approval_id,
            },
            Some((approval_id, _, _)) => KeyState::Pending {
                run_id,
                approval_id,
            },
            // Waiting with no approval cannot last: treat it as busy.
            None => KeyState::Claimed { run_id },
        },
        RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled => KeyState::Settled {
            previous: Some(run_id),
        },
    }
}

/// What a new call does in `state`.
pub fn on_call(state: KeyState) -> OnCall {
    match state {
        KeyState::Settled { previous } => OnCall::NewRun { previous },
        KeyState::Claimed { .. } => OnCall::InProgress,
        KeyState::Abandoned { run_id } => OnCall::TakeOver { run_id },
        KeyState::Pending {
            run_id,
            approval_id,
        } => OnCall::Hold {
            run_id,
            approval_id,
            interruption: false,
        },
        KeyState::Unknown {
            run_id,
            approval_id,
        } => OnCall::Hold {
            run_id,
            approval_id,
            interruption: true,
        },
        KeyState::Approved { run_id } => OnCall::Collect { run_id },
    }
}

/// Reads the facts of (`session`, `key`)'s newest row at `now` (the key's
/// open row if it has one; a closed newest row's run has finished).
pub fn read(
    store: &Store,
    session: &str,
    key: &str,
    now: Timestamp,
) -> agentrt::Result<Option<RowFacts>> {
    let Some(row) = index::newest_row(store, session, key)? else {
        return Ok(None);
    };
    let run = store.get_run(&row.run_id)?;
    let latest_approval = if run.status == RunStatus::WaitingForApproval {
        crate::run_rows::approvals(store, &row.run_id)?
            .pop()
            .map(|a| (a.id, a.status, a.kind))
    } else {
        None
    };
    let lease_expired = run.status == RunStatus::Running && lease_expired(store, &row.run_id, now)?;
    Ok(Some(RowFacts {
        run_id: row.run_id,
        status: run.status,
        latest_approval,
        lease_expired,
    }))
}

/// Whether run `run_id`'s lease expired at `now` (leases are compared by
/// the wall clock, across processes; an unreadable one counts expired).
pub(crate) fn lease_expired(store: &Store, run_id: &str, now: Timestamp) -> agentrt::Result<bool> {
    let (_, expires) = store.lease(run_id)?;
    Ok(Timestamp::parse(&expires).map_or(true, |at| at < now))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(
        status: RunStatus,
        approval: Option<(ApprovalStatus, &str)>,
        expired: bool,
    ) -> Option<RowFacts> {
        Some(RowFacts {
            run_id: "r".into(),
            status,
            latest_approval: approval.map(|(s, k)| ("a".to_owned(), s, k.to_owned())),
            lease_expired: expired,
        })
    }

    #[test]
    fn each_state_and_what_a_call_does_in_it() {
        use ApprovalStatus as A;
        use RunStatus as R;
        let run = || "r".to_owned();
        let hold = |interruption| OnCall::Hold {
            run_id: run(),
            approval_id: "a".into(),
            interruption,
        };
        let cases: Vec<(Option<RowFacts>, KeyState, OnCall)> = vec![
            (
                None,
                KeyState::Settled { previous: None },
                OnCall::NewRun { previous: None },
            ),
            (
                facts(R::Running, None, false),
                KeyState::Claimed { run_id: run() },
                OnCall::InProgress,
            ),
            (
                facts(R::Running, None, true),
                KeyState::Abandoned { run_id: run() },
                OnCall::TakeOver { run_id: run() },
            ),
            (
                facts(
                    R::WaitingForApproval,
                    Some((A::Pending, "remote_mutation")),
                    false,
                ),
                KeyState::Pending {
                    run_id: run(),
                    approval_id: "a".into(),
                },
                hold(false),
            ),
            (
                facts(
                    R::WaitingForApproval,
                    Some((A::Pending, INTERRUPTION)),
                    false,
                ),
                KeyState::Unknown {
                    run_id: run(),
                    approval_id: "a".into(),
                },
                hold(true),
            ),
            (
                facts(
                    R::WaitingForApproval,
                    Some((A::Approved, INTERRUPTION)),
                    false,
                ),
                KeyState::Approved { run_id: run() },
                OnCall::Collect { run_id: run() },
            ),
            (
                facts(
                    R::WaitingForApproval,
                    Some((A::Approved, "local_mutation")),
                    false,
                ),
                KeyState::Approved { run_id: run() },
                OnCall::Collect { run_id: run() },
            ),
            (
                facts(R::WaitingForApproval, None, false),
                KeyState::Claimed { run_id: run() },
                OnCall::InProgress,
            ),
            // A lease only matters while the run runs.
            (
                facts(R::WaitingForApproval, Some((A::Pending, "x")), true),
                KeyState::Pending {
                    run_id: run(),
                    approval_id: "a".into(),
                },
                hold(false),
            ),
        ];
        for (i, (facts, state, action)) in cases.into_iter().enumerate() {
            let classified = classify(facts);
            assert_eq!(classified, state, "case {i}");
            assert_eq!(on_call(classified), action, "case {i}");
        }
        for status in [R::Completed, R::Failed, R::Cancelled] {
            let state = classify(facts(status, None, true));
            assert_eq!(
                state,
                KeyState::Settled {
                    previous: Some(run())
                }
            );
            assert_eq!(
                on_call(state),
                OnCall::NewRun {
                    previous: Some(run())
                }
            );
        }
    }
}
