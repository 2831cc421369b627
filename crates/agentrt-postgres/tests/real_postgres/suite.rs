//! The core's engine suite (`crates/agentrt/tests/suite`), compiled here
//! against PostgreSQL: the same files, with this crate's `engine`. All but
//! `lease_clock`, about the host lease clock SQLite judges leases by:
//! PostgreSQL judges them by its own (`hosts.rs` tests that instead).

#[path = "../../../agentrt/tests/suite/approval_grants.rs"]
mod approval_grants;
#[path = "../../../agentrt/tests/suite/approvals.rs"]
mod approvals;
#[path = "../../../agentrt/tests/suite/edits.rs"]
mod edits;
#[path = "../../../agentrt/tests/suite/interruption.rs"]
mod interruption;
#[path = "../../../agentrt/tests/suite/loop_basics.rs"]
mod loop_basics;
#[path = "../../../agentrt/tests/suite/recheck.rs"]
mod recheck;
#[path = "../../../agentrt/tests/suite/store_writes.rs"]
mod store_writes;
#[path = "../../../agentrt/tests/suite/two_people.rs"]
mod two_people;
#[path = "../../../agentrt/tests/suite/verify_tamper.rs"]
mod verify_tamper;
