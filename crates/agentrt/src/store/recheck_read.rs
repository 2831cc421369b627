//! A capped read of a run's approvals: the first ones, read whole, with
//! how many the run has (design §17: a re-check reads approvals whole, and
//! only as many as the views counted; a satellite that decides from a
//! run's approvals reads a bounded number of them).

use super::Store;
use crate::error::Result;
use crate::model::Approval;

impl Store {
    /// The first `limit` approvals of `run_id` in creation order, each read
    /// whole (as [`Store::get_approval`] reads one), and how many approvals
    /// the run has. `limit` 0 reads none and only counts.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use agentrt::*;
    /// let store = Store::open(":memory:")?;
    /// let gate = Gate::new(GateConfig::new(store.clone(), DefaultPolicy, vec![]))?;
    /// gate.begin(Some("r1"), "g", Limits::default()).await?.close().await?;
    /// assert_eq!(store.first_approvals("r1", 8)?, (vec![], 0));
    /// # Ok::<(), agentrt::Error>(()) }).unwrap();
    /// ```
    pub fn first_approvals(&self, run_id: &str, limit: u64) -> Result<(Vec<Approval>, u64)> {
        self.read(|rows| rows.first_approvals(run_id, limit))
    }
}
