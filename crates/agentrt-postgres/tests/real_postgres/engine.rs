//! The core suite's database on PostgreSQL: each store, and each `Db`, a
//! fresh database on the test server.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use agentrt::{Store, StoreOptions};
use agentrt_postgres::PgOptions;
use postgres::error::SqlState;

use crate::backends::{client, create_database, database_name, location, on_plain_thread, server};
use crate::common::sql_text;

/// The engine's name, for messages.
pub const NAME: &str = "postgres";

/// Lets every lease taken so far lapse: PostgreSQL judges leases by its own
/// clock, so the test waits them out (the lease clock is moved too, for
/// the session's own view of its lease).
pub async fn let_leases_lapse(lease_clock: &agentrt::clock::ManualClock, ttl: std::time::Duration) {
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

/// Whether the engine holds a satellite's extension tables.
pub fn extension_tables() -> bool {
    true
}

/// An SQL query: the seqs (as text) of the events whose `rows_json` lists row `id` of `table`.
pub fn listing_seqs(table: &str, id: &str) -> String {
    format!(
        "SELECT CAST(e.seq AS TEXT) FROM events e,
             jsonb_array_elements((CASE WHEN e.rows_json = '' THEN '[]' ELSE e.rows_json END)::jsonb) j
         WHERE j ->> 0 = {} AND j ->> 1 = {} ORDER BY e.seq",
        sql_text(table),
        sql_text(id)
    )
}

/// SQL that has the next write follow event `seq` once later ones are cut: the head row set back.
pub fn rewind_head(seq: i64) -> String {
    format!(
        "UPDATE agentrt_chain SET head_seq = {seq},
             head_hash = COALESCE((SELECT hash FROM events WHERE seq = {seq}), '') WHERE id = 1"
    )
}

/// How long a copy waits for the connections of a closed store to go.
const COPY_WAIT: Duration = Duration::from_secs(10);

/// A fresh database that several handles can open and raw SQL can reach.
pub struct Db {
    name: String,
    location: String,
    /// A copy ([`Db::copy`]), dropped with its `Db`.
    copy: bool,
}

impl Db {
    pub fn new() -> Db {
        let name = database_name();
        on_plain_thread(|| create_database(&name));
        Db {
            location: location(&name),
            name,
            copy: false,
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

    /// Opens a handle with `options` (a satellite's extensions, say), or the engine's refusal.
    pub fn open_with(&self, options: StoreOptions) -> agentrt::Result<Store> {
        agentrt_postgres::open_with(
            &self.location,
            PgOptions {
                store: options,
                ..PgOptions::default()
            },
        )
    }

    /// A copy (`CREATE DATABASE … TEMPLATE`, once its handles have closed), to tamper with.
    pub fn copy(&self) -> Db {
        let name = database_name();
        on_plain_thread(|| {
            let mut admin = client(&server());
            let sql = format!("CREATE DATABASE {name} TEMPLATE {}", self.name);
            let deadline = Instant::now() + COPY_WAIT;
            loop {
                match admin.batch_execute(&sql) {
                    Ok(()) => return,
                    // A dropped store's connections close asynchronously.
                    Err(e)
                        if e.code() == Some(&SqlState::OBJECT_IN_USE)
                            && Instant::now() < deadline =>
                    {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    Err(e) => panic!("{sql}: {e}"),
                }
            }
        });
        Db {
            location: location(&name),
            name,
            copy: true,
        }
    }

    /// Runs statements behind the store's back, foreign keys off (the test role is a superuser).
    pub fn exec_batch(&self, sql: &str) {
        on_plain_thread(|| {
            client(&self.location)
                .batch_execute(&format!("SET session_replication_role = replica; {sql}"))
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
        })
    }

    /// The columns of `table`, in schema order, without the bookkeeping
    /// `pos` (`_pos` on an extension table).
    pub fn columns(&self, table: &str) -> Vec<String> {
        self.text_rows(&format!(
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = {}
                 AND column_name NOT IN ('pos', '_pos')
             ORDER BY ordinal_position",
            sql_text(table)
        ))
        .into_iter()
        .map(|mut row| row.remove(0))
        .collect()
    }

    /// An SQL expression: `column` of `table` changed (an integer plus 1000, a text plus `x`).
    pub fn changed(&self, table: &str, column: &str) -> String {
        let types = self.text_rows(&format!(
            "SELECT data_type::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = {} AND column_name = {}",
            sql_text(table),
            sql_text(column)
        ));
        match types.first().map(|row| row[0].as_str()) {
            Some("bigint" | "integer" | "smallint") => format!("{column} + 1000"),
            Some(_) => format!("{column} || 'x'"),
            None => panic!("{table} has no column {column:?}"),
        }
    }

    /// What to `ORDER BY` to read `table`'s rows in a fixed order: `pos`
    /// (`_pos`), else its key.
    pub fn row_order(&self, table: &str) -> String {
        let pos = self.text_rows(&format!(
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = {}
                 AND column_name IN ('pos', '_pos')",
            sql_text(table)
        ));
        if let Some(row) = pos.first() {
            return format!("\"{}\"", row[0]);
        }
        let key: Vec<String> = self
            .text_rows(&format!(
                "SELECT a.attname::text FROM pg_index i
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                 WHERE i.indrelid = {}::regclass AND i.indisprimary
                 ORDER BY array_position(i.indkey::int2[], a.attnum)",
                sql_text(table)
            ))
            .into_iter()
            .map(|mut row| row.remove(0))
            .collect();
        assert!(!key.is_empty(), "{table} has no key");
        key.join(", ")
    }
}

impl Drop for Db {
    /// Drops a copy's database (a tamper test makes hundreds), whatever
    /// handles are still connected; leaves others as every test does.
    fn drop(&mut self) {
        if !self.copy {
            return;
        }
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        on_plain_thread(|| {
            let admin = server()
                .parse::<postgres::Config>()
                .ok()
                .and_then(|config| config.connect(postgres::NoTls).ok());
            if let Some(mut admin) = admin {
                let _ = admin.batch_execute(&sql);
            }
        });
    }
}
