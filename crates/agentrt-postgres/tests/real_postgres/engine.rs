//! The core suite's database on PostgreSQL: each store, and each `Db`, a
//! fresh database on the test server.
#![allow(dead_code)]

use agentrt::Store;

use crate::backends::{client, fresh_database, on_plain_thread};

/// The engine's name, for messages.
pub const NAME: &str = "postgres";

/// Lets every lease taken so far lapse: PostgreSQL judges leases by its own
/// clock, so the test waits them out (the lease clock is moved too, for
/// the session's own view of its lease).
pub async fn let_leases_lapse(lease_clock: &agentrt::ManualClock, ttl: std::time::Duration) {
    lease_clock.advance(ttl + std::time::Duration::from_millis(1));
    tokio::time::sleep(ttl + std::time::Duration::from_millis(50)).await;
}

/// A fresh, empty store.
pub fn store() -> Store {
    Db::new().open()
}

/// An SQL expression: `column`'s JSON with the member at the dotted
/// `path` set to the JSON `value`.
pub fn json_set(column: &str, path: &str, value: &str) -> String {
    let path = path.replace('.', ",");
    format!("jsonb_set({column}::jsonb, '{{{path}}}', '{value}'::jsonb)::text")
}

/// A fresh database that several handles can open and raw SQL can reach.
pub struct Db {
    location: String,
}

impl Db {
    pub fn new() -> Db {
        Db {
            location: fresh_database(),
        }
    }

    /// Opens a handle on it (creating the schema on first use), as another
    /// host would.
    pub fn open(&self) -> Store {
        agentrt_postgres::open(&self.location).unwrap()
    }

    /// Opens another handle (PostgreSQL has no read-only handle: it is a
    /// handle like any other).
    pub fn reader(&self) -> Store {
        self.open()
    }

    /// Runs one statement behind the store's back; returns the rows it
    /// changed.
    pub fn exec(&self, sql: &str) -> u64 {
        on_plain_thread(|| client(&self.location).execute(sql, &[]).unwrap())
    }

    /// The rows a query returns, every column text.
    pub fn text_rows(&self, sql: &str) -> Vec<Vec<String>> {
        on_plain_thread(|| {
            client(&self.location)
                .query(sql, &[])
                .unwrap()
                .iter()
                .map(|row| (0..row.len()).map(|i| row.get(i)).collect())
                .collect()
        })
    }

    /// The integer a one-value query returns.
    pub fn query_i64(&self, sql: &str) -> i64 {
        on_plain_thread(|| client(&self.location).query_one(sql, &[]).unwrap().get(0))
    }
}
