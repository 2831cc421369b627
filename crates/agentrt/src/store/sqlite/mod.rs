//! The SQLite engine: [`SqliteRows`] answers the backend-neutral interface
//! ([`ReadRows`](super::ReadRows), [`GroupRows`](super::GroupRows)) on one
//! connection, inside the transaction or savepoint that holds a write
//! group, or on a read connection.

mod group;
mod read;

use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, params_from_iter};

use super::columns::RowColumns;
use super::extension::{ExtensionTable, SqlValue, quoted, quoted_list};
use super::read_rows::{StoredRow, StoredValue};
use crate::error::{Error, Result};

/// The engine's statements on one connection.
pub(crate) struct SqliteRows<'c> {
    conn: &'c Connection,
}

impl<'c> SqliteRows<'c> {
    pub(crate) fn new(conn: &'c Connection) -> SqliteRows<'c> {
        SqliteRows { conn }
    }

    fn exec(&self, sql: &str, params: Vec<Value>) -> Result<usize> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(Error::from_sqlite)?;
        stmt.execute(params_from_iter(params))
            .map_err(Error::from_sqlite)
    }

    /// One integer from a `COUNT(*)` query.
    fn count(&self, sql: &str, params: impl rusqlite::Params) -> Result<u64> {
        let n: i64 = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut stmt| stmt.query_row(params, |r| r.get(0)))
            .map_err(Error::from_sqlite)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Every row of a query, decoded by `f`.
    fn rows<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        f: fn(&dyn RowColumns) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(Error::from_sqlite)?;
        let mut rows = stmt.query(params).map_err(Error::from_sqlite)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(Error::from_sqlite)? {
            out.push(f(row)?);
        }
        Ok(out)
    }

    /// The first row of a query, decoded by `f`, if there is one.
    fn first<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        f: fn(&dyn RowColumns) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(Error::from_sqlite)?;
        let mut rows = stmt.query(params).map_err(Error::from_sqlite)?;
        match rows.next().map_err(Error::from_sqlite)? {
            Some(row) => f(row).map(Some),
            None => Ok(None),
        }
    }
}

/// SQLite `LIMIT`/`OFFSET` values: limit 0 means all (`-1`).
fn bounds(limit: u64, offset: u64) -> (i64, i64) {
    let limit = if limit == 0 {
        -1
    } else {
        i64::try_from(limit).unwrap_or(i64::MAX)
    };
    (limit, i64::try_from(offset).unwrap_or(i64::MAX))
}

fn sql_value(value: &SqlValue) -> Value {
    match value {
        SqlValue::Int(n) => Value::Integer(*n),
        SqlValue::Text(t) => Value::Text(t.clone()),
    }
}

/// A column value as stored.
fn stored(value: ValueRef<'_>) -> StoredValue {
    match value {
        ValueRef::Integer(n) => StoredValue::Int(n),
        ValueRef::Text(t) => match std::str::from_utf8(t) {
            Ok(t) => StoredValue::Text(t.to_owned()),
            Err(_) => StoredValue::Other("Text"),
        },
        ValueRef::Real(_) => StoredValue::Other("Real"),
        ValueRef::Blob(_) => StoredValue::Other("Blob"),
        ValueRef::Null => StoredValue::Other("Null"),
    }
}

/// The rows of an extension table matching `filter`, on any connection
/// (a group's, or a reader's).
fn extension_rows(
    conn: &Connection,
    table: &ExtensionTable,
    filter: &[(&'static str, &SqlValue)],
    limit: u64,
) -> Result<Vec<StoredRow>> {
    let mut wheres: Vec<String> = filter
        .iter()
        .map(|(name, _)| format!("{} = ?", quoted(name)))
        .collect();
    if wheres.is_empty() {
        wheres.push("1".into());
    }
    let mut params: Vec<Value> = filter.iter().map(|(_, v)| sql_value(v)).collect();
    let limit = if limit == 0 {
        -1
    } else {
        i64::try_from(limit).unwrap_or(i64::MAX)
    };
    params.push(Value::Integer(limit));
    let sql = format!(
        "SELECT {}, written_seq FROM {} WHERE {} ORDER BY rowid LIMIT ?",
        quoted_list(table.columns),
        quoted(table.name),
        wheres.join(" AND ")
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(Error::from_sqlite)?;
    let mut rows = stmt
        .query(params_from_iter(params))
        .map_err(Error::from_sqlite)?;
    let width = table.columns.len();
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(Error::from_sqlite)? {
        let mut values = Vec::with_capacity(width);
        for at in 0..width {
            values.push(stored(row.get_ref(at).map_err(Error::from_sqlite)?));
        }
        let written_seq = row.get::<_, i64>(width).map_err(Error::from_sqlite)?;
        out.push(StoredRow {
            values,
            written_seq,
        });
    }
    Ok(out)
}
