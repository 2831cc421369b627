//! What `verify` reads, whatever the engine: [`ChainRows`], one
//! consistent snapshot of the event log and the state rows, with the
//! events handed over a page at a time as borrowed bytes and long fields
//! in pieces, so a walk's memory stays flat however large the log.

use std::ops::ControlFlow;
use std::sync::LazyLock;

use crate::error::Result;

/// Longest field handed over whole in an [`EventRow`]; a longer one is
/// [`Field::Long`] and read with [`ChainRows::read_event_field`].
pub const INLINE_FIELD: u64 = 4096;

/// Most bytes of a stored link handed over (a tampered one may be huge).
pub const MAX_LINK_SHOWN: usize = 128;

/// The statement a [`ChainRows`] reads a page of events with, the same
/// text on every engine (`?` placeholders: after, to, limit): the seq,
/// each linked field of [`EventColumn::ALL`] (NULL when longer than
/// [`INLINE_FIELD`], so a long one is read in pieces), and the link cut
/// at [`MAX_LINK_SHOWN`] bytes.
pub static EVENTS_PAGE_SQL: LazyLock<String> = LazyLock::new(|| {
    let fields: Vec<String> = EventColumn::ALL
        .iter()
        .map(|c| super::chained::capped_select(c.name()))
        .collect();
    format!(
        "SELECT seq, {}, substr(hash, 1, {MAX_LINK_SHOWN}) FROM events
         WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
        fields.join(", ")
    )
});

/// The chain head as [`ChainRows::head`] reads it: the highest seq and its
/// link, cut at [`MAX_LINK_SHOWN`] bytes.
pub static HEAD_SQL: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT seq, substr(hash, 1, {MAX_LINK_SHOWN}) FROM events ORDER BY seq DESC LIMIT 1")
});

/// The link of one seq as [`ChainRows::hash_at`] reads it (`?`: the seq).
pub static HASH_AT_SQL: LazyLock<String> =
    LazyLock::new(|| format!("SELECT substr(hash, 1, {MAX_LINK_SHOWN}) FROM events WHERE seq = ?"));

/// A text column of the event log, in link order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventColumn {
    /// `run_id`.
    RunId,
    /// `step_id`.
    StepId,
    /// `at`.
    At,
    /// `type`.
    Type,
    /// `payload_json`.
    Payload,
    /// `rows_json`, the listing of the rows the event's group wrote.
    Rows,
}

impl EventColumn {
    /// Every linked text column, in link order.
    pub const ALL: [EventColumn; 6] = [
        EventColumn::RunId,
        EventColumn::StepId,
        EventColumn::At,
        EventColumn::Type,
        EventColumn::Payload,
        EventColumn::Rows,
    ];

    /// The column's name in the `events` table.
    pub fn name(self) -> &'static str {
        match self {
            EventColumn::RunId => "run_id",
            EventColumn::StepId => "step_id",
            EventColumn::At => "at",
            EventColumn::Type => "type",
            EventColumn::Payload => "payload_json",
            EventColumn::Rows => "rows_json",
        }
    }
}

/// One field as selected: its bytes, or nothing when it is longer than
/// [`INLINE_FIELD`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field<'r> {
    /// The stored bytes.
    Inline(&'r [u8]),
    /// A long field: read it with [`ChainRows::read_event_field`].
    Long,
}

/// A long field, as read: first its length, then its bytes in pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// The field's length in bytes (handed over first).
    Len(u64),
    /// The next bytes.
    Bytes(&'a [u8]),
}

/// One stored event, borrowed from the page being read.
#[derive(Debug, Clone, Copy)]
pub struct EventRow<'r> {
    /// The event's seq.
    pub seq: i64,
    /// The linked text fields, in [`EventColumn::ALL`] order.
    pub fields: [Field<'r>; 6],
    /// The stored link, cut at [`MAX_LINK_SHOWN`] bytes.
    pub hash: &'r [u8],
}

/// One consistent read of the log and the state rows, as `verify` walks
/// it. SQLite's snapshot is one read transaction; another engine's (see
/// [`Backend::chain_read`](super::Backend::chain_read)) must be as
/// consistent: every call sees the same committed state.
///
/// Tables are named by index, in the order of [`ChainRows::table_name`]:
/// the core's state tables in name order, then the extension tables.
pub trait ChainRows {
    /// The chain head: the highest stored seq and its link (at most
    /// [`MAX_LINK_SHOWN`] bytes of it).
    fn head(&self) -> Result<Option<(i64, String)>>;

    /// The link stored for `seq` (at most [`MAX_LINK_SHOWN`] bytes).
    fn hash_at(&self, seq: i64) -> Result<Option<String>>;

    /// Hands `f` the events with `after < seq <= to` in seq order, at most
    /// `limit`; stops early when `f` breaks. Returns how many were handed
    /// over and whether `f` broke.
    fn events(
        &self,
        after: i64,
        to: i64,
        limit: usize,
        f: &mut dyn FnMut(&EventRow<'_>) -> Result<ControlFlow<()>>,
    ) -> Result<(usize, ControlFlow<()>)>;

    /// Reads a long field of event `seq`: its length in bytes first, then
    /// its bytes in pieces, in order.
    fn read_event_field(
        &self,
        column: EventColumn,
        seq: i64,
        f: &mut dyn FnMut(Piece<'_>),
    ) -> Result<()>;

    /// How many tables the chain covers.
    fn table_count(&self) -> Result<usize>;

    /// The name of table `index`, as a row listing names it.
    fn table_name(&self, index: usize) -> Result<&str>;

    /// The first problem of the extension registry (an entry that is not
    /// a valid extension table, left out of the tables), if any.
    fn registry_problem(&self) -> Result<Option<&str>>;

    /// The `written_seq` of row `id` of table `index`; `None` when there
    /// is no such row.
    fn row_written_seq(&self, index: usize, id: &str) -> Result<Option<i64>>;

    /// The digest of row `id` of table `index` now, in hex (see
    /// [`crate::chain::row_digest`]); `None` when there is no such row.
    fn row_digest(&self, index: usize, id: &str) -> Result<Option<String>>;

    /// How many rows of table `index` the chain accounts for, or how many
    /// have a `written_seq` within `range` (both ends included).
    fn count_rows(&self, index: usize, range: Option<(i64, i64)>) -> Result<u64>;

    /// How many rows of the tables that joined the chain later are marked
    /// as older than the chain, and how many the migration recorded.
    fn unchained_rows(&self) -> Result<(u64, u64)>;

    /// The row of table `index` (within `range`, by `written_seq`) with the
    /// lowest `written_seq` whose event does not list it: its key (at most
    /// 128 bytes) and `written_seq`.
    fn first_unlisted_row(
        &self,
        index: usize,
        range: Option<(i64, i64)>,
    ) -> Result<Option<(String, i64)>>;
}
