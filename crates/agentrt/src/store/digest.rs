//! Digests of the rows a write group wrote (see [`crate::chain`]): which
//! tables they are in, the statements that read a written row and mark it
//! with its event's seq, and the digest of the row read.

use std::sync::LazyLock;

use rusqlite::types::ValueRef;

use super::schema::StateTable;
use crate::chain::FieldHasher;

/// A table whose written rows a group digests: a core state table, or an
/// extension table (its index in the store's [`super::extension::Registry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Written {
    Core(StateTable),
    Extension(usize),
}

/// The two statements that mark a written row, per state table:
/// `SELECT rowid, <digested columns> FROM <table> WHERE <key> = ?1`, then
/// `UPDATE <table> SET written_seq = ?1 WHERE rowid = ?2`.
///
/// Two plain statements, not one `UPDATE … RETURNING`: SQLite runs a
/// `RETURNING` through a temporary table opened and dropped at every
/// execution, which cost more than the read and the write together
/// (docs/performance.md, issue 15).
pub(super) fn mark_sql(table: StateTable) -> (&'static str, &'static str) {
    static SQL: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
        StateTable::ALL
            .into_iter()
            .map(|t| {
                (
                    format!(
                        "SELECT rowid, {} FROM {} WHERE {} = ?1",
                        t.digested_columns().join(", "),
                        t.name(),
                        t.key_column()
                    ),
                    format!("UPDATE {} SET written_seq = ?1 WHERE rowid = ?2", t.name()),
                )
            })
            .collect()
    });
    SQL.get(table.index()).map_or(("", ""), |(select, update)| {
        (select.as_str(), update.as_str())
    })
}

/// The digest of a row of `table` whose `columns` digested columns are the
/// row's columns in order from column `first` (see
/// [`crate::chain::row_digest`]).
pub(super) fn digest_row(
    table: &str,
    first: usize,
    columns: usize,
    row: &rusqlite::Row<'_>,
) -> rusqlite::Result<String> {
    let mut h = FieldHasher::new();
    h.field(table.as_bytes());
    for i in first..first + columns {
        hash_value(&mut h, row.get_ref(i)?);
    }
    Ok(h.finish().to_hex().to_string())
}

/// Adds one column value to a digest: integers in decimal, text and blobs
/// as stored. Reals and NULLs never come from the store (its columns are
/// INTEGER and TEXT, NOT NULL); one written by hand gets a spelling no
/// stored value has, so its digest differs.
pub(super) fn hash_value(h: &mut FieldHasher, value: ValueRef<'_>) {
    match value {
        ValueRef::Integer(n) => h.int(n),
        ValueRef::Text(t) | ValueRef::Blob(t) => h.field(t),
        ValueRef::Real(f) => h.field(format!("\0real:{f:?}").as_bytes()),
        ValueRef::Null => h.field(crate::chain::NULL_FIELD),
    }
}
