//! The consumer's reconciliation hook: after a crash, a consumer that can
//! find out what an interrupted call did says so, instead of an operator.

use crate::model::{Approval, BoxFuture, PolicyDecision, Run, Step};

/// What the hook is handed: the run as taken over, the steps just marked
/// interrupted, and the run's approvals.
#[derive(Debug, Clone)]
pub struct ReconcileInput {
    /// The run, RUNNING under the new owner.
    pub run: Run,
    /// The steps found in flight (now `interrupted`), in index order.
    pub interrupted: Vec<Step>,
    /// The run's approvals.
    pub approvals: Vec<Approval>,
}

/// The hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciled {
    /// Go on with the run: `run.resumed {after: "interruption"}` and a new
    /// step.
    Continue,
    /// The goal was reached after all: the run completes with this result
    /// (JSON bytes, boundary-checked).
    Completed {
        /// The result.
        result: Vec<u8>,
    },
    /// The state cannot be reconciled: the run fails `reconcile_conflict`.
    Conflict {
        /// Why.
        detail: String,
    },
    /// Ask an operator: `decision` must be a `require_approval`; the
    /// interrupted executing call pauses on its own step.
    Waiting {
        /// The approval to ask for.
        decision: PolicyDecision,
    },
}

/// The hook failed; the run fails `internal_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ReconcileError {
    /// What went wrong.
    pub message: String,
}

/// Reconciles a run taken over after a crash.
pub trait Reconcile: Send + Sync {
    /// Decides what becomes of the interrupted steps.
    fn reconcile<'a>(
        &'a self,
        input: &'a ReconcileInput,
    ) -> BoxFuture<'a, Result<Reconciled, ReconcileError>>;
}
