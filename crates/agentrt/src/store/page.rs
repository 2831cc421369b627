//! Bounded page reads, for files that may hold rows of any size (design
//! §6): each read returns at most `limit` rows (`0` means all; callers
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

use super::columns::RowColumns;
use super::dialect::{Dialect, SqliteDialect};

use super::read::{approval_from_row, run_from_row, step_from_row};
use super::read_rows::Cut;
use super::{RunFilter, Store};
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

    fn select(self, dialect: &dyn Dialect) -> String {
        let n = MAX_PAGE_TEXT;
        match self {
            Int(c) => c.to_owned(),
            Text(c) => format!(
                "CASE WHEN length({c}) > {n} THEN substr({c}, 1, {n}) || '\u{2026}[cut: ' || length({c}) || ' characters]' ELSE {c} END"
            ),
            Json(c) => format!(
                "CASE WHEN length({c}) > {n} THEN {} ELSE {c} END",
                dialect.json_cut(c, n)
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
fn select_list(cols: &[Col], dialect: &dyn Dialect) -> String {
    let mut parts: Vec<String> = cols.iter().map(|c| c.select(dialect)).collect();
    let notes: Vec<String> = cols.iter().filter_map(|c| c.cut_note()).collect();
    parts.push(format!("({})", notes.join(" || ")));
    parts.join(", ")
}

pub(super) static RUN_SELECT: LazyLock<String> =
    LazyLock::new(|| select_list(RUN_COLS, &SqliteDialect));
pub(super) static STEP_SELECT: LazyLock<String> =
    LazyLock::new(|| select_list(STEP_COLS, &SqliteDialect));
pub(super) static APPROVAL_SELECT: LazyLock<String> =
    LazyLock::new(|| select_list(APPROVAL_COLS, &SqliteDialect));
pub(super) static EVENT_SELECT: LazyLock<String> =
    LazyLock::new(|| select_list(EVENT_COLS, &SqliteDialect));

/// The tables a page read selects from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageTable {
    /// `runs` joined with `run_labels` (`RUN_FROM`).
    Runs,
    /// `steps`.
    Steps,
    /// `approvals`.
    Approvals,
    /// `events`.
    Events,
}

/// The select list of a capped read of `table` in `dialect`: the columns
/// of the table's whole read in the same order, each cut at
/// [`MAX_PAGE_TEXT`], then one text column naming the cut ones, which
/// `capped_run`, `capped_step` and `capped_approval` read.
pub fn capped_select(table: PageTable, dialect: &dyn Dialect) -> String {
    let cols = match table {
        PageTable::Runs => RUN_COLS,
        PageTable::Steps => STEP_COLS,
        PageTable::Approvals => APPROVAL_COLS,
        PageTable::Events => EVENT_COLS,
    };
    select_list(cols, dialect)
}

/// The cut note of a row selected with [`select_list`]: the last column.
fn cut_note(r: &dyn RowColumns, cols: &[Col]) -> Result<Option<String>> {
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

/// A run from a row of `capped_select(PageTable::Runs, …)`, its cut
/// columns named in `decode_error`.
pub fn capped_run(r: &dyn RowColumns) -> Result<Run> {
    let run = run_from_row(r)?;
    let note = cut_note(r, RUN_COLS)?;
    Ok(Run {
        decode_error: with_note(run.decode_error.clone(), note),
        ..run
    })
}

/// A step from a row of `capped_select(PageTable::Steps, …)`, its cut
/// columns named in `decode_error`.
pub fn capped_step(r: &dyn RowColumns) -> Result<Step> {
    let step = step_from_row(r)?;
    let note = cut_note(r, STEP_COLS)?;
    Ok(Step {
        decode_error: with_note(step.decode_error.clone(), note),
        ..step
    })
}

/// An approval from a row of `capped_select(PageTable::Approvals, …)`,
/// its cut columns named in `decode_error`.
pub fn capped_approval(r: &dyn RowColumns) -> Result<Approval> {
    let approval = approval_from_row(r)?;
    let note = cut_note(r, APPROVAL_COLS)?;
    Ok(Approval {
        decode_error: with_note(approval.decode_error.clone(), note),
        ..approval
    })
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
        self.read(|rows| rows.run(run_id, Cut::Capped))?
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
        self.runs_page_capped_filtered(limit, offset, &RunFilter::labelled(labels.clone()))
    }

    /// A page of the runs `filter` keeps, newest first, capped; `limit` 0
    /// means all. The total counts the kept runs only.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use agentrt::store::RunFilter;
    /// use agentrt::*;
    /// let store = Store::open(":memory:")?;
    /// let gate = Gate::new(GateConfig::new(store.clone(), DefaultPolicy, vec![]))?;
    /// gate.begin(Some("r1"), "open", Limits::default()).await?.close().await?;
    /// let running = RunFilter::default().with_status(RunStatus::Running);
    /// assert_eq!(store.runs_page_capped_filtered(10, 0, &running)?.total, 1);
    /// let done = RunFilter::default().with_status(RunStatus::Completed);
    /// assert_eq!(store.runs_page_capped_filtered(10, 0, &done)?.total, 0);
    /// # Ok::<(), agentrt::Error>(()) }).unwrap();
    /// ```
    pub fn runs_page_capped_filtered(
        &self,
        limit: u64,
        offset: u64,
        filter: &RunFilter,
    ) -> Result<Page<Run>> {
        self.read(|rows| rows.runs(filter, limit, offset, Cut::Capped))
    }

    /// A page of a run's steps in index order, capped; `limit` 0 means all.
    pub fn steps_page_capped(&self, run_id: &str, limit: u64, offset: u64) -> Result<Page<Step>> {
        self.read(|rows| rows.steps_page(run_id, limit, offset, Cut::Capped))
    }

    /// A page of a run's pending approvals in creation order, capped;
    /// `limit` 0 means all.
    pub fn pending_approvals_page_capped(
        &self,
        run_id: &str,
        limit: u64,
        offset: u64,
    ) -> Result<Page<Approval>> {
        self.read(|rows| rows.pending_approvals_page(run_id, limit, offset, Cut::Capped))
    }

    /// One approval of `run_id`, capped.
    pub fn get_approval_capped(&self, run_id: &str, approval_id: &str) -> Result<Approval> {
        self.read(|rows| rows.approval(run_id, approval_id, Cut::Capped))?
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
        self.read(|rows| rows.pending_approval_ids(run_id, limit, Cut::Capped))
    }

    /// For each of `run_ids` that has pending approvals: how many, and the
    /// id when there is exactly one.
    pub fn pending_counts_capped(&self, run_ids: &[&str]) -> Result<HashMap<String, PendingCount>> {
        let found = self.read(|rows| rows.pending_counts(run_ids))?;
        Ok(found
            .into_iter()
            .map(|(run_id, count, id)| {
                let only_id = (count == 1).then_some(id);
                (run_id, PendingCount { count, only_id })
            })
            .collect())
    }

    /// A page of a run's events in seq order, capped; `limit` 0 means all.
    pub fn events_page_capped(&self, run_id: &str, limit: u64, offset: u64) -> Result<Page<Event>> {
        self.read(|rows| rows.events_page(run_id, limit, offset, Cut::Capped))
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
        self.read(|rows| rows.events_after(run_id, after_seq, limit))
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
