//! What a governed step costs in commits (each one fsync at the default
//! durability): an allowed tool call exactly two, a decision that runs no
//! tool exactly one. Counted through the store's public counter.

mod common;

use std::sync::Arc;

use agentrt::*;
use agentrt::{gate::SatelliteRows, gate::Session};
use common::*;

struct Fixture {
    store: Store,
    gate: Gate,
    read: Arc<Counting>,
}

fn fixture() -> Fixture {
    let store = Store::open(":memory:").unwrap();
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let delete = Arc::new(Counting::new("fs_delete", SideEffect::Destructive));
    let gate = Gate::new(config(
        &store,
        DefaultPolicy,
        shared(vec![read.clone(), delete]),
        &stepping_clock(),
        &Recorder::default(),
    ))
    .unwrap();
    Fixture { store, gate, read }
}

#[tokio::test]
async fn an_allowed_tool_call_costs_exactly_two_commits() {
    let f = fixture();
    let mut session = f
        .gate
        .begin(Some("r"), "g", Limits::default())
        .await
        .unwrap();
    assert_eq!(f.store.commits(), 1, "begin: the run and its first step");
    for n in 0..3u64 {
        session.step().await.unwrap().unwrap();
        let before = f.store.commits();
        let verdict = session
            .propose(Decision::tool_call("fs_read", format!(r#"{{"n":{n}}}"#)))
            .await
            .unwrap();
        assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
        assert_eq!(
            f.store.commits(),
            before,
            "an allowed verdict writes nothing yet"
        );
        session.execute().await.unwrap();
        assert_eq!(
            f.store.commits(),
            before + 2,
            "the tool start, then its result with the next step"
        );
    }
    assert_eq!(f.read.count(), 3);
}

#[tokio::test]
async fn a_decision_that_runs_no_tool_costs_exactly_one_commit() {
    let f = fixture();
    let limits = Limits::default().max_consecutive_tool_failures(10);
    let mut session = f.gate.begin(Some("r"), "g", limits).await.unwrap();
    let decisions = [
        // Invalid: an unknown tool.
        Decision::tool_call("no_such_tool", "{}"),
        // Invalid: arguments that are not an object.
        Decision::tool_call("fs_read", "[1]"),
        // Denied by the policy.
        Decision::tool_call("fs_delete", "{}"),
    ];
    for decision in decisions {
        session.step().await.unwrap().unwrap();
        let before = f.store.commits();
        let verdict = session.propose(decision).await.unwrap();
        assert_eq!(verdict.outcome, VerdictOutcome::Denied, "{verdict:?}");
        assert_eq!(f.store.commits(), before + 1);
    }
    // Completing ends the step and the run in one commit.
    session.step().await.unwrap().unwrap();
    let before = f.store.commits();
    let verdict = session.propose(Decision::complete("1")).await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Ended);
    assert_eq!(f.store.commits(), before + 1);
    assert_eq!(f.read.count(), 0);
}

#[tokio::test]
async fn a_driver_run_commits_one_plus_two_per_tool_call_plus_one() {
    let store = Store::open(":memory:").unwrap();
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let mut driver = Driver::new(
        config(
            &store,
            DefaultPolicy,
            shared(vec![read.clone()]),
            &stepping_clock(),
            &Recorder::default(),
        ),
        ScriptedAgent::new([
            Decision::tool_call("fs_read", r#"{"a":1}"#),
            Decision::tool_call("fs_read", r#"{"a":2}"#),
            Decision::complete("1"),
        ]),
    )
    .unwrap();
    let run = driver
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(store.commits(), 1 + 2 * 2 + 1);
}

/// Opens the session's step and proposes a read, which the policy allows.
async fn step_to_an_allowed_read(session: &mut Session) {
    session.step().await.unwrap().unwrap();
    let verdict = session
        .propose(Decision::tool_call("fs_read", r#"{"n":1}"#))
        .await
        .unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
}

#[tokio::test]
async fn a_deferred_run_is_written_with_its_first_tool_start_two_commits_in_all() {
    let f = fixture();
    let rows: SatelliteRows = Box::new(|_| Ok(()));
    let mut session = f
        .gate
        .begin_deferred_with_rows(Some("r"), "g", Limits::default(), Labels::new(), rows)
        .await
        .unwrap();
    assert_eq!(f.store.commits(), 0, "nothing is written at begin");
    assert!(!session.stored());
    assert!(matches!(f.store.get_run("r"), Err(Error::NotFound { .. })));
    step_to_an_allowed_read(&mut session).await;
    assert_eq!(
        f.store.commits(),
        0,
        "an allowed verdict writes nothing yet"
    );
    session.execute().await.unwrap();
    assert_eq!(
        f.store.commits(),
        2,
        "the run with its tool's start, then the result with the next step"
    );
    assert_eq!(f.read.count(), 1);
    assert!(session.stored());
    session.close().await.unwrap();
    let types: Vec<EventType> = f
        .store
        .list_events("r")
        .unwrap()
        .iter()
        .map(|e| e.event_type.clone())
        .collect();
    assert_eq!(
        &types[..6],
        [
            EventType::RunCreated,
            EventType::RunStarted,
            EventType::StepStarted,
            EventType::StepDecided,
            EventType::StepPolicy,
            EventType::StepToolStarted,
        ]
    );
    let report = verify::verify(&f.store, &verify::VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}

#[tokio::test]
async fn a_deferred_run_whose_first_write_is_refused_writes_nothing_and_runs_nothing() {
    let f = fixture();
    let refused: SatelliteRows = Box::new(|_| {
        Err(Error::InvalidInput {
            what: "satellite",
            detail: "refused".into(),
        })
    });
    let mut session = f
        .gate
        .begin_deferred_with_rows(Some("r"), "g", Limits::default(), Labels::new(), refused)
        .await
        .unwrap();
    step_to_an_allowed_read(&mut session).await;
    let e = session.execute().await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidInput {
                what: "satellite",
                ..
            }
        ),
        "the satellite's own error: {e:?}"
    );
    assert_eq!(f.read.count(), 0, "the tool never ran");
    assert!(!session.stored());
    assert_eq!(f.store.commits(), 0);
    assert!(matches!(f.store.get_run("r"), Err(Error::NotFound { .. })));
    assert!(matches!(
        session.step().await,
        Err(Error::SessionClosed { .. })
    ));
}
