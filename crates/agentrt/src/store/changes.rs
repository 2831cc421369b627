//! The typed changes a write group makes: rows to insert, the guards an
//! update must meet (compare-and-set), and what it changes. Shared by the
//! group's front ([`WriteTx`](super::WriteTx)) and every engine
//! ([`GroupRows`](super::GroupRows)).

use super::dialect::Dialect;
use super::extension::SqlValue;
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
    /// The lease must not have expired by the engine's own clock, read by
    /// the guard's statement itself, on an engine that has one (see
    /// [`ReadRows::clock_now`](super::engine::ReadRows::clock_now)); an
    /// engine without one judges `lease_live_at` instead. The group then
    /// needs no answer from the engine before its change: the clock is not
    /// read ahead of it.
    pub lease_live_by_engine: bool,
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
    /// The decider it must have now (`None`: not checked): a second
    /// approver's decision, or a first one's, is written only over the
    /// decider it read (design §46).
    pub by_was: Option<&'a str>,
}

/// One column assignment of an update, as every engine makes it: the
/// neutral form of a [`RunChange`] or a [`StepChange`], which an engine
/// renders in its SQL dialect (see [`RunChange::assignments`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assignment<'a> {
    /// `column = text`.
    Text(&'static str, std::borrow::Cow<'a, str>),
    /// `column = n` (a count saturates at `i64::MAX`).
    Int(&'static str, i64),
    /// `column = column + n`.
    Add(&'static str, i64),
    /// `column = column + n`, saturating at `i64::MAX` instead of failing.
    AddSaturating(&'static str, i64),
}

impl Assignment<'_> {
    /// The column assigned.
    pub fn column(&self) -> &'static str {
        match self {
            Assignment::Text(c, _)
            | Assignment::Int(c, _)
            | Assignment::Add(c, _)
            | Assignment::AddSaturating(c, _) => c,
        }
    }

    /// The value bound to the assignment's one `?`.
    pub fn value(&self) -> SqlValue {
        match self {
            Assignment::Text(_, v) => SqlValue::Text(v.clone().into_owned()),
            Assignment::Int(_, n) | Assignment::Add(_, n) | Assignment::AddSaturating(_, n) => {
                SqlValue::Int(*n)
            }
        }
    }

    /// The assignment in `dialect`, with one `?` for its value.
    pub fn sql(&self, dialect: &dyn Dialect) -> String {
        let c = self.column();
        match self {
            Assignment::Text(..) | Assignment::Int(..) => format!("{c} = ?"),
            Assignment::Add(..) => format!("{c} = {c} + ?"),
            Assignment::AddSaturating(..) => format!("{c} = {}", dialect.add_saturating(c)),
        }
    }

    /// An update's `SET` list in `dialect` and its values in order
    /// (`id = id` for no assignment).
    ///
    /// ```
    /// use agentrt::store::SqlValue;
    /// use agentrt::store::engine::{Assignment, Dialect};
    ///
    /// struct Plain;
    /// impl Dialect for Plain {
    ///     fn add_saturating(&self, column: &str) -> String {
    ///         format!("least({column} + ?, 9223372036854775807)")
    ///     }
    ///     fn json_cut(&self, column: &str, cap: usize) -> String {
    ///         format!("substr({column}, 1, {cap})")
    ///     }
    /// }
    ///
    /// let sets = [Assignment::Text("status", "done".into()), Assignment::Add("step_count", 1)];
    /// let (sql, values) = Assignment::set_list(&sets, &Plain);
    /// assert_eq!(sql, "status = ?, step_count = step_count + ?");
    /// assert_eq!(values, [SqlValue::from("done"), SqlValue::Int(1)]);
    /// ```
    pub fn set_list(sets: &[Assignment<'_>], dialect: &dyn Dialect) -> (String, Vec<SqlValue>) {
        if sets.is_empty() {
            return ("id = id".to_owned(), Vec::new());
        }
        let sql: Vec<String> = sets.iter().map(|set| set.sql(dialect)).collect();
        (sql.join(", "), sets.iter().map(Assignment::value).collect())
    }
}

/// A count as a column value (saturating).
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl RunChange<'_> {
    /// The change's column assignments, in a fixed order (empty: the change
    /// changes nothing).
    ///
    /// ```
    /// use agentrt::store::engine::Assignment;
    /// use agentrt::store::{LeaseChange, RunChange};
    ///
    /// let change = RunChange { step_count_add: 1, lease: LeaseChange::Clear, ..RunChange::default() };
    /// let columns: Vec<_> = change.assignments().iter().map(Assignment::column).collect();
    /// assert_eq!(columns, ["lease_owner", "lease_expires_at", "step_count"]);
    /// ```
    pub fn assignments(&self) -> Vec<Assignment<'_>> {
        use std::borrow::Cow::{Borrowed, Owned};
        let mut sets = Vec::new();
        if let Some(s) = self.status {
            sets.push(Assignment::Text("status", Borrowed(s.as_str())));
        }
        if let Some((reason, detail)) = self.reason {
            sets.push(Assignment::Text("reason", Borrowed(reason.as_str())));
            sets.push(Assignment::Text("reason_detail", Borrowed(detail)));
        }
        if let Some(t) = &self.finished_at {
            sets.push(Assignment::Text("finished_at", Owned(t.to_string())));
        }
        if let Some(r) = self.result {
            sets.push(Assignment::Text("result_json", Borrowed(r.as_str())));
        }
        match &self.lease {
            LeaseChange::Keep => {}
            LeaseChange::Set { owner, expires_at } => {
                sets.push(Assignment::Text("lease_owner", Borrowed(owner)));
                sets.push(Assignment::Text(
                    "lease_expires_at",
                    Owned(expires_at.to_string()),
                ));
            }
            LeaseChange::Clear => {
                sets.push(Assignment::Text("lease_owner", Borrowed("")));
                sets.push(Assignment::Text("lease_expires_at", Borrowed("")));
            }
        }
        if self.step_count_add > 0 {
            sets.push(Assignment::Add("step_count", count(self.step_count_add)));
        }
        if self.active_ms_add > 0 {
            // Half the range: the engine's sum cannot overflow before it
            // saturates.
            sets.push(Assignment::AddSaturating(
                "active_ms",
                count(self.active_ms_add.min(i64::MAX as u64 / 2)),
            ));
        }
        if let Some((calls, usage, cost)) = self.totals {
            sets.push(Assignment::Int("model_calls", count(calls)));
            sets.push(Assignment::Int("input_tokens", count(usage.input_tokens)));
            sets.push(Assignment::Int("output_tokens", count(usage.output_tokens)));
            sets.push(Assignment::Int(
                "cached_input_tokens",
                count(usage.cached_input_tokens),
            ));
            sets.push(Assignment::Int("estimated_cost_micros", cost.max(0)));
        }
        sets
    }
}

impl StepChange<'_> {
    /// The change's column assignments, in a fixed order (empty: the change
    /// changes nothing).
    ///
    /// ```
    /// use agentrt::store::StepChange;
    /// use agentrt::store::engine::Assignment;
    ///
    /// let change = StepChange { finished_at: Some(None), ..StepChange::default() };
    /// assert_eq!(change.assignments(), [Assignment::Text("finished_at", "".into())]);
    /// ```
    pub fn assignments(&self) -> Vec<Assignment<'_>> {
        use std::borrow::Cow::{Borrowed, Owned};
        let mut sets = Vec::new();
        if let Some(s) = self.status {
            sets.push(Assignment::Text("status", Borrowed(s.as_str())));
        }
        let texts = [
            ("decision_json", self.decision_json),
            ("policy_json", self.policy_json),
            ("spec_hash", self.spec_hash),
            ("policy_id", self.policy_id),
        ];
        for (column, value) in texts {
            if let Some(v) = value {
                sets.push(Assignment::Text(column, Borrowed(v)));
            }
        }
        if let Some((json, hash)) = self.observation {
            sets.push(Assignment::Text("observation_json", Borrowed(json)));
            sets.push(Assignment::Text("observation_hash", Borrowed(hash)));
        }
        if let Some(t) = &self.started_at {
            sets.push(Assignment::Text("started_at", Owned(t.to_string())));
        }
        if let Some(t) = &self.finished_at {
            let text = t.map(|t| t.to_string()).unwrap_or_default();
            sets.push(Assignment::Text("finished_at", Owned(text)));
        }
        sets
    }
}
