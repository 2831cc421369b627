//! A SQLite store's rows exactly as stored, table by table, inside one
//! read transaction: what a copy to another engine needs to carry the
//! chain over intact (`agentrt migrate`). Rows come a page at a time, so a
//! copy's memory stays flat whatever the file holds.

use rusqlite::types::ValueRef;

use super::Store;
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
    /// The table.
    pub table: &'static str,
    /// Its columns, in stored order.
    pub columns: &'a [String],
    /// The rows, each value in `columns` order.
    pub rows: &'a [Vec<StoredValue>],
}

impl Store {
    /// Hands `f` every row of [`EXPORTED_TABLES`], a page at a time in
    /// insertion order, all read in one read transaction (one snapshot
    /// however long `f` takes). SQLite stores only; a value that is
    /// neither an integer nor UTF-8 text is refused as corrupt. Extension
    /// tables are not exported: see [`Store::extension_table_names`].
    pub fn export_rows(&self, f: &mut dyn FnMut(ExportPage<'_>) -> Result<()>) -> Result<()> {
        let conn = lock(&self.sqlite("an export")?.conn);
        let tx = conn.unchecked_transaction().map_err(Error::from_sqlite)?;
        for table in EXPORTED_TABLES {
            export_table(&tx, table, f)?;
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

fn export_table(
    conn: &rusqlite::Connection,
    table: &'static str,
    f: &mut dyn FnMut(ExportPage<'_>) -> Result<()>,
) -> Result<()> {
    // The table name is one of ours: no quoting needed.
    let mut stmt = conn
        .prepare(&format!(
            "SELECT rowid, * FROM {table} WHERE rowid > ?1 ORDER BY rowid LIMIT ?2"
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
                    table,
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
        f(ExportPage {
            table,
            columns: &columns,
            rows: &rows,
        })?;
        if !full {
            return Ok(());
        }
    }
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
        let mut seen: Vec<(&str, Vec<String>)> = Vec::new();
        store
            .export_rows(&mut |page| {
                let id = page.columns.iter().position(|c| c == "id" || c == "seq");
                for row in page.rows {
                    let key = id.map(|i| match &row[i] {
                        StoredValue::Int(n) => n.to_string(),
                        StoredValue::Text(t) => t.clone(),
                        StoredValue::Other(o) => (*o).to_owned(),
                    });
                    match seen.last_mut() {
                        Some((t, keys)) if *t == page.table => keys.extend(key),
                        _ => seen.push((page.table, key.into_iter().collect())),
                    }
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(seen[0], ("runs", vec!["b".into(), "a".into()]));
        assert_eq!(seen[1], ("events", vec!["1".into(), "2".into()]));
        assert_eq!(seen[2].0, "agentrt_meta");
        assert!(store.extension_table_names().unwrap().is_empty());
    }
}
