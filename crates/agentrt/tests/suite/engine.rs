//! The suite's database on SQLite: a store in memory when a test needs
//! nothing else, a file when it opens a second handle or changes rows
//! behind the store's back.
#![allow(dead_code)]

use std::path::PathBuf;

use agentrt::Store;

/// The engine's name, for messages.
pub const NAME: &str = "sqlite";

/// Lets every lease taken so far lapse: SQLite judges leases by the gate's
/// lease clock, which the test moves past them (no waiting).
pub async fn let_leases_lapse(lease_clock: &agentrt::ManualClock, ttl: std::time::Duration) {
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
}
