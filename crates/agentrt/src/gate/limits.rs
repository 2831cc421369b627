//! The limits checked before each step: pure functions over the run and
//! the steps before it.

use std::sync::Arc;

use crate::clock::Timestamp;
use crate::json::hash_hex;
use crate::model::{DecisionKind, ObservationKind, Run, Step, TerminalReason};

/// A limit that stops the run before its next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A limit: `limit.exceeded` then `run.finished`.
    Limit {
        reason: TerminalReason,
        detail: String,
    },
    /// A loop: `loop.detected` then `run.finished`.
    Loop {
        repeats: u64,
        tool: String,
        args_hash: String,
        observation_hash: String,
    },
}

/// Trailing failed outcomes. A step without an observation or with a
/// success ends the streak; an interrupted outcome neither counts nor ends
/// it (its outcome is unknown).
pub(crate) fn failure_streak<'a>(steps: impl DoubleEndedIterator<Item = &'a Arc<Step>>) -> u64 {
    let mut streak = 0;
    for step in steps.rev() {
        match &step.observation {
            None => break,
            Some(o) if o.kind == ObservationKind::Interrupted => continue,
            Some(o) if o.is_failure() => streak += 1,
            Some(_) => break,
        }
    }
    streak
}

/// The signature of a step that can take part in a loop: a tool call whose
/// observation is not an invalid decision.
fn signature(step: &Step) -> Option<(&str, String, &str)> {
    let decision = step.decision.as_ref()?;
    if decision.kind != DecisionKind::ToolCall {
        return None;
    }
    let observation = step.observation.as_ref()?;
    if observation.kind == ObservationKind::InvalidDecision {
        return None;
    }
    let args = decision.args.as_ref().map(|a| a.as_str()).unwrap_or("{}");
    Some((
        &decision.tool,
        hash_hex(args.as_bytes()),
        &observation.content_hash,
    ))
}

/// How many of the trailing qualifying steps share the last one's
/// signature, and that signature.
pub(crate) fn identical_outcomes<'a>(
    steps: impl DoubleEndedIterator<Item = &'a Arc<Step>>,
) -> Option<(u64, String, String, String)> {
    let mut qualifying = steps.rev().filter_map(|s| signature(s));
    let (tool, args_hash, obs_hash) = qualifying.next()?;
    let mut repeats = 1;
    for (t, a, o) in qualifying {
        if t == tool && a == args_hash && o == obs_hash {
            repeats += 1;
        } else {
            break;
        }
    }
    Some((repeats, tool.to_owned(), args_hash, obs_hash.to_owned()))
}

/// The first limit the next step would break, in the fixed order: steps,
/// failure streak, active time, elapsed time (reading `now` only when an
/// elapsed limit is set), loop.
pub(crate) fn check<'a, I>(run: &Run, steps: I, now: impl FnOnce() -> Timestamp) -> Option<Stop>
where
    I: DoubleEndedIterator<Item = &'a Arc<Step>> + Clone,
{
    let limits = &run.limits;
    if run.step_count >= limits.max_steps {
        return Some(Stop::Limit {
            reason: TerminalReason::LimitSteps,
            detail: format!("the run reached its limit of {} steps", limits.max_steps),
        });
    }
    let streak = failure_streak(steps.clone());
    if streak >= limits.max_consecutive_tool_failures {
        return Some(Stop::Limit {
            reason: TerminalReason::RepeatedToolFailures,
            detail: format!(
                "{streak} consecutive failed steps (limit {})",
                limits.max_consecutive_tool_failures
            ),
        });
    }
    if limits.max_active_time_ms > 0 && run.active_ms >= limits.max_active_time_ms {
        return Some(Stop::Limit {
            reason: TerminalReason::LimitActiveTime,
            detail: format!(
                "active time {} ms reached the limit of {} ms",
                run.active_ms, limits.max_active_time_ms
            ),
        });
    }
    if limits.max_elapsed_time_ms > 0 {
        let elapsed = now().millis_since(&run.created_at);
        if elapsed >= limits.max_elapsed_time_ms {
            return Some(Stop::Limit {
                reason: TerminalReason::LimitElapsedTime,
                detail: format!(
                    "elapsed time {elapsed} ms reached the limit of {} ms",
                    limits.max_elapsed_time_ms
                ),
            });
        }
    }
    if let Some((repeats, tool, args_hash, observation_hash)) = identical_outcomes(steps)
        && repeats >= limits.loop_threshold
    {
        return Some(Stop::Loop {
            repeats,
            tool,
            args_hash,
            observation_hash,
        });
    }
    None
}
