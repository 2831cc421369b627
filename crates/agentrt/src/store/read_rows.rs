//! The backend-neutral read surface: what a storage engine answers for the
//! store's reads, inside a write group ([`GroupRows`](super::GroupRows)
//! extends it) and outside one. The store's public reads
//! ([`Store::get_run`](super::Store::get_run), the pages, the capped reads)
//! are a front over it that turns missing rows into errors.

use crate::clock::Timestamp;
use crate::error::Result;
use crate::model::{Approval, Event, ModelCall, Run, Step};

use super::RunFilter;
use super::extension::{ExtensionTable, SqlValue};

/// A page of rows and the total the page was cut from.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The rows of this page.
    pub items: Vec<T>,
    /// How many rows there are in all.
    pub total: u64,
}

/// A column value as a backend read it from an extension table: of one of
/// the two kinds the store writes, or something else written by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredValue {
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
    /// A value of another type (named as the engine names it, for errors).
    Other(&'static str),
}

/// An extension row as a backend read it: its registered columns in order,
/// then the seq of the event that last wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRow {
    /// The registered (digested) columns' values, in registered order.
    pub values: Vec<StoredValue>,
    /// The row's `written_seq`.
    pub written_seq: i64,
}

/// The order an extension table's rows are read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtensionOrder {
    /// Insertion order (SQLite's rowid; for a numbered key, the key's).
    Oldest,
    /// Newest first: insertion order reversed.
    Newest,
    /// By this (checked) column, highest first; the newest first among
    /// equal values.
    Highest(&'static str),
}

/// A read of an extension table as an engine gets it: its columns checked
/// against the registration (names from the declaration, values of the
/// columns' kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionQuery<'v> {
    /// Every row holds each of these values in its column.
    pub filter: &'v [(&'static str, &'v SqlValue)],
    /// Every row holds at least this value in this column (integers by
    /// value, text by byte order), when given.
    pub at_least: Option<(&'static str, &'v SqlValue)>,
    /// The order.
    pub order: ExtensionOrder,
    /// At most this many rows (0: all).
    pub limit: u64,
}

/// Whether a read returns rows whole, or with every text column cut at
/// [`MAX_PAGE_TEXT`](super::MAX_PAGE_TEXT) characters (the page reads of
/// design §6: a row says so in its `decode_error`, a cut JSON column
/// becomes a marker object or is left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Every column as stored.
    Whole,
    /// Text columns cut at the page-read cap.
    Capped,
}

/// The reads of a storage engine. `limit` 0 means all; a page's `total`
/// counts every matching row, not just the page.
///
/// What an implementation must guarantee: one call reads one consistent
/// state (a transaction or snapshot of its own, or the group's); rows come
/// in the orders named below, which are the orders rows were inserted in
/// (newest first for runs); a column that does not decode is reported in
/// the value's `decode_error` instead of failing the read.
pub trait ReadRows {
    /// A run.
    fn run(&self, run_id: &str, cut: Cut) -> Result<Option<Run>>;
    /// The runs `filter` keeps (every label it names, its status if it
    /// names one), newest first.
    fn runs(&self, filter: &RunFilter, limit: u64, offset: u64, cut: Cut) -> Result<Page<Run>>;
    /// Whether a run exists.
    fn run_exists(&self, run_id: &str) -> Result<bool>;
    /// A run's lease: owner and expiry as stored (`""` when not leased).
    fn lease(&self, run_id: &str) -> Result<Option<(String, String)>>;
    /// The engine's own clock, read once per transaction, when the engine
    /// has one that every host shares (PostgreSQL's): lease expiries are
    /// then set and judged by it, never by a host's clock. `None` (the
    /// default, SQLite's): the gate's lease clock decides.
    fn clock_now(&self) -> Result<Option<Timestamp>> {
        Ok(None)
    }
    /// The seq of a run's latest event (0 when it has none).
    fn run_head(&self, run_id: &str) -> Result<i64>;
    /// The seq of the latest stored event of any run (0 when there is none).
    fn last_seq(&self) -> Result<i64>;

    /// All of a run's steps, whole, by index.
    fn steps(&self, run_id: &str) -> Result<Vec<Step>>;
    /// A page of a run's steps, by index.
    fn steps_page(&self, run_id: &str, limit: u64, offset: u64, cut: Cut) -> Result<Page<Step>>;

    /// All of a run's approvals, whole, in insertion order.
    fn approvals(&self, run_id: &str) -> Result<Vec<Approval>>;
    /// The first `limit` approvals of a run, whole, in insertion order (0:
    /// none), and how many the run has.
    fn first_approvals(&self, run_id: &str, limit: u64) -> Result<(Vec<Approval>, u64)>;
    /// One approval of a run.
    fn approval(&self, run_id: &str, approval_id: &str, cut: Cut) -> Result<Option<Approval>>;
    /// A page of a run's pending approvals, in insertion order.
    fn pending_approvals_page(
        &self,
        run_id: &str,
        limit: u64,
        offset: u64,
        cut: Cut,
    ) -> Result<Page<Approval>>;
    /// The ids of a run's first `limit` pending approvals, and how many are
    /// pending.
    fn pending_approval_ids(
        &self,
        run_id: &str,
        limit: u64,
        cut: Cut,
    ) -> Result<(Vec<String>, u64)>;
    /// For each of `run_ids` that has pending approvals: the run, how many,
    /// and the smallest pending id (capped).
    fn pending_counts(&self, run_ids: &[&str]) -> Result<Vec<(String, u64, String)>>;

    /// A page of a run's events, in seq order.
    fn events_page(&self, run_id: &str, limit: u64, offset: u64, cut: Cut) -> Result<Page<Event>>;
    /// How many of a run's events have type `event_type` (its stored text).
    fn event_count(&self, run_id: &str, event_type: &str) -> Result<u64>;
    /// Events with a seq above `after_seq` (of one run, or of all), in seq
    /// order, capped.
    fn events_after(&self, run_id: Option<&str>, after_seq: i64, limit: u64) -> Result<Vec<Event>>;

    /// The spec JSON stored under `hash`.
    fn tool_spec(&self, hash: &str) -> Result<Option<String>>;
    /// A run's model call attempts, in dispatch order.
    fn model_calls(&self, run_id: &str) -> Result<Vec<ModelCall>>;
    /// One model call attempt.
    fn model_call(&self, call_id: &str) -> Result<Option<ModelCall>>;

    /// The rows of an extension table whose (checked) columns hold every
    /// value of `filter`, in insertion order.
    fn extension_rows(
        &self,
        table: &ExtensionTable,
        filter: &[(&'static str, &SqlValue)],
        limit: u64,
    ) -> Result<Vec<StoredRow>>;

    /// The rows of an extension table that `query` asks for, in its order,
    /// at most its limit. An engine answers it from an index that matches
    /// the filter, the bound and the order where the table has one (on
    /// SQLite every index ends with the rowid; on PostgreSQL every
    /// non-unique index of an extension table ends with its insertion
    /// order), so that a limited read stops after its rows.
    fn extension_rows_by(
        &self,
        table: &ExtensionTable,
        query: &ExtensionQuery<'_>,
    ) -> Result<Vec<StoredRow>>;
}
