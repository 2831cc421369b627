//! [`Approver`] over the run's own database, through the core's operator.

use std::path::Path;
use std::sync::Arc;

use agentrt::view::{RunSummary, run_summary};
use agentrt::{
    Approval, Clock, DecideOptions, Observer, Operator, Run, RunStatus, Store, system_clock,
};

use crate::{Approver, ApproverError, Decision, Pending};

/// Steps read at a time while looking for an approval's step.
const STEP_PAGE: u64 = 128;

/// An [`Approver`] on a store: decisions are the core operator's (one
/// transaction each, its checks inside it), reads are capped page reads
/// (an oversized row reads back with a decode error instead of failing).
#[derive(Clone)]
pub struct StoreApprover {
    store: Store,
    operator: Operator,
    clock: Clock,
}

impl std::fmt::Debug for StoreApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreApprover")
            .field("store", &self.store.path())
            .finish_non_exhaustive()
    }
}

impl StoreApprover {
    /// An approver on a store the caller owns; `observer` is told every
    /// event a decision commits.
    pub fn new(store: Store, observer: Option<Arc<dyn Observer>>) -> StoreApprover {
        let mut operator = Operator::new(store.clone());
        if let Some(observer) = observer {
            operator = operator.with_observer(observer);
        }
        StoreApprover {
            store,
            operator,
            clock: system_clock(),
        }
    }

    /// An approver on the database at `path`, which must exist, be at this
    /// build's schema and not be a symbolic link (the core's
    /// `open_existing`, read-write: nothing is created or migrated).
    pub fn open(
        path: impl AsRef<Path>,
        observer: Option<Arc<dyn Observer>>,
    ) -> Result<StoreApprover, ApproverError> {
        let store = Store::open_existing(path.as_ref(), false)?;
        Ok(StoreApprover::new(store, observer))
    }

    /// Judges expiry and stamps decisions with `clock` instead of the
    /// wall clock. For tests: a deployed approver keeps the wall clock.
    #[doc(hidden)]
    pub fn with_clock(mut self, clock: Clock) -> StoreApprover {
        self.operator = self.operator.with_clock(clock.clone());
        self.clock = clock;
        self
    }

    /// The store it decides on.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A capped summary of the run, for a channel that shows what it is
    /// about to cancel.
    pub fn run(&self, run_id: &str) -> Result<RunSummary, ApproverError> {
        Ok(run_summary(&self.store, run_id)?)
    }

    /// The policy's reason in the decision that paused `step_id`; empty
    /// when the step or its decision is not found (nothing to show is not
    /// an error). Looks from the run's last step back, a page at a time.
    fn reason(&self, run: &Run, step_id: &str) -> Result<String, ApproverError> {
        let mut end = run.step_count;
        while end > 0 {
            let offset = end.saturating_sub(STEP_PAGE);
            let page = self
                .store
                .steps_page_capped(&run.id, end - offset, offset)?;
            if let Some(step) = page.items.iter().find(|s| s.id == step_id) {
                return Ok(step
                    .policy
                    .as_ref()
                    .map(|p| p.reason.clone())
                    .unwrap_or_default());
            }
            end = offset;
        }
        Ok(String::new())
    }

    fn shown(&self, run: &Run, approval: &Approval) -> Result<Pending, ApproverError> {
        let reason = self.reason(run, &approval.step_id)?;
        Ok(Pending::new(approval, &reason, (self.clock)()))
    }

    fn options<'a>(decision: &'a Decision) -> DecideOptions<'a> {
        DecideOptions {
            by: &decision.by,
            note: &decision.note,
            // An empty hash is refused as a changed approval.
            shown_hash: Some(&decision.hash),
        }
    }
}

impl Approver for StoreApprover {
    fn pending(&self, run_id: &str, limit: u64) -> Result<Vec<Pending>, ApproverError> {
        let run = self.store.get_run_capped(run_id)?;
        if run.status != RunStatus::WaitingForApproval {
            return Ok(Vec::new());
        }
        let page = self.store.pending_approvals_page_capped(run_id, limit, 0)?;
        page.items.iter().map(|a| self.shown(&run, a)).collect()
    }

    fn show(&self, run_id: &str, approval_id: &str) -> Result<Pending, ApproverError> {
        let run = self.store.get_run_capped(run_id)?;
        let approval = self.store.get_approval_capped(run_id, approval_id)?;
        self.shown(&run, &approval)
    }

    fn approve(&self, decision: &Decision) -> Result<Approval, ApproverError> {
        decision.check()?;
        let options = StoreApprover::options(decision);
        Ok(self
            .operator
            .approve(&decision.run_id, &decision.approval_id, &options)?)
    }

    fn reject(&self, decision: &Decision) -> Result<Approval, ApproverError> {
        decision.check()?;
        let options = StoreApprover::options(decision);
        Ok(self
            .operator
            .reject(&decision.run_id, &decision.approval_id, &options)?)
    }

    fn cancel(&self, run_id: &str, by: &str, note: &str) -> Result<Run, ApproverError> {
        for (value, missing) in [(run_id, "run_id"), (by, "by")] {
            if value.is_empty() {
                return Err(ApproverError::Incomplete { missing });
            }
        }
        Ok(self.operator.cancel(run_id, by, note)?)
    }
}
