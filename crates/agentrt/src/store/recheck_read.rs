//! The read a re-check needs beyond the public reads: the first approvals
//! of a run, read whole, with how many the run has (core §10.4: approvals
//! are read whole, and only as many as the views counted).

use super::Store;
use super::read::{APPROVAL_COLUMNS, approval_from_row};
use crate::error::{Error, Result};
use crate::model::Approval;

impl Store {
    /// The first `limit` approvals of `run_id` in creation order, each read
    /// whole (as [`Store::get_approval`] reads one), and how many approvals
    /// the run has. `limit` 0 reads none and only counts.
    pub(crate) fn first_approvals(&self, run_id: &str, limit: u64) -> Result<(Vec<Approval>, u64)> {
        self.read(|c| {
            let total: i64 = c
                .query_row(
                    "SELECT COUNT(*) FROM approvals WHERE run_id = ?",
                    [run_id],
                    |r| r.get(0),
                )
                .map_err(Error::from_sqlite)?;
            let total = u64::try_from(total).unwrap_or(0);
            if limit == 0 {
                return Ok((Vec::new(), total));
            }
            let sql = format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run_id = ?1 ORDER BY rowid LIMIT ?2"
            );
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let mut stmt = c.prepare_cached(&sql).map_err(Error::from_sqlite)?;
            let items = stmt
                .query_map(rusqlite::params![run_id, limit], approval_from_row)
                .map_err(Error::from_sqlite)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(Error::from_sqlite)?;
            Ok((items, total))
        })
    }
}
