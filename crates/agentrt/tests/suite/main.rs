//! The suite every store engine passes: the store's write groups, the
//! governed loop, approvals, leases and the interruption contract,
//! re-check, and `verify` against a tampered database. It reaches its
//! database only through `engine` (here SQLite); `agentrt-postgres`
//! compiles these same modules against PostgreSQL with an `engine` of its
//! own, so both engines answer to one suite.

#[path = "../common/mod.rs"]
mod common;
mod engine;

mod approval_grants;
mod approvals;
mod edits;
mod interruption;
// SQLite only: the lease clock it judges leases by (PostgreSQL uses its own).
mod lease_clock;
mod loop_basics;
mod recheck;
mod store_writes;
mod two_people;
mod verify_tamper;
