//! The README's first command: the demo stops at its approval, prints the
//! command that approves it, and on resume runs the approved call once.

#[path = "../scripted/demo.rs"]
#[allow(dead_code)]
mod demo;

use std::sync::Arc;

use agentrt::{
    DecideOptions, EventType, Operator, RunStatus, Store, model::ObservationKind, model::StepStatus,
};

#[tokio::test]
async fn the_demo_pauses_prints_the_approve_command_and_resumes_to_completion() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let options = demo::Options {
        db: db.clone(),
        resume: None,
    };
    let mut out = Vec::new();
    let first = demo::run(&options, &mut out, Arc::new(|_: &agentrt::Event| {}))
        .await
        .unwrap();
    assert_eq!(first.run.status, RunStatus::WaitingForApproval);
    let approval = first.approval.clone().unwrap();
    let text = String::from_utf8(out).unwrap();
    let absolute = std::path::absolute(&db).unwrap().display().to_string();
    let command = format!(
        "cargo run -p agentrt-cli -- --db {absolute:?} approve {} --approval {approval} --by {:?}\n",
        first.run.id,
        demo::operator_name()
    );
    assert!(text.contains(&command), "{text}");
    assert!(text.contains(&format!(
        "cargo run --example scripted -- --db {absolute:?} --resume {}",
        first.run.id
    )));

    // The operator approves (what the printed command does), then the demo resumes.
    let store = Store::open_existing(&db, false).unwrap();
    Operator::new(store.clone())
        .approve(
            &first.run.id,
            &approval,
            &DecideOptions {
                by: "test",
                note: "",
                shown_hash: None,
            },
        )
        .unwrap();
    let options = demo::Options {
        db: db.clone(),
        resume: Some(first.run.id.clone()),
    };
    let mut out = Vec::new();
    let second = demo::run(&options, &mut out, Arc::new(|_: &agentrt::Event| {}))
        .await
        .unwrap();
    assert_eq!(second.run.status, RunStatus::Completed);
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("step.tool_finished"),
        "the trace is printed: {text}"
    );

    // Denied, invalid, approved and executed steps are all on record.
    let steps = store.list_steps(&first.run.id).unwrap();
    let kinds: Vec<_> = steps
        .iter()
        .map(|s| s.observation.as_ref().map(|o| o.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            Some(ObservationKind::ToolResult),
            Some(ObservationKind::InvalidDecision),
            Some(ObservationKind::PolicyDenied),
            Some(ObservationKind::ToolResult),
            None
        ]
    );
    assert!(
        steps
            .iter()
            .all(|s| s.status == StepStatus::Done || s.status == StepStatus::Failed)
    );
    let events = store.list_events(&first.run.id).unwrap();
    let started: Vec<_> = events
        .iter()
        .filter(|e| e.event_type == EventType::StepToolStarted)
        .collect();
    assert_eq!(started.len(), 2);
    assert!(started[1].payload.contains(&approval));
}
