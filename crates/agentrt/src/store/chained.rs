//! The tables whose rows the chain covers, as `verify` finds them in the
//! file: the core's state tables, and the extension tables the registry
//! (`extension_tables`) names, whatever satellite wrote them. A registry
//! entry is trusted only once it passes the rules an opener enforced when
//! it registered the table, so a tampered registry cannot put other SQL in
//! the verifier's statements.

use rusqlite::Connection;
use rusqlite::types::ValueRef;

use super::extension::{self, RegistryEntry, quoted};
use super::schema::{StateTable, UNCHAINED_SEQ};
use crate::error::{Error, Result};

pub(crate) use super::chain_rows::INLINE_FIELD;

/// The column, or NULL when it is longer than [`INLINE_FIELD`] (the
/// columns read this way are NOT NULL, so NULL means long).
pub(crate) fn capped_select(column: &str) -> String {
    format!("CASE WHEN octet_length({column}) > {INLINE_FIELD} THEN NULL ELSE {column} END")
}

/// One table the chain covers.
#[derive(Debug, Clone)]
pub(crate) struct ChainedTable {
    /// Its name, as the row listing names it.
    pub(crate) name: String,
    /// The digested columns, in digest order.
    pub(crate) columns: Vec<String>,
    /// `true` for the core tables that joined the chain after schema 1,
    /// whose older rows may be marked [`UNCHAINED_SEQ`].
    pub(crate) joined_later: bool,
    /// `SELECT rowid, <columns capped> FROM t WHERE key = ?1`.
    pub(crate) row_sql: String,
    /// `SELECT written_seq FROM t WHERE key = ?1`.
    pub(crate) written_sql: String,
    /// The table, quoted for SQL.
    pub(crate) sql_name: String,
    /// The key column, quoted for SQL.
    pub(crate) sql_key: String,
}

impl ChainedTable {
    fn new(name: &str, key: &str, columns: Vec<String>, joined_later: bool) -> ChainedTable {
        let capped: Vec<String> = columns.iter().map(|c| capped_select(&quoted(c))).collect();
        let sql_name = quoted(name);
        let sql_key = quoted(key);
        ChainedTable {
            row_sql: format!(
                "SELECT rowid, {} FROM {sql_name} WHERE {sql_key} = ?1",
                capped.join(", ")
            ),
            written_sql: format!("SELECT written_seq FROM {sql_name} WHERE {sql_key} = ?1"),
            name: name.to_owned(),
            columns,
            joined_later,
            sql_name,
            sql_key,
        }
    }

    fn core(table: StateTable) -> ChainedTable {
        let columns = table
            .digested_columns()
            .iter()
            .map(|c| (*c).to_owned())
            .collect();
        ChainedTable::new(
            table.name(),
            table.key_column(),
            columns,
            table.joined_later(),
        )
    }

    /// The rows a walk accounts for, as a condition on alias `alias`:
    /// every row, but for the rows a migration marked as older than their
    /// table's place on the chain.
    pub(crate) fn chained_rows(&self, alias: &str) -> String {
        if self.joined_later {
            format!("{alias}written_seq <> {UNCHAINED_SEQ}")
        } else {
            "1".to_owned()
        }
    }
}

/// Text as stored, lossily (names from the file are only checked and shown).
fn text(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Text(b) | ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned(),
        ValueRef::Integer(n) => n.to_string(),
        _ => String::new(),
    }
}

/// The tables the chain covers, in name order, and the first problem of
/// the extension registry (an entry left out), if any.
pub(crate) fn load(conn: &Connection) -> Result<(Vec<ChainedTable>, Option<String>)> {
    let mut tables: Vec<ChainedTable> = StateTable::ALL
        .into_iter()
        .map(ChainedTable::core)
        .collect();
    let mut problem = None;
    let has_registry: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'extension_tables')",
            [],
            |r| r.get(0),
        )
        .map_err(Error::from_sqlite)?;
    if !has_registry {
        problem = Some("the extension registry (table extension_tables) is missing".to_owned());
    } else {
        let mut stmt = conn
            .prepare(
                "SELECT name, extension, key_column, columns_json FROM extension_tables ORDER BY name",
            )
            .map_err(Error::from_sqlite)?;
        let rows: Vec<[String; 4]> = stmt
            .query_map([], |r| {
                Ok([
                    text(r.get_ref(0)?),
                    text(r.get_ref(1)?),
                    text(r.get_ref(2)?),
                    text(r.get_ref(3)?),
                ])
            })
            .map_err(Error::from_sqlite)?
            .collect::<rusqlite::Result<_>>()
            .map_err(Error::from_sqlite)?;
        for [name, ext, key, columns_json] in rows {
            match registered(conn, &name, &ext, &key, &columns_json)? {
                Ok(table) => tables.push(table),
                Err(why) => {
                    problem.get_or_insert(format!(
                        "the extension registry names table {name:?} of extension {ext:?}, which is not a valid extension table: {why}"
                    ));
                }
            }
        }
    }
    tables.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((tables, problem))
}

/// A registry entry as a table to check, or why it is not one.
fn registered(
    conn: &Connection,
    name: &str,
    ext: &str,
    key: &str,
    columns_json: &str,
) -> Result<std::result::Result<ChainedTable, String>> {
    let entry = RegistryEntry {
        extension: ext.to_owned(),
        key_column: key.to_owned(),
        columns_json: columns_json.to_owned(),
    };
    let columns = match entry.checked_columns(name) {
        Ok(columns) => columns,
        Err(why) => return Ok(Err(why)),
    };
    if let Err(why) = extension::table_problem_in(conn, name, key, &columns)? {
        return Ok(Err(why));
    }
    // Only identifiers get this far, and they are quoted as names.
    Ok(Ok(ChainedTable::new(name, key, columns, false)))
}
