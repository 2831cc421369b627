//! Test tools for consumers (cargo feature `testkit`): a crash-and-resume
//! harness for scenarios, policy conformance tables, and argument fuzzing
//! from a tool's JSON Schema.

pub mod fuzz;
mod harness;
pub mod policy_check;
mod recheck;

pub use fuzz::{Fuzz, FuzzError, FuzzProblem, Invalid};
pub use harness::{
    AgentFactory, Choice, Crash, Driving, HarnessError, LoopFn, Report, Scenario, invariants,
    rendered, run, same_renders,
};
pub use policy_check::{
    Disagreement, Disagreements, Got, Hit, NeverViolations, PolicyCase, StandIn, Want,
    check_policy, never, stand_in,
};
pub use recheck::{PartialRecheck, RecheckError, recheck, recheck_differs, recheck_partial};
