//! The typed row operations on extension tables: inserts and
//! compare-and-set updates inside a write group, reads inside it and
//! outside. Every identifier comes from the registered declaration (a
//! caller's name is only looked up); every value is bound.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params_from_iter};

use super::{ExtensionRow, Registered, SqlValue, quoted, quoted_list};
use crate::error::{Error, Result};
use crate::store::{Store, WriteTx};

/// A value as stored, if it is of the column's kind.
fn stored(value: ValueRef<'_>) -> Option<SqlValue> {
    match value {
        ValueRef::Integer(n) => Some(SqlValue::Int(n)),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()
            .map(|t| SqlValue::Text(t.to_owned())),
        _ => None,
    }
}

/// Decodes a selected row: the digested columns, then `written_seq`.
fn decode(t: &Registered, row: &rusqlite::Row<'_>) -> Result<ExtensionRow> {
    let columns = t.table.columns;
    let mut values = Vec::with_capacity(columns.len());
    for (at, column) in columns.iter().enumerate() {
        let value = row.get_ref(at).map_err(Error::from_sqlite)?;
        let kind = t.types.get(at).copied();
        match stored(value) {
            Some(v) if Some(v.kind()) == kind => values.push(v),
            _ => {
                let key = columns
                    .iter()
                    .position(|c| *c == t.table.key_column)
                    .and_then(|k| row.get_ref(k).ok())
                    .and_then(stored)
                    .map(|k| k.to_string())
                    .unwrap_or_default();
                return Err(Error::Corrupt {
                    table: t.table.name,
                    id: key,
                    detail: format!(
                        "column {column:?} holds a {:?} value, not {}",
                        value.data_type(),
                        kind.map_or("", |k| k.name())
                    ),
                });
            }
        }
    }
    let written_seq = row
        .get::<_, i64>(columns.len())
        .map_err(Error::from_sqlite)?;
    Ok(ExtensionRow {
        table: t.table.name,
        columns,
        values,
        written_seq,
    })
}

/// `"col" = ?` for each of `filter`, checked against `t`, and their values.
fn conditions(
    t: &Registered,
    filter: &[(&str, SqlValue)],
) -> Result<(Vec<String>, Vec<rusqlite::types::Value>)> {
    let mut sql = Vec::with_capacity(filter.len());
    let mut params = Vec::with_capacity(filter.len());
    for (column, value) in filter {
        let (_, name) = t.typed(column, value)?;
        sql.push(format!("{} = ?", quoted(name)));
        params.push(value.to_sql());
    }
    Ok((sql, params))
}

fn select_row(conn: &Connection, t: &Registered, key: &SqlValue) -> Result<Option<ExtensionRow>> {
    t.typed(t.table.key_column, key)?;
    let sql = format!(
        "SELECT {}, written_seq FROM {} WHERE {} = ?1",
        quoted_list(t.table.columns),
        quoted(t.table.name),
        quoted(t.table.key_column)
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(Error::from_sqlite)?;
    let mut rows = stmt.query([key.to_sql()]).map_err(Error::from_sqlite)?;
    match rows.next().map_err(Error::from_sqlite)? {
        Some(row) => decode(t, row).map(Some),
        None => Ok(None),
    }
}

fn select_rows(
    conn: &Connection,
    t: &Registered,
    filter: &[(&str, SqlValue)],
    limit: u64,
) -> Result<Vec<ExtensionRow>> {
    let (mut wheres, mut params) = conditions(t, filter)?;
    if wheres.is_empty() {
        wheres.push("1".into());
    }
    let limit = if limit == 0 {
        -1
    } else {
        i64::try_from(limit).unwrap_or(i64::MAX)
    };
    params.push(rusqlite::types::Value::Integer(limit));
    let sql = format!(
        "SELECT {}, written_seq FROM {} WHERE {} ORDER BY rowid LIMIT ?",
        quoted_list(t.table.columns),
        quoted(t.table.name),
        wheres.join(" AND ")
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(Error::from_sqlite)?;
    let mut rows = stmt
        .query(params_from_iter(params))
        .map_err(Error::from_sqlite)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(Error::from_sqlite)? {
        out.push(decode(t, row)?);
    }
    Ok(out)
}

impl WriteTx<'_> {
    /// Inserts a row into extension table `table` and returns its key (the
    /// one given, or the one SQLite chose for an `INTEGER PRIMARY KEY` left
    /// out). The row is digested into the group's last event, like a core
    /// state row: a group that inserts it without an event is refused
    /// ([`Error::UnexplainedWrite`]).
    ///
    /// A column left out takes its default (or fails its `NOT NULL`).
    /// Refused: a table not registered with the store
    /// ([`Error::NoSuchTable`]), a column it does not have
    /// ([`Error::NoSuchColumn`]), a value of the other type or a column
    /// given twice ([`Error::ColumnValue`]); a duplicate key is
    /// [`Error::Database`] with kind `Constraint`.
    ///
    /// ```
    /// # use agentrt::store::{Extension, ExtensionTable, SqlValue};
    /// # use agentrt::{Error, EventType, Store, StoreOptions, Timestamp};
    /// const CALLS: Extension = Extension {
    ///     name: "calls",
    ///     migrations: &[(1, "CREATE TABLE calls_index (
    ///         id INTEGER PRIMARY KEY, tool TEXT NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)")],
    ///     tables: &[ExtensionTable { name: "calls_index", key_column: "id", columns: &["id", "tool"] }],
    /// };
    /// let store = Store::open_with(":memory:", StoreOptions { extensions: vec![CALLS], ..StoreOptions::default() })?;
    /// let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
    /// let (key, _) = store.write(|tx| {
    /// #   tx.insert_run(&agentrt::store::NewRun { id: "r1", goal: "g", limits_json: "{}",
    /// #       created_at: at, lease_owner: "me", lease_expires_at: at })?;
    ///     let key = tx.insert_row("calls_index", &[("tool", SqlValue::from("fs_read"))])?;
    ///     tx.append_event("r1", "", &at, EventType::RunCreated, "{}")?;
    ///     Ok(key)
    /// })?;
    /// assert_eq!(key, SqlValue::Int(1));
    /// let refused = store.write(|tx| tx.insert_row("calls_index", &[("tool", SqlValue::Int(3))]));
    /// assert!(matches!(refused, Err(Error::ColumnValue { column: "tool", .. })));
    /// let unexplained = store.write(|tx| tx.insert_row("calls_index", &[("tool", "x".into())]));
    /// assert!(matches!(unexplained, Err(Error::UnexplainedWrite { table: "calls_index", .. })));
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn insert_row(&mut self, table: &str, values: &[(&str, SqlValue)]) -> Result<SqlValue> {
        let (index, t) = self.extensions().find(table)?;
        let mut names: Vec<&'static str> = Vec::with_capacity(values.len());
        let mut params = Vec::with_capacity(values.len());
        for (column, value) in values {
            let (_, name) = t.typed(column, value)?;
            if names.contains(&name) {
                return Err(Error::ColumnValue {
                    table: t.table.name,
                    column: name,
                    detail: "it is given twice".into(),
                });
            }
            names.push(name);
            params.push(value.to_sql());
        }
        let sql = if names.is_empty() {
            format!(
                "INSERT INTO {} DEFAULT VALUES RETURNING {}",
                quoted(t.table.name),
                quoted(t.table.key_column)
            )
        } else {
            format!(
                "INSERT INTO {} ({}) VALUES ({}) RETURNING {}",
                quoted(t.table.name),
                quoted_list(&names),
                vec!["?"; names.len()].join(", "),
                quoted(t.table.key_column)
            )
        };
        let mut stmt = self
            .conn()
            .prepare_cached(&sql)
            .map_err(Error::from_sqlite)?;
        let key = stmt
            .query_row(params_from_iter(params), |r| Ok(stored(r.get_ref(0)?)))
            .map_err(Error::from_sqlite)?
            .ok_or_else(|| Error::Corrupt {
                table: t.table.name,
                id: String::new(),
                detail: "the inserted row's key is neither an integer nor text".into(),
            })?;
        self.wrote_extension_row(index, key.to_string());
        Ok(key)
    }

    /// Sets columns of the row of extension table `table` keyed `key`, if
    /// the row is there and every column of `guard` holds the value given
    /// (compare-and-set, in the same statement); `false` if it did not
    /// apply. A row it changed is digested into the group's last event.
    ///
    /// The key never changes (the chain names the row by it), `set` is not
    /// empty and names each column once.
    ///
    /// ```
    /// # use agentrt::store::{Extension, ExtensionTable, SqlValue};
    /// # use agentrt::{EventType, Store, StoreOptions, Timestamp};
    /// # const CALLS: Extension = Extension {
    /// #     name: "calls",
    /// #     migrations: &[(1, "CREATE TABLE calls_index (
    /// #         id INTEGER PRIMARY KEY, open INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)")],
    /// #     tables: &[ExtensionTable { name: "calls_index", key_column: "id", columns: &["id", "open"] }],
    /// # };
    /// # let store = Store::open_with(":memory:", StoreOptions { extensions: vec![CALLS], ..StoreOptions::default() })?;
    /// # let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
    /// # store.write(|tx| {
    /// #   tx.insert_run(&agentrt::store::NewRun { id: "r1", goal: "g", limits_json: "{}",
    /// #       created_at: at, lease_owner: "me", lease_expires_at: at })?;
    /// #   tx.insert_row("calls_index", &[("id", 7.into()), ("open", 1.into())])?;
    /// #   tx.append_event("r1", "", &at, EventType::RunCreated, "{}")
    /// # })?;
    /// let close = |tx: &mut agentrt::store::WriteTx<'_>| {
    ///     let closed = tx.update_row("calls_index", 7, &[("open", 0.into())], &[("open", 1.into())])?;
    ///     if closed {
    ///         tx.append_event("r1", "", &at, EventType::RunCreated, "{}")?;
    ///     }
    ///     Ok(closed)
    /// };
    /// assert!(store.write(close)?.0, "the first close applies");
    /// assert!(!store.write(close)?.0, "the row is no longer open");
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn update_row(
        &mut self,
        table: &str,
        key: impl Into<SqlValue>,
        set: &[(&str, SqlValue)],
        guard: &[(&str, SqlValue)],
    ) -> Result<bool> {
        let key = key.into();
        let (index, t) = self.extensions().find(table)?;
        let (_, key_column) = t.typed(t.table.key_column, &key)?;
        if set.is_empty() {
            return Err(Error::InvalidInput {
                what: "update_row",
                detail: format!("nothing to set in {}", t.table.name),
            });
        }
        let mut names: Vec<&'static str> = Vec::with_capacity(set.len());
        let mut sets = Vec::with_capacity(set.len());
        let mut params = Vec::with_capacity(set.len() + guard.len() + 1);
        for (column, value) in set {
            let (_, name) = t.typed(column, value)?;
            let refuse = |detail: &str| Error::ColumnValue {
                table: t.table.name,
                column: name,
                detail: detail.into(),
            };
            if name == key_column {
                return Err(refuse(
                    "it is the key, which never changes (the chain names the row by it)",
                ));
            }
            if names.contains(&name) {
                return Err(refuse("it is set twice"));
            }
            names.push(name);
            sets.push(format!("{} = ?", quoted(name)));
            params.push(value.to_sql());
        }
        params.push(key.to_sql());
        let (guards, guard_params) = conditions(t, guard)?;
        params.extend(guard_params);
        let mut sql = format!(
            "UPDATE {} SET {} WHERE {} = ?",
            quoted(t.table.name),
            sets.join(", "),
            quoted(key_column)
        );
        for g in guards {
            sql.push_str(" AND ");
            sql.push_str(&g);
        }
        let changed = self.exec(&sql, params)? == 1;
        if changed {
            self.wrote_extension_row(index, key.to_string());
        }
        Ok(changed)
    }

    /// The row of extension table `table` keyed `key`, as this group sees
    /// it.
    pub fn row(&self, table: &str, key: impl Into<SqlValue>) -> Result<Option<ExtensionRow>> {
        let (_, t) = self.extensions().find(table)?;
        select_row(self.conn(), t, &key.into())
    }

    /// The rows of extension table `table` whose columns hold every value
    /// of `filter` (all rows for none), in insertion order, at most `limit`
    /// (0: all), as this group sees them.
    pub fn rows_where(
        &self,
        table: &str,
        filter: &[(&str, SqlValue)],
        limit: u64,
    ) -> Result<Vec<ExtensionRow>> {
        let (_, t) = self.extensions().find(table)?;
        select_rows(self.conn(), t, filter, limit)
    }

    /// Whether run `run_id` exists, as this group sees it: decided inside
    /// the group's transaction, so no other writer can begin or remove the
    /// run before the group commits.
    pub fn run_exists(&self, run_id: &str) -> Result<bool> {
        self.conn()
            .prepare_cached("SELECT 1 FROM runs WHERE id = ?1")
            .and_then(|mut stmt| stmt.query_row([run_id], |_| Ok(())).optional())
            .map(|found| found.is_some())
            .map_err(Error::from_sqlite)
    }
}

impl Store {
    /// The row of extension table `table` keyed `key` (a table registered
    /// with this store by [`StoreOptions::extensions`](crate::StoreOptions)).
    ///
    /// ```
    /// # use agentrt::store::{Extension, ExtensionTable};
    /// # use agentrt::{Error, Store, StoreOptions};
    /// # const EXT: Extension = Extension { name: "demo", migrations: &[(1,
    /// #     "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)")],
    /// #     tables: &[ExtensionTable { name: "demo_items", key_column: "id", columns: &["id", "n"] }] };
    /// let store = Store::open_with(":memory:", StoreOptions { extensions: vec![EXT], ..StoreOptions::default() })?;
    /// assert_eq!(store.row("demo_items", "a")?, None);
    /// assert!(matches!(store.row("demo_nope", "a"), Err(Error::NoSuchTable { .. })));
    /// assert!(matches!(store.row("demo_items", 1), Err(Error::ColumnValue { column: "id", .. })));
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn row(&self, table: &str, key: impl Into<SqlValue>) -> Result<Option<ExtensionRow>> {
        let key = key.into();
        let (_, t) = self.inner.extensions.find(table)?;
        self.read(|conn| select_row(conn, t, &key))
    }

    /// The rows of extension table `table` whose columns hold every value
    /// of `filter` (all rows for none), in insertion order, at most `limit`
    /// (0: all).
    ///
    /// ```
    /// # use agentrt::store::{Extension, ExtensionTable};
    /// # use agentrt::{Error, Store, StoreOptions};
    /// # const EXT: Extension = Extension { name: "demo", migrations: &[(1,
    /// #     "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)")],
    /// #     tables: &[ExtensionTable { name: "demo_items", key_column: "id", columns: &["id", "n"] }] };
    /// let store = Store::open_with(":memory:", StoreOptions { extensions: vec![EXT], ..StoreOptions::default() })?;
    /// assert!(store.rows_where("demo_items", &[("n", 1.into())], 10)?.is_empty());
    /// assert!(matches!(
    ///     store.rows_where("demo_items", &[("written_seq", 1.into())], 10),
    ///     Err(Error::NoSuchColumn { .. })
    /// ));
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn rows_where(
        &self,
        table: &str,
        filter: &[(&str, SqlValue)],
        limit: u64,
    ) -> Result<Vec<ExtensionRow>> {
        let (_, t) = self.inner.extensions.find(table)?;
        self.read(|conn| select_rows(conn, t, filter, limit))
    }
}
