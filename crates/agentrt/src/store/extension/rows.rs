//! The typed row operations on extension tables: inserts and
//! compare-and-set updates inside a write group, reads inside it and
//! outside. Every identifier comes from the registered declaration (a
//! caller's name is only looked up and checked); every value is bound by
//! the engine.

use super::{ExtensionRow, Registered, RowOrder, RowQuery, SqlValue};
use crate::error::{Error, Result};
use crate::store::read_rows::{ExtensionOrder, ExtensionQuery, StoredRow, StoredValue};
use crate::store::{Store, WriteTx};

/// Decodes a row as read: every value of its column's kind.
fn decode(t: &Registered, row: StoredRow) -> Result<ExtensionRow> {
    let columns = t.table.columns;
    let key_at = columns.iter().position(|c| *c == t.table.key_column);
    let key = key_at
        .and_then(|k| row.values.get(k))
        .map(|k| match k {
            StoredValue::Int(n) => n.to_string(),
            StoredValue::Text(t) => t.clone(),
            StoredValue::Other(_) => String::new(),
        })
        .unwrap_or_default();
    let mut values = Vec::with_capacity(columns.len());
    for (at, (column, value)) in columns.iter().zip(row.values).enumerate() {
        let kind = t.types.get(at).copied();
        let (value, type_name) = match value {
            StoredValue::Int(n) => (Some(SqlValue::Int(n)), "Integer"),
            StoredValue::Text(s) => (Some(SqlValue::Text(s)), "Text"),
            StoredValue::Other(name) => (None, name),
        };
        match value {
            Some(v) if Some(v.kind()) == kind => values.push(v),
            _ => {
                return Err(Error::Corrupt {
                    table: t.table.name,
                    id: key,
                    detail: format!(
                        "column {column:?} holds a {type_name} value, not {}",
                        kind.map_or("", |k| k.name())
                    ),
                });
            }
        }
    }
    if values.len() != columns.len() {
        return Err(Error::Internal {
            detail: format!("a row of {} was read with too few columns", t.table.name),
        });
    }
    Ok(ExtensionRow {
        table: t.table.name,
        columns,
        values,
        written_seq: row.written_seq,
    })
}

/// `filter`'s columns, checked against `t`, with their values.
fn checked<'v>(
    t: &Registered,
    filter: &'v [(&str, SqlValue)],
) -> Result<Vec<(&'static str, &'v SqlValue)>> {
    filter
        .iter()
        .map(|(column, value)| Ok((t.typed(column, value)?.1, value)))
        .collect()
}

/// `query`'s bound and order, checked against `t` (its filter is checked
/// by [`checked`]).
fn checked_bound<'v>(
    t: &Registered,
    query: &RowQuery<'v>,
) -> Result<(Option<(&'static str, &'v SqlValue)>, ExtensionOrder)> {
    let at_least = match query.at_least {
        Some((column, value)) => Some((t.typed(column, value)?.1, value)),
        None => None,
    };
    let order = match query.order {
        RowOrder::Oldest => ExtensionOrder::Oldest,
        RowOrder::Newest => ExtensionOrder::Newest,
        RowOrder::Highest(column) => ExtensionOrder::Highest(t.column(column)?.1),
    };
    Ok((at_least, order))
}

/// Reads `query` of table `t` through `read` (an engine's
/// [`ReadRows::extension_rows_by`](crate::store::ReadRows::extension_rows_by)),
/// every name checked, every row decoded.
fn read_by(
    t: &Registered,
    query: &RowQuery<'_>,
    read: impl FnOnce(&ExtensionQuery<'_>) -> Result<Vec<StoredRow>>,
) -> Result<Vec<ExtensionRow>> {
    let filter = checked(t, query.filter)?;
    let (at_least, order) = checked_bound(t, query)?;
    let rows = read(&ExtensionQuery {
        filter: &filter,
        at_least,
        order,
        limit: query.limit,
    })?;
    rows.into_iter().map(|row| decode(t, row)).collect()
}

/// The row of `t` keyed `key`, checked to be of the key's kind.
fn key_filter<'v>(t: &Registered, key: &'v SqlValue) -> Result<[(&'static str, &'v SqlValue); 1]> {
    let (_, column) = t.typed(t.table.key_column, key)?;
    Ok([(column, key)])
}

/// The first of `rows`, decoded.
fn first(t: &Registered, rows: Vec<StoredRow>) -> Result<Option<ExtensionRow>> {
    rows.into_iter()
        .next()
        .map(|row| decode(t, row))
        .transpose()
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
    /// [`Error::Database`] with kind `Constraint` (on PostgreSQL, which
    /// sends an insert with the group's next request, it may come from a
    /// later call of the group: the group fails either way).
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
        let mut checked: Vec<(&'static str, &SqlValue)> = Vec::with_capacity(values.len());
        for (column, value) in values {
            let (_, name) = t.typed(column, value)?;
            if checked.iter().any(|(n, _)| *n == name) {
                return Err(Error::ColumnValue {
                    table: t.table.name,
                    column: name,
                    detail: "it is given twice".into(),
                });
            }
            checked.push((name, value));
        }
        let key = match self.rows().insert_extension_row(&t.table, &checked)? {
            StoredValue::Int(n) => SqlValue::Int(n),
            StoredValue::Text(s) => SqlValue::Text(s),
            StoredValue::Other(_) => {
                return Err(Error::Corrupt {
                    table: t.table.name,
                    id: String::new(),
                    detail: "the inserted row's key is neither an integer nor text".into(),
                });
            }
        };
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
        let mut sets: Vec<(&'static str, &SqlValue)> = Vec::with_capacity(set.len());
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
            if sets.iter().any(|(n, _)| *n == name) {
                return Err(refuse("it is set twice"));
            }
            sets.push((name, value));
        }
        let guard = checked(t, guard)?;
        let changed = self
            .rows()
            .update_extension_row(&t.table, &key, &sets, &guard)?;
        if changed {
            self.wrote_extension_row(index, key.to_string());
        }
        Ok(changed)
    }

    /// The row of extension table `table` keyed `key`, as this group sees
    /// it.
    pub fn row(&self, table: &str, key: impl Into<SqlValue>) -> Result<Option<ExtensionRow>> {
        let (_, t) = self.extensions().find(table)?;
        let key = key.into();
        let filter = key_filter(t, &key)?;
        first(t, self.rows_read().extension_rows(&t.table, &filter, 1)?)
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
        let filter = checked(t, filter)?;
        let rows = self.rows_read().extension_rows(&t.table, &filter, limit)?;
        rows.into_iter().map(|row| decode(t, row)).collect()
    }

    /// The rows of extension table `table` that `query` asks for (see
    /// [`Store::rows_by`]), as this group sees them.
    pub fn rows_by(&self, table: &str, query: &RowQuery<'_>) -> Result<Vec<ExtensionRow>> {
        let (_, t) = self.extensions().find(table)?;
        let rows = self.rows_read();
        read_by(t, query, |q| rows.extension_rows_by(&t.table, q))
    }

    /// Whether run `run_id` exists, as this group sees it: decided inside
    /// the group's transaction, so no other writer can begin or remove the
    /// run before the group commits.
    pub fn run_exists(&self, run_id: &str) -> Result<bool> {
        self.rows_read().run_exists(run_id)
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
        let filter = key_filter(t, &key)?;
        let rows = self.read(|rows| rows.extension_rows(&t.table, &filter, 1))?;
        first(t, rows)
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
        let filter = checked(t, filter)?;
        let rows = self.read(|rows| rows.extension_rows(&t.table, &filter, limit))?;
        rows.into_iter().map(|row| decode(t, row)).collect()
    }
    /// The rows of extension table `table` that `query` asks for: those
    /// whose columns hold every value of its filter and at least its bound,
    /// in its order, at most its limit. Read from an index that matches
    /// the question where the table has one (its filter's columns, then the
    /// bound's or the order's), it reads only the rows it returns.
    ///
    /// ```
    /// # use agentrt::store::{Extension, ExtensionTable, RowOrder, RowQuery, SqlValue};
    /// # use agentrt::{Error, EventType, Store, StoreOptions, Timestamp};
    /// const EXT: Extension = Extension { name: "demo", migrations: &[(1,
    ///     "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL, n INTEGER NOT NULL,
    ///          written_seq INTEGER NOT NULL DEFAULT 0);
    ///      CREATE INDEX demo_items_kind_n ON demo_items (kind, n);")],
    ///     tables: &[ExtensionTable { name: "demo_items", key_column: "id", columns: &["id", "kind", "n"] }] };
    /// let store = Store::open_with(":memory:", StoreOptions { extensions: vec![EXT], ..StoreOptions::default() })?;
    /// # let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
    /// store.write(|tx| {
    /// #   tx.insert_run(&agentrt::store::NewRun { id: "r1", goal: "g", limits_json: "{}",
    /// #       created_at: at, lease_owner: "me", lease_expires_at: at })?;
    ///     for (id, n) in [("a", 3), ("b", 1), ("c", 2), ("d", 5)] {
    ///         tx.insert_row("demo_items", &[("id", id.into()), ("kind", "k".into()), ("n", n.into())])?;
    ///     }
    ///     tx.append_event("r1", "", &at, EventType::RunCreated, "{}")
    /// })?;
    /// let ids = |rows: Vec<agentrt::store::ExtensionRow>| -> Vec<String> {
    ///     rows.iter().filter_map(|r| r.text("id").map(str::to_owned)).collect()
    /// };
    /// let kind = [("kind", SqlValue::from("k"))];
    /// // The newest two.
    /// let newest = store.rows_by("demo_items", &RowQuery::matching(&kind).newest_first().limit(2))?;
    /// assert_eq!(ids(newest), ["d", "c"]);
    /// // n ≥ 2, highest first.
    /// let two = SqlValue::Int(2);
    /// let query = RowQuery { at_least: Some(("n", &two)), order: RowOrder::Highest("n"), ..RowQuery::matching(&kind) };
    /// assert_eq!(ids(store.rows_by("demo_items", &query)?), ["d", "a", "c"]);
    /// let wrong = RowQuery { order: RowOrder::Highest("nope"), ..RowQuery::matching(&kind) };
    /// assert!(matches!(store.rows_by("demo_items", &wrong), Err(Error::NoSuchColumn { .. })));
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn rows_by(&self, table: &str, query: &RowQuery<'_>) -> Result<Vec<ExtensionRow>> {
        let (_, t) = self.inner.extensions.find(table)?;
        read_by(t, query, |q| {
            self.read(|rows| rows.extension_rows_by(&t.table, q))
        })
    }
}
