//! The consumer's parts: a plan agent, the one `effect` tool whose every
//! real execution leaves a line in an external file, and the crash hook
//! that parks the process at a named point until it is killed.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentrt::{
    Agent, AgentError, BoxFuture, Decision, JsonError, SideEffect, StepInput, Tool, ToolError,
    ToolResult, ToolSpec, gate::CrashHook, gate::CrashPoint, tool_fn,
};

/// The tool's name.
pub const TOOL: &str = "effect";

/// The arguments of the plan's two calls, in order (canonical form, as
/// the effects file shows them).
pub const CALLS: [&str; 2] = [r#"{"n":1}"#, r#"{"n":2}"#];

/// How long a parked process waits to be killed before it gives up (a
/// safety net against orphans when a test dies without killing it).
const PARK_LIMIT: Duration = Duration::from_secs(600);

/// The plan: `effect {"n":1}`, `effect {"n":2}`, complete.
///
/// Deterministic over the recorded history, so a new process continues
/// the plan: the position is the number of earlier steps that have a
/// recorded decision. A step killed before its decision was recorded
/// (`step.started`, `policy.allowed`) is interrupted without one, so the
/// plan asks for the same call again in the next step; a step whose
/// decision was recorded (it started its tool, or ran it) is never asked
/// for again by the agent: re-running it is the operator's call.
pub struct Plan;

impl Agent for Plan {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        let position = input.steps.iter().filter(|s| s.decision.is_some()).count();
        let next = match CALLS.get(position) {
            Some(args) => Ok(Decision::tool_call(TOOL, *args).with_reason(format!(
                "call {} of {}",
                position + 1,
                CALLS.len()
            ))),
            None if position == CALLS.len() => {
                Ok(Decision::complete(r#"{"calls":2}"#).with_reason("both calls made"))
            }
            None => Err(AgentError::failed(format!(
                "the plan has {} steps; {position} decisions are already recorded",
                CALLS.len() + 1
            ))),
        };
        Box::pin(async move { next })
    }
}

/// Appends `line` to `path` in one write and makes it durable.
fn append_synced(path: &Path, line: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(line)?;
    file.sync_all()
}

/// The `effect` tool of class `class`: each real run appends
/// `<step_id> <args>` to `effects` (fsynced) and counts in `executed`.
pub fn effect_tool(
    class: SideEffect,
    effects: PathBuf,
    executed: Arc<AtomicUsize>,
) -> Result<Arc<dyn Tool>, JsonError> {
    let spec = ToolSpec::new(
        TOOL,
        "Append one line to the effects file",
        class,
    )
    .with_schema_str(
        r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}"#,
    )?;
    Ok(Arc::new(tool_fn(spec, move |call| {
        let effects = effects.clone();
        let executed = Arc::clone(&executed);
        async move {
            let line = format!("{} {}\n", call.step_id, call.args.as_str());
            // A failed write ends the run: the count would be wrong otherwise.
            append_synced(&effects, line.as_bytes())
                .map_err(|e| ToolError::abort(format!("{}: {e}", effects.display())))?;
            executed.fetch_add(1, Ordering::SeqCst);
            Ok(ToolResult::raw(call.args.as_str()).with_summary("appended one line"))
        }
    })))
}

/// Writes `marker` (via a sibling temporary file and a rename, so a reader
/// never sees it half written).
fn write_marker(marker: &Path, point: &str) -> std::io::Result<()> {
    let mut tmp = marker.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(point.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    std::fs::rename(&tmp, marker)
}

/// A hook that parks the `nth` time `target` is reached: it writes the
/// marker, then never returns (the loop stays where a crash would leave
/// it, with its lease heartbeat still running) until the process is killed.
pub fn crash_hook(target: CrashPoint, nth: usize, marker: PathBuf) -> CrashHook {
    let seen = Arc::new(AtomicUsize::new(0));
    Arc::new(move |point: CrashPoint| -> BoxFuture<'static, ()> {
        if point != target || seen.fetch_add(1, Ordering::SeqCst) + 1 != nth {
            return Box::pin(async {});
        }
        if let Err(e) = write_marker(&marker, point.name()) {
            eprintln!(
                "crash-consumer: cannot write the marker {}: {e}",
                marker.display()
            );
            std::process::exit(1);
        }
        eprintln!(
            "crash-consumer: parked at {} (occurrence {nth}); waiting to be killed",
            point.name()
        );
        Box::pin(async {
            tokio::time::sleep(PARK_LIMIT).await;
            eprintln!(
                "crash-consumer: nobody killed this process within {} s",
                PARK_LIMIT.as_secs()
            );
            std::process::exit(1);
        })
    })
}
