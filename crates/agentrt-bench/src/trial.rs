//! A trial: one row of the result file.

use std::collections::BTreeMap;

use crate::raw::RawJson;

/// One run of one scenario in one mode: a row of the result file.
///
/// A trial has exactly one of `outcome` (it was judged) and `excluded` (why
/// it was not; an excluded trial is in no denominator and no sum).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trial {
    /// The scenario id (required).
    pub scenario: String,
    /// The mode (required).
    pub mode: String,
    /// The model; may be empty.
    pub model: String,
    /// The repetition, counting from 1.
    pub repeat: i64,
    /// The run's id in the runtime, if any.
    pub run_id: String,
    /// The class of answer the scenario expects: the key an outcome's
    /// `over` refers to.
    pub expect: String,
    /// The consumer's own end state, before classification.
    pub reached: String,
    /// The taxonomy's name for the trial; empty only when `excluded` is set.
    pub outcome: String,
    /// Why the trial was not judged; empty when it was.
    pub excluded: String,
    /// Steps taken.
    pub steps: i64,
    /// Tool calls made.
    pub tool_calls: i64,
    /// Tool calls the policy denied.
    pub policy_denials: i64,
    /// Model calls made.
    pub model_calls: i64,
    /// Input tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// Cost in millionths of a currency unit.
    pub cost_micros: i64,
    /// Wall time in nanoseconds.
    pub wall_ns: i64,
    /// An error the run ended with, if any.
    pub error: String,
    /// Remarks about the trial.
    pub notes: Vec<String>,
    /// What one consumer records and another does not, kept as JSON.
    /// Integer values are summed into [`Summary::totals`](crate::Summary::totals).
    pub extra: BTreeMap<String, RawJson>,
}

impl Trial {
    /// A judged trial with this outcome and every counter zero.
    pub fn judged(scenario: &str, mode: &str, repeat: i64, outcome: &str) -> Trial {
        Trial {
            scenario: scenario.to_string(),
            mode: mode.to_string(),
            repeat,
            outcome: outcome.to_string(),
            ..Trial::default()
        }
    }

    /// An excluded trial with this reason and every counter zero.
    pub fn excluded(scenario: &str, mode: &str, repeat: i64, reason: &str) -> Trial {
        Trial {
            scenario: scenario.to_string(),
            mode: mode.to_string(),
            repeat,
            excluded: reason.to_string(),
            ..Trial::default()
        }
    }

    /// Whether the trial has an outcome.
    pub fn is_judged(&self) -> bool {
        !self.outcome.is_empty()
    }
}
