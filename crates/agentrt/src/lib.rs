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
pub mod policy;
pub mod recheck;
pub mod reconcile;
mod registry;
pub mod render;
pub mod replay;
pub mod store;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod text;
pub mod trace;
pub mod verify;
pub mod view;

pub use agent::{Agent, AgentError, Observer, ScriptedAgent, StepInput};
pub use cancel::{Cancel, CancelHandle, cancel_pair};
pub use clock::{Clock, ManualClock, Timestamp, system_clock};
pub use driver::Driver;
pub use error::{DatabaseErrorKind, Error, Result};
pub use gate::{
    CrashHook, CrashPoint, Gate, GateConfig, SatelliteRows, Session, StepInfo, Verdict,
    VerdictOutcome,
};
pub use ids::{IdSource, ordered_id, ordered_ids, random_id, random_ids, sequential_ids};
pub use json::{Canonical, JsonError};
pub use llm::{
    BlockKind, ContentBlock, Message, Model, ModelError, ModelRequest, ModelResponse, ModelTool,
    Role, StopReason, ToolUse,
};
pub use model::*;
pub use operator::{DecideOptions, Operator};
pub use policy::{DefaultPolicy, Policy, PolicyError, SideEffectPolicy};
pub use recheck::{RecheckOptions, RecheckReport, recheck};
pub use reconcile::{Reconcile, ReconcileError, ReconcileInput, Reconciled};
pub use render::RenderOptions;
// Replay types stay under `agentrt::replay` (`Recorder` there records model
// exchanges; the name is too general for the crate root).
pub use registry::{ToolSchema, check_args};
pub use replay::{NotRecorded, ReplayError, Replayer};
pub use store::{Durability, Page, Store, StoreOptions};
