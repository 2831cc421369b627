//! The engine's statements inside one transaction: [`PgRows`] answers the
//! core's row surfaces (`ReadRows` in `read`, `GroupRows` in `group`) on a
//! transaction of a pooled connection, through its statement cache.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use agentrt::Result;
use agentrt::chain::{RowValue, row_digest};
use agentrt::clock::Timestamp;
use agentrt::store::engine::RowColumns;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row, Statement};

use crate::error::pg_error;
use crate::runtime::round_trip;

/// The digest of a state row of `table` selected as its digested columns
/// (BIGINT or TEXT) in their fixed order: the one SQLite's rows get.
pub(crate) fn digest_row(table: &str, row: &Row) -> Result<String> {
    let values = row
        .columns()
        .iter()
        .enumerate()
        .map(|(i, column)| {
            if *column.type_() == Type::INT8 {
                row.try_get::<_, Option<i64>>(i)
                    .map(|n| n.map_or(RowValue::Null, RowValue::Int))
            } else {
                row.try_get::<_, Option<&str>>(i)
                    .map(|t| t.map_or(RowValue::Null, |t| RowValue::Text(t.as_bytes())))
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| pg_error(&e))?;
    Ok(row_digest(table, &values))
}

/// A bound parameter.
pub(crate) type Param = Box<dyn ToSql + Sync>;

/// Prepared statements of one connection, by their SQL.
pub(crate) type Statements = HashMap<String, Statement>;

/// The row operations of one transaction, open on `client`'s connection.
pub(crate) struct PgRows<'a> {
    client: &'a Client,
    statements: RefCell<&'a mut Statements>,
    /// The server's clock, read once per transaction (see `clock_now`).
    now: Cell<Option<Timestamp>>,
}

impl<'a> PgRows<'a> {
    /// The rows of the transaction open on `client`; `now` is the server's
    /// clock when it was read with the transaction's first request.
    pub(crate) fn new(
        client: &'a Client,
        statements: &'a mut Statements,
        now: Option<Timestamp>,
    ) -> Self {
        PgRows {
            client,
            statements: RefCell::new(statements),
            now: Cell::new(now),
        }
    }

    /// The prepared statement for `sql` (written with `?` placeholders).
    fn statement(&self, sql: &str) -> Result<Statement> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement =
            round_trip(self.client.prepare(&numbered(sql))).map_err(|e| pg_error(&e))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// The server's clock (`clock_timestamp()`, so a group that queued on
    /// the chain head reads the time it runs at), read on first use and
    /// kept for the rest of the transaction: one instant per group, as the
    /// gate reads its clock once per group.
    pub(crate) fn server_now(&self) -> Result<Timestamp> {
        if let Some(now) = self.now.get() {
            return Ok(now);
        }
        let micros = self.int(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
            &[],
        )?;
        let now = Timestamp::from_unix_nanos(i128::from(micros) * 1000);
        self.now.set(Some(now));
        Ok(now)
    }

    /// Every row of a query.
    pub(crate) fn query(&self, sql: &str, params: &[Param]) -> Result<Vec<Row>> {
        let statement = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        round_trip(self.client.query(&statement, &refs)).map_err(|e| pg_error(&e))
    }

    /// The rows of a query, decoded by `f`.
    pub(crate) fn rows<T>(
        &self,
        sql: &str,
        params: &[Param],
        f: fn(&dyn RowColumns) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.query(sql, params)?
            .iter()
            .map(|row| f(&Columns(row)))
            .collect()
    }

    /// The first row of a query, decoded by `f`.
    pub(crate) fn first<T>(
        &self,
        sql: &str,
        params: &[Param],
        f: fn(&dyn RowColumns) -> Result<T>,
    ) -> Result<Option<T>> {
        self.query(sql, params)?
            .first()
            .map(|row| f(&Columns(row)))
            .transpose()
    }

    /// One integer (a count, a seq) from the first row's first column.
    pub(crate) fn int(&self, sql: &str, params: &[Param]) -> Result<i64> {
        let rows = self.query(sql, params)?;
        match rows.first() {
            Some(row) => Columns(row).int(0),
            None => Ok(0),
        }
    }

    /// How many rows a statement changed.
    pub(crate) fn execute(&self, sql: &str, params: &[Param]) -> Result<u64> {
        let statement = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        round_trip(self.client.execute(&statement, &refs)).map_err(|e| pg_error(&e))
    }
}

/// A PostgreSQL row read through the core's decoders.
pub(crate) struct Columns<'r>(pub(crate) &'r Row);

impl RowColumns for Columns<'_> {
    fn text(&self, index: usize) -> Result<String> {
        self.0.try_get(index).map_err(|e| pg_error(&e))
    }

    fn int(&self, index: usize) -> Result<i64> {
        self.0.try_get(index).map_err(|e| pg_error(&e))
    }

    fn opt_text(&self, index: usize) -> Result<Option<String>> {
        self.0.try_get(index).map_err(|e| pg_error(&e))
    }
}

/// `sql` with its `?` placeholders numbered (`$1`, `$2`, …). The store's
/// statements have no `?` in literals or operators.
pub(crate) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// A text parameter.
pub(crate) fn text(value: impl Into<String>) -> Param {
    Box::new(value.into())
}

/// An integer parameter.
pub(crate) fn int(value: i64) -> Param {
    Box::new(value)
}

/// A count as a parameter (saturating).
pub(crate) fn count(value: u64) -> Param {
    int(i64::try_from(value).unwrap_or(i64::MAX))
}

/// A `LIMIT` parameter: 0 means all (`LIMIT NULL`).
pub(crate) fn limit(value: u64) -> Param {
    let limit: Option<i64> = (value > 0).then(|| i64::try_from(value).unwrap_or(i64::MAX));
    Box::new(limit)
}

#[cfg(test)]
mod tests {
    use super::numbered;

    #[test]
    fn placeholders_are_numbered_in_order() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ? AND c IN (?, ?)"),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)"
        );
        assert_eq!(numbered("SELECT 1"), "SELECT 1");
    }
}
