//! Bounded page reads, for files that may hold rows of any size (core
//! §2.5): each read returns at most `limit` rows (`0` means all; callers
//! that must stay small read pages of [`PAGE_READ_ROWS`]), totals come from
//! `COUNT` queries, and every text column is cut at [`MAX_PAGE_TEXT`]
//! characters inside SQL, so a database with thousands of huge rows is
//! listed with small memory.
//!
//! What a cut looks like:
//!
//! - a plain text column keeps its first [`MAX_PAGE_TEXT`] characters
//!   followed by `…[cut: <n> characters]`;
//! - a JSON column of a run or an approval becomes the object
//!   `{"truncated":true,"length":<n>,"head":"<first characters>"}` (in
//!   canonical form, keys sorted);
//! - a JSON column of a step (decision, policy verdict, observation) is left
//!   out, so the step keeps only its identifying fields;
//! - a run, step or approval with a cut column says so in its
//!   `decode_error` (`<column>: <n> characters, over the page-read cap of
//!   65536`), so an approval read this way is never mistaken for the whole
//!   row. Events have no `decode_error`: their cut payload carries the
//!   marker object.
//!
//! Rows decode with the rules of the unbounded reads: a column that does
//! not decode is reported in `decode_error` instead of failing the read.

use std::collections::HashMap;
use std::sync::LazyLock;

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, Row, params_from_iter};

use super::Store;
use super::read::{
    RUN_FROM, approval_from_row, event_from_row, label_filter, run_from_row, step_from_row,
};
use crate::error::{Error, Result};
use crate::model::{Approval, Event, Labels, Run, Step};

use super::read::Page;

/// The most characters of one text column a page read returns.
pub const MAX_PAGE_TEXT: usize = 65_536;

/// The page size callers use to read "all" rows a page at a time.
pub const PAGE_READ_ROWS: u64 = 500;

/// How a column is selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    /// An integer, read as is.
    Int(&'static str),
    /// Text, cut with a visible marker.
    Text(&'static str),
    /// JSON, replaced by the truncation object when over the cap.
    Json(&'static str),
    /// JSON, read as empty when over the cap.
    Dropped(&'static str),
}

use Col::{Dropped, Int, Json, Text};

impl Col {
    #[cfg(test)]
    fn name(self) -> &'static str {
        match self {
            Int(c) | Text(c) | Json(c) | Dropped(c) => c,
        }
    }

    fn select(self) -> String {
        let n = MAX_PAGE_TEXT;
        match self {
            Int(c) => c.to_owned(),
            Text(c) => format!(
                "CASE WHEN length({c}) > {n} THEN substr({c}, 1, {n}) || '\u{2026}[cut: ' || length({c}) || ' characters]' ELSE {c} END"
            ),
            Json(c) => format!(
                "CASE WHEN length({c}) > {n} THEN json_object('truncated', json('true'), 'length', length({c}), 'head', CAST(substr({c}, 1, {n}) AS TEXT)) ELSE {c} END"
            ),
            Dropped(c) => format!("CASE WHEN length({c}) > {n} THEN '' ELSE {c} END"),
        }
    }

    fn cut_note(self) -> Option<String> {
        let n = MAX_PAGE_TEXT;
        match self {
            Int(_) => None,
            Text(c) | Json(c) | Dropped(c) => Some(format!(
                "CASE WHEN length({c}) > {n} THEN '{c}: ' || length({c}) || ' characters, over the page-read cap of {n}; ' ELSE '' END"
            )),
        }
    }
}

/// The columns of `read::RUN_COLUMNS`, in the same order.
const RUN_COLS: &[Col] = &[
    Text("id"),
    Text("goal"),
    Text("status"),
    Text("reason"),
    Text("reason_detail"),
    Json("limits_json"),
    Int("step_count"),
    Text("created_at"),
    Text("finished_at"),
    Json("result_json"),
    Int("model_calls"),
    Int("input_tokens"),
    Int("output_tokens"),
    Int("cached_input_tokens"),
    Int("estimated_cost_micros"),
    Int("active_ms"),
    Json("labels_json"),
];

/// The columns of `read::STEP_COLUMNS`, in the same order.
const STEP_COLS: &[Col] = &[
    Text("id"),
    Text("run_id"),
    Int("idx"),
    Text("status"),
    Dropped("decision_json"),
    Dropped("policy_json"),
    Dropped("observation_json"),
    Text("started_at"),
    Text("finished_at"),
    Text("spec_hash"),
    Text("policy_id"),
];

/// The columns of `read::APPROVAL_COLUMNS`, in the same order.
const APPROVAL_COLS: &[Col] = &[
    Text("id"),
    Text("run_id"),
    Text("step_id"),
    Text("kind"),
    Json("capability_json"),
    Json("presentation_json"),
    Json("request_json"),
    Text("hash"),
    Text("status"),
    Text("created_at"),
    Text("decided_at"),
    Text("decided_by"),
    Text("note"),
    Text("expires_at"),
];

/// The columns of `read::EVENT_COLUMNS`, in the same order.
const EVENT_COLS: &[Col] = &[
    Int("seq"),
    Text("run_id"),
    Text("step_id"),
    Text("at"),
    Text("type"),
    Json("payload_json"),
];

/// `SELECT` list: the capped columns, then one text column naming the cut
/// ones (empty when nothing was cut).
fn select_list(cols: &[Col]) -> String {
    let mut parts: Vec<String> = cols.iter().map(|c| c.select()).collect();
    let notes: Vec<String> = cols.iter().filter_map(|c| c.cut_note()).collect();
    parts.push(format!("({})", notes.join(" || ")));
    parts.join(", ")
}

static RUN_SELECT: LazyLock<String> = LazyLock::new(|| select_list(RUN_COLS));
static STEP_SELECT: LazyLock<String> = LazyLock::new(|| select_list(STEP_COLS));
static APPROVAL_SELECT: LazyLock<String> = LazyLock::new(|| select_list(APPROVAL_COLS));
static EVENT_SELECT: LazyLock<String> = LazyLock::new(|| select_list(EVENT_COLS));

/// The cut note of a row selected with [`select_list`]: the last column.
fn cut_note(r: &Row<'_>, cols: &[Col]) -> rusqlite::Result<Option<String>> {
    let note: Option<String> = r.get(cols.len())?;
    let note = note.unwrap_or_default();
    let note = note.trim_end_matches("; ");
    Ok((!note.is_empty()).then(|| note.to_owned()))
}

/// Adds `note` to a row's decode error.
fn with_note(existing: Option<String>, note: Option<String>) -> Option<String> {
    match (existing, note) {
        (None, note) => note,
        (existing, None) => existing,
        (Some(e), Some(n)) => Some(format!("{e}; {n}")),
    }
}

fn capped_run(r: &Row<'_>) -> rusqlite::Result<Run> {
    let run = run_from_row(r)?;
    let note = cut_note(r, RUN_COLS)?;
    Ok(Run {
        decode_error: with_note(run.decode_error.clone(), note),
        ..run
    })
}

fn capped_step(r: &Row<'_>) -> rusqlite::Result<Step> {
    let step = step_from_row(r)?;
    let note = cut_note(r, STEP_COLS)?;
    Ok(Step {
        decode_error: with_note(step.decode_error.clone(), note),
        ..step
    })
}

fn capped_approval(r: &Row<'_>) -> rusqlite::Result<Approval> {
    let approval = approval_from_row(r)?;
    let note = cut_note(r, APPROVAL_COLS)?;
    Ok(Approval {
        decode_error: with_note(approval.decode_error.clone(), note),
        ..approval
    })
}

fn count(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Result<u64> {
    let n: i64 = conn
        .query_row(sql, params, |r| r.get(0))
        .map_err(Error::from_sqlite)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// SQLite `LIMIT`/`OFFSET` values: limit 0 means all (`-1`).
fn bounds(limit: u64, offset: u64) -> (i64, i64) {
    let limit = if limit == 0 {
        -1
    } else {
        i64::try_from(limit).unwrap_or(i64::MAX)
    };
    (limit, i64::try_from(offset).unwrap_or(i64::MAX))
}

fn rows<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql).map_err(Error::from_sqlite)?;
    stmt.query_map(params, f)
        .map_err(Error::from_sqlite)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(Error::from_sqlite)
}

/// How many pending approvals a run has, as counted by
/// [`Store::pending_counts_capped`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCount {
    /// How many approvals of the run are pending.
    pub count: u64,
    /// The pending approval's id when there is exactly one (capped like
    /// every page-read text).
    pub only_id: Option<String>,
}

impl Store {
    /// The run with this id, with every text column capped.
    pub fn get_run_capped(&self, run_id: &str) -> Result<Run> {
        let sql = format!("SELECT {} FROM {RUN_FROM} WHERE runs.id = ?", *RUN_SELECT);
        self.read(|c| {
            let mut stmt = c.prepare_cached(&sql).map_err(Error::from_sqlite)?;
            stmt.query_row([run_id], capped_run)
                .optional()
                .map_err(Error::from_sqlite)
        })?
        .ok_or_else(|| Error::NotFound {
            what: "run",
            id: run_id.to_owned(),
        })
    }

    /// A page of runs, newest first (insertion order), capped; `limit` 0
    /// means all.
    pub fn runs_page_capped(&self, limit: u64, offset: u64) -> Result<Page<Run>> {
        self.runs_page_capped_labelled(limit, offset, &Labels::new())
    }

    /// A page of the runs that carry every label of `labels` (all runs for
    /// none), newest first, capped; `limit` 0 means all. The total counts
    /// the matching runs only.
    pub fn runs_page_capped_labelled(
        &self,
        limit: u64,
        offset: u64,
        labels: &Labels,
    ) -> Result<Page<Run>> {
        let (filter, mut params) = label_filter(labels);
        let sql = format!(
            "SELECT {} FROM {RUN_FROM}{filter} ORDER BY runs.rowid DESC LIMIT ? OFFSET ?",
            *RUN_SELECT
        );
        self.read(|c| {
            let total = if filter.is_empty() {
                count(c, "SELECT COUNT(*) FROM runs", [])?
            } else {
                let sql = format!("SELECT COUNT(*) FROM {RUN_FROM}{filter}");
                count(c, &sql, params_from_iter(params.iter()))?
            };
            let (limit, offset) = bounds(limit, offset);
            params.push(Value::Integer(limit));
            params.push(Value::Integer(offset));
            let items = rows(c, &sql, params_from_iter(params), capped_run)?;
            Ok(Page { items, total })
        })
    }

    /// A page of a run's steps in index order, capped; `limit` 0 means all.
    pub fn steps_page_capped(&self, run_id: &str, limit: u64, offset: u64) -> Result<Page<Step>> {
        let sql = format!(
            "SELECT {} FROM steps WHERE run_id = ?1 ORDER BY idx LIMIT ?2 OFFSET ?3",
            *STEP_SELECT
        );
        self.read(|c| {
            let total = count(c, "SELECT COUNT(*) FROM steps WHERE run_id = ?", [run_id])?;
            let (limit, offset) = bounds(limit, offset);
            let items = rows(
                c,
                &sql,
                rusqlite::params![run_id, limit, offset],
                capped_step,
            )?;
            Ok(Page { items, total })
        })
    }

    /// A page of a run's pending approvals in creation order, capped;
    /// `limit` 0 means all.
    pub fn pending_approvals_page_capped(
        &self,
        run_id: &str,
        limit: u64,
        offset: u64,
    ) -> Result<Page<Approval>> {
        let sql = format!(
            "SELECT {} FROM approvals WHERE run_id = ?1 AND status = 'pending' \
             ORDER BY rowid LIMIT ?2 OFFSET ?3",
            *APPROVAL_SELECT
        );
        self.read(|c| {
            let total = count(
                c,
                "SELECT COUNT(*) FROM approvals WHERE run_id = ? AND status = 'pending'",
                [run_id],
            )?;
            let (limit, offset) = bounds(limit, offset);
            let items = rows(
                c,
                &sql,
                rusqlite::params![run_id, limit, offset],
                capped_approval,
            )?;
            Ok(Page { items, total })
        })
    }

    /// One approval of `run_id`, capped.
    pub fn get_approval_capped(&self, run_id: &str, approval_id: &str) -> Result<Approval> {
        let sql = format!(
            "SELECT {} FROM approvals WHERE id = ?1 AND run_id = ?2",
            *APPROVAL_SELECT
        );
        self.read(|c| {
            let mut stmt = c.prepare_cached(&sql).map_err(Error::from_sqlite)?;
            stmt.query_row([approval_id, run_id], capped_approval)
                .optional()
                .map_err(Error::from_sqlite)
        })?
        .ok_or_else(|| Error::NotFound {
            what: "approval",
            id: approval_id.to_owned(),
        })
    }

    /// The ids of a run's pending approvals in creation order (at most
    /// `limit`; 0 means all), each capped, and how many are pending.
    pub fn pending_approval_ids_capped(
        &self,
        run_id: &str,
        limit: u64,
    ) -> Result<(Vec<String>, u64)> {
        let sql = format!(
            "SELECT substr(id, 1, {MAX_PAGE_TEXT}) FROM approvals \
             WHERE run_id = ?1 AND status = 'pending' ORDER BY rowid LIMIT ?2"
        );
        self.read(|c| {
            let total = count(
                c,
                "SELECT COUNT(*) FROM approvals WHERE run_id = ? AND status = 'pending'",
                [run_id],
            )?;
            let ids = rows(
                c,
                &sql,
                rusqlite::params![run_id, bounds(limit, 0).0],
                |r| r.get::<_, String>(0),
            )?;
            Ok((ids, total))
        })
    }

    /// For each of `run_ids` that has pending approvals: how many, and the
    /// id when there is exactly one. One query per 500 ids.
    pub fn pending_counts_capped(&self, run_ids: &[&str]) -> Result<HashMap<String, PendingCount>> {
        let mut out = HashMap::new();
        for chunk in run_ids.chunks(500) {
            if chunk.is_empty() {
                continue;
            }
            let marks = vec!["?"; chunk.len()].join(", ");
            let sql = format!(
                "SELECT run_id, COUNT(*), substr(MIN(id), 1, {MAX_PAGE_TEXT}) FROM approvals \
                 WHERE status = 'pending' AND run_id IN ({marks}) GROUP BY run_id"
            );
            let found = self.read(|c| {
                rows(c, &sql, rusqlite::params_from_iter(chunk.iter()), |r| {
                    let run_id: String = r.get(0)?;
                    let n: i64 = r.get(1)?;
                    let id: String = r.get(2)?;
                    Ok((run_id, u64::try_from(n).unwrap_or(0), id))
                })
            })?;
            for (run_id, count, id) in found {
                let only_id = (count == 1).then_some(id);
                out.insert(run_id, PendingCount { count, only_id });
            }
        }
        Ok(out)
    }

    /// A page of a run's events in seq order, capped; `limit` 0 means all.
    pub fn events_page_capped(&self, run_id: &str, limit: u64, offset: u64) -> Result<Page<Event>> {
        let sql = format!(
            "SELECT {} FROM events WHERE run_id = ?1 ORDER BY seq LIMIT ?2 OFFSET ?3",
            *EVENT_SELECT
        );
        self.read(|c| {
            let total = count(c, "SELECT COUNT(*) FROM events WHERE run_id = ?", [run_id])?;
            let (limit, offset) = bounds(limit, offset);
            let items = rows(
                c,
                &sql,
                rusqlite::params![run_id, limit, offset],
                event_from_row,
            )?;
            Ok(Page { items, total })
        })
    }

    /// Events with a seq above `after_seq`, in seq order, capped: of one run,
    /// or of every run when `run_id` is `None`. At most `limit` (0 means
    /// all). Read a stream a page at a time by passing the last seq seen.
    pub fn events_after_capped(
        &self,
        run_id: Option<&str>,
        after_seq: i64,
        limit: u64,
    ) -> Result<Vec<Event>> {
        let (limit, _) = bounds(limit, 0);
        self.read(|c| match run_id {
            Some(run_id) => {
                let sql = format!(
                    "SELECT {} FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                    *EVENT_SELECT
                );
                rows(
                    c,
                    &sql,
                    rusqlite::params![run_id, after_seq, limit],
                    event_from_row,
                )
            }
            None => {
                let sql = format!(
                    "SELECT {} FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                    *EVENT_SELECT
                );
                rows(c, &sql, rusqlite::params![after_seq, limit], event_from_row)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::read::{APPROVAL_COLUMNS, EVENT_COLUMNS, RUN_COLUMNS, STEP_COLUMNS};
    use super::*;

    fn names(cols: &[Col]) -> Vec<&'static str> {
        cols.iter().map(|c| c.name()).collect()
    }

    fn split(list: &str) -> Vec<&str> {
        list.split(',').map(str::trim).collect()
    }

    /// The capped column lists must follow the unbounded reads' lists,
    /// because both decode with the same row functions.
    #[test]
    fn capped_columns_follow_the_read_column_lists() {
        assert_eq!(names(RUN_COLS), split(RUN_COLUMNS));
        assert_eq!(names(STEP_COLS), split(STEP_COLUMNS));
        assert_eq!(names(APPROVAL_COLS), split(APPROVAL_COLUMNS));
        assert_eq!(names(EVENT_COLS), split(EVENT_COLUMNS));
    }

    #[test]
    fn notes_merge_into_decode_errors() {
        assert_eq!(with_note(None, None), None);
        assert_eq!(with_note(Some("a".into()), None), Some("a".into()));
        assert_eq!(with_note(None, Some("b".into())), Some("b".into()));
        assert_eq!(
            with_note(Some("a".into()), Some("b".into())),
            Some("a; b".into())
        );
    }
}
