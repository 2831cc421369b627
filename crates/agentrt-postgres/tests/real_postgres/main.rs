//! The store on a real PostgreSQL server, beside SQLite: the same scenarios
//! run on both engines from one suite (`backends::each`), and what only
//! PostgreSQL has (several handles as several hosts, `LISTEN`/`NOTIFY`,
//! its schema) on its own; and the core's engine suite (`suite`), the very
//! files SQLite passes in `crates/agentrt/tests/suite`, on PostgreSQL.
//!
//! Needs `AGENTRT_TEST_POSTGRES`, a connection string to a server where
//! the role may create databases: `cargo xtask postgres -- cargo test -p
//! agentrt-postgres --features real-postgres` starts a throwaway cluster
//! and sets it. Every test works in a database of its own.

mod backends;
mod both;
mod dead_connections;
mod extensions;
mod hosts;
mod schema;
mod tls;

// The core's engine suite: its shared fixtures, this crate's engine, and
// the suite's modules (`suite.rs`).
#[path = "../../../agentrt/tests/common/mod.rs"]
mod common;
mod engine;
mod suite;
