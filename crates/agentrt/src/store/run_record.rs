//! A run's whole record (the run, its steps, events and approvals) read
//! capped, for several runs in one read: what a satellite that decides
//! from past runs (the proxy's repeat rules) asks in one question instead
//! of four reads per run.

use super::Store;
use super::read_rows::Cut;
use crate::error::{Error, Result};
use crate::model::{Approval, Event, Run, Step};

/// How many rows of each kind [`Store::run_records`] reads of one run.
///
/// Every cap is at least 1 (a record without its rows is
/// [`Store::get_run`]). A run with more rows than a cap is read up to the
/// cap; its
/// [`RunRecord::totals`] tell the caller, who decides whether a part of
/// the run is enough to judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordCaps {
    /// Most steps read, in index order.
    pub steps: u64,
    /// Most events read, in seq order.
    pub events: u64,
    /// Most approvals read, in creation order.
    pub approvals: u64,
}

/// How many rows of each kind a run has (whatever the caps read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordTotals {
    /// Its steps.
    pub steps: u64,
    /// Its events.
    pub events: u64,
    /// Its approvals.
    pub approvals: u64,
}

/// One run's record as [`Store::run_records`] read it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// The run.
    pub run: Run,
    /// Its first steps, in index order (at most the cap).
    pub steps: Vec<Step>,
    /// Its first events, in seq order (at most the cap).
    pub events: Vec<Event>,
    /// Its first approvals, in creation order, each read whole (at most
    /// the cap).
    pub approvals: Vec<Approval>,
    /// How many rows of each kind the run has.
    pub totals: RecordTotals,
}

impl RunRecord {
    /// Whether every row of the run was read (no cap cut it).
    pub fn whole(&self) -> bool {
        self.steps.len() as u64 == self.totals.steps
            && self.events.len() as u64 == self.totals.events
            && self.approvals.len() as u64 == self.totals.approvals
    }
}

impl Store {
    /// The records of `run_ids`, in the order given, read in one read (one
    /// snapshot of the store, whatever its engine), each capped by `caps`.
    /// A run that does not exist is [`Error::NotFound`]; a cap of 0 is
    /// [`Error::InvalidInput`].
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use agentrt::*;
    /// use agentrt::store::RecordCaps;
    /// let store = Store::open(":memory:")?;
    /// let gate = Gate::new(GateConfig::new(store.clone(), DefaultPolicy, vec![]))?;
    /// gate.begin(Some("r1"), "g", Limits::default()).await?.close().await?;
    /// let caps = RecordCaps { steps: 4, events: 1, approvals: 4 };
    /// let records = store.run_records(&["r1"], caps)?;
    /// assert_eq!(records[0].run.id, "r1");
    /// assert_eq!(records[0].events.len(), 1);
    /// assert!(records[0].totals.events >= 1);
    /// # Ok::<(), agentrt::Error>(()) }).unwrap();
    /// ```
    pub fn run_records(&self, run_ids: &[&str], caps: RecordCaps) -> Result<Vec<RunRecord>> {
        if caps.steps == 0 || caps.events == 0 || caps.approvals == 0 {
            return Err(Error::InvalidInput {
                what: "caps",
                detail: "every cap of a run record is at least 1".into(),
            });
        }
        self.read(|rows| {
            let mut records = Vec::with_capacity(run_ids.len());
            for &run_id in run_ids {
                let run = rows
                    .run(run_id, Cut::Whole)?
                    .ok_or_else(|| Error::NotFound {
                        what: "run",
                        id: run_id.to_owned(),
                    })?;
                let steps = rows.steps_page(run_id, caps.steps, 0, Cut::Whole)?;
                let events = rows.events_page(run_id, caps.events, 0, Cut::Whole)?;
                let (approvals, approvals_total) = rows.first_approvals(run_id, caps.approvals)?;
                records.push(RunRecord {
                    run,
                    totals: RecordTotals {
                        steps: steps.total,
                        events: events.total,
                        approvals: approvals_total,
                    },
                    steps: steps.items,
                    events: events.items,
                    approvals,
                });
            }
            Ok(records)
        })
    }
}
