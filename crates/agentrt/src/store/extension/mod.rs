//! The extension point for satellite crates: a satellite (the proxy's call
//! index, the approver's nonces) declares an [`Extension`] — its name, its
//! forward-only migrations, its tables — and hands it to
//! [`Store::open_with`](crate::Store::open_with). The store applies the
//! migrations in its own IMMEDIATE transaction, under an authorizer that
//! lets them create and alter only the extension's own tables, and records
//! them in its registry. The satellite then writes its rows through typed
//! operations of [`WriteTx`](crate::store::WriteTx) (`insert_row`,
//! `update_row`), in the same write groups as the core's rows, digested
//! into the chain like them; `verify` reads the registry from the file, so
//! it checks extension rows without the satellite being linked.
//!
//! A satellite never holds a connection and never writes SQL: every
//! identifier in a statement comes from the registered declaration, every
//! value is bound.
//!
//! ```
//! use agentrt::store::{Extension, ExtensionTable, SqlValue};
//! use agentrt::{EventType, Store, StoreOptions, Timestamp};
//!
//! const NONCES: Extension = Extension {
//!     name: "nonces",
//!     migrations: &[(
//!         1,
//!         "CREATE TABLE nonces_seen (
//!              nonce       TEXT NOT NULL PRIMARY KEY,
//!              seen_at     TEXT NOT NULL,
//!              written_seq INTEGER NOT NULL DEFAULT 0
//!          )",
//!     )],
//!     tables: &[ExtensionTable {
//!         name: "nonces_seen",
//!         key_column: "nonce",
//!         columns: &["nonce", "seen_at"],
//!     }],
//! };
//!
//! let options = StoreOptions { extensions: vec![NONCES], ..StoreOptions::default() };
//! let store = Store::open_with(":memory:", options)?;
//! # let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
//! # store.write(|tx| {
//! #     tx.insert_run(&agentrt::store::NewRun { id: "r1", goal: "g", limits_json: "{}",
//! #         created_at: at, lease_owner: "me", lease_expires_at: at })?;
//! #     tx.append_event("r1", "", &at, EventType::RunCreated, "{}")
//! # })?;
//! store.write(|tx| {
//!     tx.insert_row("nonces_seen", &[
//!         ("nonce", SqlValue::from("n-1")),
//!         ("seen_at", SqlValue::from("2026-10-01T09:00:00.000000000Z")),
//!     ])?;
//!     // The event that explains the row: the group's last event digests it.
//!     tx.append_event("r1", "", &at, EventType::RunCreated, "{}")
//! })?;
//! let row = store.row("nonces_seen", "n-1")?.expect("the row is there");
//! assert_eq!(row.text("seen_at"), Some("2026-10-01T09:00:00.000000000Z"));
//! assert_eq!(row.written_seq(), 2);
//! # Ok::<(), agentrt::Error>(())
//! ```

mod migrate;
mod record;
mod rows;
mod shape;

use std::fmt;

use crate::error::{Error, Result};

pub(crate) use migrate::{DdlGuard, sync, table_problem_in};
pub use record::{Registration, RegistryEntry, check_held};
pub(crate) use shape::described;
pub use shape::{ColumnShape, ExtensionShape, IndexShape, ShapeChange, TableShape};

/// A satellite's schema, declared as constants: its name, its migrations
/// and the tables whose rows the chain covers.
///
/// Rules, checked when the store opens ([`Error::ExtensionDeclaration`]
/// otherwise):
///
/// - `name` is `[a-z][a-z0-9_]{0,30}`; every table and index the extension
///   creates starts with `<name>_`, its *prefix*. No core table or index
///   starts with the prefix (an extension `run` would own `run_labels`),
///   and no other extension's prefix starts with it or is started by it.
/// - `migrations` are `(version, ddl)` with versions `1, 2, …` in order.
///   They are forward-only: an applied version's DDL never changes (its
///   BLAKE3 hash is recorded), and a database at a newer version than the
///   build is refused. The DDL may create and alter tables and create and
///   drop indexes of the extension only: no trigger, view, row write,
///   dropped or renamed table, pragma, attach or transaction statement.
/// - `tables` lists every table the migrations create (see
///   [`ExtensionTable`]); a table once registered stays declared.
///
/// ```
/// use agentrt::store::{Extension, ExtensionTable};
///
/// const PROXY: Extension = Extension {
///     name: "proxy",
///     migrations: &[(1, "CREATE TABLE proxy_calls (
///         id          INTEGER PRIMARY KEY AUTOINCREMENT,
///         session     TEXT NOT NULL,
///         open        INTEGER NOT NULL,
///         written_seq INTEGER NOT NULL DEFAULT 0
///     )")],
///     tables: &[ExtensionTable {
///         name: "proxy_calls",
///         key_column: "id",
///         columns: &["id", "session", "open"],
///     }],
/// };
/// assert_eq!(PROXY.version(), 1);
/// assert_eq!(PROXY.prefix(), "proxy_");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extension {
    /// The extension's name, `[a-z][a-z0-9_]{0,30}` (`proxy`).
    pub name: &'static str,
    /// Its migrations, `(version, ddl)`, versions `1..` contiguous.
    pub migrations: &'static [(i64, &'static str)],
    /// Its tables.
    pub tables: &'static [ExtensionTable],
}

impl Extension {
    /// The version its last migration brings a database to.
    pub fn version(&self) -> i64 {
        self.migrations.last().map_or(0, |(v, _)| *v)
    }

    /// The prefix of every table and index it owns: its name and `_`.
    pub fn prefix(&self) -> String {
        format!("{}_", self.name)
    }
}

/// One table of an [`Extension`]: rows written through
/// [`WriteTx::insert_row`](crate::store::WriteTx::insert_row) and
/// [`WriteTx::update_row`](crate::store::WriteTx::update_row) are digested
/// into the chain like a core state row, by `columns`.
///
/// Rules, checked against the table as the migrations left it
/// ([`Error::ExtensionSchema`] otherwise): `name` starts with the
/// extension's prefix; `columns` are the table's columns, in digest order,
/// each `TEXT NOT NULL` or `INTEGER NOT NULL` and named
/// `[a-z][a-z0-9_]{0,62}` (not `rowid` or `oid`); `key_column` is one of
/// them and unique (a one-column primary key, or a unique index on it
/// alone); the table has one more column, `written_seq INTEGER NOT NULL
/// DEFAULT 0`, which the store sets to the seq of the event that last
/// wrote the row; and it is an ordinary rowid table (not `WITHOUT ROWID`).
/// Once rows are on the chain, the key and the columns cannot change.
///
/// ```
/// use agentrt::store::ExtensionTable;
///
/// let table = ExtensionTable { name: "nonces_seen", key_column: "nonce", columns: &["nonce", "seen_at"] };
/// assert!(table.columns.contains(&table.key_column));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionTable {
    /// The table's name, starting with the extension's prefix.
    pub name: &'static str,
    /// The column that names a row (in the chain's row listing, as text).
    pub key_column: &'static str,
    /// The digested columns, in digest order; the key among them.
    pub columns: &'static [&'static str],
}

/// A value of an extension column: every extension column is `INTEGER NOT
/// NULL` or `TEXT NOT NULL`, so there are two kinds and no null.
///
/// ```
/// use agentrt::store::SqlValue;
///
/// assert_eq!(SqlValue::from(7), SqlValue::Int(7));
/// assert_eq!(SqlValue::from("a").as_text(), Some("a"));
/// assert_eq!(SqlValue::Int(-3).to_string(), "-3");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SqlValue {
    /// An `INTEGER` value.
    Int(i64),
    /// A `TEXT` value.
    Text(String),
}

impl SqlValue {
    /// The integer, if it is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            SqlValue::Int(n) => Some(*n),
            SqlValue::Text(_) => None,
        }
    }

    /// The text, if it is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            SqlValue::Int(_) => None,
            SqlValue::Text(t) => Some(t),
        }
    }

    fn kind(&self) -> ColumnType {
        match self {
            SqlValue::Int(_) => ColumnType::Int,
            SqlValue::Text(_) => ColumnType::Text,
        }
    }
}

/// The order [`Store::rows_by`](crate::Store::rows_by) reads rows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowOrder<'a> {
    /// Insertion order, oldest first (as [`Store::rows_where`](crate::Store::rows_where)).
    Oldest,
    /// Newest first.
    Newest,
    /// By this column, highest first (integers by value, text by byte
    /// order); the newest first among equal values.
    Highest(&'a str),
}

/// What [`Store::rows_by`](crate::Store::rows_by) reads: the rows whose
/// columns hold every value of `filter` and, when `at_least` names a
/// column, at least its value there; in `order`; at most `limit` (0: all).
///
/// Every engine reads it from an index whose columns are the filter's,
/// then the bound's or the order's column, when the table has one, and
/// stops after `limit` rows: a satellite that asks for "the newest row of
/// this key" reads one row, however many the key has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowQuery<'a> {
    /// Columns and the values they must hold.
    pub filter: &'a [(&'a str, SqlValue)],
    /// A column and the least value it may hold.
    pub at_least: Option<(&'a str, &'a SqlValue)>,
    /// The order.
    pub order: RowOrder<'a>,
    /// At most this many rows (0: all).
    pub limit: u64,
}

impl<'a> RowQuery<'a> {
    /// The rows holding every value of `filter`, in insertion order, all
    /// of them: refine it with the other fields.
    pub fn matching(filter: &'a [(&'a str, SqlValue)]) -> RowQuery<'a> {
        RowQuery {
            filter,
            at_least: None,
            order: RowOrder::Oldest,
            limit: 0,
        }
    }

    /// The same read, newest first.
    pub fn newest_first(self) -> RowQuery<'a> {
        RowQuery {
            order: RowOrder::Newest,
            ..self
        }
    }

    /// The same read, at most `limit` rows.
    pub fn limit(self, limit: u64) -> RowQuery<'a> {
        RowQuery { limit, ..self }
    }
}

/// Integers in decimal, text as it is: the form a key takes in the chain's
/// row listing.
impl fmt::Display for SqlValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlValue::Int(n) => write!(f, "{n}"),
            SqlValue::Text(t) => f.write_str(t),
        }
    }
}

impl From<i64> for SqlValue {
    fn from(n: i64) -> SqlValue {
        SqlValue::Int(n)
    }
}

impl From<&str> for SqlValue {
    fn from(t: &str) -> SqlValue {
        SqlValue::Text(t.to_owned())
    }
}

impl From<String> for SqlValue {
    fn from(t: String) -> SqlValue {
        SqlValue::Text(t)
    }
}

impl From<&String> for SqlValue {
    fn from(t: &String) -> SqlValue {
        SqlValue::Text(t.clone())
    }
}

/// One row of an extension table, as read: its digested columns and the
/// seq of the event that last wrote it.
///
/// ```
/// # use agentrt::store::{Extension, ExtensionTable, SqlValue};
/// # use agentrt::{EventType, Store, StoreOptions, Timestamp};
/// # const EXT: Extension = Extension { name: "demo", migrations: &[(1,
/// #     "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)")],
/// #     tables: &[ExtensionTable { name: "demo_items", key_column: "id", columns: &["id", "n"] }] };
/// # let store = Store::open_with(":memory:", StoreOptions { extensions: vec![EXT], ..StoreOptions::default() })?;
/// # let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
/// store.write(|tx| {
/// #   tx.insert_run(&agentrt::store::NewRun { id: "r1", goal: "g", limits_json: "{}",
/// #       created_at: at, lease_owner: "me", lease_expires_at: at })?;
///     tx.insert_row("demo_items", &[("id", "a".into()), ("n", 1.into())])?;
///     tx.append_event("r1", "", &at, EventType::RunCreated, "{}")
/// })?;
/// let row = store.row("demo_items", "a")?.unwrap();
/// assert_eq!((row.table(), row.int("n"), row.text("id")), ("demo_items", Some(1), Some("a")));
/// assert_eq!(row.get("nope"), None);
/// assert_eq!(row.written_seq(), 1);
/// # Ok::<(), agentrt::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionRow {
    table: &'static str,
    columns: &'static [&'static str],
    values: Vec<SqlValue>,
    written_seq: i64,
}

impl ExtensionRow {
    /// The table the row is in.
    pub fn table(&self) -> &'static str {
        self.table
    }

    /// The value of `column`, if the table has that digested column.
    pub fn get(&self, column: &str) -> Option<&SqlValue> {
        let at = self.columns.iter().position(|c| *c == column)?;
        self.values.get(at)
    }

    /// The integer in `column`, if it is an integer column.
    pub fn int(&self, column: &str) -> Option<i64> {
        self.get(column).and_then(SqlValue::as_int)
    }

    /// The text in `column`, if it is a text column.
    pub fn text(&self, column: &str) -> Option<&str> {
        self.get(column).and_then(SqlValue::as_text)
    }

    /// Every digested column and its value, in digest order.
    pub fn values(&self) -> impl Iterator<Item = (&'static str, &SqlValue)> + '_ {
        self.columns.iter().copied().zip(&self.values)
    }

    /// The seq of the event whose row listing digests the row as it is.
    pub fn written_seq(&self) -> i64 {
        self.written_seq
    }
}

/// The type of an extension column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// `INTEGER` (64-bit).
    Int,
    /// `TEXT` (UTF-8).
    Text,
}

impl ColumnType {
    /// The type's name in SQLite's DDL: `INTEGER` or `TEXT`.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Int => "INTEGER",
            ColumnType::Text => "TEXT",
        }
    }
}

/// One registered table, as the store uses it: the declaration and its
/// columns' types.
#[derive(Debug)]
pub(crate) struct Registered {
    pub(crate) table: ExtensionTable,
    types: Vec<ColumnType>,
}

impl Registered {
    fn new(table: ExtensionTable, types: Vec<ColumnType>) -> Registered {
        Registered { table, types }
    }

    /// The column named `name`: its position and its registered name.
    fn column(&self, name: &str) -> Result<(usize, &'static str)> {
        self.table
            .columns
            .iter()
            .position(|c| *c == name)
            .map(|at| (at, self.table.columns[at]))
            .ok_or_else(|| Error::NoSuchColumn {
                table: self.table.name,
                column: name.to_owned(),
            })
    }

    /// The column named `name`, checked to take `value`.
    fn typed(&self, name: &str, value: &SqlValue) -> Result<(usize, &'static str)> {
        let (at, column) = self.column(name)?;
        let want = self.types.get(at).copied().unwrap_or(ColumnType::Text);
        if value.kind() != want {
            return Err(Error::ColumnValue {
                table: self.table.name,
                column,
                detail: format!(
                    "the column is {}, the value {:?} is not",
                    want.name(),
                    value
                ),
            });
        }
        Ok((at, column))
    }
}

/// The extension tables registered with one store.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    tables: Vec<Registered>,
}

impl Registry {
    /// The table named `name`, and its index.
    fn find(&self, name: &str) -> Result<(usize, &Registered)> {
        self.tables
            .iter()
            .enumerate()
            .find(|(_, t)| t.table.name == name)
            .ok_or_else(|| Error::NoSuchTable {
                table: name.to_owned(),
            })
    }

    /// The table at `index`.
    pub(crate) fn get(&self, index: usize) -> Result<&Registered> {
        self.tables.get(index).ok_or_else(|| Error::Internal {
            detail: format!("no registered extension table at {index}"),
        })
    }

    /// The registry of `shapes`' declared tables, typed as described.
    pub(crate) fn of_shapes(shapes: &[ExtensionShape]) -> Result<Registry> {
        let mut registry = Registry::default();
        for shape in shapes {
            for table in shape.extension.tables {
                let types = shape.types_of(table)?;
                registry.tables.push(Registered::new(*table, types));
            }
        }
        Ok(registry)
    }

    /// The name of the table at `index` (`""` if there is none).
    pub(crate) fn name(&self, index: usize) -> &'static str {
        self.tables.get(index).map_or("", |t| t.table.name)
    }
}

/// Most characters of an extension's name.
pub(crate) const MAX_EXTENSION_NAME: usize = 31;

/// Most characters of a table or column name.
pub(crate) const MAX_IDENTIFIER: usize = 63;

/// Column names an extension table may not use: the store's own, and
/// SQLite's names for the rowid.
const RESERVED_COLUMNS: [&str; 3] = ["written_seq", "rowid", "oid"];

/// `[a-z][a-z0-9_]*`, at most `max` characters.
pub(crate) fn is_identifier(name: &str, max: usize) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z'))
        && name.len() <= max
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
}

/// `"name"`: an identifier as SQL names it (the names quoted are checked
/// identifiers, so nothing needs escaping). Every engine quotes the
/// extension tables' names with it.
///
/// ```
/// assert_eq!(agentrt::store::engine::quoted("demo_items"), r#""demo_items""#);
/// ```
pub fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

/// `"a", "b", …`: [`quoted`] names, comma-separated.
///
/// ```
/// assert_eq!(agentrt::store::engine::quoted_list(&["a", "b"]), r#""a", "b""#);
/// ```
pub fn quoted_list(names: &[impl AsRef<str>]) -> String {
    names
        .iter()
        .map(|c| quoted(c.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a table of extension `prefix` is not a valid extension table name
/// or column list (shared with `verify`, which reads them from the file).
pub(crate) fn table_problem(
    prefix: &str,
    name: &str,
    key: &str,
    columns: &[impl AsRef<str>],
) -> Option<String> {
    let listed = |upto: usize, wanted: &str| columns[..upto].iter().any(|c| c.as_ref() == wanted);
    if !is_identifier(name, MAX_IDENTIFIER) {
        return Some(format!(
            "the table name {name:?} is not [a-z][a-z0-9_]{{0,62}}"
        ));
    }
    if !name.starts_with(prefix) || name.len() == prefix.len() {
        return Some(format!(
            "the table {name:?} does not start with the extension's prefix {prefix:?}"
        ));
    }
    if crate::store::schema::StateTable::parse(name).is_some() {
        return Some(format!("the table {name:?} is a core table"));
    }
    for (i, column) in columns.iter().map(AsRef::as_ref).enumerate() {
        if !is_identifier(column, MAX_IDENTIFIER) {
            return Some(format!(
                "the column name {column:?} is not [a-z][a-z0-9_]{{0,62}}"
            ));
        }
        if RESERVED_COLUMNS.contains(&column) {
            return Some(format!(
                "the column name {column:?} is reserved (the store keeps written_seq itself)"
            ));
        }
        if listed(i, column) {
            return Some(format!("the column {column:?} is listed twice"));
        }
    }
    if !listed(columns.len(), key) {
        return Some(format!(
            "the key column {key:?} is not one of its digested columns"
        ));
    }
    None
}

/// Whether two extensions' prefixes overlap (one starts with the other),
/// so that one could create or alter the other's tables.
fn overlapping(a: &str, b: &str) -> bool {
    let (a, b) = (format!("{a}_"), format!("{b}_"));
    a.starts_with(&b) || b.starts_with(&a)
}

/// Checks the declarations alone, before anything touches the file.
pub(crate) fn check_declarations(extensions: &[Extension]) -> Result<()> {
    for (i, ext) in extensions.iter().enumerate() {
        let wrong = |detail: String| Error::ExtensionDeclaration {
            extension: ext.name.to_owned(),
            detail,
        };
        if !is_identifier(ext.name, MAX_EXTENSION_NAME) {
            return Err(wrong(format!(
                "the name is not [a-z][a-z0-9_]{{0,{}}}",
                MAX_EXTENSION_NAME - 1
            )));
        }
        let prefix = ext.prefix();
        if let Some(core) = crate::store::schema::CORE_OBJECTS
            .iter()
            .find(|o| o.starts_with(&prefix))
        {
            return Err(wrong(format!(
                "its prefix {prefix:?} would own the core's {core:?}; choose another name"
            )));
        }
        if overlapping(ext.name, "sqlite") {
            return Err(wrong(format!(
                "its prefix {prefix:?} overlaps SQLite's own \"sqlite_\"; choose another name"
            )));
        }
        if let Some(other) = extensions[..i]
            .iter()
            .find(|o| overlapping(o.name, ext.name))
        {
            return Err(wrong(if other.name == ext.name {
                "it is given twice".to_owned()
            } else {
                format!(
                    "its prefix {prefix:?} overlaps the prefix of extension {:?}",
                    other.name
                )
            }));
        }
        if ext.migrations.is_empty() {
            return Err(wrong("it declares no migration".into()));
        }
        for (at, (version, _)) in ext.migrations.iter().enumerate() {
            if i64::try_from(at + 1).ok() != Some(*version) {
                return Err(wrong(format!(
                    "migration {} has version {version}; versions are 1, 2, … in order",
                    at + 1
                )));
            }
        }
        for (t, table) in ext.tables.iter().enumerate() {
            if let Some(problem) =
                table_problem(&prefix, table.name, table.key_column, table.columns)
            {
                return Err(wrong(problem));
            }
            if ext.tables[..t].iter().any(|o| o.name == table.name) {
                return Err(wrong(format!("the table {:?} is listed twice", table.name)));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_lowercase_words_within_their_length() {
        for good in ["a", "proxy", "a_1", "x9_"] {
            assert!(is_identifier(good, 31), "{good}");
        }
        for bad in [
            "",
            "1a",
            "_a",
            "A",
            "a-b",
            "a b",
            "a\"b",
            "é",
            &"a".repeat(32),
        ] {
            assert!(!is_identifier(bad, 31), "{bad}");
        }
        assert!(is_identifier(&"a".repeat(31), 31));
    }

    #[test]
    fn prefixes_overlap_when_one_starts_with_the_other() {
        assert!(overlapping("proxy", "proxy"));
        assert!(overlapping("proxy", "proxy_calls"));
        assert!(overlapping("proxy_calls", "proxy"));
        assert!(!overlapping("proxy", "proxyx"));
        assert!(!overlapping("a", "b"));
    }
}
