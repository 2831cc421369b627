//! Write groups: the typed row operations of one transaction, in front of
//! the engine that stores them ([`GroupRows`]).

use crate::chain;
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::model::{Approval, Event, EventType, Labels, Run, Step};

use super::changes::{ApprovalChange, NewRun, NewStep, RunChange, RunGuard, StepChange, StepGuard};
use super::digest::Written;
use super::extension::Registry;
use super::group_rows::{GroupRows, RowTable, SealedEvent};
use super::read_rows::Cut;
use super::schema::StateTable;

/// One write group, inside an open transaction (its own, or a savepoint of
/// a batch that group commit shares among several groups). The store
/// commits or rolls back around it; the group never commits itself.
///
/// Events are buffered and chained at commit: the state rows the
/// transaction inserted or updated are read back, digested into its last
/// event's `rows_json` and marked with that event's seq (`written_seq`),
/// then every event is inserted with its link (see [`crate::chain`]). A
/// transaction that appends no event digests nothing: the writes without
/// an event (the lease heartbeat, a session releasing its lease) touch
/// only lease columns, which row digests leave out. Any other change of a
/// state row needs an event to explain it, or `verify` reports the row.
/// Rows of extension tables ([`WriteTx::insert_row`],
/// [`WriteTx::update_row`]) are state rows like the core's.
pub struct WriteTx<'c> {
    /// The engine's side of the group.
    rows: &'c mut (dyn GroupRows + 'c),
    /// The extension tables registered with the store.
    extensions: &'c Registry,
    /// Appended events, without seq until commit.
    events: Vec<Event>,
    /// The state rows written, in write order (duplicates allowed).
    written: Vec<(Written, String)>,
}

impl<'c> WriteTx<'c> {
    /// A group over an engine's open transaction.
    pub(super) fn new(rows: &'c mut (dyn GroupRows + 'c), extensions: &'c Registry) -> WriteTx<'c> {
        WriteTx {
            rows,
            extensions,
            events: Vec::new(),
            written: Vec::new(),
        }
    }

    /// The engine's side of the group (for the extension row operations).
    pub(super) fn rows(&mut self) -> &mut (dyn GroupRows + 'c) {
        self.rows
    }

    /// The engine's side of the group, for reads.
    pub(super) fn rows_read(&self) -> &(dyn GroupRows + 'c) {
        self.rows
    }

    /// The extension tables registered with the store.
    pub(super) fn extensions(&self) -> &'c Registry {
        self.extensions
    }

    /// The name of a written table.
    fn table_name(&self, table: Written) -> &'static str {
        match table {
            Written::Core(t) => t.name(),
            Written::Extension(i) => self.extensions.name(i),
        }
    }

    /// Seals the group (see [`WriteTx`]) and returns its events, ready for
    /// the enclosing transaction to commit.
    pub(super) fn finish(mut self) -> Result<Vec<Event>> {
        if self.events.is_empty() {
            // A state change with no event to explain it would stay out of
            // the chain: refuse it (dropping the transaction rolls back).
            if let Some((table, id)) = self.written.first() {
                return Err(Error::UnexplainedWrite {
                    table: self.table_name(*table),
                    id: id.clone(),
                    rows: self.written.len(),
                });
            }
        } else {
            self.seal()?;
        }
        Ok(self.events)
    }

    /// Notes that this transaction wrote a state row.
    pub(super) fn wrote(&mut self, table: StateTable, id: &str) {
        self.written.push((Written::Core(table), id.to_owned()));
    }

    /// Notes that this transaction wrote a row of extension table `index`.
    pub(super) fn wrote_extension_row(&mut self, index: usize, key: String) {
        self.written.push((Written::Extension(index), key));
    }

    /// Chains the buffered events onto the log: digests the written rows
    /// into the last event, gives every event its seq and link, and
    /// stores them.
    fn seal(&mut self) -> Result<()> {
        let (head_seq, mut prev) = self.rows.chain_head()?;
        let count = i64::try_from(self.events.len()).unwrap_or(i64::MAX);
        let last_seq = head_seq.saturating_add(count);
        let rows = self.digest_written(last_seq)?;
        let last = self.events.len() - 1;
        let mut links = Vec::with_capacity(self.events.len());
        for (i, event) in self.events.iter_mut().enumerate() {
            event.seq = head_seq.saturating_add(1 + i as i64);
            let hash = chain::link(&chain::Link {
                prev: &prev,
                seq: event.seq,
                run_id: &event.run_id,
                step_id: &event.step_id,
                at: &event.at,
                event_type: event.event_type.as_str(),
                payload: &event.payload,
                rows: if i == last { &rows } else { "" },
            });
            prev.clone_from(&hash);
            links.push(hash);
        }
        let sealed: Vec<SealedEvent<'_>> = self
            .events
            .iter()
            .zip(&links)
            .enumerate()
            .map(|(i, (event, hash))| SealedEvent {
                event,
                rows: if i == last { &rows } else { "" },
                hash,
            })
            .collect();
        self.rows.insert_events(&sealed)
    }

    /// Marks every state row written with `last_seq` and returns the
    /// `rows_json` listing of their digests.
    fn digest_written(&mut self, last_seq: i64) -> Result<String> {
        let mut written = std::mem::take(&mut self.written);
        if written.is_empty() {
            return Ok(String::new());
        }
        written.sort_unstable();
        written.dedup();
        let tables = written
            .iter()
            .map(|(table, _)| match table {
                Written::Core(t) => Ok(RowTable::Core(*t)),
                Written::Extension(i) => Ok(RowTable::Extension(&self.extensions.get(*i)?.table)),
            })
            .collect::<Result<Vec<_>>>()?;
        let rows: Vec<(RowTable<'_>, &str)> = tables
            .iter()
            .zip(&written)
            .map(|(table, (_, id))| (*table, id.as_str()))
            .collect();
        let digests = self.rows.mark_all_written(&rows, last_seq)?;
        let mut entries = Vec::with_capacity(written.len());
        // A row written and gone again in the same transaction has nothing
        // to digest (the store never deletes one today).
        for ((table, (_, id)), digest) in tables.iter().zip(&written).zip(digests) {
            if let Some(digest) = digest {
                entries.push((table.name(), id.clone(), digest));
            }
        }
        Ok(chain::rows_json(&mut entries))
    }

    /// Inserts a run as RUNNING with its lease.
    pub fn insert_run(&mut self, run: &NewRun<'_>) -> Result<()> {
        self.rows.insert_run(run)?;
        self.wrote(StateTable::Runs, run.id);
        Ok(())
    }

    /// Records a run's labels (their canonical JSON), chained like the run's
    /// row; writes nothing for no labels. Once per run: a second call for
    /// the same run is refused by the table's key.
    pub fn insert_run_labels(&mut self, run_id: &str, labels: &Labels) -> Result<()> {
        if labels.is_empty() {
            return Ok(());
        }
        self.rows
            .insert_run_labels(run_id, labels.to_canonical().as_str())?;
        self.wrote(StateTable::RunLabels, run_id);
        Ok(())
    }

    /// Updates a run if it meets `guard`; `false` if it did not.
    pub fn update_run(
        &mut self,
        run_id: &str,
        guard: &RunGuard<'_>,
        change: &RunChange<'_>,
    ) -> Result<bool> {
        let changed = self.rows.update_run(run_id, guard, change)?;
        // The lease columns are outside the row digest: a change of the
        // lease alone (a heartbeat, a release) needs no event.
        let digested = change.status.is_some()
            || change.reason.is_some()
            || change.finished_at.is_some()
            || change.result.is_some()
            || change.step_count_add > 0
            || change.active_ms_add > 0
            || change.totals.is_some();
        if changed && digested {
            self.wrote(StateTable::Runs, run_id);
        }
        Ok(changed)
    }

    /// Inserts a step.
    pub fn insert_step(&mut self, step: &NewStep<'_>) -> Result<()> {
        self.rows.insert_step(step)?;
        self.wrote(StateTable::Steps, step.id);
        Ok(())
    }

    /// Updates a step if it (and its run) meet `guard`; `false` if not.
    pub fn update_step(
        &mut self,
        step_id: &str,
        guard: &StepGuard<'_>,
        change: &StepChange<'_>,
    ) -> Result<bool> {
        let changed = self.rows.update_step(step_id, guard, change)?;
        let digested = change.status.is_some()
            || change.decision_json.is_some()
            || change.policy_json.is_some()
            || change.observation.is_some()
            || change.started_at.is_some()
            || change.finished_at.is_some()
            || change.spec_hash.is_some()
            || change.policy_id.is_some();
        if changed && digested {
            self.wrote(StateTable::Steps, step_id);
        }
        Ok(changed)
    }

    /// Inserts an approval.
    pub fn insert_approval(&mut self, a: &Approval) -> Result<()> {
        self.rows.insert_approval(a)?;
        self.wrote(StateTable::Approvals, &a.id);
        Ok(())
    }

    /// Updates an approval that is still in `change.from` with `change.hash`;
    /// `false` if it is not.
    pub fn update_approval(
        &mut self,
        approval_id: &str,
        change: &ApprovalChange<'_>,
    ) -> Result<bool> {
        let changed = self.rows.update_approval(approval_id, change)?;
        if changed {
            self.wrote(StateTable::Approvals, approval_id);
        }
        Ok(changed)
    }

    /// Records a tool spec under its hash (kept if already there).
    pub fn insert_spec(&mut self, hash: &str, spec_json: &str) -> Result<()> {
        // A spec already stored keeps the event that first wrote it.
        if self.rows.insert_spec(hash, spec_json)? {
            self.wrote(StateTable::ToolSpecs, hash);
        }
        Ok(())
    }

    /// Appends an event, chained to the one before it when the transaction
    /// commits.
    pub fn append_event(
        &mut self,
        run_id: &str,
        step_id: &str,
        at: &Timestamp,
        event_type: EventType,
        payload: &str,
    ) -> Result<()> {
        // The seq and the link are given at commit (`seal`).
        self.events.push(Event {
            seq: 0,
            run_id: run_id.to_owned(),
            step_id: step_id.to_owned(),
            at: at.to_string(),
            event_type,
            payload: payload.to_owned(),
        });
        Ok(())
    }

    /// Reads a run inside the transaction.
    pub fn run(&self, run_id: &str) -> Result<Option<Run>> {
        self.rows.run(run_id, Cut::Whole)
    }

    /// Reads a run's steps inside the transaction.
    pub fn steps(&self, run_id: &str) -> Result<Vec<Step>> {
        self.rows.steps(run_id)
    }

    /// Reads a run's approvals inside the transaction.
    pub fn approvals(&self, run_id: &str) -> Result<Vec<Approval>> {
        self.rows.approvals(run_id)
    }

    /// Reads one approval of a run inside the transaction.
    pub fn approval(&self, run_id: &str, approval_id: &str) -> Result<Option<Approval>> {
        self.rows.approval(run_id, approval_id, Cut::Whole)
    }

    /// The run's lease: owner and expiry text.
    pub fn lease(&self, run_id: &str) -> Result<Option<(String, String)>> {
        self.rows.lease(run_id)
    }

    /// The engine's own clock in this group, when it has one every host
    /// shares (see [`ReadRows::clock_now`](super::engine::ReadRows::clock_now)).
    pub fn clock_now(&self) -> Result<Option<Timestamp>> {
        self.rows.clock_now()
    }
}
