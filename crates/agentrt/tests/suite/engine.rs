//! The suite's database on SQLite: a store in memory when a test needs
//! nothing else, a file when it opens a second handle or changes rows
//! behind the store's back.
#![allow(dead_code)]

use std::path::PathBuf;

use agentrt::{Store, StoreOptions};

use crate::common::sql_text;

/// The engine's name, for messages.
pub const NAME: &str = "sqlite";

/// Lets every lease taken so far lapse: SQLite judges leases by the gate's
/// lease clock, which the test moves past them (no waiting).
pub async fn let_leases_lapse(lease_clock: &agentrt::clock::ManualClock, ttl: std::time::Duration) {
    lease_clock.advance(ttl + std::time::Duration::from_millis(1));
}

/// A fresh, empty store.
pub fn store() -> Store {
    Store::open(":memory:").unwrap()
}

/// An SQL expression: `column`'s JSON with the member at the dotted
/// `path` set to the JSON `value`.
pub fn json_set(column: &str, path: &str, value: &str) -> String {
    format!("json_set({column}, '$.{path}', json('{value}'))")
}

/// Whether the engine holds a satellite's extension tables (`StoreOptions::extensions`).
pub fn extension_tables() -> bool {
    true
}

/// An SQL query: the seqs (as text) of the events whose `rows_json` lists row `id` of `table`.
pub fn listing_seqs(table: &str, id: &str) -> String {
    format!(
        "SELECT CAST(e.seq AS TEXT) FROM events e, json_each(e.rows_json) j
         WHERE e.rows_json <> '' AND j.value ->> 0 = {} AND j.value ->> 1 = {} ORDER BY e.seq",
        sql_text(table),
        sql_text(id)
    )
}

/// SQL that has the next write follow event `seq` once later ones are cut: none, no head is kept.
pub fn rewind_head(_seq: i64) -> String {
    String::new()
}

/// A fresh database that several handles can open and raw SQL can reach.
pub struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Db {
    pub fn new() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentrt.db");
        Db { _dir: dir, path }
    }

    /// Opens a handle on it (creating the schema on first use), as another
    /// process would.
    pub fn open(&self) -> Store {
        Store::open(&self.path).unwrap()
    }

    /// Opens a handle that only reads an existing database (it neither
    /// creates nor migrates, so it may open inside another handle's write).
    pub fn reader(&self) -> Store {
        Store::open_existing(&self.path, true).unwrap()
    }

    /// Runs one statement behind the store's back; returns the rows it
    /// changed.
    pub fn exec(&self, sql: &str) -> u64 {
        let conn = rusqlite::Connection::open(&self.path).unwrap();
        conn.execute(sql, []).unwrap() as u64
    }

    /// The rows a query returns, every column text.
    pub fn text_rows(&self, sql: &str) -> Vec<Vec<String>> {
        let conn = rusqlite::Connection::open(&self.path).unwrap();
        let mut stmt = conn.prepare(sql).unwrap();
        let width = stmt.column_count();
        stmt.query_map([], |r| (0..width).map(|i| r.get(i)).collect())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The integer a one-value query returns.
    pub fn query_i64(&self, sql: &str) -> i64 {
        let conn = rusqlite::Connection::open(&self.path).unwrap();
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    /// Opens a handle with `options` (a satellite's extensions, say), or the engine's refusal.
    pub fn open_with(&self, options: StoreOptions) -> agentrt::Result<Store> {
        Store::open_with(&self.path, options)
    }

    /// A copy of the file in a new directory, to tamper with (close the writing handles first).
    pub fn copy(&self) -> Db {
        let copy = Db::new();
        std::fs::copy(&self.path, &copy.path).unwrap();
        copy
    }

    /// Runs statements behind the store's back as the sqlite3 shell would: foreign keys off.
    pub fn exec_batch(&self, sql: &str) {
        let conn = rusqlite::Connection::open(&self.path).unwrap();
        conn.pragma_update(None, "foreign_keys", false).unwrap();
        conn.execute_batch(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// The columns of `table`, in schema order.
    pub fn columns(&self, table: &str) -> Vec<String> {
        self.text_rows(&format!(
            "SELECT name FROM pragma_table_info({})",
            sql_text(table)
        ))
        .into_iter()
        .map(|mut row| row.remove(0))
        .collect()
    }

    /// An SQL expression: `column` of `table` changed (an integer plus 1000, a text plus `x`).
    pub fn changed(&self, _table: &str, column: &str) -> String {
        format!(
            "CASE typeof({column}) WHEN 'integer' THEN {column} + 1000 ELSE {column} || 'x' END"
        )
    }

    /// What to `ORDER BY` to read `table`'s rows in a fixed order: as inserted (`rowid`).
    pub fn row_order(&self, _table: &str) -> String {
        "rowid".to_owned()
    }
}
