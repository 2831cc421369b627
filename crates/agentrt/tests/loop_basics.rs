//! The governed loop: happy path, invalid decisions, denials, limits.

mod common;

use std::sync::Arc;

use agentrt::*;
use common::*;

#[tokio::test]
async fn happy_path_writes_the_exact_event_sequence() {
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let agent = ScriptedAgent::new([
        Decision::tool_call("fs_read", r#"{"path":"a"}"#),
        Decision::complete(r#"{"done":true}"#),
    ]);
    let mut driver = Driver::new(
        config(
            &store,
            DefaultPolicy,
            shared(vec![read.clone()]),
            &clock,
            &rec,
        ),
        agent,
    )
    .unwrap();
    let run = driver
        .start(Some("r1"), "read a", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.reason, Some(TerminalReason::GoalCompleted));
    assert_eq!(run.result.as_ref().unwrap().as_str(), r#"{"done":true}"#);
    assert_eq!(
        rec.types(),
        [
            "run.created",
            "run.started",
            "step.started",
            "step.decided",
            "step.policy",
            "step.tool_started",
            "step.tool_finished",
            "step.started",
            "step.decided",
            "run.finished"
        ]
    );
    // The tool got the driver's run and step ids.
    let seen = read.seen.lock().unwrap().clone();
    let steps = store.list_steps("r1").unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].run_id, "r1");
    assert_eq!(seen[0].step_id, steps[0].id);
    // The store agrees with the observer.
    let stored: Vec<String> = store
        .list_events("r1")
        .unwrap()
        .iter()
        .map(|e| e.event_type.to_string())
        .collect();
    assert_eq!(stored, rec.types());
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].status, StepStatus::Done);
    assert_eq!(steps[1].status, StepStatus::Done);
    let stored_run = store.get_run("r1").unwrap();
    assert_eq!(stored_run, run);
}
