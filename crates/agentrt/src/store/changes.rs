//! The typed changes a write group makes: rows to insert, the guards an
//! update must meet (compare-and-set), and what it changes. Shared by the
//! group's front ([`WriteTx`](super::WriteTx)) and every engine
//! ([`GroupRows`](super::GroupRows)).

use crate::clock::Timestamp;
use crate::json::Canonical;
use crate::model::{ApprovalStatus, RunStatus, StepStatus, TerminalReason};

/// A run to insert.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// The id.
    pub id: &'a str,
    /// The goal.
    pub goal: &'a str,
    /// The limits as JSON.
    pub limits_json: &'a str,
    /// Creation (and start) time.
    pub created_at: Timestamp,
    /// The lease owner.
    pub lease_owner: &'a str,
    /// The lease expiry (wall clock).
    pub lease_expires_at: Timestamp,
}

/// Conditions a run row must meet for an update to apply (compare-and-set).
#[derive(Debug, Clone, Default)]
pub struct RunGuard<'a> {
    /// The statuses the run may be in (empty: any).
    pub statuses: &'a [RunStatus],
    /// The lease owner the run must have.
    pub lease_owner: Option<&'a str>,
    /// The lease must not have expired at this wall-clock instant.
    pub lease_live_at: Option<Timestamp>,
    /// The step count the run must have.
    pub step_count: Option<u64>,
}

/// What happens to the lease columns.
#[derive(Debug, Clone, Default)]
pub enum LeaseChange<'a> {
    /// Leave them.
    #[default]
    Keep,
    /// Set owner and expiry.
    Set {
        /// The owner.
        owner: &'a str,
        /// The expiry (wall clock).
        expires_at: Timestamp,
    },
    /// Clear both.
    Clear,
}

/// Changes to a run row.
#[derive(Debug, Clone, Default)]
pub struct RunChange<'a> {
    /// New status.
    pub status: Option<RunStatus>,
    /// Terminal reason and detail.
    pub reason: Option<(TerminalReason, &'a str)>,
    /// Finish time.
    pub finished_at: Option<Timestamp>,
    /// Result of a completed run.
    pub result: Option<&'a Canonical>,
    /// Lease columns.
    pub lease: LeaseChange<'a>,
    /// Steps started to add.
    pub step_count_add: u64,
    /// Active milliseconds to add (saturating).
    pub active_ms_add: u64,
    /// Model accounting totals to set (calls, usage, estimated cost).
    pub totals: Option<(u64, crate::model::Usage, i64)>,
}

/// A step to insert.
#[derive(Debug, Clone)]
pub struct NewStep<'a> {
    /// The id.
    pub id: &'a str,
    /// The run.
    pub run_id: &'a str,
    /// Its index.
    pub index: u64,
    /// Its status.
    pub status: StepStatus,
    /// Start time.
    pub started_at: Timestamp,
}

/// Conditions a step row (and optionally its run) must meet.
#[derive(Debug, Clone, Default)]
pub struct StepGuard<'a> {
    /// The statuses the step may be in (empty: any).
    pub statuses: &'a [StepStatus],
    /// The run's id and conditions, checked in the same statement.
    pub run: Option<(&'a str, RunGuard<'a>)>,
    /// An approval that must be the step's latest (by insertion order) and
    /// approved: a session acting on a grant it read earlier acts only if no
    /// newer approval of the step has superseded it since.
    pub granted_by: Option<&'a str>,
}

/// Changes to a step row. Text fields set to `Some("")` clear the column.
#[derive(Debug, Clone, Default)]
pub struct StepChange<'a> {
    /// New status.
    pub status: Option<StepStatus>,
    /// Decision JSON.
    pub decision_json: Option<&'a str>,
    /// Policy decision JSON.
    pub policy_json: Option<&'a str>,
    /// Observation JSON and its content hash.
    pub observation: Option<(&'a str, &'a str)>,
    /// Start time.
    pub started_at: Option<Timestamp>,
    /// Finish time (`Some(None)` clears it).
    pub finished_at: Option<Option<Timestamp>>,
    /// Spec hash.
    pub spec_hash: Option<&'a str>,
    /// Policy id.
    pub policy_id: Option<&'a str>,
}

/// Changes to an approval row, applied only while it is pending with the
/// given hash.
#[derive(Debug, Clone)]
pub struct ApprovalChange<'a> {
    /// New status.
    pub status: ApprovalStatus,
    /// The status it must have now.
    pub from: ApprovalStatus,
    /// The hash it must have now.
    pub hash: &'a str,
    /// Decision time (`None` keeps it).
    pub decided_at: Option<Timestamp>,
    /// Decider (`None` keeps it).
    pub decided_by: Option<&'a str>,
    /// Note (`None` keeps it).
    pub note: Option<&'a str>,
}
