//! `verify`'s reads on PostgreSQL: the core's `ChainRows` on one
//! REPEATABLE READ snapshot, so a walk sees one state of the log and the
//! rows however long it takes and however many hosts write meanwhile.
//!
//! Events come a page at a time; a field longer than `INLINE_FIELD` bytes
//! is selected as NULL and read in pieces of at most `MAX_PAGE_TEXT`
//! bytes, so a walk's memory stays flat as on SQLite. The chain covers the
//! core's state tables and the extension tables the registry names, in
//! name order, as SQLite's `verify` finds them; a registry entry is
//! trusted only once it names a valid extension table.

use std::cell::OnceCell;
use std::ops::{ControlFlow, Deref};

use agentrt::store::engine::RegistryEntry;
use agentrt::store::engine::quoted_list;
use agentrt::store::engine::schema::{StateTable, UNCHAINED_SEQ};
use agentrt::store::engine::{
    ChainRows, EVENTS_PAGE_SQL, EventColumn, EventRow, Field, HASH_AT_SQL, HEAD_SQL, Piece,
};
use agentrt::store::{ColumnType, MAX_PAGE_TEXT, SqlValue};
use agentrt::{Error, Result};
use tokio_postgres::Row;

use crate::error::pg_error;
use crate::extension_rows::typed_key;
use crate::extensions::POS;
use crate::rows::{Param, PgRows, digest_row, int, text};
use agentrt::store::engine::quoted;

/// Characters per piece of a long field: at most four bytes each in
/// UTF-8, so a piece stays within `MAX_PAGE_TEXT` bytes.
const PIECE_CHARS: i64 = (MAX_PAGE_TEXT / 4) as i64;

/// One table the chain covers, as `verify` reads it.
#[derive(Debug)]
struct ChainTable {
    /// Its name, as the row listing names it.
    name: String,
    /// The key column, quoted.
    key: String,
    /// The key column's type (a listing names the row by its text).
    key_kind: ColumnType,
    /// The digested columns, quoted, in digest order.
    columns: String,
    /// The core table it is, if it is one.
    core: Option<StateTable>,
    /// The column of insertion order.
    order: &'static str,
}

impl ChainTable {
    fn core(table: StateTable) -> ChainTable {
        ChainTable {
            name: table.name().to_owned(),
            key: table.key_column().to_owned(),
            key_kind: ColumnType::Text,
            columns: table.digested_columns().join(", "),
            core: Some(table),
            order: "pos",
        }
    }

    /// The key as text, on `alias` (as a row listing names it).
    fn key_text(&self, alias: &str) -> String {
        match self.key_kind {
            ColumnType::Int => format!("{alias}{}::text", self.key),
            ColumnType::Text => format!("{alias}{}", self.key),
        }
    }

    /// `id` as a parameter for the key column; `None` when no row can
    /// have it.
    fn key_param(&self, id: &str) -> Option<Param> {
        match typed_key(self.key_kind, id)? {
            SqlValue::Int(n) => Some(int(n)),
            SqlValue::Text(t) => Some(text(t)),
        }
    }

    /// The rows a walk accounts for, as a condition on `alias`: every row
    /// but those a migration marked as older than their table's place on
    /// the chain.
    fn chained_rows(&self, alias: &str) -> String {
        match self.core {
            Some(t) if t.joined_later() => format!("{alias}written_seq <> {UNCHAINED_SEQ}"),
            _ => "TRUE".to_owned(),
        }
    }

    /// `WHERE` on `alias`'s `written_seq` for `range`, and its parameters.
    fn in_range(&self, alias: &str, range: Option<(i64, i64)>) -> (String, Vec<Param>) {
        match range {
            Some((from, to)) => (
                format!(
                    "WHERE {alias}written_seq BETWEEN ? AND ? AND {}",
                    self.chained_rows(alias)
                ),
                vec![int(from), int(to)],
            ),
            None => (format!("WHERE {}", self.chained_rows(alias)), Vec::new()),
        }
    }
}

/// The tables the chain covers, in name order, and the first problem of
/// the extension registry (an entry left out), if any.
type Chained = (Vec<ChainTable>, Option<String>);

/// A `verify` walk's reads: one snapshot's rows, and the tables the chain
/// covers there, read on first use.
pub(crate) struct ChainSnapshot<'r, 'a> {
    rows: &'r PgRows<'a>,
    chained: OnceCell<Chained>,
}

impl<'r, 'a> ChainSnapshot<'r, 'a> {
    pub(crate) fn new(rows: &'r PgRows<'a>) -> Self {
        ChainSnapshot {
            rows,
            chained: OnceCell::new(),
        }
    }
}

impl<'a> Deref for ChainSnapshot<'_, 'a> {
    type Target = PgRows<'a>;

    fn deref(&self) -> &PgRows<'a> {
        self.rows
    }
}

impl ChainSnapshot<'_, '_> {
    fn chained(&self) -> Result<&Chained> {
        if let Some(chained) = self.chained.get() {
            return Ok(chained);
        }
        let loaded = self.load_chained()?;
        Ok(self.chained.get_or_init(|| loaded))
    }

    fn load_chained(&self) -> Result<Chained> {
        let mut tables: Vec<ChainTable> =
            StateTable::ALL.into_iter().map(ChainTable::core).collect();
        let mut problem = None;
        let has_registry = !self
            .query(
                "SELECT 1 WHERE to_regclass('extension_tables') IS NOT NULL",
                &[],
            )?
            .is_empty();
        if !has_registry {
            problem = Some("the extension registry (table extension_tables) is missing".to_owned());
        }
        let entries = if has_registry {
            self.query(
                "SELECT name, extension, key_column, columns_json FROM extension_tables ORDER BY name",
                &[],
            )?
        } else {
            Vec::new()
        };
        for row in &entries {
            let name: String = row.try_get(0).map_err(|e| pg_error(&e))?;
            let entry = RegistryEntry {
                extension: row.try_get(1).map_err(|e| pg_error(&e))?,
                key_column: row.try_get(2).map_err(|e| pg_error(&e))?,
                columns_json: row.try_get(3).map_err(|e| pg_error(&e))?,
            };
            match self.registered(&name, &entry)? {
                Ok(table) => tables.push(table),
                Err(why) => {
                    problem.get_or_insert(format!(
                        "the extension registry names table {name:?} of extension {:?}, which is not a valid extension table: {why}",
                        entry.extension
                    ));
                }
            }
        }
        tables.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((tables, problem))
    }

    /// A registry entry as a table to check, or why it is not one.
    fn registered(
        &self,
        name: &str,
        entry: &RegistryEntry,
    ) -> Result<std::result::Result<ChainTable, String>> {
        let columns = match entry.checked_columns(name) {
            Ok(columns) => columns,
            Err(why) => return Ok(Err(why)),
        };
        let found = self.query(
            "SELECT column_name::text, data_type::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = ?",
            &[text(name)],
        )?;
        let mut kinds = Vec::with_capacity(found.len());
        for row in &found {
            let column: String = row.try_get(0).map_err(|e| pg_error(&e))?;
            let kind: String = row.try_get(1).map_err(|e| pg_error(&e))?;
            kinds.push((column, kind));
        }
        if kinds.is_empty() {
            return Ok(Err("the database has no such table".into()));
        }
        let kind_of = |column: &str| -> std::result::Result<ColumnType, String> {
            match kinds
                .iter()
                .find(|(c, _)| c == column)
                .map(|(_, k)| k.as_str())
            {
                Some("bigint") => Ok(ColumnType::Int),
                Some("text") => Ok(ColumnType::Text),
                Some(other) => Err(format!(
                    "its column {column:?} is {other}, not bigint or text"
                )),
                None => Err(format!("it has no column {column:?}")),
            }
        };
        if kind_of("written_seq") != Ok(ColumnType::Int) {
            return Ok(Err(
                "it has no written_seq column (bigint); the store marks each row with the event that last wrote it"
                    .into(),
            ));
        }
        for column in &columns {
            if let Err(why) = kind_of(column) {
                return Ok(Err(why));
            }
        }
        if let Some((extra, _)) = kinds
            .iter()
            .find(|(c, _)| !matches!(c.as_str(), "written_seq" | "_pos") && !columns.contains(c))
        {
            return Ok(Err(format!(
                "its column {extra:?} is not declared; every column but written_seq is digested, so the chain covers the whole row"
            )));
        }
        let key_kind = match kind_of(&entry.key_column) {
            Ok(kind) => kind,
            Err(why) => return Ok(Err(why)),
        };
        let unique = self.query(
            "SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
             WHERE i.indrelid = to_regclass(?) AND i.indisunique AND i.indnatts = 1
                 AND i.indpred IS NULL AND a.attname = ?",
            &[text(quoted(name)), text(entry.key_column.as_str())],
        )?;
        if unique.is_empty() {
            return Ok(Err(format!(
                "its key column {:?} is not unique; make it the primary key, or give it a unique index of its own",
                entry.key_column
            )));
        }
        // Only identifiers get this far, and they are quoted as names.
        Ok(Ok(ChainTable {
            name: name.to_owned(),
            key: quoted(&entry.key_column),
            key_kind,
            columns: quoted_list(&columns),
            core: None,
            order: POS,
        }))
    }

    /// The table at `index` of the chained tables.
    fn chain_table(&self, index: usize) -> Result<&ChainTable> {
        self.chained()?
            .0
            .get(index)
            .ok_or_else(|| Error::InvalidInput {
                what: "verify table",
                detail: format!("no chained table at {index}"),
            })
    }
}

fn field(row: &Row, at: usize) -> Result<Field<'_>> {
    let value: Option<&str> = row.try_get(at).map_err(|e| pg_error(&e))?;
    Ok(value.map_or(Field::Long, |v| Field::Inline(v.as_bytes())))
}

/// A row selected as `seq, text`.
fn seq_and_text(row: &Row) -> Result<(i64, String)> {
    Ok((
        row.try_get(0).map_err(|e| pg_error(&e))?,
        row.try_get(1).map_err(|e| pg_error(&e))?,
    ))
}

fn count_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl ChainRows for ChainSnapshot<'_, '_> {
    fn head(&self) -> Result<Option<(i64, String)>> {
        self.query(&HEAD_SQL, &[])?
            .first()
            .map(seq_and_text)
            .transpose()
    }

    fn hash_at(&self, seq: i64) -> Result<Option<String>> {
        let rows = self.query(&HASH_AT_SQL, &[int(seq)])?;
        rows.first()
            .map(|row| row.try_get(0).map_err(|e| pg_error(&e)))
            .transpose()
    }

    fn events(
        &self,
        after: i64,
        to: i64,
        limit: usize,
        f: &mut dyn FnMut(&EventRow<'_>) -> Result<ControlFlow<()>>,
    ) -> Result<(usize, ControlFlow<()>)> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.query(&EVENTS_PAGE_SQL, &[int(after), int(to), int(limit)])?;
        let mut handed = 0;
        for row in &rows {
            let mut fields = [Field::Inline(&[]); 6];
            for (i, slot) in fields.iter_mut().enumerate() {
                *slot = field(row, 1 + i)?;
            }
            let hash: &str = row.try_get(7).map_err(|e| pg_error(&e))?;
            let event = EventRow {
                seq: row.try_get(0).map_err(|e| pg_error(&e))?,
                fields,
                hash: hash.as_bytes(),
            };
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
        let name = column.name();
        let corrupt = |detail: String| Error::Corrupt {
            table: "events",
            id: format!("seq {seq}"),
            detail,
        };
        let len = self.int(
            &format!("SELECT octet_length({name})::bigint FROM events WHERE seq = ?"),
            &[int(seq)],
        )?;
        let len = u64::try_from(len).map_err(|_| corrupt(format!("{name} has no length")))?;
        f(Piece::Len(len));
        // Character positions: substr counts characters, and a piece ends
        // on one, so every piece is whole UTF-8.
        let sql = format!(
            "SELECT substr({name}, (?::bigint)::int, (?::bigint)::int) FROM events WHERE seq = ?"
        );
        let mut read = 0u64;
        let mut at = 1i64;
        while read < len {
            let rows = self.query(&sql, &[int(at), int(PIECE_CHARS), int(seq)])?;
            let piece: &str = match rows.first() {
                Some(row) => row.try_get(0).map_err(|e| pg_error(&e))?,
                None => return Err(corrupt(format!("reading {name}: the event is gone"))),
            };
            if piece.is_empty() {
                return Err(corrupt(format!(
                    "reading {name}: {read} of {len} bytes were there"
                )));
            }
            read += piece.len() as u64;
            f(Piece::Bytes(piece.as_bytes()));
            at += PIECE_CHARS;
        }
        Ok(())
    }

    fn table_count(&self) -> Result<usize> {
        Ok(self.chained()?.0.len())
    }

    fn table_name(&self, index: usize) -> Result<&str> {
        Ok(&self.chain_table(index)?.name)
    }

    fn registry_problem(&self) -> Result<Option<&str>> {
        Ok(self.chained()?.1.as_deref())
    }

    fn row_written_seq(&self, index: usize, id: &str) -> Result<Option<i64>> {
        let t = self.chain_table(index)?;
        let Some(key) = t.key_param(id) else {
            return Ok(None);
        };
        let sql = format!(
            "SELECT written_seq FROM {} WHERE {} = ?",
            quoted(&t.name),
            t.key
        );
        let rows = self.query(&sql, &[key])?;
        rows.first()
            .map(|row| row.try_get(0).map_err(|e| pg_error(&e)))
            .transpose()
    }

    fn row_digest(&self, index: usize, id: &str) -> Result<Option<String>> {
        let t = self.chain_table(index)?;
        let Some(key) = t.key_param(id) else {
            return Ok(None);
        };
        let sql = format!(
            "SELECT {} FROM {} WHERE {} = ?",
            t.columns,
            quoted(&t.name),
            t.key
        );
        let rows = self.query(&sql, &[key])?;
        rows.first().map(|row| digest_row(&t.name, row)).transpose()
    }

    fn count_rows(&self, index: usize, range: Option<(i64, i64)>) -> Result<u64> {
        let t = self.chain_table(index)?;
        let (clause, params) = t.in_range("", range);
        let n = self.int(
            &format!("SELECT COUNT(*) FROM {} {clause}", quoted(&t.name)),
            &params,
        )?;
        Ok(count_of(n))
    }

    fn unchained_rows(&self) -> Result<(u64, u64)> {
        let mut marked = 0u64;
        for t in StateTable::ALL.into_iter().filter(|t| t.joined_later()) {
            let n = self.int(
                &format!(
                    "SELECT COUNT(*) FROM {} WHERE written_seq = {UNCHAINED_SEQ}",
                    t.name()
                ),
                &[],
            )?;
            marked = marked.saturating_add(count_of(n));
        }
        let rows = self.query(
            "SELECT value FROM agentrt_meta WHERE key = 'unchained_rows'",
            &[],
        )?;
        let recorded = match rows.first() {
            Some(row) => {
                let value: &str = row.try_get(0).map_err(|e| pg_error(&e))?;
                value.parse().unwrap_or(0)
            }
            None => 0,
        };
        Ok((marked, recorded))
    }

    fn first_unlisted_row(
        &self,
        index: usize,
        range: Option<(i64, i64)>,
    ) -> Result<Option<(String, i64)>> {
        let t = self.chain_table(index)?;
        let (clause, params) = t.in_range("t.", range);
        let key = t.key_text("t.");
        let sql = format!(
            "SELECT t.written_seq, substr({key}, 1, 128) FROM {name} t {clause}
             AND NOT EXISTS (
                 SELECT 1 FROM events e, jsonb_array_elements(agentrt_listing(e.rows_json)) j
                 WHERE e.seq = t.written_seq AND j ->> 0 = ? AND j ->> 1 = {key})
             ORDER BY t.written_seq, t.{order} LIMIT 1",
            name = quoted(&t.name),
            order = t.order,
        );
        let mut params = params;
        params.push(text(t.name.as_str()));
        let rows = self.query(&sql, &params)?;
        rows.first()
            .map(|row| {
                let (seq, key) = seq_and_text(row)?;
                Ok((key, seq))
            })
            .transpose()
    }
}
