//! A loop the runtime does not own, governed by the gate.
//!
//! ```sh
//! cargo run --example foreign_loop
//! ```
//!
//! Your framework keeps its loop; each action it wants to take goes through
//! a gate session: `step` opens the step (limits checked first), `propose`
//! records the decision and asks the policy, `execute` runs an allowed call
//! once and records its outcome. The rows and events are the ones the
//! Driver would write for the same decisions.

use std::sync::Arc;

use agentrt::trace::TextTrace;
use agentrt::{
    Decision, DefaultPolicy, Gate, GateConfig, Limits, SideEffect, Store, Tool, ToolResult,
    ToolSpec, VerdictOutcome, tool_fn,
};

/// Stands in for your framework's planner: what it wants to do next.
fn next_action(index: u64) -> Decision {
    match index {
        0 => Decision::tool_call("weather", r#"{"city":"Lisbon"}"#),
        1 => Decision::tool_call("wipe_disk", r#"{"device":"/dev/sda"}"#),
        _ => Decision::complete(r#"{"answer":"sunny, 24 °C"}"#),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), agentrt::Error> {
    let weather: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("weather", "Current weather of a city", SideEffect::ReadOnly)
            .with_schema_str(r#"{"type":"object","required":["city"]}"#)?,
        |_| async {
            Ok(ToolResult::raw(r#"{"sky":"sunny","celsius":24}"#).with_summary("sunny, 24 °C"))
        },
    ));
    let wipe: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("wipe_disk", "Erase a disk", SideEffect::Destructive),
        |_| async { Ok(ToolResult::raw("{}")) },
    ));
    let store = Store::open(":memory:")?;
    let config = GateConfig::new(store, DefaultPolicy, vec![weather, wipe])
        .with_observer(TextTrace::new(std::io::stderr()));
    let gate = Gate::new(config)?;

    // The foreign loop.
    let mut session = gate
        .begin(None, "what is the weather in Lisbon?", Limits::default())
        .await?;
    while let Some(step) = session.step().await? {
        let verdict = session.propose(next_action(step.index)).await?;
        match verdict.outcome {
            VerdictOutcome::Allowed => {
                let observation = session.execute().await?;
                println!("step {}: ran, {}", step.index, observation.summary);
            }
            VerdictOutcome::Denied => {
                let why = verdict.observation.map(|o| o.summary).unwrap_or_default();
                println!("step {}: refused, {why}", step.index);
            }
            VerdictOutcome::Pending => println!("step {}: waiting for an operator", step.index),
            VerdictOutcome::Ended | VerdictOutcome::Open => {}
        }
    }
    let run = session.run().clone();
    session.close().await?;
    println!("run {}: {}", run.id, run.status);
    Ok(())
}
