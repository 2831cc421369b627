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
use super::read_rows::{ExtensionOrder, ExtensionQuery, StoredRow, StoredValue};
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

/// The rows of an extension table that `query` asks for, on any
/// connection (a group's, or a reader's). Every SQLite index ends with the
/// rowid, so an index on the filter's columns (then the bound's or the
/// order's column) yields the rows in the order asked for and the read
/// stops at the limit.
fn extension_rows(
    conn: &Connection,
    table: &ExtensionTable,
    query: &ExtensionQuery<'_>,
) -> Result<Vec<StoredRow>> {
    let mut wheres: Vec<String> = query
        .filter
        .iter()
        .map(|(name, _)| format!("{} = ?", quoted(name)))
        .collect();
    let mut params: Vec<Value> = query.filter.iter().map(|(_, v)| sql_value(v)).collect();
    if let Some((name, value)) = query.at_least {
        wheres.push(format!("{} >= ?", quoted(name)));
        params.push(sql_value(value));
    }
    if wheres.is_empty() {
        wheres.push("1".into());
    }
    let limit = if query.limit == 0 {
        -1
    } else {
        i64::try_from(query.limit).unwrap_or(i64::MAX)
    };
    params.push(Value::Integer(limit));
    let order = match query.order {
        ExtensionOrder::Oldest => "rowid".to_owned(),
        ExtensionOrder::Newest => "rowid DESC".to_owned(),
        ExtensionOrder::Highest(name) => format!("{} DESC, rowid DESC", quoted(name)),
    };
    let sql = format!(
        "SELECT {}, written_seq FROM {} WHERE {} ORDER BY {order} LIMIT ?",
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
