use serde::Serialize;

use super::run::Usage;
use super::text_enum;
use crate::clock::Timestamp;

text_enum! {
    /// Where one model call attempt stands.
    pub enum CallStatus {
        /// Sent; no outcome recorded yet (a crash leaves it so).
        Dispatched => "dispatched",
        /// Answered with usable usage; charged as reported.
        Ok => "ok",
        /// Failed; charged as the failure warrants.
        Error => "error",
        /// The outcome is unknown (timeout, lost connection, the caller
        /// gave up); charged the conservative estimate.
        Ambiguous => "ambiguous",
    }
}

/// One attempt to call a model, recorded before it was sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelCall {
    /// The call id.
    pub id: String,
    /// The run.
    pub run_id: String,
    /// The step it served.
    pub step_id: String,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// Where it stands.
    pub status: CallStatus,
    /// The model name.
    pub model: String,
    /// Tokens charged.
    pub usage: Usage,
    /// Estimated cost charged, in micro-dollars.
    pub cost_micros: i64,
    /// Time from dispatch to outcome, in milliseconds.
    pub latency_ms: u64,
    /// The failure, if any.
    pub error: String,
    /// When it was sent.
    pub dispatched_at: Timestamp,
    /// When its outcome was recorded.
    pub completed_at: Option<Timestamp>,
}
