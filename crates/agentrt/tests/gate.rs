//! The Gate: loops written outside the runtime leave the same records as
//! the Driver, misuse is refused without change, and inputs are copies.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::*;
use agentrt::{ids::sequential_ids, model::Origin, model::Step, model::StepStatus};
use common::*;

fn plan() -> Vec<Decision> {
    vec![
        Decision::tool_call("read", r#"{"n":1}"#).with_origin(Origin::Plan),
        Decision::tool_call("nope", "{}"),
        Decision::tool_call("rm", "{}"),
        Decision::tool_call("read", r#"{"n":2}"#),
        Decision::complete("\"done\""),
    ]
}

fn tools() -> Vec<Arc<dyn Tool>> {
    shared(vec![
        Arc::new(Counting::new("read", SideEffect::ReadOnly)),
        Arc::new(Counting::new("rm", SideEffect::Destructive)),
    ])
}

/// An event's fields: seq, step, time, type, payload.
type EventFields = (i64, String, String, String, String);

/// Everything a run wrote, with the lease columns left out (each gate has
/// its own owner name).
fn records(store: &Store) -> (Run, Vec<Step>, Vec<EventFields>) {
    let run = store.get_run("r").unwrap();
    let steps = store.list_steps("r").unwrap();
    let events = store
        .list_events("r")
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.step_id, e.at, e.event_type.to_string(), e.payload))
        .collect();
    (run, steps, events)
}

#[tokio::test]
async fn a_gate_loop_leaves_the_drivers_exact_rows_events_and_clock_readings() {
    // The Driver.
    let driven = Store::open(":memory:").unwrap();
    let clock_a = stepping_clock();
    let mut d = Driver::new(
        config(
            &driven,
            DefaultPolicy,
            tools(),
            &clock_a,
            &Recorder::default(),
        ),
        ScriptedAgent::new(plan()),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();

    // A foreign loop over the gate, with the same decisions.
    let gated = Store::open(":memory:").unwrap();
    let clock_b = stepping_clock();
    let gate = Gate::new(config(
        &gated,
        DefaultPolicy,
        tools(),
        &clock_b,
        &Recorder::default(),
    ))
    .unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    let mut decisions = plan().into_iter();
    while session.step().await.unwrap().is_some() {
        let verdict = session.propose(decisions.next().unwrap()).await.unwrap();
        if verdict.outcome == VerdictOutcome::Allowed {
            session.execute().await.unwrap();
        }
    }
    session.close().await.unwrap();

    assert_eq!(records(&driven), records(&gated));
    assert_eq!(clock_a.readings(), clock_b.readings());
    let decided = &records(&gated).1[0].decision.clone().unwrap();
    assert_eq!(decided.origin, "plan", "the origin is recorded");
}

#[tokio::test]
async fn gate_misuse_is_refused_without_change() {
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let gate = Gate::new(config(
        &store,
        DefaultPolicy,
        tools(),
        &clock,
        &Recorder::default(),
    ))
    .unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    let count = |s: &Store| s.list_events("r").unwrap().len();

    // Propose before step, execute before any verdict.
    let before = count(&store);
    assert!(
        session
            .propose(Decision::complete("1"))
            .await
            .unwrap_err()
            .is_run_state()
    );
    assert!(session.execute().await.unwrap_err().is_run_state());
    session.step().await.unwrap().unwrap();
    // A second step while one is open.
    assert!(session.step().await.unwrap_err().is_run_state());
    assert_eq!(count(&store), before);
    // A second decision after an allowed one; execute twice.
    assert_eq!(
        session
            .propose(Decision::tool_call("read", "{}"))
            .await
            .unwrap()
            .outcome,
        VerdictOutcome::Allowed
    );
    assert!(
        session
            .propose(Decision::tool_call("read", "{}"))
            .await
            .unwrap_err()
            .is_run_state()
    );
    session.execute().await.unwrap();
    let after_one = count(&store);
    assert!(session.execute().await.unwrap_err().is_run_state());
    assert_eq!(count(&store), after_one);
    // After the run ends, every call but step is refused; step says None.
    session.step().await.unwrap().unwrap();
    session.propose(Decision::complete("1")).await.unwrap();
    assert!(session.done());
    assert!(session.step().await.unwrap().is_none());
    assert!(
        session
            .propose(Decision::complete("1"))
            .await
            .unwrap_err()
            .is_run_state()
    );
    // After close, calls say the session is closed.
    session.close().await.unwrap();
    assert!(matches!(
        session.step().await.unwrap_err(),
        Error::SessionClosed { .. }
    ));
    session.close().await.unwrap();
}

#[tokio::test]
async fn a_closed_session_frees_the_run_at_once_and_leaves_no_task() {
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let config = |owner: &str| {
        GateConfig::new(store.clone(), DefaultPolicy, tools())
            .with_clock(clock.clock())
            .with_ids(sequential_ids(&format!("{owner}-")))
            .with_lease_ttl(Duration::from_secs(3600))
            .with_lease_owner(owner)
    };
    let first = Gate::new(config("first")).unwrap();
    let mut session = first
        .begin(Some("r"), "g", Limits::default())
        .await
        .unwrap();
    assert!(session.heartbeat_running());
    // A second session on the same run in the same gate is refused.
    assert!(matches!(
        first.attach("r").await.unwrap_err(),
        Error::RunLeased { .. }
    ));
    session.close().await.unwrap();
    assert!(!session.heartbeat_running());
    // With a one-hour TTL, another gate may attach right away: close released the lease.
    let second = Gate::new(config("second")).unwrap();
    let (mut again, verdict) = second.attach("r").await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Open);
    // Close left the open step as a crash would: the takeover marked it interrupted.
    assert_eq!(
        store.list_steps("r").unwrap()[0].status,
        StepStatus::Interrupted
    );
    again.close().await.unwrap();
}

#[tokio::test]
async fn abandoning_after_an_allowed_verdict_never_runs_the_request() {
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let read = Arc::new(Counting::new("read", SideEffect::ReadOnly));
    let config = |owner: &str| {
        GateConfig::new(store.clone(), DefaultPolicy, shared(vec![read.clone()]))
            .with_clock(clock.clock())
            .with_ids(sequential_ids(&format!("{owner}-")))
            .with_lease_owner(owner)
    };
    let gate = Gate::new(config("first")).unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    session.step().await.unwrap();
    assert_eq!(
        session
            .propose(Decision::tool_call("read", "{}"))
            .await
            .unwrap()
            .outcome,
        VerdictOutcome::Allowed
    );
    session.close().await.unwrap();
    let second = Gate::new(config("second")).unwrap();
    let (mut resumed, _) = second.attach("r").await.unwrap();
    let step = store.list_steps("r").unwrap()[0].clone();
    assert_eq!(
        step.status,
        StepStatus::Interrupted,
        "still deciding when abandoned, so interrupted"
    );
    resumed.close().await.unwrap();
    assert_eq!(read.count(), 0, "never runs");
}

/// A policy that keeps the views it is handed.
#[derive(Clone, Default)]
struct Keeping(Arc<Mutex<Vec<RunView>>>);

impl Policy for Keeping {
    fn evaluate(
        &self,
        req: &ToolRequest,
        view: &RunView,
    ) -> std::result::Result<PolicyDecision, PolicyError> {
        self.0.lock().unwrap().push(view.clone());
        DefaultPolicy.evaluate(req, view)
    }
}

#[tokio::test]
async fn session_input_is_the_agents_input_an_isolated_copy_and_reads_no_clock() {
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let policy = Keeping::default();
    let gate = Gate::new(config(
        &store,
        policy.clone(),
        tools(),
        &clock,
        &Recorder::default(),
    ))
    .unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    session.step().await.unwrap();
    session
        .propose(Decision::tool_call("read", r#"{"n":1}"#))
        .await
        .unwrap();
    session.execute().await.unwrap();
    session.step().await.unwrap();
    let readings = clock.readings();
    let mut input = session.input();
    assert_eq!(clock.readings(), readings, "input reads no clock");
    assert_eq!(input.steps.len(), 1);
    assert_eq!(input.run.step_count, 2);
    // Changing the copy changes nothing the session or the policy holds.
    input.run.goal = "changed".into();
    Arc::make_mut(&mut input.steps).clear();
    assert_eq!(session.input().run.goal, "g");
    assert_eq!(session.input().steps.len(), 1);
    session
        .propose(Decision::tool_call("read", r#"{"n":2}"#))
        .await
        .unwrap();
    let views = policy.0.lock().unwrap().clone();
    assert_eq!(views[1].steps.len(), 1);
    assert_eq!(views[1].run.goal, "g");
    // The Driver hands its agent exactly what Session::input gives.
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let mut d = Driver::new(
        config(&store, DefaultPolicy, tools(), &clock, &Recorder::default()),
        ScriptedAgent::new([
            Decision::tool_call("read", r#"{"n":1}"#),
            Decision::complete("1"),
        ])
        .recording_inputs(),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let agent_input = d.agent().inputs()[1].clone();
    assert_eq!(agent_input.steps.len(), 1);
    assert_eq!(agent_input.run.step_count, 2);
    assert_eq!(agent_input.steps[0].status, StepStatus::Done);
}

#[tokio::test]
async fn bad_input_is_a_typed_error_with_nothing_written() {
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    let gate = Gate::new(config(
        &store,
        DefaultPolicy,
        shared(vec![push]),
        &clock,
        &Recorder::default(),
    ))
    .unwrap();
    // A run id that does not exist.
    assert!(matches!(
        gate.attach("ghost").await.unwrap_err(),
        Error::NotFound { what: "run", .. }
    ));
    // Two runs waiting for approval.
    for id in ["a", "b"] {
        let mut s = gate.begin(Some(id), "g", Limits::default()).await.unwrap();
        s.step().await.unwrap();
        assert_eq!(
            s.propose(Decision::tool_call("push", "{}"))
                .await
                .unwrap()
                .outcome,
            VerdictOutcome::Pending
        );
    }
    let total = |s: &Store| s.list_events("a").unwrap().len() + s.list_events("b").unwrap().len();
    let before = total(&store);
    // An approval of another run.
    let of_b = store.list_approvals("b").unwrap()[0].id.clone();
    let err = Operator::new(store.clone())
        .approve("a", &of_b, &DecideOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotFound {
                what: "approval",
                ..
            }
        ),
        "{err:?}"
    );
    // A run already finished.
    Operator::new(store.clone()).cancel("a", "ops", "").unwrap();
    let after_cancel = total(&store);
    assert!(gate.attach("a").await.unwrap_err().is_run_state());
    assert_eq!(total(&store), after_cancel);
    assert_eq!(
        after_cancel,
        before + 1,
        "only the cancel wrote (run.finished)"
    );
}

/// Answers by the tool's name: `rm` denied, `push` paused, `broken` an error.
struct Judge;

impl Policy for Judge {
    fn evaluate(
        &self,
        req: &ToolRequest,
        view: &RunView,
    ) -> std::result::Result<PolicyDecision, PolicyError> {
        match req.spec.name.as_str() {
            "broken" => Err(PolicyError::new("broken")),
            _ => DefaultPolicy.evaluate(req, view),
        }
    }
}

#[tokio::test]
async fn a_decision_proposed_after_an_operator_cancel_writes_nothing_and_reports_the_cancelled_run()
{
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    let rm = Arc::new(Counting::new("rm", SideEffect::Destructive));
    let broken = Arc::new(Counting::new("broken", SideEffect::ReadOnly));
    // A lease of an hour: no heartbeat notices the cancel during the test.
    let gate = Gate::new(
        config(
            &store,
            Judge,
            shared(vec![push.clone(), rm.clone(), broken.clone()]),
            &clock,
            &Recorder::default(),
        )
        .with_lease_ttl(Duration::from_secs(3600)),
    )
    .unwrap();
    let cases = [
        ("complete", Decision::complete("1")),
        ("fail", Decision::fail("gave up")),
        ("invalid", Decision::tool_call("nope", "{}")),
        ("denied", Decision::tool_call("rm", "{}")),
        ("policy-error", Decision::tool_call("broken", "{}")),
        ("paused", Decision::tool_call("push", "{}")),
    ];
    for (run, decision) in cases {
        let mut session = gate.begin(Some(run), "g", Limits::default()).await.unwrap();
        session.step().await.unwrap().unwrap();
        // The operator cancels while the agent decides.
        Operator::new(store.clone())
            .cancel(run, "ops", "stop")
            .unwrap();
        let events = store.list_events(run).unwrap().len();
        let verdict = session.propose(decision).await.unwrap();
        assert_eq!(verdict.outcome, VerdictOutcome::Ended, "{run}");
        assert_eq!(
            (verdict.run.status, verdict.run.reason),
            (
                RunStatus::Cancelled,
                Some(TerminalReason::OperatorCancelled)
            ),
            "{run}"
        );
        assert_eq!(session.run().status, RunStatus::Cancelled, "{run}");
        assert!(session.done(), "{run}");
        assert_eq!(store.list_events(run).unwrap().len(), events, "{run}");
        let step = store.list_steps(run).unwrap().remove(0);
        assert_eq!(step.status, StepStatus::Failed, "{run}");
        assert!(
            step.decision.is_none(),
            "{run}: the decision is not recorded"
        );
        assert!(store.list_approvals(run).unwrap().is_empty(), "{run}");
        session.close().await.unwrap();
    }
    assert_eq!(push.count() + rm.count() + broken.count(), 0);
}

/// A caller that drops a call's future while its write is in flight (a
/// timeout around `execute`) may leave a commit the session never applied:
/// the session refuses every later call rather than act on a stale view,
/// and the run is left as a crash would leave it, for the next attach.
#[tokio::test]
async fn a_session_whose_call_was_dropped_mid_write_refuses_further_calls() {
    let store = Store::open(":memory:").unwrap();
    let read = Arc::new(Counting::new("read", SideEffect::ReadOnly));
    let gate = Gate::new(config(
        &store,
        DefaultPolicy,
        shared(vec![read.clone()]),
        &stepping_clock(),
        &Recorder::default(),
    ))
    .unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    session.step().await.unwrap().unwrap();
    let verdict = session
        .propose(Decision::tool_call("read", "{}"))
        .await
        .unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
    // Polled once: the tool-start write is submitted (a commit takes far
    // longer than the rest of that poll), then the future is dropped.
    {
        let mut call = Box::pin(session.execute());
        let first =
            std::future::poll_fn(|cx| std::task::Poll::Ready(call.as_mut().poll(cx).is_pending()))
                .await;
        assert!(first, "the call was still waiting for its write");
    }
    let refused = session.step().await.unwrap_err();
    assert!(
        matches!(&refused, Error::SessionClosed { cause: Some(c) } if c.contains("dropped")),
        "{refused:?}"
    );
    assert!(session.execute().await.is_err());
    assert_eq!(read.count(), 0, "the tool never ran");
    // The write still commits on its own: the step is executing, as after
    // a crash between the start and the tool.
    let step = store.list_steps("r").unwrap().pop().unwrap();
    for _ in 0..100 {
        if store.list_steps("r").unwrap().pop().unwrap().status == StepStatus::Executing {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let now = store.list_steps("r").unwrap().pop().unwrap();
    assert_eq!(now.id, step.id);
    assert_eq!(now.status, StepStatus::Executing);
}
