//! The engine's reads: the core's `ReadRows` on PostgreSQL, with the
//! core's column lists and decoders.

use std::sync::LazyLock;

use agentrt::Result;
use agentrt::model::{Approval, Event, ModelCall, Run, Step};
use agentrt::store::engine::{
    APPROVAL_COLUMNS, CALL_COLUMNS, Cut, Decode, EVENT_COLUMNS, ExtensionOrder, ExtensionQuery,
    Page, PageTable, RUN_COLUMNS, RUN_FROM, ReadRows, STEP_COLUMNS, StoredRow, capped_select,
    decode_approval, decode_capped_approval, decode_capped_run, decode_capped_step, decode_event,
    decode_model_call, decode_run, decode_step,
};
use agentrt::store::{ExtensionTable, MAX_PAGE_TEXT, RunFilter, SqlValue};

use crate::dialect::Postgres;
use crate::rows::{Param, PgRows, count, int, limit, text};

static RUN_SELECT: LazyLock<String> = LazyLock::new(|| capped_select(PageTable::Runs, &Postgres));
static STEP_SELECT: LazyLock<String> = LazyLock::new(|| capped_select(PageTable::Steps, &Postgres));
static APPROVAL_SELECT: LazyLock<String> =
    LazyLock::new(|| capped_select(PageTable::Approvals, &Postgres));
static EVENT_SELECT: LazyLock<String> =
    LazyLock::new(|| capped_select(PageTable::Events, &Postgres));

const PENDING_COUNT: &str =
    "SELECT COUNT(*) FROM approvals WHERE run_id = ? AND status = 'pending'";

/// ` WHERE …` keeping the runs that carry every label of `labels`, and its
/// parameters; a labels text that is not a JSON object matches nothing.
fn run_filter(filter: &RunFilter) -> (String, Vec<Param>) {
    let mut params = Vec::with_capacity(filter.labels.len() * 2 + 1);
    let mut clauses: Vec<&str> = filter
        .labels
        .iter()
        .map(|(key, value)| {
            params.push(text(key));
            params.push(text(value));
            "EXISTS (SELECT 1 FROM jsonb_each(agentrt_labels(run_labels.labels_json)) j \
             WHERE j.key = ? AND jsonb_typeof(j.value) = 'string' AND j.value #>> '{}' = ?)"
        })
        .collect();
    if let Some(status) = filter.status {
        params.push(text(status.as_str()));
        clauses.push("runs.status = ?");
    }
    if clauses.is_empty() {
        return (String::new(), params);
    }
    (format!(" WHERE {}", clauses.join(" AND ")), params)
}

fn nonnegative(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl ReadRows for PgRows<'_> {
    fn clock_now(&self) -> Result<Option<agentrt::clock::Timestamp>> {
        self.server_now().map(Some)
    }

    fn run(&self, run_id: &str, cut: Cut) -> Result<Option<Run>> {
        match cut {
            Cut::Whole => {
                let sql = format!("SELECT {RUN_COLUMNS} FROM {RUN_FROM} WHERE runs.id = ?");
                self.first(&sql, &[text(run_id)], decode_run)
            }
            Cut::Capped => {
                let sql = format!("SELECT {} FROM {RUN_FROM} WHERE runs.id = ?", *RUN_SELECT);
                self.first(&sql, &[text(run_id)], decode_capped_run)
            }
        }
    }

    fn runs(&self, filter: &RunFilter, limit_n: u64, offset: u64, cut: Cut) -> Result<Page<Run>> {
        let (filter, mut params) = run_filter(filter);
        let total = nonnegative(if filter.is_empty() {
            self.int("SELECT COUNT(*) FROM runs", &[])?
        } else {
            let sql = format!("SELECT COUNT(*) FROM {RUN_FROM}{filter}");
            self.int(&sql, &params)?
        });
        params.push(limit(limit_n));
        params.push(count(offset));
        let (columns, decode): (&str, Decode<Run>) = match cut {
            Cut::Whole => (RUN_COLUMNS, decode_run),
            Cut::Capped => (RUN_SELECT.as_str(), decode_capped_run),
        };
        let sql = format!(
            "SELECT {columns} FROM {RUN_FROM}{filter} ORDER BY runs.pos DESC LIMIT ? OFFSET ?"
        );
        let items = self.rows(&sql, &params, decode)?;
        Ok(Page { items, total })
    }

    fn run_exists(&self, run_id: &str) -> Result<bool> {
        Ok(!self
            .query("SELECT 1 FROM runs WHERE id = ?", &[text(run_id)])?
            .is_empty())
    }

    fn lease(&self, run_id: &str) -> Result<Option<(String, String)>> {
        self.first(
            "SELECT lease_owner, lease_expires_at FROM runs WHERE id = ?",
            &[text(run_id)],
            |r| Ok((r.text(0)?, r.text(1)?)),
        )
    }

    fn run_head(&self, run_id: &str) -> Result<i64> {
        self.int(
            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?",
            &[text(run_id)],
        )
    }

    fn last_seq(&self) -> Result<i64> {
        self.int("SELECT COALESCE(MAX(seq), 0) FROM events", &[])
    }

    fn steps(&self, run_id: &str) -> Result<Vec<Step>> {
        let sql = format!("SELECT {STEP_COLUMNS} FROM steps WHERE run_id = ? ORDER BY idx");
        self.rows(&sql, &[text(run_id)], decode_step)
    }

    fn steps_page(&self, run_id: &str, limit_n: u64, offset: u64, cut: Cut) -> Result<Page<Step>> {
        let total = nonnegative(self.int(
            "SELECT COUNT(*) FROM steps WHERE run_id = ?",
            &[text(run_id)],
        )?);
        let (columns, decode): (&str, Decode<Step>) = match cut {
            Cut::Whole => (STEP_COLUMNS, decode_step),
            Cut::Capped => (STEP_SELECT.as_str(), decode_capped_step),
        };
        let sql =
            format!("SELECT {columns} FROM steps WHERE run_id = ? ORDER BY idx LIMIT ? OFFSET ?");
        let items = self.rows(&sql, &[text(run_id), limit(limit_n), count(offset)], decode)?;
        Ok(Page { items, total })
    }

    fn approvals(&self, run_id: &str) -> Result<Vec<Approval>> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run_id = ? ORDER BY pos");
        self.rows(&sql, &[text(run_id)], decode_approval)
    }

    fn first_approvals(&self, run_id: &str, limit_n: u64) -> Result<(Vec<Approval>, u64)> {
        let total = nonnegative(self.int(
            "SELECT COUNT(*) FROM approvals WHERE run_id = ?",
            &[text(run_id)],
        )?);
        if limit_n == 0 {
            return Ok((Vec::new(), total));
        }
        let sql = format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE run_id = ? ORDER BY pos LIMIT ?"
        );
        let items = self.rows(&sql, &[text(run_id), limit(limit_n)], decode_approval)?;
        Ok((items, total))
    }

    fn approval(&self, run_id: &str, approval_id: &str, cut: Cut) -> Result<Option<Approval>> {
        let params = [text(approval_id), text(run_id)];
        match cut {
            Cut::Whole => {
                let sql =
                    format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ? AND run_id = ?");
                self.first(&sql, &params, decode_approval)
            }
            Cut::Capped => {
                let sql = format!(
                    "SELECT {} FROM approvals WHERE id = ? AND run_id = ?",
                    *APPROVAL_SELECT
                );
                self.first(&sql, &params, decode_capped_approval)
            }
        }
    }

    fn pending_approvals_page(
        &self,
        run_id: &str,
        limit_n: u64,
        offset: u64,
        cut: Cut,
    ) -> Result<Page<Approval>> {
        let total = nonnegative(self.int(PENDING_COUNT, &[text(run_id)])?);
        let (columns, decode): (&str, Decode<Approval>) = match cut {
            Cut::Whole => (APPROVAL_COLUMNS, decode_approval),
            Cut::Capped => (APPROVAL_SELECT.as_str(), decode_capped_approval),
        };
        let sql = format!(
            "SELECT {columns} FROM approvals WHERE run_id = ? AND status = 'pending' \
             ORDER BY pos LIMIT ? OFFSET ?"
        );
        let items = self.rows(&sql, &[text(run_id), limit(limit_n), count(offset)], decode)?;
        Ok(Page { items, total })
    }

    fn pending_approval_ids(
        &self,
        run_id: &str,
        limit_n: u64,
        cut: Cut,
    ) -> Result<(Vec<String>, u64)> {
        let total = nonnegative(self.int(PENDING_COUNT, &[text(run_id)])?);
        let column = match cut {
            Cut::Whole => "id".to_owned(),
            Cut::Capped => format!("substr(id, 1, {MAX_PAGE_TEXT})"),
        };
        let sql = format!(
            "SELECT {column} FROM approvals WHERE run_id = ? AND status = 'pending' ORDER BY pos LIMIT ?"
        );
        let ids = self.rows(&sql, &[text(run_id), limit(limit_n)], |r| r.text(0))?;
        Ok((ids, total))
    }

    fn pending_counts(&self, run_ids: &[&str]) -> Result<Vec<(String, u64, String)>> {
        let ids: Vec<String> = run_ids.iter().map(|id| (*id).to_owned()).collect();
        let sql = format!(
            "SELECT run_id, COUNT(*), substr(MIN(id), 1, {MAX_PAGE_TEXT}) FROM approvals \
             WHERE status = 'pending' AND run_id = ANY(?) GROUP BY run_id"
        );
        self.rows(&sql, &[Box::new(ids)], |r| {
            Ok((r.text(0)?, nonnegative(r.int(1)?), r.text(2)?))
        })
    }

    fn event_count(&self, run_id: &str, event_type: &str) -> Result<u64> {
        Ok(nonnegative(self.int(
            "SELECT COUNT(*) FROM events WHERE run_id = ? AND type = ?",
            &[text(run_id), text(event_type)],
        )?))
    }

    fn events_page(
        &self,
        run_id: &str,
        limit_n: u64,
        offset: u64,
        cut: Cut,
    ) -> Result<Page<Event>> {
        let total = nonnegative(self.int(
            "SELECT COUNT(*) FROM events WHERE run_id = ?",
            &[text(run_id)],
        )?);
        let columns = match cut {
            Cut::Whole => EVENT_COLUMNS,
            Cut::Capped => EVENT_SELECT.as_str(),
        };
        let sql =
            format!("SELECT {columns} FROM events WHERE run_id = ? ORDER BY seq LIMIT ? OFFSET ?");
        let items = self.rows(
            &sql,
            &[text(run_id), limit(limit_n), count(offset)],
            decode_event,
        )?;
        Ok(Page { items, total })
    }

    fn events_after(
        &self,
        run_id: Option<&str>,
        after_seq: i64,
        limit_n: u64,
    ) -> Result<Vec<Event>> {
        match run_id {
            Some(run_id) => {
                let sql = format!(
                    "SELECT {} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                    *EVENT_SELECT
                );
                self.rows(
                    &sql,
                    &[text(run_id), int(after_seq), limit(limit_n)],
                    decode_event,
                )
            }
            None => {
                let sql = format!(
                    "SELECT {} FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                    *EVENT_SELECT
                );
                self.rows(&sql, &[int(after_seq), limit(limit_n)], decode_event)
            }
        }
    }

    fn tool_spec(&self, hash: &str) -> Result<Option<String>> {
        self.first(
            "SELECT spec_json FROM tool_specs WHERE hash = ?",
            &[text(hash)],
            |r| r.text(0),
        )
    }

    fn model_calls(&self, run_id: &str) -> Result<Vec<ModelCall>> {
        let sql = format!("SELECT {CALL_COLUMNS} FROM model_calls WHERE run_id = ? ORDER BY pos");
        self.rows(&sql, &[text(run_id)], decode_model_call)
    }

    fn model_call(&self, call_id: &str) -> Result<Option<ModelCall>> {
        let sql = format!("SELECT {CALL_COLUMNS} FROM model_calls WHERE id = ?");
        self.first(&sql, &[text(call_id)], decode_model_call)
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
        self.select_extension(table, &query)
    }

    fn extension_rows_by(
        &self,
        table: &ExtensionTable,
        query: &ExtensionQuery<'_>,
    ) -> Result<Vec<StoredRow>> {
        self.select_extension(table, query)
    }
}
