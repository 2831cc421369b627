//! Reads for verifying the event chain (`crate::verify`): one read
//! transaction, so the walk sees one snapshot of the log and the state
//! rows however long it takes.
//!
//! Memory stays flat whatever the file holds: events are read a page at a
//! time and handed over as borrowed bytes; a field longer than
//! [`INLINE_FIELD`](super::chain_rows::INLINE_FIELD) bytes is not selected but read through SQLite's
//! incremental blob I/O in chunks of [`MAX_PAGE_TEXT`] bytes; state rows
//! are looked up one at a time by id, and only the row counts are kept.

use std::cell::{OnceCell, RefCell};
use std::io::Read;
use std::ops::ControlFlow;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row, Statement};

use super::chain_rows::{
    ChainRows, EVENTS_PAGE_SQL, EventColumn, EventRow, Field, HASH_AT_SQL, HEAD_SQL, Piece,
};
use super::chained::{self, ChainedTable};
use super::digest::hash_value;
use super::page::MAX_PAGE_TEXT;
use super::schema::{StateTable, UNCHAINED_SEQ};
use super::{Engine, Store};
use crate::chain::FieldHasher;
use crate::clock::lock;
use crate::error::{Error, Result};

/// A read transaction over the store, for verifying. Its hot statements
/// are prepared once per snapshot (the statement cache would hash their
/// long SQL on every call).
pub(crate) struct Snapshot<'c> {
    conn: &'c Connection,
    events: RefCell<Option<Statement<'c>>>,
    /// The tables the chain covers (read on first use) and the first
    /// problem of the extension registry.
    tables: OnceCell<(Vec<ChainedTable>, Option<String>)>,
    /// Per table of `tables`: its `written_seq` and row statements.
    written: RefCell<Vec<Option<Statement<'c>>>>,
    rows: RefCell<Vec<Option<Statement<'c>>>>,
    hasher: RefCell<FieldHasher>,
}

impl Store {
    /// Runs `f` inside one read transaction on the store's connection (held
    /// for the whole call).
    pub(crate) fn snapshot<T>(&self, f: impl FnOnce(&dyn ChainRows) -> Result<T>) -> Result<T> {
        let sqlite = match &self.inner.engine {
            Engine::Sqlite(sqlite) => sqlite,
            Engine::Backend(backend) => {
                let mut f = Some(f);
                let mut out = None;
                backend.chain_read(&mut |rows| {
                    if let Some(f) = f.take() {
                        out = Some(f(rows)?);
                    }
                    Ok(())
                })?;
                return out.ok_or_else(|| Error::Internal {
                    detail: "the engine's chain read never ran".into(),
                });
            }
        };
        let conn = lock(&sqlite.conn);
        let tx = conn.unchecked_transaction().map_err(Error::from_sqlite)?;
        let value = {
            let snap = Snapshot {
                conn: &tx,
                events: RefCell::new(None),
                tables: OnceCell::new(),
                written: RefCell::default(),
                rows: RefCell::default(),
                hasher: RefCell::new(FieldHasher::new()),
            };
            f(&snap)?
        };
        // Nothing was written: ending the read either way is the same.
        tx.rollback().map_err(Error::from_sqlite)?;
        Ok(value)
    }
}

/// The statement in `slot`, prepared from `sql` on first use.
fn prepared<'s, 'c>(
    conn: &'c Connection,
    slot: &'s RefCell<Option<Statement<'c>>>,
    sql: &str,
) -> Result<std::cell::RefMut<'s, Statement<'c>>> {
    let mut slot = slot.borrow_mut();
    if slot.is_none() {
        *slot = Some(conn.prepare(sql).map_err(Error::from_sqlite)?);
    }
    // Just filled: the error branch is never taken.
    std::cell::RefMut::filter_map(slot, Option::as_mut).map_err(|_| Error::InvalidInput {
        what: "verify statement",
        detail: format!("{sql} was not prepared"),
    })
}

/// The statement for table `index` in `slots`, prepared from `sql` on
/// first use.
fn prepared_at<'s, 'c>(
    conn: &'c Connection,
    slots: &'s RefCell<Vec<Option<Statement<'c>>>>,
    index: usize,
    sql: &str,
) -> Result<std::cell::RefMut<'s, Statement<'c>>> {
    let mut slots = slots.borrow_mut();
    if slots.len() <= index {
        slots.resize_with(index + 1, || None);
    }
    if slots[index].is_none() {
        slots[index] = Some(conn.prepare(sql).map_err(Error::from_sqlite)?);
    }
    // Just filled: the error branch is never taken.
    std::cell::RefMut::filter_map(slots, |s| s.get_mut(index).and_then(Option::as_mut)).map_err(
        |_| Error::InvalidInput {
            what: "verify statement",
            detail: format!("{sql} was not prepared"),
        },
    )
}

/// The text of a field that is not a long one: text and blobs as stored,
/// anything else empty (the chain then fails to match, as it should).
fn inline_bytes<'r>(value: ValueRef<'r>) -> &'r [u8] {
    match value {
        ValueRef::Text(b) | ValueRef::Blob(b) => b,
        _ => &[],
    }
}

fn field<'r>(row: &'r Row<'_>, at: usize) -> rusqlite::Result<Field<'r>> {
    Ok(match row.get_ref(at)? {
        ValueRef::Null => Field::Long,
        value => Field::Inline(inline_bytes(value)),
    })
}

impl Snapshot<'_> {
    /// Reads column `column` of the row at `rowid` of `table` in chunks;
    /// `label` names the kind of row in an error.
    fn read_long(
        &self,
        label: &'static str,
        table: &str,
        column: &str,
        rowid: i64,
        mut f: impl FnMut(Piece<'_>),
    ) -> Result<()> {
        let mut blob = self
            .conn
            .blob_open(rusqlite::MAIN_DB, table, column, rowid, true)
            .map_err(Error::from_sqlite)?;
        f(Piece::Len(u64::try_from(blob.len()).unwrap_or(0)));
        let mut buf = vec![0u8; MAX_PAGE_TEXT];
        loop {
            let n = blob.read(&mut buf).map_err(|e| Error::Corrupt {
                table: label,
                id: if label == table {
                    format!("rowid {rowid}")
                } else {
                    format!("{table} rowid {rowid}")
                },
                detail: format!("reading {column}: {e}"),
            })?;
            if n == 0 {
                return Ok(());
            }
            f(Piece::Bytes(&buf[..n]));
        }
    }

    /// The tables the chain covers, in name order: the core's state tables
    /// and the extension tables the file's registry names (read on first
    /// use).
    fn tables(&self) -> Result<&[ChainedTable]> {
        Ok(&self.loaded()?.0)
    }

    fn loaded(&self) -> Result<&(Vec<ChainedTable>, Option<String>)> {
        if let Some(loaded) = self.tables.get() {
            return Ok(loaded);
        }
        let loaded = chained::load(self.conn)?;
        Ok(self.tables.get_or_init(|| loaded))
    }

    /// The table at `index` of [`Snapshot::tables`].
    fn table(&self, index: usize) -> Result<&ChainedTable> {
        self.tables()?
            .get(index)
            .ok_or_else(|| Error::InvalidInput {
                what: "verify table",
                detail: format!("no chained table at {index}"),
            })
    }
}

impl ChainRows for Snapshot<'_> {
    fn head(&self) -> Result<Option<(i64, String)>> {
        let mut stmt = self
            .conn
            .prepare_cached(&HEAD_SQL)
            .map_err(Error::from_sqlite)?;
        stmt.query_row([], |r| Ok((r.get(0)?, text(r.get_ref(1)?))))
            .optional()
            .map_err(Error::from_sqlite)
    }

    fn hash_at(&self, seq: i64) -> Result<Option<String>> {
        let mut stmt = self
            .conn
            .prepare_cached(&HASH_AT_SQL)
            .map_err(Error::from_sqlite)?;
        stmt.query_row([seq], |r| Ok(text(r.get_ref(0)?)))
            .optional()
            .map_err(Error::from_sqlite)
    }

    fn events(
        &self,
        after: i64,
        to: i64,
        limit: usize,
        f: &mut dyn FnMut(&EventRow<'_>) -> Result<ControlFlow<()>>,
    ) -> Result<(usize, ControlFlow<()>)> {
        let mut stmt = prepared(self.conn, &self.events, &EVENTS_PAGE_SQL)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = stmt
            .query(rusqlite::params![after, to, limit])
            .map_err(Error::from_sqlite)?;
        let mut handed = 0;
        while let Some(row) = rows.next().map_err(Error::from_sqlite)? {
            let event = (|| -> rusqlite::Result<EventRow<'_>> {
                let mut fields = [Field::Inline(&[]); 6];
                for (i, slot) in fields.iter_mut().enumerate() {
                    *slot = field(row, 1 + i)?;
                }
                Ok(EventRow {
                    seq: row.get(0)?,
                    fields,
                    hash: inline_bytes(row.get_ref(7)?),
                })
            })()
            .map_err(Error::from_sqlite)?;
            handed += 1;
            if f(&event)?.is_break() {
                return Ok((handed, ControlFlow::Break(())));
            }
        }
        Ok((handed, ControlFlow::Continue(())))
    }

    fn read_event_field(
        &self,
        column: EventColumn,
        seq: i64,
        f: &mut dyn FnMut(Piece<'_>),
    ) -> Result<()> {
        self.read_long("events", "events", column.name(), seq, f)
    }

    fn table_count(&self) -> Result<usize> {
        Ok(self.tables()?.len())
    }

    fn table_name(&self, index: usize) -> Result<&str> {
        Ok(self.table(index)?.name.as_str())
    }

    fn registry_problem(&self) -> Result<Option<&str>> {
        Ok(self.loaded()?.1.as_deref())
    }

    fn row_written_seq(&self, index: usize, id: &str) -> Result<Option<i64>> {
        let table = self.table(index)?;
        let mut stmt = prepared_at(self.conn, &self.written, index, &table.written_sql)?;
        stmt.query_row([id], |r| r.get(0))
            .optional()
            .map_err(Error::from_sqlite)
    }

    fn row_digest(&self, index: usize, id: &str) -> Result<Option<String>> {
        let table = self.table(index)?;
        let mut stmt = prepared_at(self.conn, &self.rows, index, &table.row_sql)?;
        let mut rows = stmt.query([id]).map_err(Error::from_sqlite)?;
        let Some(row) = rows.next().map_err(Error::from_sqlite)? else {
            return Ok(None);
        };
        let rowid: i64 = row.get(0).map_err(Error::from_sqlite)?;
        let mut h = self.hasher.borrow_mut();
        h.reset();
        h.field(table.name.as_bytes());
        for (i, column) in table.columns.iter().enumerate() {
            let at = 1 + i;
            match field(row, at).map_err(Error::from_sqlite)? {
                Field::Long => {
                    self.read_long(
                        "state row",
                        &table.name,
                        column,
                        rowid,
                        |piece| match piece {
                            Piece::Len(len) => h.begin(len),
                            Piece::Bytes(bytes) => h.piece(bytes),
                        },
                    )?;
                    h.end();
                }
                Field::Inline(_) => {
                    hash_value(&mut h, row.get_ref(at).map_err(Error::from_sqlite)?)
                }
            }
        }
        Ok(Some(h.finish().to_hex().to_string()))
    }

    fn count_rows(&self, index: usize, range: Option<(i64, i64)>) -> Result<u64> {
        let table = self.table(index)?;
        let name = &table.sql_name;
        let n: i64 = match range {
            // No WHERE on the first tables: SQLite counts the smallest
            // index's entries.
            None if !table.joined_later => {
                self.conn
                    .query_row(&format!("SELECT COUNT(*) FROM {name}"), [], |r| r.get(0))
            }
            None => self.conn.query_row(
                &format!(
                    "SELECT COUNT(*) FROM {name} WHERE {}",
                    table.chained_rows("")
                ),
                [],
                |r| r.get(0),
            ),
            Some((from, to)) => self.conn.query_row(
                &format!("SELECT COUNT(*) FROM {name} WHERE written_seq BETWEEN ?1 AND ?2"),
                [from, to],
                |r| r.get(0),
            ),
        }
        .map_err(Error::from_sqlite)?;
        Ok(n.unsigned_abs())
    }

    fn unchained_rows(&self) -> Result<(u64, u64)> {
        let mut marked = 0u64;
        for table in StateTable::ALL.into_iter().filter(|t| t.joined_later()) {
            let n: i64 = self
                .conn
                .query_row(
                    &format!(
                        "SELECT COUNT(*) FROM {} WHERE written_seq = {UNCHAINED_SEQ}",
                        table.name()
                    ),
                    [],
                    |r| r.get(0),
                )
                .map_err(Error::from_sqlite)?;
            marked = marked.saturating_add(n.unsigned_abs());
        }
        let recorded: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM agentrt_meta WHERE key = 'unchained_rows'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(Error::from_sqlite)?;
        let recorded = recorded.and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok((marked, recorded))
    }

    fn first_unlisted_row(
        &self,
        index: usize,
        range: Option<(i64, i64)>,
    ) -> Result<Option<(String, i64)>> {
        let table = self.table(index)?;
        let (clause, a, b) = match range {
            Some((from, to)) => ("WHERE t.written_seq BETWEEN ?1 AND ?2", from, to),
            None => ("WHERE ?1 <= ?2", 0, 0),
        };
        // The name is an identifier (core, or checked when the registry
        // was read): it needs no escaping as a string literal.
        let sql = format!(
            "SELECT substr(t.{key}, 1, 128), t.written_seq FROM {sql_name} t {clause}
             AND {chained}
             AND NOT EXISTS (
                 SELECT 1 FROM events e, json_each(CASE WHEN json_valid(e.rows_json) THEN e.rows_json ELSE '[]' END) j
                 WHERE e.seq = t.written_seq AND j.value ->> 0 = '{name}' AND j.value ->> 1 = t.{key})
             ORDER BY t.written_seq LIMIT 1",
            sql_name = table.sql_name,
            name = table.name,
            key = table.sql_key,
            chained = table.chained_rows("t."),
        );
        let mut stmt = self.conn.prepare_cached(&sql).map_err(Error::from_sqlite)?;
        stmt.query_row([a, b], |r| Ok((text(r.get_ref(0)?), r.get(1)?)))
            .optional()
            .map_err(Error::from_sqlite)
    }
}

/// A selected text value as a string (lossy: it is only shown).
fn text(value: ValueRef<'_>) -> String {
    String::from_utf8_lossy(inline_bytes(value)).into_owned()
}
