//! An agentrt database's runs as OpenTelemetry spans.
//!
//! [`Spans`] turns a run's events, in seq order, into finished spans: one
//! per run, step, model attempt, tool execution and approval wait, named with fixed names
//! (model text never names a span), with trace and span ids derived from
//! the run's own ids ([`trace_id`], [`span_id`]), OpenTelemetry GenAI
//! attribute names where they exist (`gen_ai.operation.name`,
//! `gen_ai.tool.name`, `gen_ai.request.model`, `gen_ai.usage.*`) and
//! `agentrt.*` for the rest, and a status from the outcome. Tool arguments
//! and results are left out unless [`SpansOptions::content`] asks for them
//! (bounded and sanitized): they may hold secrets.
#![deny(missing_docs)]

mod attributes;
pub mod export;
mod ids;
mod spans;

pub use ids::{SpanKindName, span_id, trace_id};
pub use spans::{SCOPE, Spans, SpansOptions};
