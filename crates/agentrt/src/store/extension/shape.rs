//! An extension's tables described for another engine: its SQLite
//! migrations applied to an empty in-memory database (under the same
//! authorizer as on a file), and the tables they leave read back as plain
//! data — columns, types, literal defaults, keys, unique constraints and
//! indexes. An engine such as PostgreSQL creates the tables from that
//! description with DDL of its own, so a satellite declares its schema
//! once, in SQLite's dialect, and never writes SQL for another engine.
//!
//! Only what every engine enforces alike is carried; a table that relies
//! on anything else (a `CHECK`, a foreign key, a collation, a partial or
//! expression index, a default that is not a literal) is refused with
//! [`Error::ExtensionSchema`], naming what.

use rusqlite::{Connection, OptionalExtension};

use super::migrate::{DdlGuard, run_migration};
use super::{ColumnType, Extension, ExtensionTable, SqlValue, check_declarations, is_identifier};
use crate::error::{Error, Result};

/// An extension's tables as its migrations up to one version leave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionShape {
    /// The extension.
    pub extension: Extension,
    /// The version described (0: before its first migration, no tables).
    pub version: i64,
    /// Its tables, in name order.
    pub tables: Vec<TableShape>,
}

/// One table of an [`ExtensionShape`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    /// The table's name.
    pub name: String,
    /// Every column (`written_seq` included), in the table's order; every
    /// one is NOT NULL.
    pub columns: Vec<ColumnShape>,
    /// The primary key's columns, in key order (empty: none).
    pub primary_key: Vec<String>,
    /// The column SQLite numbers itself when an insert leaves it out (an
    /// `INTEGER PRIMARY KEY`): the largest value in the table plus one.
    pub numbered_key: Option<String>,
    /// The table's unnamed unique constraints (`UNIQUE (a, b)`), each as
    /// its columns.
    pub unique: Vec<Vec<String>>,
    /// Its named indexes (`CREATE [UNIQUE] INDEX`), in name order.
    pub indexes: Vec<IndexShape>,
}

impl TableShape {
    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&ColumnShape> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// One column of a [`TableShape`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnShape {
    /// The column's name.
    pub name: String,
    /// `INTEGER` or `TEXT`.
    pub kind: ColumnType,
    /// The value an insert that leaves the column out gives it.
    pub default: Option<SqlValue>,
}

/// A named index of a [`TableShape`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexShape {
    /// The index's name (it starts with the extension's prefix).
    pub name: String,
    /// Whether it is `UNIQUE`.
    pub unique: bool,
    /// The indexed columns, in order.
    pub columns: Vec<String>,
    /// A partial index's condition: every column holds its value (empty:
    /// the index covers every row).
    pub condition: Vec<(String, SqlValue)>,
}

/// What another engine does to bring its tables from one [`ExtensionShape`]
/// to a later one ([`ExtensionShape::changes_from`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShapeChange {
    /// Create the table, with its constraints and indexes.
    CreateTable(TableShape),
    /// The table's columns or keys changed: SQLite allows that (an added,
    /// renamed or dropped column) and the registry allows it only while
    /// the table holds no rows, so the engine checks that it is empty,
    /// drops it and creates it as described.
    RecreateTable(TableShape),
    /// Create a named index.
    CreateIndex {
        /// The indexed table.
        table: String,
        /// The index.
        index: IndexShape,
    },
    /// Drop a named index.
    DropIndex {
        /// The indexed table.
        table: String,
        /// The index's name.
        name: String,
    },
}

impl Extension {
    /// The extension's tables as its migrations leave them at its version
    /// (see [`Extension::shape_at`]).
    ///
    /// ```
    /// use agentrt::store::{ColumnType, Extension, ExtensionTable, SqlValue};
    ///
    /// const NONCES: Extension = Extension {
    ///     name: "nonces",
    ///     migrations: &[(1, "CREATE TABLE nonces_seen (
    ///         nonce TEXT NOT NULL PRIMARY KEY,
    ///         uses INTEGER NOT NULL DEFAULT 1,
    ///         written_seq INTEGER NOT NULL DEFAULT 0)")],
    ///     tables: &[ExtensionTable { name: "nonces_seen", key_column: "nonce", columns: &["nonce", "uses"] }],
    /// };
    /// let shape = NONCES.shape()?;
    /// let table = &shape.tables[0];
    /// assert_eq!(table.primary_key, ["nonce"]);
    /// let uses = table.column("uses").unwrap();
    /// assert_eq!((uses.kind, uses.default.clone()), (ColumnType::Int, Some(SqlValue::Int(1))));
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn shape(&self) -> Result<ExtensionShape> {
        self.shape_at(self.version())
    }

    /// The extension's tables as its migrations `1..=version` leave them
    /// (none at version 0), read from an empty in-memory SQLite database.
    /// At the extension's own version every declared table must be there
    /// and valid (as [`Store::open_with`](crate::Store::open_with) checks);
    /// at an earlier one, the tables then present are described as they
    /// were.
    ///
    /// Refused ([`Error::ExtensionSchema`]) when a table relies on what
    /// another engine would not enforce alike: a `CHECK`, a foreign key, a
    /// `COLLATE`, a generated column, an expression index, a partial index
    /// on another condition than `column = literal [AND …]`, a default that is not an integer or string literal, a nullable column.
    pub fn shape_at(&self, version: i64) -> Result<ExtensionShape> {
        check_declarations(std::slice::from_ref(self))?;
        if version < 0 || version > self.version() {
            return Err(Error::InvalidInput {
                what: "extension version",
                detail: format!(
                    "extension {:?} has versions 0 to {}, not {version}",
                    self.name,
                    self.version()
                ),
            });
        }
        let mut conn = Connection::open_in_memory().map_err(Error::from_sqlite)?;
        // A store's file has SQLite's AUTOINCREMENT counters (the core's
        // tables use them), which an extension's AUTOINCREMENT then
        // shares; here too. The name is outside every prefix (upper case).
        conn.execute_batch("CREATE TABLE \"Core\" (id INTEGER PRIMARY KEY AUTOINCREMENT)")
            .map_err(Error::from_sqlite)?;
        let guard = DdlGuard::install(&mut conn)?;
        for (v, ddl) in self.migrations.iter().filter(|(v, _)| *v <= version) {
            run_migration(&conn, &guard, self, *v, ddl)?;
        }
        DdlGuard::remove(&mut conn)?;
        let prefix = self.prefix();
        let names: Vec<String> = {
            let mut stmt = conn
                .prepare(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, ?1) = ?2 ORDER BY name",
                )
                .map_err(Error::from_sqlite)?;
            stmt.query_map(rusqlite::params![prefix.len() as i64, prefix], |r| r.get(0))
                .map_err(Error::from_sqlite)?
                .collect::<rusqlite::Result<_>>()
                .map_err(Error::from_sqlite)?
        };
        self.undeclared(&names)?;
        let at_build = version == self.version();
        let mut tables = Vec::with_capacity(names.len());
        for name in &names {
            let wrong = |detail: String| Error::ExtensionSchema {
                extension: self.name.to_owned(),
                table: name.clone(),
                detail,
            };
            if at_build && let Some(declared) = self.tables.iter().find(|t| t.name == name) {
                let problem = super::table_problem_in(
                    &conn,
                    declared.name,
                    declared.key_column,
                    declared.columns,
                )?;
                if let Err(problem) = problem {
                    return Err(wrong(problem));
                }
            }
            tables.push(describe(&conn, name).map_err(|e| match e {
                Unportable::Because(why) => wrong(format!(
                    "it cannot be created on another engine than SQLite: {why}"
                )),
                Unportable::Sqlite(e) => e,
            })?);
        }
        if at_build
            && let Some(missing) = self
                .tables
                .iter()
                .find(|t| !names.iter().any(|n| n == t.name))
        {
            return Err(Error::ExtensionSchema {
                extension: self.name.to_owned(),
                table: missing.name.to_owned(),
                detail: "its migrations do not create it".into(),
            });
        }
        Ok(ExtensionShape {
            extension: *self,
            version,
            tables,
        })
    }
}

impl ExtensionShape {
    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&TableShape> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// The types of `declared`'s digested columns, in its order.
    pub(crate) fn types_of(&self, declared: &ExtensionTable) -> Result<Vec<ColumnType>> {
        let missing = |detail: String| Error::ExtensionSchema {
            extension: self.extension.name.to_owned(),
            table: declared.name.to_owned(),
            detail,
        };
        let table = self
            .table(declared.name)
            .ok_or_else(|| missing("its migrations do not create it".into()))?;
        declared
            .columns
            .iter()
            .map(|c| {
                table
                    .column(c)
                    .map(|c| c.kind)
                    .ok_or_else(|| missing(format!("it has no column {c:?}")))
            })
            .collect()
    }

    /// What brings an engine's tables from `older` (this extension at an
    /// earlier version, as that engine holds it) to this shape: tables
    /// created, tables whose columns or keys changed recreated, indexes
    /// dropped and created. A table of `older` this shape lacks is
    /// refused (an extension table is never dropped).
    ///
    /// ```
    /// use agentrt::store::{Extension, ExtensionTable, ShapeChange};
    ///
    /// const V2: Extension = Extension {
    ///     name: "demo",
    ///     migrations: &[
    ///         (1, "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, written_seq INTEGER NOT NULL DEFAULT 0)"),
    ///         (2, "CREATE INDEX demo_items_seq ON demo_items (written_seq)"),
    ///     ],
    ///     tables: &[ExtensionTable { name: "demo_items", key_column: "id", columns: &["id"] }],
    /// };
    /// let changes = V2.shape()?.changes_from(&V2.shape_at(1)?)?;
    /// assert!(matches!(&changes[..], [ShapeChange::CreateIndex { index, .. }] if index.name == "demo_items_seq"));
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn changes_from(&self, older: &ExtensionShape) -> Result<Vec<ShapeChange>> {
        let mut changes = Vec::new();
        if let Some(gone) = older.tables.iter().find(|t| self.table(&t.name).is_none()) {
            return Err(Error::ExtensionSchema {
                extension: self.extension.name.to_owned(),
                table: gone.name.clone(),
                detail: format!(
                    "version {} has it and version {} does not; an extension table is never dropped or renamed",
                    older.version, self.version
                ),
            });
        }
        for table in &self.tables {
            let Some(before) = older.table(&table.name) else {
                changes.push(ShapeChange::CreateTable(table.clone()));
                continue;
            };
            let same_table = before.columns == table.columns
                && before.primary_key == table.primary_key
                && before.numbered_key == table.numbered_key
                && before.unique == table.unique;
            if !same_table {
                changes.push(ShapeChange::RecreateTable(table.clone()));
                continue;
            }
            for index in &before.indexes {
                if !table.indexes.contains(index) {
                    changes.push(ShapeChange::DropIndex {
                        table: table.name.clone(),
                        name: index.name.clone(),
                    });
                }
            }
            for index in &table.indexes {
                if !before.indexes.contains(index) {
                    changes.push(ShapeChange::CreateIndex {
                        table: table.name.clone(),
                        index: index.clone(),
                    });
                }
            }
        }
        Ok(changes)
    }
}

/// Why a table cannot be described for another engine.
enum Unportable {
    /// What it relies on, in words.
    Because(String),
    /// Reading the description failed.
    Sqlite(Error),
}

impl From<rusqlite::Error> for Unportable {
    fn from(e: rusqlite::Error) -> Unportable {
        Unportable::Sqlite(Error::from_sqlite(e))
    }
}

fn because<T>(why: String) -> std::result::Result<T, Unportable> {
    Err(Unportable::Because(why))
}

/// Table `name` of `conn` described, or why another engine could not
/// have it as SQLite does.
pub(crate) fn described(
    conn: &Connection,
    name: &str,
) -> Result<std::result::Result<TableShape, String>> {
    match describe(conn, name) {
        Ok(shape) => Ok(Ok(shape)),
        Err(Unportable::Because(why)) => Ok(Err(why)),
        Err(Unportable::Sqlite(e)) => Err(e),
    }
}

/// Describes table `name` of `conn`.
fn describe(conn: &Connection, name: &str) -> std::result::Result<TableShape, Unportable> {
    let sql: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or_default();
    if let Some(word) = unportable_word(&sql) {
        return because(format!(
            "its definition uses {word}, which only SQLite would enforce as declared"
        ));
    }
    let wr: i64 = conn.query_row(
        "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
        [name],
        |r| r.get(0),
    )?;
    if wr != 0 {
        return because("it is a WITHOUT ROWID table".into());
    }
    let foreign: i64 = conn.query_row(
        "SELECT COUNT(*) FROM pragma_foreign_key_list(?1)",
        [name],
        |r| r.get(0),
    )?;
    if foreign > 0 {
        return because("it has a foreign key".into());
    }
    struct Info {
        name: String,
        kind: String,
        not_null: bool,
        default: Option<String>,
        pk: i64,
        hidden: i64,
    }
    let infos: Vec<Info> = {
        let mut stmt = conn.prepare(
            r#"SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?1) ORDER BY cid"#,
        )?;
        stmt.query_map([name], |r| {
            Ok(Info {
                name: r.get(0)?,
                kind: r.get(1)?,
                not_null: r.get::<_, i64>(2)? != 0,
                default: r.get(3)?,
                pk: r.get(4)?,
                hidden: r.get(5)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?
    };
    let pk_count = infos.iter().filter(|c| c.pk > 0).count();
    let mut columns = Vec::with_capacity(infos.len());
    let mut numbered_key = None;
    for info in &infos {
        if info.hidden != 0 {
            return because(format!("its column {:?} is generated", info.name));
        }
        let kind = if info.kind.eq_ignore_ascii_case("INTEGER") {
            ColumnType::Int
        } else if info.kind.eq_ignore_ascii_case("TEXT") {
            ColumnType::Text
        } else {
            return because(format!(
                "its column {:?} is {:?}, not INTEGER or TEXT",
                info.name, info.kind
            ));
        };
        let numbered = kind == ColumnType::Int && info.pk == 1 && pk_count == 1;
        if numbered {
            numbered_key = Some(info.name.clone());
        } else if !info.not_null {
            return because(format!("its column {:?} may be NULL", info.name));
        }
        let default = match &info.default {
            None => None,
            Some(text) => Some(literal(text, kind).ok_or_else(|| {
                Unportable::Because(format!(
                    "its column {:?} defaults to {text}, which is not a literal of its type ({})",
                    info.name,
                    kind.name()
                ))
            })?),
        };
        columns.push(ColumnShape {
            name: info.name.clone(),
            kind,
            default,
        });
    }
    let mut keyed: Vec<(i64, String)> = infos
        .iter()
        .filter(|c| c.pk > 0)
        .map(|c| (c.pk, c.name.clone()))
        .collect();
    keyed.sort();
    let primary_key = keyed.into_iter().map(|(_, c)| c).collect();
    let mut unique = Vec::new();
    let mut indexes = Vec::new();
    let listed: Vec<(String, bool, String, bool)> = {
        let mut stmt = conn.prepare(
            r#"SELECT name, "unique", origin, partial FROM pragma_index_list(?1) ORDER BY name"#,
        )?;
        stmt.query_map([name], |r| {
            Ok((
                r.get(0)?,
                r.get::<_, i64>(1)? != 0,
                r.get(2)?,
                r.get::<_, i64>(3)? != 0,
            ))
        })?
        .collect::<rusqlite::Result<_>>()?
    };
    for (index, is_unique, origin, partial) in listed {
        if origin == "pk" {
            continue;
        }
        let on = index_columns(conn, &index)?;
        let condition = if partial {
            let sql: String = conn
                .query_row(
                    "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1",
                    [&index],
                    |r| r.get(0),
                )
                .optional()?
                .unwrap_or_default();
            let condition = index_condition(&sql).ok_or_else(|| {
                Unportable::Because(format!(
                    "its index {index:?} is partial on a condition other than `column = literal [AND …]`"
                ))
            })?;
            for (column, value) in &condition {
                let kind = columns.iter().find(|c| c.name == *column).map(|c| c.kind);
                if kind != Some(value.kind()) {
                    return because(format!(
                        "its index {index:?} compares {column:?} with {value:?}, not a value of its type"
                    ));
                }
            }
            condition
        } else {
            Vec::new()
        };
        match origin.as_str() {
            "u" => unique.push(on),
            _ => indexes.push(IndexShape {
                name: index,
                unique: is_unique,
                columns: on,
                condition,
            }),
        }
    }
    Ok(TableShape {
        name: name.to_owned(),
        columns,
        primary_key,
        numbered_key,
        unique,
        indexes,
    })
}

/// The columns index `index` keys, refused when one is an expression or
/// compares by another collation than SQLite's byte order.
fn index_columns(conn: &Connection, index: &str) -> std::result::Result<Vec<String>, Unportable> {
    let mut stmt = conn.prepare(
        "SELECT cid, name, coll FROM pragma_index_xinfo(?1) WHERE key = 1 ORDER BY seqno",
    )?;
    let keyed: Vec<(i64, Option<String>, Option<String>)> = stmt
        .query_map([index], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut columns = Vec::with_capacity(keyed.len());
    for (cid, column, collation) in keyed {
        let Some(column) = column.filter(|_| cid >= 0) else {
            return because(format!("its index {index:?} is on an expression"));
        };
        if collation.is_some_and(|c| !c.eq_ignore_ascii_case("BINARY")) {
            return because(format!(
                "its index {index:?} compares {column:?} by another collation than BINARY"
            ));
        }
        columns.push(column);
    }
    Ok(columns)
}

/// A column default as SQLite reports it (`0`, `-1`, `'text'`), as a
/// value of `kind`; `None` when it is anything else (an expression,
/// `CURRENT_TIMESTAMP`, a value of the other kind).
fn literal(text: &str, kind: ColumnType) -> Option<SqlValue> {
    let mut text = text.trim();
    while let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
        text = inner.trim();
    }
    match kind {
        ColumnType::Int => {
            let digits = text.strip_prefix('+').unwrap_or(text);
            let unsigned = digits.strip_prefix('-').unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok().map(SqlValue::Int)
        }
        ColumnType::Text => {
            let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
            // Inside one literal, a quote is only ever doubled.
            (!inner.replace("''", "").contains('\''))
                .then(|| SqlValue::Text(inner.replace("''", "'")))
        }
    }
}

/// A token of SQL, as far as describing a table needs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A bare word (keyword or name), as written.
    Word(String),
    /// A quoted name (`"a"`, `` `a` ``, `[a]`), unquoted.
    Name(String),
    /// A string literal, unquoted.
    Text(String),
    /// Any other character.
    Symbol(char),
}

/// `sql`'s tokens (whitespace dropped; `--` and `/* */` comments too).
fn tokens(sql: &str) -> Vec<Token> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    let quoted_until = |at: &mut usize, close: char| -> String {
        let mut text = String::new();
        *at += 1;
        while *at < chars.len() {
            if chars[*at] == close {
                // A doubled closing quote is one quote inside.
                if close != ']' && chars.get(*at + 1) == Some(&close) {
                    text.push(close);
                    *at += 2;
                    continue;
                }
                *at += 1;
                return text;
            }
            text.push(chars[*at]);
            *at += 1;
        }
        text
    };
    while at < chars.len() {
        let c = chars[at];
        match c {
            '\'' => out.push(Token::Text(quoted_until(&mut at, '\''))),
            '"' | '`' => out.push(Token::Name(quoted_until(&mut at, c))),
            '[' => out.push(Token::Name(quoted_until(&mut at, ']'))),
            '-' if chars.get(at + 1) == Some(&'-') => {
                while at < chars.len() && chars[at] != '\n' {
                    at += 1;
                }
            }
            '/' if chars.get(at + 1) == Some(&'*') => {
                at += 2;
                while at < chars.len() && !(chars[at] == '*' && chars.get(at + 1) == Some(&'/')) {
                    at += 1;
                }
                at += 2;
            }
            c if c.is_alphanumeric() || c == '_' => {
                let start = at;
                while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                    at += 1;
                }
                out.push(Token::Word(chars[start..at].iter().collect()));
            }
            c if c.is_whitespace() => at += 1,
            c => {
                out.push(Token::Symbol(c));
                at += 1;
            }
        }
    }
    out
}

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.eq_ignore_ascii_case(word))
}

/// The first keyword of `sql` (outside strings and quoted names) that
/// makes SQLite enforce what another engine would not from the
/// description: `CHECK`, `REFERENCES`, `COLLATE`, `GENERATED`, `AS`.
fn unportable_word(sql: &str) -> Option<&'static str> {
    const WORDS: [&str; 5] = ["CHECK", "REFERENCES", "COLLATE", "GENERATED", "AS"];
    tokens(sql)
        .iter()
        .find_map(|t| WORDS.iter().find(|w| is_word(t, w)).copied())
}

/// The condition of a partial index (`CREATE … INDEX … WHERE a = 1 AND b =
/// 'x'`) as its column = value pairs; `None` when it is anything else than
/// equalities of a column and a literal joined by `AND` (which another
/// engine could not be given as written).
fn index_condition(sql: &str) -> Option<Vec<(String, SqlValue)>> {
    let tokens = tokens(sql);
    let at = tokens.iter().position(|t| is_word(t, "WHERE"))?;
    let mut rest = &tokens[at + 1..];
    let mut pairs = Vec::new();
    loop {
        let (column, value, after) = match rest {
            [column, Token::Symbol('='), value, after @ ..] => (column, value, after),
            _ => return None,
        };
        let column = match column {
            Token::Word(w) | Token::Name(w) if is_identifier(w, super::MAX_IDENTIFIER) => w.clone(),
            _ => return None,
        };
        let (value, after) = match (value, after) {
            (Token::Text(t), after) => (SqlValue::Text(t.clone()), after),
            (Token::Symbol('-'), [Token::Word(n), after @ ..]) => {
                (SqlValue::Int(format!("-{n}").parse().ok()?), after)
            }
            (Token::Word(n), after) if n.bytes().all(|b| b.is_ascii_digit()) => {
                (SqlValue::Int(n.parse().ok()?), after)
            }
            _ => return None,
        };
        pairs.push((column, value));
        match after {
            [] => return Some(pairs),
            [and, more @ ..] if is_word(and, "AND") => rest = more,
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_integer_or_string_literals_of_their_column_kind() {
        assert_eq!(literal("0", ColumnType::Int), Some(SqlValue::Int(0)));
        assert_eq!(literal("-12", ColumnType::Int), Some(SqlValue::Int(-12)));
        assert_eq!(literal("+3", ColumnType::Int), Some(SqlValue::Int(3)));
        assert_eq!(literal("''", ColumnType::Text), Some(SqlValue::from("")));
        assert_eq!(
            literal("'it''s'", ColumnType::Text),
            Some(SqlValue::from("it's"))
        );
        assert_eq!(literal("(7)", ColumnType::Int), Some(SqlValue::Int(7)));
        for not in ["'1'", "1.5", "(1 + 1)", "CURRENT_TIMESTAMP", "-", "x'00'"] {
            assert_eq!(literal(not, ColumnType::Int), None, "{not}");
        }
        for not in ["1", "CURRENT_TIMESTAMP", "'a' || 'b'", "'a'b'"] {
            assert_eq!(literal(not, ColumnType::Text), None, "{not}");
        }
    }

    #[test]
    fn a_partial_index_carries_equalities_of_columns_and_literals() {
        let sql = "CREATE UNIQUE INDEX p_open ON p_calls (s, k) WHERE open = 1 AND \"kind\" = 'it''s' and n = -2";
        assert_eq!(
            index_condition(sql),
            Some(vec![
                ("open".to_owned(), SqlValue::Int(1)),
                ("kind".to_owned(), SqlValue::from("it's")),
                ("n".to_owned(), SqlValue::Int(-2)),
            ])
        );
        for other in [
            "CREATE INDEX i ON t (a) WHERE open <> 1",
            "CREATE INDEX i ON t (a) WHERE open = 1 OR open = 2",
            "CREATE INDEX i ON t (a) WHERE open = b",
            "CREATE INDEX i ON t (a) WHERE open = 1.5",
            "CREATE INDEX i ON t (a) WHERE open = 1 AND",
            "CREATE INDEX i ON t (a)",
        ] {
            assert_eq!(index_condition(other), None, "{other}");
        }
    }

    #[test]
    fn only_keywords_outside_strings_and_quoted_names_count() {
        assert_eq!(
            unportable_word("CREATE TABLE t (a TEXT CHECK (a <> ''))"),
            Some("CHECK")
        );
        assert_eq!(
            unportable_word("CREATE TABLE t (a TEXT COLLATE NOCASE)"),
            Some("COLLATE")
        );
        assert_eq!(
            unportable_word("CREATE TABLE t (b INTEGER REFERENCES x)"),
            Some("REFERENCES")
        );
        assert_eq!(
            unportable_word("CREATE TABLE t (a TEXT DEFAULT 'check as collate')"),
            None
        );
        assert_eq!(
            unportable_word("CREATE TABLE \"as\" (checked TEXT, ascii TEXT)"),
            None
        );
    }
}
