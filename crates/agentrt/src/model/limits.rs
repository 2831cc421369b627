use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::is_default;

/// The limits a run is held to. Zero means unlimited for every optional
/// limit; `max_steps`, `max_consecutive_tool_failures` and `loop_threshold`
/// must be positive.
///
/// Stored as JSON with durations in integer milliseconds (`*_ms`) and money
/// in micro-dollars (`*_micros`); optional limits at zero are omitted.
///
/// ```
/// use agentrt::Limits;
/// use std::time::Duration;
/// let limits = Limits::default().max_steps(10).max_active_time(Duration::from_secs(60));
/// assert_eq!(serde_json::to_string(&limits).unwrap(),
///     r#"{"max_steps":10,"max_consecutive_tool_failures":3,"loop_threshold":3,"max_active_time_ms":60000}"#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Steps a run may start.
    pub max_steps: u64,
    /// Consecutive failed tool outcomes that end the run.
    pub max_consecutive_tool_failures: u64,
    /// Identical outcomes in a row that count as a loop.
    pub loop_threshold: u64,
    /// Model call attempts (0 = unlimited).
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_model_calls: u64,
    /// Cap on one call's output tokens (0 = none).
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_output_tokens_per_call: u64,
    /// Input plus output tokens of the run (0 = unlimited).
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_total_tokens: u64,
    /// Estimated spend in micro-dollars (0 = unlimited).
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_estimated_cost_micros: i64,
    /// Sum of step durations (0 = unlimited); approval waits do not count.
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_active_time_ms: u64,
    /// Time since the run was created, waits included (0 = unlimited).
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_elapsed_time_ms: u64,
    /// How long an approval may stay pending (0 = forever).
    #[serde(default, skip_serializing_if = "is_default")]
    pub approval_ttl_ms: u64,
    /// How long a granted approval may wait for the resume that uses it
    /// (0 = forever).
    #[serde(default, skip_serializing_if = "is_default")]
    pub grant_ttl_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_steps: 50,
            max_consecutive_tool_failures: 3,
            loop_threshold: 3,
            max_model_calls: 0,
            max_output_tokens_per_call: 0,
            max_total_tokens: 0,
            max_estimated_cost_micros: 0,
            max_active_time_ms: 0,
            max_elapsed_time_ms: 0,
            approval_ttl_ms: 0,
            grant_ttl_ms: 0,
        }
    }
}

/// A limit that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("limit {field} must be positive (it is {value}); set it above zero or use the default")]
pub struct LimitsError {
    /// The field at fault.
    pub field: &'static str,
    /// Its value.
    pub value: i64,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Limits {
    /// Refuses a zero `max_steps`, `max_consecutive_tool_failures` or
    /// `loop_threshold`, and a negative cost limit.
    pub fn validate(&self) -> Result<(), LimitsError> {
        let required = [
            ("max_steps", self.max_steps),
            (
                "max_consecutive_tool_failures",
                self.max_consecutive_tool_failures,
            ),
            ("loop_threshold", self.loop_threshold),
        ];
        for (field, value) in required {
            if value == 0 {
                return Err(LimitsError { field, value: 0 });
            }
        }
        if self.max_estimated_cost_micros < 0 {
            return Err(LimitsError {
                field: "max_estimated_cost_micros",
                value: self.max_estimated_cost_micros,
            });
        }
        Ok(())
    }

    /// Sets `max_steps`.
    pub fn max_steps(mut self, n: u64) -> Limits {
        self.max_steps = n;
        self
    }
    /// Sets `max_consecutive_tool_failures`.
    pub fn max_consecutive_tool_failures(mut self, n: u64) -> Limits {
        self.max_consecutive_tool_failures = n;
        self
    }
    /// Sets `loop_threshold`.
    pub fn loop_threshold(mut self, n: u64) -> Limits {
        self.loop_threshold = n;
        self
    }
    /// Sets `max_model_calls`.
    pub fn max_model_calls(mut self, n: u64) -> Limits {
        self.max_model_calls = n;
        self
    }
    /// Sets `max_output_tokens_per_call`.
    pub fn max_output_tokens_per_call(mut self, n: u64) -> Limits {
        self.max_output_tokens_per_call = n;
        self
    }
    /// Sets `max_total_tokens`.
    pub fn max_total_tokens(mut self, n: u64) -> Limits {
        self.max_total_tokens = n;
        self
    }
    /// Sets `max_estimated_cost_micros`.
    pub fn max_estimated_cost_micros(mut self, micros: i64) -> Limits {
        self.max_estimated_cost_micros = micros;
        self
    }
    /// Sets the active-time limit.
    pub fn max_active_time(mut self, d: Duration) -> Limits {
        self.max_active_time_ms = millis(d);
        self
    }
    /// Sets the elapsed-time limit.
    pub fn max_elapsed_time(mut self, d: Duration) -> Limits {
        self.max_elapsed_time_ms = millis(d);
        self
    }
    /// Sets how long an approval may stay pending.
    pub fn approval_ttl(mut self, d: Duration) -> Limits {
        self.approval_ttl_ms = millis(d);
        self
    }
    /// Sets how long a grant may wait for its resume.
    pub fn grant_ttl(mut self, d: Duration) -> Limits {
        self.grant_ttl_ms = millis(d);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_50_3_3_and_optional_limits_are_omitted() {
        let json = serde_json::to_string(&Limits::default()).unwrap();
        assert_eq!(
            json,
            r#"{"max_steps":50,"max_consecutive_tool_failures":3,"loop_threshold":3}"#
        );
    }

    #[test]
    fn missing_grant_ttl_decodes_zero() {
        let l: Limits = serde_json::from_str(
            r#"{"max_steps":5,"max_consecutive_tool_failures":1,"loop_threshold":2,"approval_ttl_ms":1000}"#,
        )
        .unwrap();
        assert_eq!(l.grant_ttl_ms, 0);
        assert_eq!(l.approval_ttl_ms, 1000);
    }

    #[test]
    fn zero_required_limits_are_refused_by_name() {
        let e = Limits::default().loop_threshold(0).validate().unwrap_err();
        assert_eq!(e.field, "loop_threshold");
        assert!(Limits::default().validate().is_ok());
        let e = Limits::default()
            .max_estimated_cost_micros(-1)
            .validate()
            .unwrap_err();
        assert_eq!(e.field, "max_estimated_cost_micros");
    }
}
