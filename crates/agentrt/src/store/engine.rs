//! What a storage engine outside the core needs to be one: the
//! [`Backend`] it implements, the row surfaces ([`GroupRows`],
//! [`ReadRows`], [`ChainRows`] for `verify`) and the one set of decoders and column lists every
//! engine reads rows with, so that a run read from PostgreSQL is the run
//! read from SQLite, `decode_error` and page cuts included.
//!
//! The column lists name the core tables' columns as both engines store
//! them; an engine selects them in this order and hands each row to the
//! decoder through [`RowColumns`].

pub use super::backend::{Backend, BatchedGroup, ChangeSignal};
pub use super::calls::{CALL_COLUMNS, call_from_row as decode_model_call};
pub use super::chain_rows::{
    ChainRows, EVENTS_PAGE_SQL, EventColumn, EventRow, Field, HASH_AT_SQL, HEAD_SQL, INLINE_FIELD,
    MAX_LINK_SHOWN, Piece,
};
pub use super::columns::{Column, Decode, RowColumns};
pub use super::group_rows::{GroupRows, RowTable, SealedEvent};
pub use super::page::{
    Dialect, PageTable, capped_approval as decode_capped_approval, capped_run as decode_capped_run,
    capped_select, capped_step as decode_capped_step,
};
pub use super::read::{
    APPROVAL_COLUMNS, EVENT_COLUMNS, RUN_COLUMNS, RUN_FROM, STEP_COLUMNS,
    approval_from_row as decode_approval, event_from_row as decode_event,
    run_from_row as decode_run, step_from_row as decode_step,
};
pub use super::read_rows::{
    Cut, ExtensionOrder, ExtensionQuery, Page, ReadRows, StoredRow, StoredValue,
};
