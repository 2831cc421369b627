//! # agentrt
//!
//! Deterministic control of the effects of tool-using AI agents. A model
//! proposes an action; agentrt decides, executes and records it: every tool
//! request is recorded exactly, checked against the tool's JSON Schema and
//! put to a policy written in code; approvals are bound by hash to the exact
//! request; limits are enforced before dispatch; and the audit log is
//! written in the same SQLite transaction as the state it explains.
#![deny(missing_docs)]

pub mod agent;
pub mod approval;
pub mod budget;
pub mod cancel;
pub mod chain;
pub mod clock;
pub mod driver;
mod error;
mod expiry;
pub mod follow;
pub mod gate;
pub mod ids;
pub mod json;
pub mod llm;
pub mod model;
pub mod operator;
mod payload;
pub mod policy;
pub mod private_file;
pub mod recheck;
pub mod reconcile;
pub mod registry;
pub mod render;
pub mod replay;
mod run_end;
pub mod store;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod text;
pub mod trace;
pub mod verify;
pub mod view;

// The crate root holds what a user of the Driver or the Gate needs: the
// loop and its agent, tools and policy, the store it writes and the
// records read back. Everything else has one path, in its module.
pub use agent::{Agent, AgentError, Observer, ScriptedAgent, StepInput};
pub use cancel::{Cancel, CancelHandle, cancel_pair};
pub use clock::{Clock, Timestamp, system_clock};
pub use driver::Driver;
pub use error::{DatabaseErrorKind, Error, Result};
pub use gate::{Gate, GateConfig, Verdict, VerdictOutcome};
pub use json::{Canonical, JsonError};
pub use llm::{Model, ModelError, ModelRequest, ModelResponse};
pub use model::{
    Approval, ApprovalStatus, BoxFuture, Decision, Event, EventType, FnTool, Label, Labels, Limits,
    MAX_APPROVERS, Outcome, PolicyDecision, Run, RunStatus, RunView, SideEffect, TerminalReason,
    Tool, ToolCall, ToolError, ToolRequest, ToolResult, ToolSpec, Usage, tool_fn,
};
pub use operator::{DecideOptions, Operator};
pub use policy::{DefaultPolicy, Policy, PolicyError, SideEffectPolicy};
pub use store::{Durability, Store, StoreOptions};
