//! Running one tool call: the spec's timeout, panics caught, the caller's
//! cancellation honoured, and every way it can end turned into an
//! observation.

use std::sync::Arc;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::json::Canonical;
use crate::model::{
    Observation, ObservationKind, SideEffect, Tool, ToolCall, ToolError, ToolFailure, ToolResult,
    base64,
};

/// How a tool call ended.
pub(crate) enum ToolRun {
    Returned(Result<ToolResult, ToolError>),
    TimedOut(u64),
    Panicked(String),
    Cancelled,
}

/// Runs the call on its own task, so a panic is caught and a timeout can
/// abandon it. A tool that finishes as the caller cancels is reported as
/// finished: its outcome is recorded before the cancellation is returned.
pub(crate) async fn run(
    tool: Arc<dyn Tool>,
    call: ToolCall,
    timeout_ms: u64,
    cancel: &Cancel,
) -> ToolRun {
    let task = tokio::spawn(async move { tool.call(call).await });
    let abort = task.abort_handle();
    let limit = Duration::from_millis(timeout_ms);
    tokio::select! {
        biased;
        joined = tokio::time::timeout(limit, task) => match joined {
            Err(_) => {
                abort.abort();
                ToolRun::TimedOut(timeout_ms)
            }
            Ok(Ok(result)) => ToolRun::Returned(result),
            Ok(Err(e)) if e.is_panic() => ToolRun::Panicked(crate::policy::panic_text(e.into_panic().as_ref())),
            Ok(Err(_)) => ToolRun::Cancelled,
        },
        _ = cancel.cancelled() => {
            abort.abort();
            ToolRun::Cancelled
        }
    }
}

/// What follows the step's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Then {
    /// A known outcome (a result, a failure): the run goes on.
    Go,
    /// The tool asked to end the run (`tool_abort`), with this detail.
    Abort(String),
    /// The caller cancelled while the tool ran.
    Cancelled,
    /// The call started and its outcome is unknown, and the tool is not
    /// read-only: the step follows the interruption contract. Holds the
    /// reason the operator is given.
    Unknown(String),
}

/// What the step observed, and what follows it.
pub(crate) struct Outcome {
    pub observation: Observation,
    pub then: Then,
}

/// The observation of an ending whose outcome is unknown. A read-only
/// tool's is a tool error (the agent may ask again); any other tool's is
/// `interrupted` with the same fields plus `previous_status: executing`,
/// so a takeover after a crash still finds the step that was executing.
fn unknown(
    side_effect: SideEffect,
    fields: &[(&str, &str)],
    summary: String,
    reason: String,
) -> Outcome {
    if side_effect == SideEffect::ReadOnly {
        return Outcome {
            observation: Observation::runtime(ObservationKind::ToolError, fields, summary),
            then: Then::Go,
        };
    }
    let mut marked = fields.to_vec();
    marked.push(("previous_status", "executing"));
    Outcome {
        observation: Observation::runtime(
            ObservationKind::Interrupted,
            &marked,
            format!("{summary}; outcome unknown"),
        ),
        then: Then::Unknown(reason),
    }
}

/// Turns how the call ended into the step's observation. A timeout, a
/// panic and [`ToolError::Unknown`] happen after the call started: their
/// outcome is unknown (see [`unknown`]). A returned result, content that
/// is not acceptable JSON (the tool answered), [`ToolError::Failed`] and
/// [`ToolError::AbortRun`] are known outcomes.
pub(crate) fn observe(tool: &str, side_effect: SideEffect, run: ToolRun) -> Outcome {
    let error = |fields: &[(&str, &str)], summary: String| Outcome {
        observation: Observation::runtime(ObservationKind::ToolError, fields, summary),
        then: Then::Go,
    };
    match run {
        ToolRun::Returned(Ok(result)) => match Canonical::parse(&result.content) {
            Ok(content) => Outcome {
                observation: Observation::new(
                    ObservationKind::ToolResult,
                    Some(content),
                    result.summary,
                ),
                then: Then::Go,
            },
            Err(e) => {
                let problem = format!("content is not acceptable JSON: {e}");
                match std::str::from_utf8(&result.content) {
                    Ok(text) => error(
                        &[
                            ("tool", tool),
                            ("error", &problem),
                            ("failure", ToolFailure::InvalidContent.as_str()),
                            ("content", text),
                        ],
                        format!("{tool} returned content that is not acceptable JSON"),
                    ),
                    Err(_) => error(
                        &[
                            ("tool", tool),
                            ("error", &problem),
                            ("failure", ToolFailure::InvalidContent.as_str()),
                            ("content_base64", &base64(&result.content)),
                        ],
                        format!("{tool} returned content that is not UTF-8"),
                    ),
                }
            }
        },
        ToolRun::Returned(Err(ToolError::Failed { message })) => error(
            &[
                ("tool", tool),
                ("error", &message),
                ("failure", ToolFailure::Failed.as_str()),
            ],
            format!("{tool} error: {message}"),
        ),
        ToolRun::Returned(Err(ToolError::Unknown { message })) => unknown(
            side_effect,
            &[
                ("tool", tool),
                ("error", &message),
                ("failure", ToolFailure::UnknownOutcome.as_str()),
            ],
            format!("{tool} outcome unknown: {message}"),
            format!("{tool} reported that the outcome of its call is unknown: {message}"),
        ),
        ToolRun::Returned(Err(ToolError::AbortRun { detail })) => Outcome {
            observation: Observation::runtime(
                ObservationKind::ToolError,
                &[
                    ("tool", tool),
                    ("error", &detail),
                    ("failure", ToolFailure::Abort.as_str()),
                ],
                format!("{tool} aborted the run: {detail}"),
            ),
            then: Then::Abort(detail),
        },
        ToolRun::TimedOut(ms) => {
            let message = format!("no result within {ms} ms");
            unknown(
                side_effect,
                &[
                    ("tool", tool),
                    ("error", &message),
                    ("failure", ToolFailure::Timeout.as_str()),
                ],
                format!("{tool} timeout: {message}"),
                format!(
                    "{tool} timed out after its call started ({message}); its outcome is unknown"
                ),
            )
        }
        ToolRun::Panicked(text) => unknown(
            side_effect,
            &[("tool", tool), ("error", &format!("panic: {text}"))],
            format!("{tool} panicked"),
            format!("{tool} panicked after its call started; its outcome is unknown"),
        ),
        ToolRun::Cancelled => Outcome {
            observation: Observation::runtime(
                ObservationKind::Interrupted,
                &[
                    ("tool", tool),
                    ("error", "cancelled by the caller"),
                    ("failure", ToolFailure::Cancelled.as_str()),
                ],
                format!("{tool} was cancelled while running; outcome unknown"),
            ),
            then: Then::Cancelled,
        },
    }
}
