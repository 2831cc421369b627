//! `verify`'s reads on PostgreSQL: the core's `ChainRows` on one
//! REPEATABLE READ snapshot, so a walk sees one state of the log and the
//! rows however long it takes and however many hosts write meanwhile.
//!
//! Events come a page at a time; a field longer than `INLINE_FIELD` bytes
//! is selected as NULL and read in pieces of at most `MAX_PAGE_TEXT`
//! bytes, so a walk's memory stays flat as on SQLite. The chain covers the
//! core's state tables (extension tables are not on PostgreSQL yet).

use std::ops::ControlFlow;
use std::sync::LazyLock;

use agentrt::store::MAX_PAGE_TEXT;
use agentrt::store::engine::{
    ChainRows, EventColumn, EventRow, Field, INLINE_FIELD, MAX_LINK_SHOWN, Piece,
};
use agentrt::store::schema::{StateTable, UNCHAINED_SEQ};
use agentrt::{Error, Result};
use tokio_postgres::Row;

use crate::error::pg_error;
use crate::rows::{Param, PgRows, digest_row, int, text};

/// Characters per piece of a long field: at most four bytes each in
/// UTF-8, so a piece stays within `MAX_PAGE_TEXT` bytes.
const PIECE_CHARS: i64 = (MAX_PAGE_TEXT / 4) as i64;

/// A link as shown: at most `MAX_LINK_SHOWN` characters of it (links are
/// ASCII hex unless tampered with).
fn capped_link() -> String {
    format!("substr(hash, 1, {MAX_LINK_SHOWN})")
}

/// A page of events: seq, the linked fields (NULL when long), the link.
static EVENTS_SQL: LazyLock<String> = LazyLock::new(|| {
    let fields: Vec<String> = EventColumn::ALL
        .iter()
        .map(|c| {
            let name = c.name();
            format!("CASE WHEN octet_length({name}) > {INLINE_FIELD} THEN NULL ELSE {name} END")
        })
        .collect();
    format!(
        "SELECT seq, {}, {} FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
        fields.join(", "),
        capped_link()
    )
});

static HEAD_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT seq, {} FROM events ORDER BY seq DESC LIMIT 1",
        capped_link()
    )
});

static HASH_AT_SQL: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {} FROM events WHERE seq = ?", capped_link()));

/// The table at `index` of the chained tables (the core's, in name order).
fn table(index: usize) -> Result<StateTable> {
    StateTable::ALL
        .get(index)
        .copied()
        .ok_or_else(|| Error::InvalidInput {
            what: "verify table",
            detail: format!("no chained table at {index}"),
        })
}

/// The rows a walk accounts for, as a condition on `alias`: every row but
/// those a migration marked as older than their table's place on the
/// chain.
fn chained_rows(table: StateTable, alias: &str) -> String {
    if table.joined_later() {
        format!("{alias}written_seq <> {UNCHAINED_SEQ}")
    } else {
        "TRUE".to_owned()
    }
}

/// `WHERE` on `alias`'s `written_seq` for `range`, and its parameters.
fn in_range(table: StateTable, alias: &str, range: Option<(i64, i64)>) -> (String, Vec<Param>) {
    match range {
        Some((from, to)) => (
            format!(
                "WHERE {alias}written_seq BETWEEN ? AND ? AND {}",
                chained_rows(table, alias)
            ),
            vec![int(from), int(to)],
        ),
        None => (format!("WHERE {}", chained_rows(table, alias)), Vec::new()),
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

impl ChainRows for PgRows<'_> {
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
        let rows = self.query(&EVENTS_SQL, &[int(after), int(to), int(limit)])?;
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
        Ok(StateTable::ALL.len())
    }

    fn table_name(&self, index: usize) -> Result<&str> {
        Ok(table(index)?.name())
    }

    fn registry_problem(&self) -> Result<Option<&str>> {
        Ok(None)
    }

    fn row_written_seq(&self, index: usize, id: &str) -> Result<Option<i64>> {
        let t = table(index)?;
        let sql = format!(
            "SELECT written_seq FROM {} WHERE {} = ?",
            t.name(),
            t.key_column()
        );
        let rows = self.query(&sql, &[text(id)])?;
        rows.first()
            .map(|row| row.try_get(0).map_err(|e| pg_error(&e)))
            .transpose()
    }

    fn row_digest(&self, index: usize, id: &str) -> Result<Option<String>> {
        let t = table(index)?;
        let sql = format!(
            "SELECT {} FROM {} WHERE {} = ?",
            t.digested_columns().join(", "),
            t.name(),
            t.key_column()
        );
        let rows = self.query(&sql, &[text(id)])?;
        rows.first()
            .map(|row| digest_row(t.name(), row))
            .transpose()
    }

    fn count_rows(&self, index: usize, range: Option<(i64, i64)>) -> Result<u64> {
        let t = table(index)?;
        let (clause, params) = in_range(t, "", range);
        let n = self.int(
            &format!("SELECT COUNT(*) FROM {} {clause}", t.name()),
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
        let t = table(index)?;
        let (clause, params) = in_range(t, "t.", range);
        // Table and key names are the core's own: no quoting needed.
        let sql = format!(
            "SELECT t.written_seq, substr(t.{key}, 1, 128) FROM {name} t {clause}
             AND NOT EXISTS (
                 SELECT 1 FROM events e, jsonb_array_elements(agentrt_listing(e.rows_json)) j
                 WHERE e.seq = t.written_seq AND j ->> 0 = '{name}' AND j ->> 1 = t.{key})
             ORDER BY t.written_seq, t.pos LIMIT 1",
            name = t.name(),
            key = t.key_column(),
        );
        let rows = self.query(&sql, &params)?;
        rows.first()
            .map(|row| {
                let (seq, key) = seq_and_text(row)?;
                Ok((key, seq))
            })
            .transpose()
    }
}
