//! The SQLite engine's reads: every `SELECT` behind [`ReadRows`].

use rusqlite::types::Value;
use rusqlite::{OptionalExtension, params, params_from_iter};

use super::super::RunFilter;
use super::super::calls::{CALL_COLUMNS, call_from_row};
use super::super::columns::Decode;
use super::super::extension::{ExtensionTable, SqlValue};
use super::super::page::{
    APPROVAL_SELECT, EVENT_SELECT, MAX_PAGE_TEXT, RUN_SELECT, STEP_SELECT, capped_approval,
    capped_run, capped_step,
};
use super::super::read::{
    APPROVAL_COLUMNS, EVENT_COLUMNS, Page, RUN_COLUMNS, RUN_FROM, STEP_COLUMNS, approval_from_row,
    event_from_row, run_filter, run_from_row, step_from_row,
};
use super::super::read_rows::StoredRow;
use super::super::read_rows::{Cut, ExtensionOrder, ExtensionQuery, ReadRows};
use super::{SqliteRows, bounds, extension_rows};
use crate::error::{Error, Result};
use crate::model::{Approval, Event, ModelCall, Run, Step};

const PENDING_COUNT: &str =
    "SELECT COUNT(*) FROM approvals WHERE run_id = ? AND status = 'pending'";

impl ReadRows for SqliteRows<'_> {
    fn run(&self, run_id: &str, cut: Cut) -> Result<Option<Run>> {
        match cut {
            Cut::Whole => {
                let sql = format!("SELECT {RUN_COLUMNS} FROM {RUN_FROM} WHERE runs.id = ?");
                self.first(&sql, [run_id], run_from_row)
            }
            Cut::Capped => {
                let sql = format!("SELECT {} FROM {RUN_FROM} WHERE runs.id = ?", *RUN_SELECT);
                self.first(&sql, [run_id], capped_run)
            }
        }
    }

    fn runs(&self, filter: &RunFilter, limit: u64, offset: u64, cut: Cut) -> Result<Page<Run>> {
        let (filter, mut params) = run_filter(filter);
        let total = if filter.is_empty() {
            self.count("SELECT COUNT(*) FROM runs", [])?
        } else {
            let sql = format!("SELECT COUNT(*) FROM {RUN_FROM}{filter}");
            self.count(&sql, params_from_iter(params.iter()))?
        };
        let (limit, offset) = bounds(limit, offset);
        params.push(Value::Integer(limit));
        params.push(Value::Integer(offset));
        let (columns, decode): (&str, Decode<Run>) = match cut {
            Cut::Whole => (RUN_COLUMNS, run_from_row),
            Cut::Capped => (RUN_SELECT.as_str(), capped_run),
        };
        let sql = format!(
            "SELECT {columns} FROM {RUN_FROM}{filter} ORDER BY runs.rowid DESC LIMIT ? OFFSET ?"
        );
        let items = self.rows(&sql, params_from_iter(params), decode)?;
        Ok(Page { items, total })
    }

    fn run_exists(&self, run_id: &str) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM runs WHERE id = ?1")
            .and_then(|mut stmt| stmt.query_row([run_id], |_| Ok(())).optional())
            .map(|found| found.is_some())
            .map_err(Error::from_sqlite)
    }

    fn lease(&self, run_id: &str) -> Result<Option<(String, String)>> {
        self.conn
            .prepare_cached("SELECT lease_owner, lease_expires_at FROM runs WHERE id = ?")
            .and_then(|mut stmt| {
                stmt.query_row([run_id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(Error::from_sqlite)
    }

    fn run_head(&self, run_id: &str) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?")
            .and_then(|mut stmt| stmt.query_row([run_id], |r| r.get(0)))
            .map_err(Error::from_sqlite)
    }

    fn last_seq(&self) -> Result<i64> {
        self.conn
            .prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM events")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .map_err(Error::from_sqlite)
    }

    fn steps(&self, run_id: &str) -> Result<Vec<Step>> {
        let sql = format!("SELECT {STEP_COLUMNS} FROM steps WHERE run_id = ? ORDER BY idx");
        self.rows(&sql, [run_id], step_from_row)
    }

    fn steps_page(&self, run_id: &str, limit: u64, offset: u64, cut: Cut) -> Result<Page<Step>> {
        let total = self.count("SELECT COUNT(*) FROM steps WHERE run_id = ?", [run_id])?;
        let (limit, offset) = bounds(limit, offset);
        let (columns, decode): (&str, Decode<Step>) = match cut {
            Cut::Whole => (STEP_COLUMNS, step_from_row),
            Cut::Capped => (STEP_SELECT.as_str(), capped_step),
        };
        let sql = format!(
            "SELECT {columns} FROM steps WHERE run_id = ?1 ORDER BY idx LIMIT ?2 OFFSET ?3"
        );
        let items = self.rows(&sql, params![run_id, limit, offset], decode)?;
        Ok(Page { items, total })
    }

    fn approvals(&self, run_id: &str) -> Result<Vec<Approval>> {
        let sql =
            format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run_id = ? ORDER BY rowid");
        self.rows(&sql, [run_id], approval_from_row)
    }

    fn first_approvals(&self, run_id: &str, limit: u64) -> Result<(Vec<Approval>, u64)> {
        let total = self.count("SELECT COUNT(*) FROM approvals WHERE run_id = ?", [run_id])?;
        if limit == 0 {
            return Ok((Vec::new(), total));
        }
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run_id = ?1 ORDER BY rowid LIMIT ?2"
        );
        let (limit, _) = bounds(limit, 0);
        let items = self.rows(&sql, params![run_id, limit], approval_from_row)?;
        Ok((items, total))
    }

    fn approval(&self, run_id: &str, approval_id: &str, cut: Cut) -> Result<Option<Approval>> {
        match cut {
            Cut::Whole => {
                let sql =
                    format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ? AND run_id = ?");
                self.first(&sql, [approval_id, run_id], approval_from_row)
            }
            Cut::Capped => {
                let sql = format!(
                    "SELECT {} FROM approvals WHERE id = ?1 AND run_id = ?2",
                    *APPROVAL_SELECT
                );
                self.first(&sql, [approval_id, run_id], capped_approval)
            }
        }
    }

    fn pending_approvals_page(
        &self,
        run_id: &str,
        limit: u64,
        offset: u64,
        cut: Cut,
    ) -> Result<Page<Approval>> {
        let total = self.count(PENDING_COUNT, [run_id])?;
        let (limit, offset) = bounds(limit, offset);
        let (columns, decode): (&str, Decode<Approval>) = match cut {
            Cut::Whole => (APPROVAL_COLUMNS, approval_from_row),
            Cut::Capped => (APPROVAL_SELECT.as_str(), capped_approval),
        };
        let sql = format!(
            "SELECT {columns} FROM approvals WHERE run_id = ?1 AND status = 'pending'
             ORDER BY rowid LIMIT ?2 OFFSET ?3"
        );
        let items = self.rows(&sql, params![run_id, limit, offset], decode)?;
        Ok(Page { items, total })
    }

    fn pending_approval_ids(
        &self,
        run_id: &str,
        limit: u64,
        cut: Cut,
    ) -> Result<(Vec<String>, u64)> {
        let total = self.count(PENDING_COUNT, [run_id])?;
        let column = match cut {
            Cut::Whole => "id".to_owned(),
            Cut::Capped => format!("substr(id, 1, {MAX_PAGE_TEXT})"),
        };
        let sql = format!(
            "SELECT {column} FROM approvals WHERE run_id = ?1 AND status = 'pending' ORDER BY rowid LIMIT ?2"
        );
        let ids = self.rows(&sql, params![run_id, bounds(limit, 0).0], |r| r.get(0))?;
        Ok((ids, total))
    }

    fn pending_counts(&self, run_ids: &[&str]) -> Result<Vec<(String, u64, String)>> {
        let mut out = Vec::new();
        // SQLite binds at most a few thousand parameters per statement.
        for chunk in run_ids.chunks(500) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let sql = format!(
                "SELECT run_id, COUNT(*), substr(MIN(id), 1, {MAX_PAGE_TEXT}) FROM approvals \
                 WHERE status = 'pending' AND run_id IN ({marks}) GROUP BY run_id"
            );
            out.extend(self.rows(&sql, params_from_iter(chunk.iter()), |r| {
                let n: i64 = r.get(1)?;
                Ok((r.get(0)?, u64::try_from(n).unwrap_or(0), r.get(2)?))
            })?);
        }
        Ok(out)
    }

    fn event_count(&self, run_id: &str, event_type: &str) -> Result<u64> {
        self.count(
            "SELECT COUNT(*) FROM events WHERE run_id = ? AND type = ?",
            [run_id, event_type],
        )
    }

    fn events_page(&self, run_id: &str, limit: u64, offset: u64, cut: Cut) -> Result<Page<Event>> {
        let total = self.count("SELECT COUNT(*) FROM events WHERE run_id = ?", [run_id])?;
        let (limit, offset) = bounds(limit, offset);
        let columns = match cut {
            Cut::Whole => EVENT_COLUMNS,
            Cut::Capped => EVENT_SELECT.as_str(),
        };
        let sql = format!(
            "SELECT {columns} FROM events WHERE run_id = ?1 ORDER BY seq LIMIT ?2 OFFSET ?3"
        );
        let items = self.rows(&sql, params![run_id, limit, offset], event_from_row)?;
        Ok(Page { items, total })
    }

    fn events_after(&self, run_id: Option<&str>, after_seq: i64, limit: u64) -> Result<Vec<Event>> {
        let (limit, _) = bounds(limit, 0);
        match run_id {
            Some(run_id) => {
                let sql = format!(
                    "SELECT {} FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                    *EVENT_SELECT
                );
                self.rows(&sql, params![run_id, after_seq, limit], event_from_row)
            }
            None => {
                let sql = format!(
                    "SELECT {} FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                    *EVENT_SELECT
                );
                self.rows(&sql, params![after_seq, limit], event_from_row)
            }
        }
    }

    fn tool_spec(&self, hash: &str) -> Result<Option<String>> {
        self.first(
            "SELECT spec_json FROM tool_specs WHERE hash = ?",
            [hash],
            |r| r.get(0),
        )
    }

    fn model_calls(&self, run_id: &str) -> Result<Vec<ModelCall>> {
        let sql = format!("SELECT {CALL_COLUMNS} FROM model_calls WHERE run_id = ? ORDER BY rowid");
        self.rows(&sql, [run_id], call_from_row)
    }

    fn model_call(&self, call_id: &str) -> Result<Option<ModelCall>> {
        let sql = format!("SELECT {CALL_COLUMNS} FROM model_calls WHERE id = ?");
        self.first(&sql, [call_id], call_from_row)
    }

    fn extension_rows(
        &self,
        table: &ExtensionTable,
        filter: &[(&'static str, &SqlValue)],
        limit: u64,
    ) -> Result<Vec<StoredRow>> {
        let query = ExtensionQuery {
            filter,
            at_least: None,
            order: ExtensionOrder::Oldest,
            limit,
        };
        extension_rows(self.conn, table, &query)
    }

    fn extension_rows_by(
        &self,
        table: &ExtensionTable,
        query: &ExtensionQuery<'_>,
    ) -> Result<Vec<StoredRow>> {
        extension_rows(self.conn, table, query)
    }
}
