//! The backend-neutral surface of a write group: what a storage engine
//! does inside one group's transaction. [`WriteTx`](super::WriteTx) is the
//! front every group writes through; it validates what it is given, keeps
//! the list of state rows written and chains the group's events, and asks
//! a [`GroupRows`] for everything that touches storage.

use crate::clock::Timestamp;
use crate::error::Result;
use crate::model::{Approval, Event, ModelCall};

use super::changes::{ApprovalChange, NewRun, NewStep, RunChange, RunGuard, StepChange, StepGuard};
use super::extension::{ExtensionTable, SqlValue};
use super::read_rows::{ReadRows, StoredValue};
use super::schema::StateTable;

/// A table whose written rows a group digests into its last event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowTable<'a> {
    /// A core state table.
    Core(StateTable),
    /// A satellite's registered table.
    Extension(&'a ExtensionTable),
}

impl RowTable<'_> {
    /// The table's name.
    pub fn name(&self) -> &'static str {
        match self {
            RowTable::Core(t) => t.name(),
            RowTable::Extension(t) => t.name,
        }
    }
}

/// One event of a group, sealed: its seq and link given, ready to store.
#[derive(Debug, Clone, Copy)]
pub struct SealedEvent<'a> {
    /// The event (its `seq` set).
    pub event: &'a Event,
    /// The row listing it carries (`""` on every event but a group's last).
    pub rows: &'a str,
    /// Its link in the chain.
    pub hash: &'a str,
}

/// The row operations of one write group, as a storage engine performs
/// them inside the group's transaction (SQLite's today; PostgreSQL's is
/// planned). Only the store's engines implement it; satellites and the
/// gate write through [`WriteTx`](super::WriteTx), which calls these.
///
/// What an implementation must guarantee:
///
/// - every operation runs inside the group's one transaction, which the
///   engine commits or rolls back as a whole around the group;
/// - a guarded change (`update_*`) checks its guard in the same statement
///   (or the same serializable transaction) as the change it guards, and
///   returns `false`, changing nothing, when the guard does not hold;
/// - its reads ([`ReadRows`]) see the group's own writes;
/// - [`GroupRows::chain_head`] and [`GroupRows::insert_events`] see and
///   extend one total order of events across every writer of the database
///   (SQLite's write lock, or a single head row locked by the group);
/// - [`GroupRows::mark_written`] digests with [`crate::chain::row_digest`]
///   over the table's digested columns in their fixed order, so that every
///   engine yields the same chain for the same groups.
pub trait GroupRows: ReadRows {
    /// Inserts a run as RUNNING with its lease.
    fn insert_run(&mut self, run: &NewRun<'_>) -> Result<()>;
    /// Inserts a run's labels, as their canonical JSON.
    fn insert_run_labels(&mut self, run_id: &str, labels_json: &str) -> Result<()>;
    /// Applies `change` to the run if it meets `guard`; whether it did.
    /// With no guard at all, an engine may send the change later (with its
    /// next request) and answer `true`: the group then fails if the run is
    /// missing, rather than hearing `false` (the store never deletes a run).
    fn update_run(
        &mut self,
        run_id: &str,
        guard: &RunGuard<'_>,
        change: &RunChange<'_>,
    ) -> Result<bool>;
    /// Inserts a step.
    fn insert_step(&mut self, step: &NewStep<'_>) -> Result<()>;
    /// Applies `change` to the step if it (and its run) meet `guard`.
    fn update_step(
        &mut self,
        step_id: &str,
        guard: &StepGuard<'_>,
        change: &StepChange<'_>,
    ) -> Result<bool>;
    /// Inserts an approval.
    fn insert_approval(&mut self, approval: &Approval) -> Result<()>;
    /// Applies `change` to the approval if it is in `change.from` with
    /// `change.hash`.
    fn update_approval(&mut self, approval_id: &str, change: &ApprovalChange<'_>) -> Result<bool>;
    /// Stores a tool spec under its hash unless one is there; whether it
    /// inserted.
    fn insert_spec(&mut self, hash: &str, spec_json: &str) -> Result<bool>;
    /// Inserts a model call as dispatched, only while `owner` holds an
    /// unexpired lease (at `wall`) on the RUNNING run; whether it did.
    fn insert_model_call(
        &mut self,
        call: &ModelCall,
        owner: &str,
        wall: &Timestamp,
    ) -> Result<bool>;
    /// Records a dispatched call's outcome; `false` if it is not dispatched.
    fn complete_model_call(&mut self, call: &ModelCall) -> Result<bool>;
    /// Inserts a row of a registered extension table with the given
    /// (checked) columns and returns its key, as stored (a numbered key
    /// left out: the largest in the table plus one, as SQLite's rowid).
    /// When every column has a value or a default and the key is known, an
    /// engine may send the insert with its next request: a refusal (a
    /// duplicate key) then fails the group there instead of here.
    fn insert_extension_row(
        &mut self,
        table: &ExtensionTable,
        values: &[(&'static str, &SqlValue)],
    ) -> Result<StoredValue>;
    /// Sets (checked) columns of the row keyed `key` if every column of
    /// `guard` holds its value; whether it did.
    fn update_extension_row(
        &mut self,
        table: &ExtensionTable,
        key: &SqlValue,
        set: &[(&'static str, &SqlValue)],
        guard: &[(&'static str, &SqlValue)],
    ) -> Result<bool>;

    /// The chain head: the highest seq ever used (a seq is never reused,
    /// even after the newest events were removed) and the link of the
    /// highest stored event (`""` for an empty log).
    fn chain_head(&self) -> Result<(i64, String)>;
    /// Sets the `written_seq` of the row of `table` keyed `key` to `seq`
    /// and returns the row's digest, or `None` if there is no such row.
    fn mark_written(&mut self, table: RowTable<'_>, key: &str, seq: i64) -> Result<Option<String>>;
    /// [`GroupRows::mark_written`] for every row of `rows`, answered in
    /// their order. An engine that pays a round trip per statement sends
    /// them together; the default marks them one by one.
    fn mark_all_written(
        &mut self,
        rows: &[(RowTable<'_>, &str)],
        seq: i64,
    ) -> Result<Vec<Option<String>>> {
        rows.iter()
            .map(|(table, key)| self.mark_written(*table, key, seq))
            .collect()
    }
    /// Stores sealed events, in order.
    fn insert_events(&mut self, events: &[SealedEvent<'_>]) -> Result<()>;
}
