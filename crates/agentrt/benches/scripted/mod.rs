//! The scripted run the benchmarks share: an agent that calls `echo` a
//! given number of times and completes, and the `echo` tool.

// Each benchmark uses the part it needs.
#![allow(dead_code)]

use std::sync::Arc;

use agentrt::{
    Agent, AgentError, BoxFuture, Decision, DefaultPolicy, Driver, GateConfig, Limits, RunStatus,
    SideEffect, StepInput, Store, Tool, ToolResult, ToolSpec, tool_fn,
};

/// Calls `echo` `steps - 1` times with distinct arguments, then completes.
pub struct Counter {
    pub steps: u64,
}

impl Agent for Counter {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        let i = input.run.step_count;
        let d = if i >= self.steps {
            Decision::complete("true")
        } else {
            Decision::tool_call("echo", format!(r#"{{"i":{i}}}"#))
        };
        Box::pin(async move { Ok(d) })
    }
}

/// Echoes its arguments, padded to about `result_bytes` when not 0.
pub fn echo(result_bytes: usize) -> Arc<dyn Tool> {
    let pad = "x".repeat(result_bytes);
    Arc::new(tool_fn(
        ToolSpec::new("echo", "echo", SideEffect::ReadOnly),
        move |call| {
            let body = if pad.is_empty() {
                call.args.as_str().to_owned()
            } else {
                format!(r#"{{"args":{},"pad":"{pad}"}}"#, call.args)
            };
            async move { Ok(ToolResult::raw(body).with_summary("echoed")) }
        },
    ))
}

/// One whole run of `steps` steps on `store`, with the gate's defaults.
pub async fn one_run(store: &Store, steps: u64, result_bytes: usize) {
    let config = GateConfig::new(store.clone(), DefaultPolicy, vec![echo(result_bytes)]);
    let mut driver = Driver::new(config, Counter { steps }).expect("driver");
    let run = driver
        .start(None, "bench", Limits::default().max_steps(steps + 10))
        .await
        .expect("run");
    assert_eq!(run.status, RunStatus::Completed);
}
