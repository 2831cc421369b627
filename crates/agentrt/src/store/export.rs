//! A SQLite store's rows exactly as stored, table by table, inside one
//! read transaction: what a copy to another engine needs to carry the
//! chain over intact (`agentrt migrate`). Rows come a page at a time, so a
//! copy's memory stays flat whatever the file holds. Satellites' extension
//! tables come too, described as they are in the file (the copying tool
//! does not link the satellites), with the registry that names them.

use rusqlite::types::ValueRef;

use super::Store;
use super::extension::{self, RegistryEntry, TableShape};
use super::read_rows::StoredValue;
use crate::clock::lock;
use crate::error::{Error, Result};

/// The tables a copy carries, in an order that keeps every reference valid
/// (a run before what names it), then the metadata rows.
pub const EXPORTED_TABLES: [&str; 8] = [
    "runs",
    "run_labels",
    "steps",
    "approvals",
    "model_calls",
    "tool_specs",
    "events",
    "agentrt_meta",
];

/// Rows per page handed over.
const PAGE_ROWS: i64 = 500;

/// One page of one table's rows, every column as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportPage<'a> {
    /// The table (one of [`EXPORTED_TABLES`], or an extension table of
    /// [`ExtensionExport::tables`]).
    pub table: &'a str,
    /// Its columns, in stored order.
    pub columns: &'a [String],
    /// The rows, each value in `columns` order.
    pub rows: &'a [Vec<StoredValue>],
}

/// The satellites' extension tables of a file, as a copy recreates them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtensionExport {
    /// Every applied extension migration: extension, version, hash of its
    /// SQLite DDL, when it was applied.
    pub migrations: Vec<(String, i64, String, String)>,
    /// Every registered table, in name order.
    pub tables: Vec<ExportedTable>,
}

/// One extension table of [`ExtensionExport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedTable {
    /// Its registry entry (the extension, the key, the digested columns).
    pub entry: RegistryEntry,
    /// The table as the file has it.
    pub shape: TableShape,
}

/// What [`Store::export_rows`] hands over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exported<'a> {
    /// The extension tables and their registry: once, after the rows of
    /// the core's tables and before the extension tables' rows.
    Extensions(&'a ExtensionExport),
    /// A page of one table's rows.
    Rows(ExportPage<'a>),
}

impl Store {
    /// Hands `f` every row of [`EXPORTED_TABLES`], a page at a time in
    /// insertion order; then the extension tables the file registers,
    /// described ([`Exported::Extensions`]); then their rows, in SQLite's
    /// rowid order. All is read in one read transaction (one snapshot
    /// however long `f` takes). SQLite stores only; a value that is
    /// neither an integer nor UTF-8 text is refused as corrupt, and so is
    /// a registry entry that does not name a valid extension table; a
    /// table another engine could not hold as SQLite does (see
    /// [`Extension::shape_at`](super::Extension::shape_at)) is refused
    /// with [`Error::ExtensionSchema`].
    pub fn export_rows(&self, f: &mut dyn FnMut(Exported<'_>) -> Result<()>) -> Result<()> {
        let conn = lock(&self.sqlite("an export")?.conn);
        let tx = conn.unchecked_transaction().map_err(Error::from_sqlite)?;
        for table in EXPORTED_TABLES {
            export_table(&tx, table, f)?;
        }
        let extensions = export_extensions(&tx)?;
        f(Exported::Extensions(&extensions))?;
        for table in &extensions.tables {
            export_table(&tx, &table.shape.name, f)?;
        }
        tx.rollback().map_err(Error::from_sqlite)
    }

    /// The extension tables registered in this SQLite database, by name.
    pub fn extension_table_names(&self) -> Result<Vec<String>> {
        let conn = lock(&self.sqlite("the extension registry")?.conn);
        let mut stmt = conn
            .prepare("SELECT name FROM extension_tables ORDER BY name")
            .map_err(Error::from_sqlite)?;
        let names = stmt
            .query_map([], |r| r.get(0))
            .map_err(Error::from_sqlite)?
            .collect::<rusqlite::Result<Vec<String>>>()
            .map_err(Error::from_sqlite)?;
        Ok(names)
    }
}

/// The extension registry of `conn`, each table checked and described.
fn export_extensions(conn: &rusqlite::Connection) -> Result<ExtensionExport> {
    let refused = |table: &str, extension: &str, why: String| Error::ExtensionSchema {
        extension: extension.to_owned(),
        table: table.to_owned(),
        detail: format!("it cannot be copied: {why}"),
    };
    let mut stmt = conn
        .prepare(
            "SELECT extension, version, ddl_hash, applied_at FROM extension_migrations ORDER BY extension, version",
        )
        .map_err(Error::from_sqlite)?;
    let migrations = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .map_err(Error::from_sqlite)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(Error::from_sqlite)?;
    let mut stmt = conn
        .prepare(
            "SELECT name, extension, key_column, columns_json FROM extension_tables ORDER BY name",
        )
        .map_err(Error::from_sqlite)?;
    let entries = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                RegistryEntry {
                    extension: r.get(1)?,
                    key_column: r.get(2)?,
                    columns_json: r.get(3)?,
                },
            ))
        })
        .map_err(Error::from_sqlite)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(Error::from_sqlite)?;
    let mut tables = Vec::with_capacity(entries.len());
    for (name, entry) in entries {
        let columns = entry
            .checked_columns(&name)
            .map_err(|why| refused(&name, &entry.extension, why))?;
        if let Err(why) = extension::table_problem_in(conn, &name, &entry.key_column, &columns)? {
            return Err(refused(&name, &entry.extension, why));
        }
        let shape = extension::described(conn, &name)?.map_err(|why| {
            refused(
                &name,
                &entry.extension,
                format!("another engine could not hold it as SQLite does: {why}"),
            )
        })?;
        tables.push(ExportedTable { entry, shape });
    }
    Ok(ExtensionExport { migrations, tables })
}

fn export_table(
    conn: &rusqlite::Connection,
    table: &str,
    f: &mut dyn FnMut(Exported<'_>) -> Result<()>,
) -> Result<()> {
    // The table name is the core's own, or a checked extension table's
    // (an identifier).
    let mut stmt = conn
        .prepare(&format!(
            "SELECT rowid, * FROM \"{table}\" WHERE rowid > ?1 ORDER BY rowid LIMIT ?2"
        ))
        .map_err(Error::from_sqlite)?;
    let columns: Vec<String> = stmt.column_names().skip(1).map(str::to_owned).collect();
    let mut after = i64::MIN;
    loop {
        let mut rows = Vec::new();
        let mut query = stmt
            .query(rusqlite::params![after, PAGE_ROWS])
            .map_err(Error::from_sqlite)?;
        while let Some(row) = query.next().map_err(Error::from_sqlite)? {
            after = row.get(0).map_err(Error::from_sqlite)?;
            let mut values = Vec::with_capacity(columns.len());
            for (i, column) in columns.iter().enumerate() {
                let value = row.get_ref(1 + i).map_err(Error::from_sqlite)?;
                values.push(stored(value).ok_or_else(|| Error::Corrupt {
                    table: corrupt_table(table),
                    id: format!("rowid {after}"),
                    detail: format!("{column} is neither an integer nor UTF-8 text"),
                })?);
            }
            rows.push(values);
        }
        if rows.is_empty() {
            return Ok(());
        }
        let full = rows.len() as i64 == PAGE_ROWS;
        f(Exported::Rows(ExportPage {
            table,
            columns: &columns,
            rows: &rows,
        }))?;
        if !full {
            return Ok(());
        }
    }
}

/// The name a corrupt-row error gives: the core table's, or "an extension
/// table" (the error names tables by static names).
fn corrupt_table(table: &str) -> &'static str {
    EXPORTED_TABLES
        .iter()
        .find(|t| **t == table)
        .copied()
        .unwrap_or("an extension table")
}

fn stored(value: ValueRef<'_>) -> Option<StoredValue> {
    match value {
        ValueRef::Integer(n) => Some(StoredValue::Int(n)),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()
            .map(|t| StoredValue::Text(t.to_owned())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_of_every_table_is_handed_over_in_insertion_order() {
        let store = Store::open(":memory:").unwrap();
        let at = crate::clock::Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
        for id in ["b", "a"] {
            store
                .write(|tx| {
                    tx.insert_run(&super::super::NewRun {
                        id,
                        goal: "g",
                        limits_json: "{}",
                        created_at: at,
                        lease_owner: "",
                        lease_expires_at: at,
                    })?;
                    tx.append_event(id, "", &at, crate::model::EventType::RunCreated, "{}")
                })
                .unwrap();
        }
        let mut seen: Vec<(String, Vec<String>)> = Vec::new();
        store
            .export_rows(&mut |exported| {
                let page = match exported {
                    Exported::Rows(page) => page,
                    Exported::Extensions(x) => {
                        assert_eq!(x, &ExtensionExport::default());
                        return Ok(());
                    }
                };
                let id = page.columns.iter().position(|c| c == "id" || c == "seq");
                for row in page.rows {
                    let key = id.map(|i| match &row[i] {
                        StoredValue::Int(n) => n.to_string(),
                        StoredValue::Text(t) => t.clone(),
                        StoredValue::Other(o) => (*o).to_owned(),
                    });
                    match seen.last_mut() {
                        Some((t, keys)) if *t == page.table => keys.extend(key),
                        _ => seen.push((page.table.to_owned(), key.into_iter().collect())),
                    }
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(seen[0], ("runs".into(), vec!["b".into(), "a".into()]));
        assert_eq!(seen[1], ("events".into(), vec!["1".into(), "2".into()]));
        assert_eq!(seen[2].0, "agentrt_meta");
        assert!(store.extension_table_names().unwrap().is_empty());
    }
}
