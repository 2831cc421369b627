//! Running one tool call: the spec's timeout, panics caught, the caller's
//! cancellation honoured, and every way it can end turned into an
//! observation.

use std::sync::Arc;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::json::Canonical;
use crate::model::{Observation, ObservationKind, Tool, ToolCall, ToolError, ToolResult, base64};

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

/// What the step observed, and whether the tool asked to end the run.
pub(crate) struct Outcome {
    pub observation: Observation,
    pub abort: Option<String>,
}

pub(crate) fn observe(tool: &str, run: ToolRun) -> Outcome {
    let error = |fields: &[(&str, &str)], summary: String| {
        Observation::runtime(ObservationKind::ToolError, fields, summary)
    };
    match run {
        ToolRun::Returned(Ok(result)) => match Canonical::parse(&result.content) {
            Ok(content) => Outcome {
                observation: Observation::new(
                    ObservationKind::ToolResult,
                    Some(content),
                    result.summary,
                ),
                abort: None,
            },
            Err(e) => {
                let problem = format!("content is not acceptable JSON: {e}");
                let observation = match std::str::from_utf8(&result.content) {
                    Ok(text) => error(
                        &[
                            ("tool", tool),
                            ("error", &problem),
                            ("failure", "invalid_content"),
                            ("content", text),
                        ],
                        format!("{tool} returned content that is not acceptable JSON"),
                    ),
                    Err(_) => error(
                        &[
                            ("tool", tool),
                            ("error", &problem),
                            ("failure", "invalid_content"),
                            ("content_base64", &base64(&result.content)),
                        ],
                        format!("{tool} returned content that is not UTF-8"),
                    ),
                };
                Outcome {
                    observation,
                    abort: None,
                }
            }
        },
        ToolRun::Returned(Err(ToolError::Failed { message })) => Outcome {
            observation: error(
                &[("tool", tool), ("error", &message), ("failure", "error")],
                format!("{tool} error: {message}"),
            ),
            abort: None,
        },
        ToolRun::Returned(Err(ToolError::AbortRun { detail })) => Outcome {
            observation: error(
                &[("tool", tool), ("error", &detail), ("failure", "abort")],
                format!("{tool} aborted the run: {detail}"),
            ),
            abort: Some(detail),
        },
        ToolRun::TimedOut(ms) => {
            let message = format!("no result within {ms} ms");
            Outcome {
                observation: error(
                    &[("tool", tool), ("error", &message), ("failure", "timeout")],
                    format!("{tool} timeout: {message}"),
                ),
                abort: None,
            }
        }
        ToolRun::Panicked(text) => Outcome {
            observation: error(
                &[("tool", tool), ("error", &format!("panic: {text}"))],
                format!("{tool} panicked"),
            ),
            abort: None,
        },
        ToolRun::Cancelled => Outcome {
            observation: Observation::runtime(
                ObservationKind::Interrupted,
                &[
                    ("tool", tool),
                    ("error", "cancelled by the caller"),
                    ("failure", "cancelled"),
                ],
                format!("{tool} was cancelled while running; outcome unknown"),
            ),
            abort: None,
        },
    }
}
