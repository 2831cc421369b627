//! An agentrt database's runs as OpenTelemetry spans.
//!
//! [`Spans`] turns a run's events, in seq order, into finished spans: one
//! per run, step, model attempt, tool execution and approval wait, named with fixed names
//! (model text never names a span), with trace and span ids derived from
//! the run's own ids ([`trace_id`], [`span_id`]), OpenTelemetry GenAI
//! attribute names where they exist (`gen_ai.operation.name`,
//! `gen_ai.tool.name`, `gen_ai.request.model`, `gen_ai.usage.*`) and
//! `agentrt.*` for the rest, and a status from the outcome. Text a model,
//! a tool, a policy or a server chose (tool arguments, results and
//! errors, policy and approval reasons, model errors, step and run
//! details) is left out unless [`SpansOptions::content`] asks for it
//! (bounded and sanitized): it may hold secrets. Without it a failure
//! leaves as its kind (`agentrt.step.observation`, `agentrt.tool.failure`,
//! the status description) and its length in bytes (`agentrt.*_bytes`).
//!
//! # What leaves without `content`
//!
//! | exported | whose |
//! |---|---|
//! | ids, event types, statuses, observation kinds, failure words, counts, lengths, durations, hashes | the runtime's |
//! | the run's goal | whoever started the run |
//! | `enduser.id`, `agentrt.caller.issuer` (a run's `caller.subject` and `caller.issuer` labels) | the issuer of the access token the caller brought (agentrt-proxy's OAuth) |
//! | `run.by`, `approval.by` | an operator's label, recorded as given |
//! | a tool's name once the runtime knows the tool (`step.policy`, `step.tool_started`) | the tool registry's |
//! | policy and approval kinds, the policy id | the policy's labels |
//! | the requested model | the caller's configuration |
//!
//! Content, exported only with `content`: decision arguments; a decision
//! kind or tool name the runtime does not know (the model's text); tool
//! summaries and errors; policy and approval reasons (a policy may quote
//! the request); model errors (a server's text); step details (an
//! observation's summary) and run details (a tool's abort text, the
//! model's reason for giving up, an operator's note).
#![deny(missing_docs)]

mod attributes;
pub mod environment;
pub mod export;
mod failure;
mod ids;
mod spans;
pub mod warnings;

pub use ids::{SpanKindName, span_id, trace_id};
pub use spans::{SCOPE, Spans, SpansOptions};
