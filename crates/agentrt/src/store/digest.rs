//! Digests of the rows a write group wrote (see [`crate::chain`]): which
//! tables they are in, the statement that marks a written row with its
//! event's seq and reads it back, and the digest of the row read.

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

/// `UPDATE <table> SET written_seq = ?1 WHERE <key> = ?2 RETURNING
/// <digested columns>`, per state table.
pub(super) fn mark_sql(table: StateTable) -> &'static str {
    static SQL: LazyLock<Vec<String>> = LazyLock::new(|| {
        StateTable::ALL
            .into_iter()
            .map(|t| {
                format!(
                    "UPDATE {} SET written_seq = ?1 WHERE {} = ?2 RETURNING {}",
                    t.name(),
                    t.key_column(),
                    t.digested_columns().join(", ")
                )
            })
            .collect()
    });
    SQL.get(table.index()).map_or("", String::as_str)
}

/// The digest of a row of `table` whose `columns` digested columns are the
/// row's columns in order (see [`crate::chain::row_digest`]).
pub(super) fn digest_row(
    table: &str,
    columns: usize,
    row: &rusqlite::Row<'_>,
) -> rusqlite::Result<String> {
    let mut h = FieldHasher::new();
    h.field(table.as_bytes());
    for i in 0..columns {
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
        ValueRef::Null => h.field(b"\0null"),
    }
}
