//! The rows of satellites' extension tables inside a transaction: the
//! core's typed inserts, compare-and-set updates and filtered reads, and
//! the marking of written rows, as SQLite's engine does them. Identifiers
//! come from the registered declaration; every value is bound.
//!
//! An insert goes with the group's next request (its result decides
//! nothing) unless the server must number its key (an `INTEGER PRIMARY
//! KEY` left out: the largest key plus one, as SQLite's rowid) or a
//! column left out has no default (the insert then fails now, as on
//! SQLite). Each row written is digested by the group from the values it
//! wrote, so marking it costs no answer.

use agentrt::chain::{RowValue, row_digest};
use agentrt::store::engine::{ExtensionOrder, ExtensionQuery, StoredRow, StoredValue};
use agentrt::store::engine::{quoted, quoted_list};
use agentrt::store::{ColumnType, ExtensionTable, SqlValue};
use agentrt::{Error, Result};
use tokio_postgres::Row;
use tokio_postgres::types::Type;

use crate::error::pg_error;
use crate::extensions::row_order;
use crate::rows::{ExtensionWrite, Param, PgRows, digest_row, int, limit, text};

fn param(value: &SqlValue) -> Param {
    match value {
        SqlValue::Int(n) => int(*n),
        SqlValue::Text(t) => text(t.as_str()),
    }
}

fn row_value(value: &SqlValue) -> RowValue<'_> {
    match value {
        SqlValue::Int(n) => RowValue::Int(*n),
        SqlValue::Text(t) => RowValue::Text(t.as_bytes()),
    }
}

/// A value as read from a column of `row`: BIGINT or TEXT.
fn stored(row: &Row, at: usize) -> Result<StoredValue> {
    let column = &row.columns()[at];
    if *column.type_() == Type::INT8 {
        let n: i64 = row.try_get(at).map_err(|e| pg_error(&e))?;
        Ok(StoredValue::Int(n))
    } else if *column.type_() == Type::TEXT {
        let t: String = row.try_get(at).map_err(|e| pg_error(&e))?;
        Ok(StoredValue::Text(t))
    } else {
        Ok(StoredValue::Other("Other"))
    }
}

/// `key` (as a row listing names it) as a value of `table`'s key column;
/// `None` when it cannot be one (no such row).
pub(crate) fn typed_key(key_kind: ColumnType, key: &str) -> Option<SqlValue> {
    match key_kind {
        ColumnType::Int => key.parse().ok().map(SqlValue::Int),
        ColumnType::Text => Some(SqlValue::from(key)),
    }
}

impl PgRows<'_> {
    /// Notes row `key` of `table` as written, with its digest if known.
    fn wrote_extension(&self, table: &ExtensionTable, key: SqlValue, digest: Option<String>) {
        self.extension_rows.borrow_mut().insert(
            (table.name, key.to_string()),
            ExtensionWrite { key, digest },
        );
    }

    /// The digest of a row of `table` whose digested columns hold `values`.
    fn extension_digest(table: &ExtensionTable, values: &[&SqlValue]) -> String {
        let values: Vec<RowValue<'_>> = values.iter().map(|v| row_value(v)).collect();
        row_digest(table.name, &values)
    }

    pub(crate) fn insert_extension(
        &self,
        table: &ExtensionTable,
        values: &[(&'static str, &SqlValue)],
    ) -> Result<StoredValue> {
        let shape = self.extensions.get(table)?;
        let given = |column: &str| values.iter().find(|(c, _)| *c == column).map(|(_, v)| *v);
        let value_of = |column: &str| {
            given(column).or_else(|| shape.column(column).and_then(|c| c.default.as_ref()))
        };
        let names: Vec<&str> = values.iter().map(|(c, _)| *c).collect();
        let params: Vec<Param> = values.iter().map(|(_, v)| param(v)).collect();
        // A numbered key left out: the server numbers it, as SQLite's rowid.
        let numbered = (shape.numbered_key.as_deref() == Some(table.key_column)
            && given(table.key_column).is_none())
        .then(|| self.insert_numbered(table, &names, &params))
        .transpose()?;
        if numbered.is_none() {
            let sql = table.insert_sql(&names);
            if table.columns.iter().any(|c| value_of(c).is_none()) {
                // A column with neither a value nor a default: the server
                // refuses the insert, now, as SQLite does.
                self.execute(&sql, &params)?;
            } else {
                self.defer(&sql, params)?;
            }
        }
        // Every digested column's value as inserted.
        let row: Vec<Option<&SqlValue>> = table
            .columns
            .iter()
            .map(|c| match &numbered {
                Some(number) if *c == table.key_column => Some(number),
                _ => value_of(c),
            })
            .collect();
        let key_at = table.columns.iter().position(|c| *c == table.key_column);
        let Some(key) = key_at.and_then(|at| row[at]).cloned() else {
            return Err(Error::Internal {
                detail: format!("inserting into {}: the key has no value", table.name),
            });
        };
        let digest = row
            .iter()
            .copied()
            .collect::<Option<Vec<&SqlValue>>>()
            .map(|full| PgRows::extension_digest(table, &full));
        self.wrote_extension(table, key.clone(), digest);
        Ok(match key {
            SqlValue::Int(n) => StoredValue::Int(n),
            SqlValue::Text(t) => StoredValue::Text(t),
        })
    }

    /// Inserts `names`' values with the key numbered by the server (the
    /// largest in the table plus one); the number.
    fn insert_numbered(
        &self,
        table: &ExtensionTable,
        names: &[&str],
        params: &[Param],
    ) -> Result<SqlValue> {
        let (name, key) = (quoted(table.name), quoted(table.key_column));
        let mut columns = vec![table.key_column];
        columns.extend(names);
        let mut marks = vec![format!("(SELECT COALESCE(MAX({key}), 0) + 1 FROM {name})")];
        marks.extend(names.iter().map(|_| "?".to_owned()));
        let sql = format!(
            "INSERT INTO {name} ({}) VALUES ({}) RETURNING {key}",
            quoted_list(&columns),
            marks.join(", ")
        );
        match self
            .query(&sql, params)?
            .first()
            .map(|r| stored(r, 0))
            .transpose()?
        {
            Some(StoredValue::Int(n)) => Ok(SqlValue::Int(n)),
            _ => Err(Error::Internal {
                detail: format!("inserting into {}: no key returned", table.name),
            }),
        }
    }

    pub(crate) fn update_extension(
        &self,
        table: &ExtensionTable,
        key: &SqlValue,
        set: &[(&'static str, &SqlValue)],
        guard: &[(&'static str, &SqlValue)],
    ) -> Result<bool> {
        let set_columns: Vec<&str> = set.iter().map(|(c, _)| *c).collect();
        let guard_columns: Vec<&str> = guard.iter().map(|(c, _)| *c).collect();
        let sql = format!(
            "{} RETURNING {}",
            table.update_sql(&set_columns, &guard_columns),
            quoted_list(table.columns)
        );
        let mut params: Vec<Param> = set.iter().map(|(_, v)| param(v)).collect();
        params.push(param(key));
        params.extend(guard.iter().map(|(_, v)| param(v)));
        let rows = self.query(&sql, &params)?;
        let Some(row) = rows.first() else {
            return Ok(false);
        };
        let digest = digest_row(table.name, row)?;
        self.wrote_extension(table, key.clone(), Some(digest));
        Ok(true)
    }

    pub(crate) fn select_extension(
        &self,
        table: &ExtensionTable,
        query: &ExtensionQuery<'_>,
    ) -> Result<Vec<StoredRow>> {
        let shape = self.extensions.get(table)?;
        let mut wheres: Vec<String> = query
            .filter
            .iter()
            .map(|(c, _)| format!("{} = ?", quoted(c)))
            .collect();
        let mut params: Vec<Param> = query.filter.iter().map(|(_, v)| param(v)).collect();
        if let Some((column, value)) = query.at_least {
            wheres.push(format!("{} >= ?", quoted(column)));
            params.push(param(value));
        }
        if wheres.is_empty() {
            wheres.push("TRUE".into());
        }
        // Insertion order is `_pos` (or a numbered key), which every
        // non-unique index of an extension table ends with, as SQLite's
        // end with the rowid.
        let inserted = row_order(shape);
        let order = match query.order {
            ExtensionOrder::Oldest => inserted,
            ExtensionOrder::Newest => format!("{inserted} DESC"),
            ExtensionOrder::Highest(column) => format!("{} DESC, {inserted} DESC", quoted(column)),
        };
        let sql = format!(
            "SELECT {}, written_seq FROM {} WHERE {} ORDER BY {order} LIMIT ?",
            quoted_list(table.columns),
            quoted(table.name),
            wheres.join(" AND "),
        );
        params.push(limit(query.limit));
        let width = table.columns.len();
        self.query(&sql, &params)?
            .iter()
            .map(|row| {
                let values = (0..width)
                    .map(|at| stored(row, at))
                    .collect::<Result<Vec<_>>>()?;
                let written_seq: i64 = row.try_get(width).map_err(|e| pg_error(&e))?;
                Ok(StoredRow {
                    values,
                    written_seq,
                })
            })
            .collect()
    }

    /// Marks row `key` of `table` written by `seq`: with the digest the
    /// group noted, the update is deferred and the digest returned;
    /// otherwise `None`, and the caller reads the row as it marks it with
    /// [`PgRows::mark_extension_query`].
    pub(crate) fn mark_extension_noted(
        &self,
        table: &ExtensionTable,
        key: &str,
        seq: i64,
    ) -> Result<Option<String>> {
        let noted = self
            .extension_rows
            .borrow()
            .get(&(table.name, key.to_owned()))
            .and_then(|w| w.digest.clone().map(|d| (w.key.clone(), d)));
        let Some((typed, digest)) = noted else {
            return Ok(None);
        };
        self.defer(
            &format!(
                "UPDATE {} SET written_seq = ? WHERE {} = ?",
                quoted(table.name),
                quoted(table.key_column)
            ),
            vec![int(seq), param(&typed)],
        )?;
        Ok(Some(digest))
    }

    /// The statement that marks row `key` of `table` written by `seq` and
    /// returns its digested columns; `None` when the key cannot name a row.
    pub(crate) fn mark_extension_query(
        &self,
        table: &ExtensionTable,
        key: &str,
        seq: i64,
    ) -> Result<Option<(String, Vec<Param>)>> {
        let shape = self.extensions.get(table)?;
        let kind = shape
            .column(table.key_column)
            .map_or(ColumnType::Text, |c| c.kind);
        let Some(typed) = typed_key(kind, key) else {
            return Ok(None);
        };
        Ok(Some((
            format!(
                "UPDATE {} SET written_seq = ? WHERE {} = ? RETURNING {}",
                quoted(table.name),
                quoted(table.key_column),
                quoted_list(table.columns)
            ),
            vec![int(seq), param(&typed)],
        )))
    }
}
