//! For implementing a storage engine outside the core, such as
//! `agentrt-postgres`; nothing here is needed to use a [`Store`](super::Store).
//!
//! An engine implements [`Backend`] (its write groups, consistent reads,
//! lease renewal and change signal) and the row surfaces [`GroupRows`],
//! [`ReadRows`] and, for `verify`, [`ChainRows`]. It reads rows with the
//! one set of decoders and column lists every engine shares, so that a run
//! read from PostgreSQL is the run read from SQLite, `decode_error` and
//! page cuts included; it renders the few dialect-specific fragments of
//! the core's statements through its own [`Dialect`], and creates the
//! core's tables from [`schema`].
//!
//! What the core promises an engine: the column lists name the core
//! tables' columns as both engines store them, in the order the decoders
//! read them (an engine selects them in that order and hands each row to
//! the decoder through [`RowColumns`]); the statement texts here
//! ([`EVENTS_PAGE_SQL`], [`HEAD_SQL`], [`HASH_AT_SQL`], [`RUN_FROM`]) are
//! plain SQL every engine runs as written, with `?` placeholders; and the
//! core hands an engine only the neutral forms ([`Assignment`],
//! [`SealedEvent`], [`StoredValue`]) whose SQL the engine writes itself.
//! This module changes with the core: an engine is built against the
//! core's exact version.

pub use super::backend::{Backend, BatchedGroup, ChangeSignal};
pub use super::calls::{CALL_COLUMNS, call_from_row as decode_model_call};
pub use super::chain_rows::{
    ChainRows, EVENTS_PAGE_SQL, EventColumn, EventRow, Field, HASH_AT_SQL, HEAD_SQL, INLINE_FIELD,
    MAX_LINK_SHOWN, Piece,
};
pub use super::changes::Assignment;
pub use super::columns::{Column, Decode, RowColumns};
pub use super::dialect::Dialect;
pub use super::export::{EXPORTED_TABLES, ExportPage, Exported, ExportedTable, ExtensionExport};
pub use super::extension::{Registration, RegistryEntry, check_held, quoted, quoted_list};
pub use super::group_rows::{GroupRows, RowTable, SealedEvent};
pub use super::page::{
    PageTable, capped_approval as decode_capped_approval, capped_run as decode_capped_run,
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

/// The core's schema: its SQLite migrations, the constants they record,
/// the state tables the chain covers, and the description of the core
/// tables another engine creates its own schema from.
pub mod schema {
    pub use super::super::core_tables::{CORE_TABLES, CoreColumn, CoreTable};
    pub use super::super::schema::{
        CANONICAL_FORM, CORE_OBJECTS, HASH_ALGORITHM, META, MIGRATION_1, MIGRATION_2, MIGRATION_3,
        MIGRATION_4, MIGRATION_5, MIGRATIONS, NOT_DIGESTED, SCHEMA_VERSION, StateTable,
        TIME_FORMAT, UNCHAINED_SEQ,
    };
}
