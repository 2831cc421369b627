//! The store on a real PostgreSQL server, beside SQLite: the same scenarios
//! run on both engines from one suite (`backends::each`), and what only
//! PostgreSQL has (several handles as several hosts, `LISTEN`/`NOTIFY`,
//! its schema) on its own.
//!
//! Needs `AGENTRT_TEST_POSTGRES`, a connection string to a server where
//! the role may create databases: `cargo xtask postgres -- cargo test -p
//! agentrt-postgres --features real-postgres` starts a throwaway cluster
//! and sets it. Every test works in a database of its own.

mod backends;
mod both;
mod hosts;
mod schema;
