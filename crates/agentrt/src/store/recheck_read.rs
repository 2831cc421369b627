//! The read a re-check needs beyond the public reads: the first approvals
//! of a run, read whole, with how many the run has (core §10.4: approvals
//! are read whole, and only as many as the views counted).

use super::Store;
use crate::error::Result;
use crate::model::Approval;

impl Store {
    /// The first `limit` approvals of `run_id` in creation order, each read
    /// whole (as [`Store::get_approval`] reads one), and how many approvals
    /// the run has. `limit` 0 reads none and only counts.
    pub(crate) fn first_approvals(&self, run_id: &str, limit: u64) -> Result<(Vec<Approval>, u64)> {
        self.read(|rows| rows.first_approvals(run_id, limit))
    }
}
