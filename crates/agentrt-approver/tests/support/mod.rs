//! What the approver's tests share: a run paused on a real database for
//! an operator's approval of a remote mutation.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use agentrt::{
    Clock, Decision, DefaultPolicy, Driver, GateConfig, Limits, RunStatus, ScriptedAgent,
    SideEffect, Store, Tool, ToolResult, ToolSpec, tool_fn,
};

/// `push`, a remote mutation: the default policy asks before it runs.
pub fn push_tool() -> Arc<dyn Tool> {
    Arc::new(tool_fn(
        ToolSpec::new("push", "Push to the remote", SideEffect::RemoteMutation),
        |_call| async move { Ok(ToolResult::raw(r#"{"pushed":true}"#).with_summary("pushed")) },
    ))
}

/// Starts run `id` on the database at `db`, its agent pushing `args`, and
/// drives it until it waits for approval: the approval's id and hash.
/// `clock` (the gate's) when given, else the wall clock.
pub async fn pause_on_push(
    db: &Path,
    id: &str,
    args: &str,
    limits: Limits,
    clock: Option<Clock>,
) -> (String, String) {
    let store = Store::open(db).unwrap();
    let mut config = GateConfig::new(store.clone(), DefaultPolicy, vec![push_tool()]);
    if let Some(clock) = clock {
        config = config.with_clock(clock);
    }
    let agent = ScriptedAgent::new(vec![Decision::tool_call("push", args)]);
    let run = Driver::new(config, agent)
        .unwrap()
        .start(Some(id), "push", limits)
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approval = store.list_approvals(id).unwrap().pop().unwrap();
    (approval.id, approval.hash)
}
