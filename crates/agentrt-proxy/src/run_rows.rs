//! A run's rows as the proxy reads them: whole, but capped. A run the
//! proxy began has at most three steps; one with more rows than these caps
//! is refused as corrupt rather than judged on part of itself. Below the
//! history, the key state and the policy, which all read runs.

use agentrt::store::{RecordCaps, RunRecord};
use agentrt::{Approval, Store, model::Step};

/// Most steps of one run read (the proxy's runs have at most three).
const MAX_STEPS: u64 = 16;
/// Most events of one run read.
const MAX_EVENTS: u64 = 256;
/// Most approvals of one run read.
const MAX_APPROVALS: u64 = 64;

/// A run holding more rows of `what` than a run of the proxy can.
fn too_many(table: &'static str, run_id: &str, total: u64, cap: u64) -> agentrt::Error {
    agentrt::Error::Corrupt {
        table,
        id: run_id.to_owned(),
        detail: format!("the run has {total} rows here; a run of the proxy has at most {cap}"),
    }
}

/// Run `run_id`'s approvals in creation order (at most [`MAX_APPROVALS`]).
pub(crate) fn approvals(store: &Store, run_id: &str) -> agentrt::Result<Vec<Approval>> {
    let (approvals, total) = store.first_approvals(run_id, MAX_APPROVALS)?;
    if total > MAX_APPROVALS {
        return Err(too_many("approvals", run_id, total, MAX_APPROVALS));
    }
    Ok(approvals)
}

/// Run `run_id`'s steps in index order (at most [`MAX_STEPS`]).
pub(crate) fn steps(store: &Store, run_id: &str) -> agentrt::Result<Vec<Step>> {
    let page = store.steps_page(run_id, MAX_STEPS, 0)?;
    if page.total > MAX_STEPS {
        return Err(too_many("steps", run_id, page.total, MAX_STEPS));
    }
    Ok(page.items)
}

/// What [`records`] reads of each run.
const CAPS: RecordCaps = RecordCaps {
    steps: MAX_STEPS,
    events: MAX_EVENTS,
    approvals: MAX_APPROVALS,
};

/// The records of `run_ids` (run, steps, events, approvals), in the order
/// given, in one read of the store; a run with more rows than a run of the
/// proxy can hold is refused as corrupt.
pub(crate) fn records(store: &Store, run_ids: &[&str]) -> agentrt::Result<Vec<RunRecord>> {
    let records = store.run_records(run_ids, CAPS)?;
    for record in &records {
        let (id, totals) = (&record.run.id, record.totals);
        if totals.steps > MAX_STEPS {
            return Err(too_many("steps", id, totals.steps, MAX_STEPS));
        }
        if totals.events > MAX_EVENTS {
            return Err(too_many("events", id, totals.events, MAX_EVENTS));
        }
        if totals.approvals > MAX_APPROVALS {
            return Err(too_many("approvals", id, totals.approvals, MAX_APPROVALS));
        }
    }
    Ok(records)
}
