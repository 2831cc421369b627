//! The interruption contract and the run lease: a crashed step is never
//! re-executed by the runtime on its own.

use crate::engine;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;
use agentrt::*;
use agentrt::{
    clock::ManualClock, gate::Session, ids::sequential_ids, model::INTERRUPTED_SIDE_EFFECT,
    model::ObservationKind, model::Step, model::StepStatus, reconcile::Reconcile,
    reconcile::ReconcileError, reconcile::ReconcileInput, reconcile::Reconciled,
};

pub(crate) const TTL: Duration = Duration::from_millis(300);

thread_local! {
    /// The clock this test's leases are measured by. Each test runs on a
    /// thread of its own (its body too, under `#[tokio::test]`), so each has
    /// its own clock; a lease expires when the test moves it, not after a
    /// wait a loaded machine could stretch.
    static LEASES: ManualClock = ManualClock::new(Timestamp::now());
}

pub(crate) fn leases() -> ManualClock {
    LEASES.with(ManualClock::clone)
}

/// Waits until `reached` holds (checked every few milliseconds); fails the
/// test if it never does.
async fn until(what: &str, reached: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !reached() {
        assert!(
            std::time::Instant::now() < deadline,
            "never reached: {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A tool that counts calls; the first call hangs forever (the process
/// "dies" while it runs), later calls return at once.
fn hanging_once(name: &str, class: SideEffect, calls: Arc<AtomicUsize>) -> Arc<dyn Tool> {
    Arc::new(tool_fn(ToolSpec::new(name, "", class), move |call| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                std::future::pending::<()>().await;
            }
            Ok(ToolResult::raw(call.args.as_str()))
        }
    }))
}

pub(crate) fn gate_config(
    store: &Store,
    tools: Vec<Arc<dyn Tool>>,
    rec: &Recorder,
    owner: &str,
    ids: &str,
) -> GateConfig {
    GateConfig::new(store.clone(), DefaultPolicy, tools)
        .with_ids(sequential_ids(ids))
        .with_observer(rec.clone())
        .with_lease_ttl(TTL)
        .with_lease_clock(leases().clock())
        .with_lease_owner(owner)
}

/// A tool that tells when it was called, then does what `inner` does.
struct Entered {
    inner: Arc<dyn Tool>,
    entered: Arc<AtomicUsize>,
}

impl Tool for Entered {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }
    fn call(&self, call: ToolCall) -> BoxFuture<'_, std::result::Result<ToolResult, ToolError>> {
        let running = self.inner.call(call);
        self.entered.fetch_add(1, Ordering::SeqCst);
        running
    }
}

/// Starts a run whose first decision is `first`, and "crashes" while it is
/// in flight (the driver's task is dropped) once its tool, or its agent,
/// is running.
async fn crash_during(
    store: &Store,
    tools: Vec<Arc<dyn Tool>>,
    first: Decision,
    hang_in_agent: bool,
) {
    let rec = Recorder::default();
    let entered = Arc::new(AtomicUsize::new(0));
    let tools = tools
        .into_iter()
        .map(|inner| {
            Arc::new(Entered {
                inner,
                entered: entered.clone(),
            }) as Arc<dyn Tool>
        })
        .collect();
    let config = gate_config(store, tools, &rec, "first", "a-");
    struct Hang(Arc<AtomicUsize>);
    impl Agent for Hang {
        fn decide<'a>(
            &'a mut self,
            _: &'a StepInput,
        ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::pending())
        }
    }
    let task = if hang_in_agent {
        let mut driver = Driver::new(config, Hang(entered.clone())).unwrap();
        tokio::spawn(async move {
            driver
                .start(Some("r"), "g", Limits::default())
                .await
                .map(|_| ())
        })
    } else {
        let mut driver = Driver::new(config, ScriptedAgent::new([first])).unwrap();
        tokio::spawn(async move {
            driver
                .start(Some("r"), "g", Limits::default())
                .await
                .map(|_| ())
        })
    };
    until("the tool or the agent runs", || {
        entered.load(Ordering::SeqCst) > 0
    })
    .await;
    task.abort();
    let _ = task.await;
}

/// Lets every lease taken so far lapse: moves this test's lease clock past
/// them, and on an engine that judges leases by a clock of its own, waits
/// them out.
pub(crate) async fn after_expiry() {
    engine::let_leases_lapse(&leases(), TTL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_side_effect_pauses_and_runs_again_only_once_approved() {
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = hanging_once("write", SideEffect::LocalMutation, calls.clone());
    crash_during(
        &store,
        vec![tool.clone()],
        Decision::tool_call("write", r#"{"n":1}"#),
        false,
    )
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        store.list_steps("r").unwrap()[0].status,
        StepStatus::Executing
    );

    // A live lease is refused, with its owner and expiry, and nothing changes.
    let rec = Recorder::default();
    let second = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "second", "b-"),
        ScriptedAgent::new([]),
    );
    let mut second = second.unwrap();
    let before = store.list_events("r").unwrap().len();
    match second.resume("r").await.unwrap_err() {
        Error::RunLeased {
            owner, expires_at, ..
        } => {
            assert!(owner.starts_with("first/"));
            assert!(!expires_at.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.list_events("r").unwrap().len(), before);

    after_expiry().await;
    let run = second.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approval = store.list_approvals("r").unwrap().pop().unwrap();
    assert_eq!(approval.kind, INTERRUPTED_SIDE_EFFECT);
    assert!(
        approval
            .presentation
            .as_str()
            .contains("outcome is unknown")
    );
    let types = rec.types();
    assert_eq!(
        types,
        [
            "lease.taken_over",
            "step.interrupted",
            "step.policy",
            "approval.requested"
        ]
    );
    let policy = rec.events()[2].payload.clone();
    assert!(
        !policy.contains("\"view\"") && !policy.contains("policy_id"),
        "a non-policy pause: {policy}"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "nothing ran again on its own"
    );

    // Approving re-runs exactly that step once.
    Operator::new(store.clone())
        .approve("r", &approval.id, &DecideOptions::default())
        .unwrap();
    let mut third = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "third", "c-"),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    let run = third.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let steps = store.list_steps("r").unwrap();
    assert_eq!(steps[0].status, StepStatus::Done);
    assert_eq!(steps.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejecting_an_interrupted_side_effect_ends_the_run_without_running_it() {
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = hanging_once("push", SideEffect::RemoteMutation, calls.clone());
    // A remote mutation needs approval first: approve it, crash during the approved call.
    let rec = Recorder::default();
    let mut d = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "first", "a-"),
        ScriptedAgent::new([Decision::tool_call("push", "{}")]),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let approval = store.list_approvals("r").unwrap()[0].clone();
    Operator::new(store.clone())
        .approve("r", &approval.id, &DecideOptions::default())
        .unwrap();
    let task = tokio::spawn(async move { d.resume("r").await.map(|_| ()) });
    until("the approved call runs", || {
        calls.load(Ordering::SeqCst) == 1
    })
    .await;
    task.abort();
    let _ = task.await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    after_expiry().await;
    let mut second = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "second", "b-"),
        ScriptedAgent::new([]),
    )
    .unwrap();
    assert_eq!(
        second.resume("r").await.unwrap().status,
        RunStatus::WaitingForApproval
    );
    let interrupted = store.list_approvals("r").unwrap().pop().unwrap();
    assert_eq!(interrupted.kind, INTERRUPTED_SIDE_EFFECT);
    Operator::new(store.clone())
        .reject("r", &interrupted.id, &DecideOptions::default())
        .unwrap();
    assert!(second.resume("r").await.unwrap_err().is_run_state());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        store.get_run("r").unwrap().reason,
        Some(TerminalReason::ApprovalRejected)
    );

    // Approving instead re-runs it once: the policy's remote approval of the same
    // request was granted before, so the re-run needs no third decision.
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = hanging_once("push", SideEffect::RemoteMutation, calls.clone());
    let mut d = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "first", "a-"),
        ScriptedAgent::new([Decision::tool_call("push", "{}")]),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let approval = store.list_approvals("r").unwrap()[0].clone();
    Operator::new(store.clone())
        .approve("r", &approval.id, &DecideOptions::default())
        .unwrap();
    let task = tokio::spawn(async move { d.resume("r").await.map(|_| ()) });
    until("the approved call runs", || {
        calls.load(Ordering::SeqCst) == 1
    })
    .await;
    task.abort();
    let _ = task.await;
    after_expiry().await;
    let mut second = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "second", "b-"),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    second.resume("r").await.unwrap();
    let interrupted = store.list_approvals("r").unwrap().pop().unwrap();
    Operator::new(store.clone())
        .approve("r", &interrupted.id, &DecideOptions::default())
        .unwrap();
    assert_eq!(
        second.resume("r").await.unwrap().status,
        RunStatus::Completed
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// An edited call cut short by a crash: the takeover pauses it with the
/// edited arguments, and approving runs the edited call again, once, with
/// no further approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_call_cut_short_waits_and_runs_again_with_the_edited_arguments() {
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (counted, recorded) = (calls.clone(), seen.clone());
    let tool: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("push", "", SideEffect::RemoteMutation),
        move |call| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            recorded.lock().unwrap().push(call.args.as_str().to_owned());
            async move {
                if n == 0 {
                    std::future::pending::<()>().await;
                }
                Ok(ToolResult::raw(call.args.as_str()))
            }
        },
    ));
    let rec = Recorder::default();
    let mut d = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "first", "a-"),
        ScriptedAgent::new([Decision::tool_call("push", r#"{"ref":"main"}"#)]),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let approval = store.list_approvals("r").unwrap()[0].clone();
    Operator::new(store.clone())
        .approve_edited(
            "r",
            &approval.id,
            r#"{"ref":"docs"}"#,
            &DecideOptions::default(),
        )
        .unwrap();
    let task = tokio::spawn(async move { d.resume("r").await.map(|_| ()) });
    until("the edited call runs", || calls.load(Ordering::SeqCst) == 1).await;
    task.abort();
    let _ = task.await;
    after_expiry().await;
    let mut second = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "second", "b-"),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    assert_eq!(
        second.resume("r").await.unwrap().status,
        RunStatus::WaitingForApproval
    );
    let interrupted = store.list_approvals("r").unwrap().pop().unwrap();
    assert_eq!(interrupted.kind, INTERRUPTED_SIDE_EFFECT);
    assert_eq!(
        interrupted.request.get("args").unwrap().as_str(),
        r#"{"ref":"docs"}"#,
        "the call that was cut short is the edited one"
    );
    Operator::new(store.clone())
        .approve("r", &interrupted.id, &DecideOptions::default())
        .unwrap();
    assert_eq!(
        second.resume("r").await.unwrap().status,
        RunStatus::Completed
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [r#"{"ref":"docs"}"#, r#"{"ref":"docs"}"#]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_read_only_and_deciding_steps_continue() {
    for (class, in_agent) in [
        (SideEffect::ReadOnly, false),
        (SideEffect::LocalMutation, true),
    ] {
        let store = engine::store();
        let calls = Arc::new(AtomicUsize::new(0));
        let tool = hanging_once("t", class, calls.clone());
        crash_during(
            &store,
            vec![tool.clone()],
            Decision::tool_call("t", "{}"),
            in_agent,
        )
        .await;
        after_expiry().await;
        let rec = Recorder::default();
        let mut d = Driver::new(
            gate_config(&store, vec![tool], &rec, "second", "b-"),
            ScriptedAgent::new([Decision::complete("1")]),
        )
        .unwrap();
        let run = d.resume("r").await.unwrap();
        assert_eq!(run.status, RunStatus::Completed, "{class:?}");
        let steps = store.list_steps("r").unwrap();
        assert_eq!(steps[0].status, StepStatus::Interrupted);
        let o = steps[0].observation.as_ref().unwrap();
        let was = if in_agent { "deciding" } else { "executing" };
        assert_eq!(o.summary, format!("step interrupted while {was}"));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            if in_agent { 0 } else { 1 },
            "never run again by the runtime"
        );
        assert_eq!(&rec.types()[..2], ["lease.taken_over", "step.interrupted"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_tool_or_failing_arguments_end_the_run_reconcile_conflict() {
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = hanging_once("w", SideEffect::LocalMutation, calls.clone());
    crash_during(
        &store,
        vec![tool],
        Decision::tool_call("w", r#"{"n":1}"#),
        false,
    )
    .await;
    after_expiry().await;
    let rec = Recorder::default();
    let mut d = Driver::new(
        gate_config(&store, vec![], &rec, "second", "b-"),
        ScriptedAgent::new([]),
    )
    .unwrap();
    let run = d.resume("r").await.unwrap();
    assert_eq!(
        (run.status, run.reason),
        (RunStatus::Failed, Some(TerminalReason::ReconcileConflict))
    );

    let store = engine::store();
    let tool = hanging_once(
        "w",
        SideEffect::LocalMutation,
        Arc::new(AtomicUsize::new(0)),
    );
    crash_during(
        &store,
        vec![tool],
        Decision::tool_call("w", r#"{"n":1}"#),
        false,
    )
    .await;
    after_expiry().await;
    let strict: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("w", "", SideEffect::LocalMutation)
            .with_schema_str(r#"{"type":"object","required":["m"]}"#)
            .unwrap(),
        |_| async { Ok(ToolResult::raw("1")) },
    ));
    let mut d = Driver::new(
        gate_config(&store, vec![strict], &rec, "second", "b-"),
        ScriptedAgent::new([]),
    )
    .unwrap();
    let run = d.resume("r").await.unwrap();
    assert_eq!(run.reason, Some(TerminalReason::ReconcileConflict));
    assert!(
        run.reason_detail.contains("schema"),
        "{}",
        run.reason_detail
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_sustains_a_call_several_ttls_long_and_stops_with_the_session() {
    // On SQLite in memory the heartbeat shares the connection; a file
    // store gives it a connection of its own.
    let db = engine::Db::new();
    heartbeat_case(engine::store()).await;
    heartbeat_case(db.open()).await;
}

async fn heartbeat_case(store: Store) {
    let rec = Recorder::default();
    // A call that lasts two TTLs of the lease clock: the clock moves half a
    // TTL at a time, and each time the heartbeat must renew the lease
    // before it moves on. Without renewals the lease would lapse mid-call.
    let watched = store.clone();
    // Captured here: the tool runs on a worker thread.
    let leases = leases();
    let slow: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("slow", "", SideEffect::ReadOnly),
        move |_| {
            let store = watched.clone();
            let clock = leases.clone();
            async move {
                for _ in 0..4 {
                    clock.advance(TTL / 2);
                    let due = clock.peek().add(TTL / 2).to_string();
                    until("the heartbeat renews the lease", || {
                        store.lease("r").unwrap().1 > due
                    })
                    .await;
                }
                Ok(ToolResult::raw("1"))
            }
        },
    ));
    let gate = Gate::new(gate_config(&store, vec![slow], &rec, "only", "a-")).unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    assert!(session.heartbeat_running());
    session.step().await.unwrap().unwrap();
    assert_eq!(
        session
            .propose(Decision::tool_call("slow", "{}"))
            .await
            .unwrap()
            .outcome,
        VerdictOutcome::Allowed
    );
    let observed = session.execute().await.unwrap();
    assert_eq!(observed.kind, ObservationKind::ToolResult, "{observed:?}");
    // Still held after two TTLs: the next decision is accepted.
    session.step().await.unwrap().unwrap();
    assert_eq!(
        session
            .propose(Decision::complete("1"))
            .await
            .unwrap()
            .outcome,
        VerdictOutcome::Ended
    );
    assert!(
        !session.heartbeat_running(),
        "a finished run's heartbeat stops"
    );
    session.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_stops_the_session_before_the_next_tool() {
    let store = engine::store();
    let rec = Recorder::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let t: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("t", "", SideEffect::ReadOnly),
        move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolResult::raw("1")) }
        },
    ));
    let gate = Gate::new(gate_config(&store, vec![t.clone()], &rec, "one", "a-")).unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    session.step().await.unwrap().unwrap();
    // Another owner takes the run (as a takeover after an expiry would).
    let other = Gate::new(gate_config(&store, vec![t], &rec, "two", "b-")).unwrap();
    store
        .write(|tx| {
            tx.update_run(
                "r",
                &agentrt::store::RunGuard::default(),
                &agentrt::store::RunChange {
                    lease: agentrt::store::LeaseChange::Set {
                        owner: other.owner(),
                        expires_at: Timestamp::now().add(Duration::from_secs(60)),
                    },
                    ..Default::default()
                },
            )
        })
        .unwrap();
    until("the heartbeat finds the lease lost", || {
        !session.heartbeat_running()
    })
    .await;
    let err = session
        .propose(Decision::tool_call("t", "{}"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LeaseLost { .. }), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(!session.heartbeat_running());
    assert!(matches!(
        session.step().await.unwrap_err(),
        Error::SessionClosed { .. }
    ));
}

/// A reconciliation hook that answers from a closure.
struct Answer<F>(F);

impl<F> Reconcile for Answer<F>
where
    F: Fn(&ReconcileInput) -> std::result::Result<Reconciled, ReconcileError> + Send + Sync,
{
    fn reconcile<'a>(
        &'a self,
        input: &'a ReconcileInput,
    ) -> BoxFuture<'a, std::result::Result<Reconciled, ReconcileError>> {
        let answer = (self.0)(input);
        Box::pin(async move { answer })
    }
}

async fn reconciled_run(
    answer: impl Fn(&ReconcileInput) -> std::result::Result<Reconciled, ReconcileError>
    + Send
    + Sync
    + 'static,
    schema: Option<&str>,
) -> (Store, Run, Recorder, Arc<AtomicUsize>) {
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = hanging_once("w", SideEffect::LocalMutation, calls.clone());
    crash_during(
        &store,
        vec![tool.clone()],
        Decision::tool_call("w", r#"{"n":1}"#),
        false,
    )
    .await;
    after_expiry().await;
    let tool = match schema {
        None => tool,
        Some(schema) => Arc::new(tool_fn(
            ToolSpec::new("w", "", SideEffect::LocalMutation)
                .with_schema_str(schema)
                .unwrap(),
            |_| async { Ok(ToolResult::raw("1")) },
        )) as Arc<dyn Tool>,
    };
    let rec = Recorder::default();
    let config =
        gate_config(&store, vec![tool], &rec, "second", "b-").with_reconcile(Answer(answer));
    let mut d = Driver::new(
        config,
        ScriptedAgent::new([Decision::complete("\"after\"")]),
    )
    .unwrap();
    let run = d.resume("r").await.unwrap();
    (store, run, rec, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reconcile_outcome_behaves_as_specified() {
    // continue: the run resumes after the interruption with a new step.
    let (store, run, rec, calls) = reconciled_run(
        |input| {
            assert_eq!(input.interrupted.len(), 1);
            assert_eq!(input.interrupted[0].status, StepStatus::Interrupted);
            Ok(Reconciled::Continue)
        },
        None,
    )
    .await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let resumed = rec
        .events()
        .into_iter()
        .find(|e| e.event_type == EventType::RunResumed)
        .unwrap();
    assert_eq!(resumed.payload, r#"{"after":"interruption"}"#);
    assert_eq!(store.list_steps("r").unwrap().len(), 2);

    // completed: the run completes with the hook's result.
    let (_, run, _, _) = reconciled_run(
        |_| {
            Ok(Reconciled::Completed {
                result: br#"{"merged":true}"#.to_vec(),
            })
        },
        None,
    )
    .await;
    assert_eq!(
        (run.status, run.reason_detail.as_str()),
        (RunStatus::Completed, "completed by reconciliation")
    );
    assert_eq!(run.result.unwrap().as_str(), r#"{"merged":true}"#);
    let (_, run, _, _) = reconciled_run(
        |_| {
            Ok(Reconciled::Completed {
                result: b"{oops".to_vec(),
            })
        },
        None,
    )
    .await;
    assert_eq!(run.reason, Some(TerminalReason::InternalError));

    // conflict, and an error of the hook.
    let (_, run, _, _) = reconciled_run(
        |_| {
            Ok(Reconciled::Conflict {
                detail: "two versions".into(),
            })
        },
        None,
    )
    .await;
    assert_eq!(
        (run.reason, run.reason_detail.as_str()),
        (Some(TerminalReason::ReconcileConflict), "two versions")
    );
    let (_, run, _, _) = reconciled_run(
        |_| {
            Err(ReconcileError {
                message: "remote unreachable".into(),
            })
        },
        None,
    )
    .await;
    assert_eq!(
        (run.reason, run.reason_detail.as_str()),
        (
            Some(TerminalReason::InternalError),
            "reconcile: remote unreachable"
        )
    );

    // waiting: an ordinary pause on the same step, with the hook's approval.
    let ask = PolicyDecision::need_approval_json(
        "check_remote",
        "did it land?",
        &serde_json::json!({"n": 1}),
        &serde_json::json!({}),
    )
    .unwrap();
    let (store, run, _, calls) = reconciled_run(
        move |_| {
            Ok(Reconciled::Waiting {
                decision: ask.clone(),
            })
        },
        None,
    )
    .await;
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approval = store.list_approvals("r").unwrap().pop().unwrap();
    assert_eq!(approval.kind, "check_remote");
    let step = &store.list_steps("r").unwrap()[0];
    assert_eq!(
        (
            step.status,
            step.observation.is_none(),
            step.finished_at.is_none()
        ),
        (StepStatus::AwaitingApproval, true, true)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // waiting needs a require_approval decision, and a call that still passes its schema.
    let (_, run, _, _) = reconciled_run(
        |_| {
            Ok(Reconciled::Waiting {
                decision: PolicyDecision::allow(),
            })
        },
        None,
    )
    .await;
    assert_eq!(run.reason, Some(TerminalReason::InternalError));
    let ask = PolicyDecision::need_approval("k", "r", None, None);
    let (store, run, _, _) = reconciled_run(
        move |_| {
            Ok(Reconciled::Waiting {
                decision: ask.clone(),
            })
        },
        Some(r#"{"type":"object","required":["m"]}"#),
    )
    .await;
    assert_eq!(run.reason, Some(TerminalReason::ReconcileConflict));
    let step = &store.list_steps("r").unwrap()[0];
    assert_eq!(
        step.observation.as_ref().unwrap().kind,
        ObservationKind::InvalidDecision
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_that_died_after_marking_still_pauses_the_executing_step() {
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = hanging_once("w", SideEffect::LocalMutation, calls.clone());
    crash_during(
        &store,
        vec![tool.clone()],
        Decision::tool_call("w", "{}"),
        false,
    )
    .await;
    after_expiry().await;
    // The second owner marks the step, then dies inside its (never answering) hook.
    struct Never;
    impl Reconcile for Never {
        fn reconcile<'a>(
            &'a self,
            _: &'a ReconcileInput,
        ) -> BoxFuture<'a, std::result::Result<Reconciled, ReconcileError>> {
            Box::pin(std::future::pending())
        }
    }
    let rec = Recorder::default();
    let config =
        gate_config(&store, vec![tool.clone()], &rec, "second", "b-").with_reconcile(Never);
    let mut d = Driver::new(config, ScriptedAgent::new([])).unwrap();
    let task = tokio::spawn(async move { d.resume("r").await.map(|_| ()) });
    until("the takeover marks the step", || {
        store.list_steps("r").unwrap()[0].status == StepStatus::Interrupted
    })
    .await;
    task.abort();
    let _ = task.await;
    assert_eq!(
        store.list_steps("r").unwrap()[0].status,
        StepStatus::Interrupted
    );
    after_expiry().await;
    let mut third = Driver::new(
        gate_config(&store, vec![tool], &rec, "third", "c-"),
        ScriptedAgent::new([]),
    )
    .unwrap();
    let run = third.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert_eq!(
        store.list_approvals("r").unwrap()[0].kind,
        INTERRUPTED_SIDE_EFFECT
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_are_distinct_and_an_own_expired_lease_is_taken_over_on_record() {
    let store = engine::store();
    let rec = Recorder::default();
    let a = Gate::new(gate_config(&store, vec![], &rec, "same", "a-")).unwrap();
    let b = Gate::new(gate_config(&store, vec![], &rec, "same", "b-")).unwrap();
    assert_ne!(a.owner(), b.owner(), "the same label gives distinct owners");
    assert!(a.owner().starts_with("same/"));

    // A session of gate `a` dies (dropped without close); its lease stays.
    let session = a.begin(Some("r"), "g", Limits::default()).await.unwrap();
    drop(session);
    // A live foreign lease: refused without reading the clock or writing.
    let clock = stepping_clock();
    let c = Gate::new(gate_config(&store, vec![], &rec, "other", "c-").with_clock(clock.clock()))
        .unwrap();
    let before = store.list_events("r").unwrap().len();
    assert!(matches!(
        c.attach("r").await.unwrap_err(),
        Error::RunLeased { .. }
    ));
    assert_eq!(clock.readings(), 0, "no Now read");
    assert_eq!(store.list_events("r").unwrap().len(), before, "no change");
    // After expiry, the same gate takes its own lease over, on record.
    after_expiry().await;
    let (mut again, verdict) = a.attach("r").await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Open);
    let taken = store
        .list_events("r")
        .unwrap()
        .into_iter()
        .find(|e| e.event_type == EventType::LeaseTakenOver)
        .unwrap();
    let payload: serde_json::Value = serde_json::from_str(&taken.payload).unwrap();
    assert_eq!(payload["previous_owner"], a.owner());
    assert_eq!(payload["owner"], a.owner());
    again.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_never_starts_once_the_stored_lease_has_lapsed() {
    // A lease of an hour: no heartbeat renews it during the test.
    let store = engine::store();
    let rec = Recorder::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let t: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("t", "", SideEffect::ReadOnly),
        move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolResult::raw("1")) }
        },
    ));
    let gate = Gate::new(
        gate_config(&store, vec![t], &rec, "one", "a-").with_lease_ttl(Duration::from_secs(3600)),
    )
    .unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    session.step().await.unwrap().unwrap();
    assert_eq!(
        session
            .propose(Decision::tool_call("t", "{}"))
            .await
            .unwrap()
            .outcome,
        VerdictOutcome::Allowed
    );
    // The stored lease, the one every other process judges by, lapses
    // (still naming this owner) while the session still counts on its own.
    store
        .write(|tx| {
            tx.update_run(
                "r",
                &agentrt::store::RunGuard::default(),
                &agentrt::store::RunChange {
                    lease: agentrt::store::LeaseChange::Set {
                        owner: gate.owner(),
                        expires_at: leases().peek(),
                    },
                    ..Default::default()
                },
            )
        })
        .unwrap();
    let events = store.list_events("r").unwrap().len();
    let err = session.execute().await.unwrap_err();
    assert!(err.is_run_state(), "{err:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the tool never ran");
    assert_eq!(
        store.list_events("r").unwrap().len(),
        events,
        "nothing written"
    );
    assert_eq!(
        store.list_steps("r").unwrap()[0].status,
        StepStatus::Deciding
    );
    session.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_caller_cancelled_is_left_to_the_agent_not_paused_on_the_next_resume() {
    let store = engine::store();
    let rec = Recorder::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let (handle, signal) = cancel_pair();
    let counter = calls.clone();
    // A side effect whose caller gives up while it runs.
    let tool: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("w", "", SideEffect::LocalMutation),
        move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            handle.cancel();
            std::future::pending()
        },
    ));
    let mut first = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "first", "a-"),
        ScriptedAgent::new([Decision::tool_call("w", "{}")]),
    )
    .unwrap()
    .with_cancel(signal);
    let err = first
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err:?}");
    let step = store.list_steps("r").unwrap().remove(0);
    assert_eq!(step.status, StepStatus::Interrupted);
    assert_eq!(
        step.observation.unwrap().content.unwrap().to_value()["failure"],
        "cancelled"
    );

    // The next resume hands the interrupted call to the agent, as any
    // outcome: no operator is asked, nothing runs again.
    let resumed = Recorder::default();
    let mut second = Driver::new(
        gate_config(&store, vec![tool], &resumed, "second", "b-"),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    let run = second.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert!(store.list_approvals("r").unwrap().is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        resumed.types(),
        ["step.started", "step.decided", "run.finished"]
    );
    assert_eq!(
        store.list_steps("r").unwrap()[0].status,
        StepStatus::Interrupted
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_ends_in_flight_steps_at_its_time_and_the_agent_sees_them_as_stored() {
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = hanging_once("read", SideEffect::ReadOnly, calls.clone());
    crash_during(
        &store,
        vec![tool.clone()],
        Decision::tool_call("read", "{}"),
        false,
    )
    .await;
    after_expiry().await;
    let rec = Recorder::default();
    let mut d = Driver::new(
        gate_config(&store, vec![tool], &rec, "second", "b-"),
        ScriptedAgent::new([Decision::complete("1")]).recording_inputs(),
    )
    .unwrap();
    assert_eq!(d.resume("r").await.unwrap().status, RunStatus::Completed);
    let marked = rec
        .events()
        .into_iter()
        .find(|e| e.event_type == EventType::StepInterrupted)
        .unwrap();
    let stored = store.list_steps("r").unwrap().remove(0);
    assert_eq!(stored.status, StepStatus::Interrupted);
    assert_eq!(
        stored.finished_at.map(|t| t.to_string()),
        Some(marked.at),
        "the interrupted step ended when the takeover marked it"
    );
    let seen = &d.agent().inputs()[0].steps;
    assert_eq!(seen.len(), 1);
    assert_eq!(*seen[0], stored, "the agent sees the step as stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconcile_hook_is_asked_exactly_when_a_step_was_in_flight() {
    // What the hook was handed, call by call.
    type Asked = Arc<std::sync::Mutex<Vec<Vec<Step>>>>;
    let hook = |asked: &Asked| {
        let asked = asked.clone();
        Answer(move |input: &ReconcileInput| {
            asked.lock().unwrap().push(input.interrupted.clone());
            Ok(Reconciled::Continue)
        })
    };

    // A step left deciding after a finished one (no call was executing):
    // the hook is asked, about that step alone.
    let store = engine::store();
    let tool = hanging_once("w", SideEffect::LocalMutation, Arc::default());
    crashed_after_a_read(&store, tool.clone(), None).await;
    after_expiry().await;
    let asked = Asked::default();
    let rec = Recorder::default();
    let mut d = Driver::new(
        gate_config(&store, vec![tool], &rec, "second", "b-").with_reconcile(hook(&asked)),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    assert_eq!(d.resume("r").await.unwrap().status, RunStatus::Completed);
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].len(), 1);
    assert_eq!(asked[0][0].index, 1);
    assert_eq!(
        asked[0][0].observation.as_ref().unwrap().summary,
        "step interrupted while deciding"
    );
    assert!(rec.types().contains(&"run.resumed".to_owned()));

    // Nothing in flight (the caller cancelled the call; the lease was
    // released): the hook is not asked, the run just goes on.
    let store = engine::store();
    let (handle, signal) = cancel_pair();
    let tool: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("w", "", SideEffect::LocalMutation),
        move |_| {
            handle.cancel();
            std::future::pending()
        },
    ));
    let mut first = Driver::new(
        gate_config(&store, vec![tool.clone()], &rec, "first", "a-"),
        ScriptedAgent::new([Decision::tool_call("w", "{}")]),
    )
    .unwrap()
    .with_cancel(signal);
    first
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap_err();
    let asked = Asked::default();
    let rec = Recorder::default();
    let mut d = Driver::new(
        gate_config(&store, vec![tool], &rec, "second", "b-").with_reconcile(hook(&asked)),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    assert_eq!(d.resume("r").await.unwrap().status, RunStatus::Completed);
    assert!(asked.lock().unwrap().is_empty(), "the hook was not asked");
    assert_eq!(
        rec.types(),
        ["step.started", "step.decided", "run.finished"]
    );
}

/// Allows every request, under a stated id.
struct AllowAll;

impl Policy for AllowAll {
    fn evaluate(
        &self,
        _: &ToolRequest,
        _: &RunView,
    ) -> std::result::Result<PolicyDecision, PolicyError> {
        Ok(PolicyDecision::allow())
    }
    fn policy_id(&self) -> Option<String> {
        Some("allow-all/1".into())
    }
}

/// A run whose step 0 read (done) and whose step 1 a crash cut short:
/// left deciding (`calls` none), or executing `w` (hanging on its first
/// call, counted in `calls`) under a policy with an id.
async fn crashed_after_a_read(store: &Store, w: Arc<dyn Tool>, calls: Option<&AtomicUsize>) {
    let read: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("read", "", SideEffect::ReadOnly),
        |_| async { Ok(ToolResult::raw("1")) },
    ));
    let mut config = gate_config(store, vec![read, w], &Recorder::default(), "first", "a-");
    config.policy = Arc::new(AllowAll);
    let gate = Gate::new(config).unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    session.step().await.unwrap().unwrap();
    session
        .propose(Decision::tool_call("read", "{}"))
        .await
        .unwrap();
    session.execute().await.unwrap();
    session.step().await.unwrap().unwrap();
    let Some(calls) = calls else {
        drop(session);
        return;
    };
    let verdict = session
        .propose(Decision::tool_call("w", r#"{"n":1}"#))
        .await
        .unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
    let task = tokio::spawn(async move { session.execute().await.map(|_| ()) });
    until("w runs", || calls.load(Ordering::SeqCst) > 0).await;
    task.abort();
    let _ = task.await;
}

/// Every step the session holds (its input), as rows.
fn held_steps(session: &Session) -> Vec<Step> {
    session
        .input()
        .steps
        .iter()
        .map(|s| (**s).clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_pause_leaves_the_step_awaiting_its_new_approval_and_the_lease_cleared() {
    let ask = PolicyDecision::need_approval("check_remote", "did it land?", None, None);
    for hook in [None, Some(ask)] {
        let store = engine::store();
        let calls = Arc::new(AtomicUsize::new(0));
        let w = hanging_once("w", SideEffect::LocalMutation, calls.clone());
        crashed_after_a_read(&store, w.clone(), Some(&calls)).await;
        after_expiry().await;
        let mut config = gate_config(&store, vec![w], &Recorder::default(), "second", "b-");
        if let Some(decision) = hook.clone() {
            config = config.with_reconcile(Answer(move |_: &ReconcileInput| {
                Ok(Reconciled::Waiting {
                    decision: decision.clone(),
                })
            }));
        }
        let gate = Gate::new(config).unwrap();
        let (session, verdict) = gate.attach("r").await.unwrap();
        let case = if hook.is_some() {
            "reconciled"
        } else {
            "plain"
        };
        assert_eq!(verdict.outcome, VerdictOutcome::Pending, "{case}");
        let approval = verdict.approval.unwrap();
        assert_eq!(
            store.list_approvals("r").unwrap(),
            std::slice::from_ref(&approval)
        );
        let kind = if hook.is_some() {
            "check_remote"
        } else {
            INTERRUPTED_SIDE_EFFECT
        };
        assert_eq!(approval.kind, kind);
        let stored = store.list_steps("r").unwrap();
        assert_eq!(stored.len(), 2);
        let paused = &stored[1];
        assert_eq!(paused.status, StepStatus::AwaitingApproval, "{case}");
        let policy = paused.policy.as_ref().unwrap();
        assert_eq!(
            (policy.outcome, policy.kind.as_str()),
            (Outcome::RequireApproval, kind),
            "{case}: the row holds the pause's decision, not the first verdict"
        );
        assert_eq!(paused.policy_id, "", "{case}: a non-policy pause");
        assert!(paused.observation.is_none(), "{case}");
        assert!(paused.finished_at.is_none(), "{case}");
        assert_eq!(
            store.lease("r").unwrap(),
            (String::new(), String::new()),
            "{case}: a paused run holds no lease"
        );
        assert_eq!(held_steps(&session), stored, "{case}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{case}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_can_no_longer_wait_is_failed_in_the_store_and_in_the_session() {
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let w = hanging_once("w", SideEffect::LocalMutation, calls.clone());
    crashed_after_a_read(&store, w, Some(&calls)).await;
    after_expiry().await;
    // The tool now wants arguments the interrupted call lacks.
    let strict: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("w", "", SideEffect::LocalMutation)
            .with_schema_str(r#"{"type":"object","required":["m"]}"#)
            .unwrap(),
        |_| async { Ok(ToolResult::raw("1")) },
    ));
    let ask = PolicyDecision::need_approval("check_remote", "did it land?", None, None);
    let config = gate_config(&store, vec![strict], &Recorder::default(), "second", "b-")
        .with_reconcile(Answer(move |_: &ReconcileInput| {
            Ok(Reconciled::Waiting {
                decision: ask.clone(),
            })
        }));
    let gate = Gate::new(config).unwrap();
    let (session, verdict) = gate.attach("r").await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Ended);
    assert_eq!(verdict.run.reason, Some(TerminalReason::ReconcileConflict));
    let stored = store.list_steps("r").unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].status, StepStatus::Done);
    assert_eq!(stored[1].status, StepStatus::Failed);
    assert_eq!(
        stored[1].observation.as_ref().unwrap().kind,
        ObservationKind::InvalidDecision
    );
    assert_eq!(held_steps(&session), stored);
    assert!(store.list_approvals("r").unwrap().is_empty());
}
