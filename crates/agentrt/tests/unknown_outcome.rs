//! A tool outcome that is known or unknown (issue 10): a call that started
//! and whose outcome is unknown (the tool says so, the spec's timeout
//! fired, the tool panicked) of a tool with side effects is never retried
//! by the runtime. The step follows the interruption contract: an operator
//! approves one re-run, or the reconciliation hook settles it. A read-only
//! tool's unknown outcome is a tool error, and a known failure of any tool
//! lets the run go on.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::*;
use agentrt::{
    clock::ManualClock, ids::sequential_ids, model::INTERRUPTED_SIDE_EFFECT, model::Observation,
    model::ObservationKind, model::Step, model::StepStatus, reconcile::Reconcile,
    reconcile::ReconcileError, reconcile::ReconcileInput, reconcile::Reconciled,
};
use common::*;

/// The spec timeout of a tool that times out; its call sleeps far longer.
const TIMEOUT: Duration = Duration::from_millis(100);

/// The spec timeout of every other tool: long enough for a panic to be
/// caught as one (printing its backtrace can take a while).
const PATIENT: Duration = Duration::from_secs(30);

/// How the first call of a tool ends without a known outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    /// The tool returns `ToolError::Unknown`.
    Reported,
    /// The tool runs past its spec's timeout.
    Timeout,
    /// The tool panics after it started.
    Panic,
}

const CAUSES: [Cause; 3] = [Cause::Reported, Cause::Timeout, Cause::Panic];

const WITH_EFFECTS: [SideEffect; 3] = [
    SideEffect::LocalMutation,
    SideEffect::RemoteMutation,
    SideEffect::Destructive,
];

impl Cause {
    /// The observation's `failure` field (a panic has none, as before).
    fn failure(self) -> serde_json::Value {
        match self {
            Cause::Reported => "unknown_outcome".into(),
            Cause::Timeout => "timeout".into(),
            Cause::Panic => serde_json::Value::Null,
        }
    }
}

/// Tool `t` of `class`: its first call ends with `cause`, later calls
/// return their arguments. `calls` counts every call.
fn flaky(class: SideEffect, cause: Cause, calls: &Arc<AtomicUsize>) -> Arc<dyn Tool> {
    let calls = Arc::clone(calls);
    let timeout = if cause == Cause::Timeout {
        TIMEOUT
    } else {
        PATIENT
    };
    let spec = ToolSpec::new("t", "a tool", class).with_timeout(timeout);
    Arc::new(tool_fn(spec, move |call| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                match cause {
                    Cause::Reported => {
                        return Err(ToolError::unknown(
                            "connection reset after the request was sent",
                        ));
                    }
                    Cause::Timeout => tokio::time::sleep(Duration::from_secs(60)).await,
                    Cause::Panic => panic!("the reply could not be read"),
                }
            }
            Ok(ToolResult::raw(call.args.as_str()).with_summary("done"))
        }
    }))
}

/// A tool of `class` whose every call returns `result`.
fn answering(class: SideEffect, result: Result<ToolResult, ToolError>) -> Arc<dyn Tool> {
    let spec = ToolSpec::new("t", "a tool", class).with_timeout(PATIENT);
    Arc::new(tool_fn(spec, move |_| {
        let result = result.clone();
        async move { result }
    }))
}

/// Allows every class, so each tool runs without a policy approval.
fn allow_all() -> SideEffectPolicy {
    SideEffectPolicy::new()
        .with(SideEffect::ReadOnly, Outcome::Allow)
        .with(SideEffect::LocalMutation, Outcome::Allow)
        .with(SideEffect::RemoteMutation, Outcome::Allow)
        .with(SideEffect::Destructive, Outcome::Allow)
}

/// One store, one clock and one recorder that every driver of a test
/// shares; each driver gets ids of its own.
struct World {
    store: Store,
    clock: ManualClock,
    rec: Recorder,
}

impl World {
    fn new() -> World {
        World {
            store: Store::open(":memory:").unwrap(),
            clock: stepping_clock(),
            rec: Recorder::default(),
        }
    }

    fn config(&self, policy: impl Policy + 'static, tool: &Arc<dyn Tool>, ids: &str) -> GateConfig {
        GateConfig::new(self.store.clone(), policy, vec![Arc::clone(tool)])
            .with_clock(self.clock.clock())
            .with_ids(sequential_ids(ids))
            .with_observer(self.rec.clone())
    }

    fn driver(
        &self,
        tool: &Arc<dyn Tool>,
        ids: &str,
        decisions: impl IntoIterator<Item = Decision>,
    ) -> Driver<ScriptedAgent> {
        Driver::new(
            self.config(allow_all(), tool, ids),
            ScriptedAgent::new(decisions),
        )
        .unwrap()
    }

    /// Starts run `r` with one call of `t`, then (if it gets that far) a
    /// completion.
    async fn start(&self, tool: &Arc<dyn Tool>) -> Run {
        self.driver(tool, "a-", [call(), Decision::complete("\"done\"")])
            .start(Some("r"), "g", Limits::default())
            .await
            .unwrap()
    }

    fn steps(&self) -> Vec<Step> {
        self.store.list_steps("r").unwrap()
    }

    fn approvals(&self) -> Vec<Approval> {
        self.store.list_approvals("r").unwrap()
    }

    fn events(&self) -> Vec<Event> {
        self.rec.events()
    }

    fn count(&self, event: &str) -> usize {
        self.rec.types().iter().filter(|t| *t == event).count()
    }

    /// The audit chain and the row digests verify.
    fn verified(&self) {
        let report = verify::verify(&self.store, &verify::VerifyOptions::default()).unwrap();
        assert!(report.intact(), "{:?}", report.broken);
        assert!(report.checked > 0);
    }
}

fn call() -> Decision {
    Decision::tool_call("t", r#"{"n":1}"#)
}

fn field(o: &Observation, key: &str) -> serde_json::Value {
    o.content.as_ref().unwrap().to_value()[key].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_tools_unknown_outcome_is_a_tool_error_and_the_run_goes_on() {
    for cause in CAUSES {
        let w = World::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let tool = flaky(SideEffect::ReadOnly, cause, &calls);
        let run = w.start(&tool).await;
        assert_eq!(run.status, RunStatus::Completed, "{cause:?}");
        let steps = w.steps();
        assert_eq!(steps.len(), 2, "{cause:?}: the next step was opened");
        assert_eq!(steps[0].status, StepStatus::Failed, "{cause:?}");
        let o = steps[0].observation.as_ref().unwrap();
        assert_eq!(o.kind, ObservationKind::ToolError, "{cause:?}");
        assert_eq!(field(o, "failure"), cause.failure(), "{cause:?}");
        assert_eq!(field(o, "previous_status"), serde_json::Value::Null);
        assert!(w.approvals().is_empty(), "{cause:?}: no operator asked");
        assert_eq!(w.count("step.failed"), 1, "{cause:?}");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{cause:?}");
        w.verified();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_reported_unknown_outcome_of_a_read_only_tool_says_so() {
    let w = World::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = flaky(SideEffect::ReadOnly, Cause::Reported, &calls);
    w.start(&tool).await;
    let o = w.steps()[0].observation.clone().unwrap();
    assert_eq!(
        o.summary,
        "t outcome unknown: connection reset after the request was sent"
    );
    assert_eq!(
        field(&o, "error"),
        "connection reset after the request was sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outcome_of_a_side_effect_pauses_on_an_interrupted_side_effect_approval() {
    for class in WITH_EFFECTS {
        for cause in CAUSES {
            let case = format!("{class:?} {cause:?}");
            let w = World::new();
            let calls = Arc::new(AtomicUsize::new(0));
            let tool = flaky(class, cause, &calls);
            let run = w.start(&tool).await;
            assert_eq!(run.status, RunStatus::WaitingForApproval, "{case}");
            assert_eq!(calls.load(Ordering::SeqCst), 1, "{case}: ran once");

            // The same step awaits the operator; no next step was opened.
            let steps = w.steps();
            assert_eq!(steps.len(), 1, "{case}");
            assert_eq!(steps[0].status, StepStatus::AwaitingApproval, "{case}");
            assert!(steps[0].observation.is_none(), "{case}");
            assert_eq!(
                steps[0].policy.as_ref().unwrap().kind,
                INTERRUPTED_SIDE_EFFECT
            );

            // The approval a takeover builds for an interrupted side effect.
            let approvals = w.approvals();
            assert_eq!(approvals.len(), 1, "{case}");
            let a = &approvals[0];
            assert_eq!(
                (a.kind.as_str(), a.status, a.step_id.as_str()),
                (
                    INTERRUPTED_SIDE_EFFECT,
                    ApprovalStatus::Pending,
                    steps[0].id.as_str()
                ),
                "{case}"
            );
            assert_eq!(a.capability.as_str(), r#"{"args":{"n":1},"tool":"t"}"#);
            let shown = a.presentation.to_value();
            assert_eq!(shown["tool"], "t");
            assert_eq!(shown["args"], serde_json::json!({"n": 1}));
            assert_eq!(shown["side_effect"], class.as_str(), "{case}");
            assert!(
                shown["notice"]
                    .as_str()
                    .unwrap()
                    .contains("its outcome is unknown"),
                "{case}"
            );

            // The run waits with its lease cleared.
            let run = w.store.get_run("r").unwrap();
            assert_eq!(run.status, RunStatus::WaitingForApproval);
            assert_eq!(w.store.lease("r").unwrap().0, "", "{case}");

            // One write group after the tool: the outcome, then the pause.
            let events = w.events();
            let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
            assert_eq!(
                &types[types.len() - 4..],
                [
                    "step.tool_started",
                    "step.tool_finished",
                    "step.policy",
                    "approval.requested"
                ],
                "{case}"
            );
            assert_eq!(w.count("step.failed"), 0, "{case}: the step did not fail");
            assert_eq!(w.count("step.started"), 1, "{case}");
            let finished = &events[events.len() - 3].payload;
            assert!(finished.contains("outcome unknown"), "{case}: {finished}");
            let requested = &events[events.len() - 1].payload;
            let reason = match cause {
                Cause::Reported => "reported that the outcome of its call is unknown",
                Cause::Timeout => "timed out after its call started",
                Cause::Panic => "panicked after its call started",
            };
            assert!(requested.contains(reason), "{case}: {requested}");
            let policy = &events[events.len() - 2].payload;
            assert!(
                !policy.contains("\"view\"") && !policy.contains("policy_id"),
                "a non-policy pause: {policy}"
            );

            // The attempt's time counts as active time.
            assert!(run.active_ms > 0, "{case}");
            w.verified();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_the_pause_re_runs_the_same_step_exactly_once_on_attach() {
    for class in WITH_EFFECTS {
        for cause in CAUSES {
            let case = format!("{class:?} {cause:?}");
            let w = World::new();
            let calls = Arc::new(AtomicUsize::new(0));
            let tool = flaky(class, cause, &calls);
            w.start(&tool).await;
            let approval = w.approvals().remove(0);
            Operator::new(w.store.clone())
                .approve("r", &approval.id, &DecideOptions::default())
                .unwrap();
            assert_eq!(calls.load(Ordering::SeqCst), 1, "{case}: not before attach");

            let run = w
                .driver(&tool, "b-", [Decision::complete("\"done\"")])
                .resume("r")
                .await
                .unwrap();
            assert_eq!(run.status, RunStatus::Completed, "{case}");
            assert_eq!(calls.load(Ordering::SeqCst), 2, "{case}: re-run once");
            let steps = w.steps();
            assert_eq!(steps.len(), 2, "{case}");
            assert_eq!(steps[0].status, StepStatus::Done, "{case}");
            assert_eq!(
                steps[0].observation.as_ref().unwrap().kind,
                ObservationKind::ToolResult
            );
            let starts: Vec<Event> = w
                .events()
                .into_iter()
                .filter(|e| e.event_type == EventType::StepToolStarted)
                .collect();
            assert_eq!(starts.len(), 2, "{case}");
            assert!(starts.iter().all(|e| e.step_id == steps[0].id));
            assert!(
                starts[1]
                    .payload
                    .contains(&format!("\"approval_id\":\"{}\"", approval.id)),
                "{case}: the re-run is the approved one"
            );
            w.verified();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejecting_the_pause_ends_the_run_and_nothing_runs_again() {
    for class in WITH_EFFECTS {
        for cause in CAUSES {
            let case = format!("{class:?} {cause:?}");
            let w = World::new();
            let calls = Arc::new(AtomicUsize::new(0));
            let tool = flaky(class, cause, &calls);
            w.start(&tool).await;
            let approval = w.approvals().remove(0);
            Operator::new(w.store.clone())
                .reject("r", &approval.id, &DecideOptions::default())
                .unwrap();
            let run = w.store.get_run("r").unwrap();
            assert_eq!(
                (run.status, run.reason),
                (RunStatus::Cancelled, Some(TerminalReason::ApprovalRejected)),
                "{case}"
            );
            let err = w
                .driver(&tool, "b-", [Decision::complete("1")])
                .resume("r")
                .await
                .unwrap_err();
            assert!(err.is_run_state(), "{case}: {err:?}");
            assert_eq!(calls.load(Ordering::SeqCst), 1, "{case}");
            assert_eq!(w.steps()[0].status, StepStatus::Failed, "{case}");
            w.verified();
        }
    }
}

/// A reconciliation hook that keeps what it was handed and answers
/// `answer`.
#[derive(Clone)]
struct Hook {
    asked: Arc<Mutex<Vec<ReconcileInput>>>,
    answer: Reconciled,
}

impl Hook {
    fn new(answer: Reconciled) -> Hook {
        Hook {
            asked: Arc::default(),
            answer,
        }
    }
    fn asked(&self) -> Vec<ReconcileInput> {
        self.asked.lock().unwrap().clone()
    }
}

impl Reconcile for Hook {
    fn reconcile<'a>(
        &'a self,
        input: &'a ReconcileInput,
    ) -> BoxFuture<'a, std::result::Result<Reconciled, ReconcileError>> {
        self.asked.lock().unwrap().push(input.clone());
        let answer = self.answer.clone();
        Box::pin(async move { Ok(answer) })
    }
}

/// Runs `r` (a call of `t`, then a completion) under a gate with `hook`.
async fn reconciled(w: &World, tool: &Arc<dyn Tool>, hook: &Hook) -> Run {
    let config = w
        .config(allow_all(), tool, "a-")
        .with_reconcile(hook.clone());
    Driver::new(
        config,
        ScriptedAgent::new([call(), Decision::complete("\"after\"")]),
    )
    .unwrap()
    .start(Some("r"), "g", Limits::default())
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_reconcile_hook_the_hook_is_asked_once_and_the_tool_never_re_runs() {
    for class in WITH_EFFECTS {
        for cause in CAUSES {
            let case = format!("{class:?} {cause:?}");
            let w = World::new();
            let calls = Arc::new(AtomicUsize::new(0));
            let tool = flaky(class, cause, &calls);
            let hook = Hook::new(Reconciled::Continue);
            let run = reconciled(&w, &tool, &hook).await;
            assert_eq!(run.status, RunStatus::Completed, "{case}");
            assert_eq!(calls.load(Ordering::SeqCst), 1, "{case}: never re-run");
            assert!(w.approvals().is_empty(), "{case}: no operator asked");

            // Asked once, about the marked step, with why its outcome is unknown.
            let asked = hook.asked();
            assert_eq!(asked.len(), 1, "{case}");
            assert_eq!(asked[0].run.status, RunStatus::Running);
            assert_eq!(asked[0].interrupted.len(), 1, "{case}");
            let step = &asked[0].interrupted[0];
            assert_eq!(step.status, StepStatus::Interrupted, "{case}");
            let o = step.observation.as_ref().unwrap();
            assert_eq!(o.kind, ObservationKind::Interrupted, "{case}");
            assert_eq!(field(o, "failure"), cause.failure(), "{case}");
            assert_eq!(field(o, "previous_status"), "executing", "{case}");
            assert!(o.summary.ends_with("; outcome unknown"), "{}", o.summary);

            // The answer applied: the run resumed after the interruption with a
            // new step; the settled step stays as the hook saw it.
            let steps = w.steps();
            assert_eq!(steps.len(), 2, "{case}");
            assert_eq!(steps[0], *step, "{case}");
            let resumed = w
                .events()
                .into_iter()
                .find(|e| e.event_type == EventType::RunResumed)
                .unwrap();
            assert_eq!(resumed.payload, r#"{"after":"interruption"}"#);
            // begin; the tool start; the outcome; the hook's answer with the
            // next step; the completion. The hook ran between two commits.
            assert_eq!(w.store.commits(), 5, "{case}");
            w.verified();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_of_the_hook_is_applied_to_an_unknown_outcome() {
    // completed: the run completes with the hook's result.
    let w = World::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = flaky(SideEffect::RemoteMutation, Cause::Timeout, &calls);
    let hook = Hook::new(Reconciled::Completed {
        result: br#"{"merged":true}"#.to_vec(),
    });
    let run = reconciled(&w, &tool, &hook).await;
    assert_eq!(
        (run.status, run.reason_detail.as_str()),
        (RunStatus::Completed, "completed by reconciliation")
    );
    assert_eq!(run.result.unwrap().as_str(), r#"{"merged":true}"#);
    assert_eq!(hook.asked().len(), 1);
    w.verified();

    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // conflict: the run fails reconcile_conflict.
    let w = World::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = flaky(SideEffect::Destructive, Cause::Reported, &calls);
    let hook = Hook::new(Reconciled::Conflict {
        detail: "the branch moved".into(),
    });
    let run = reconciled(&w, &tool, &hook).await;
    assert_eq!(
        (run.status, run.reason, run.reason_detail.as_str()),
        (
            RunStatus::Failed,
            Some(TerminalReason::ReconcileConflict),
            "the branch moved"
        )
    );
    assert_eq!(w.steps()[0].status, StepStatus::Interrupted);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    w.verified();

    // waiting: a pause on the same step with the hook's approval; approving
    // it re-runs the call once.
    let w = World::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = flaky(SideEffect::LocalMutation, Cause::Timeout, &calls);
    let ask = PolicyDecision::need_approval_json(
        "check_remote",
        "did it land?",
        &serde_json::json!({"n": 1}),
        &serde_json::json!({}),
    )
    .unwrap();
    let hook = Hook::new(Reconciled::Waiting { decision: ask });
    let run = reconciled(&w, &tool, &hook).await;
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let steps = w.steps();
    assert_eq!(
        (steps.len(), steps[0].status),
        (1, StepStatus::AwaitingApproval)
    );
    let approval = w.approvals().remove(0);
    assert_eq!(approval.kind, "check_remote");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    Operator::new(w.store.clone())
        .approve("r", &approval.id, &DecideOptions::default())
        .unwrap();
    let run = w
        .driver(&tool, "b-", [Decision::complete("1")])
        .resume("r")
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    w.verified();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_failure_of_a_destructive_tool_fails_the_step_and_the_run_goes_on() {
    let known = [
        Err(ToolError::failed("permission denied")),
        Ok(ToolResult::raw("not json")),
    ];
    for result in known {
        let w = World::new();
        let tool = answering(SideEffect::Destructive, result.clone());
        let run = w.start(&tool).await;
        assert_eq!(run.status, RunStatus::Completed, "{result:?}");
        let steps = w.steps();
        assert_eq!(steps.len(), 2, "{result:?}");
        assert_eq!(steps[0].status, StepStatus::Failed);
        assert_eq!(
            steps[0].observation.as_ref().unwrap().kind,
            ObservationKind::ToolError
        );
        assert!(w.approvals().is_empty(), "{result:?}: no pause");
        assert_eq!(w.count("step.failed"), 1);
        w.verified();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_loop_sees_the_pause_as_the_end_of_its_session() {
    let w = World::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = flaky(SideEffect::LocalMutation, Cause::Reported, &calls);
    let gate = Gate::new(w.config(allow_all(), &tool, "a-")).unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    session.step().await.unwrap().unwrap();
    assert_eq!(
        session.propose(call()).await.unwrap().outcome,
        VerdictOutcome::Allowed
    );
    let before = w.store.commits();
    let observed = session.execute().await.unwrap();
    assert_eq!(
        w.store.commits(),
        before + 2,
        "the tool start, then the outcome and the pause in one write group"
    );
    assert_eq!(observed.kind, ObservationKind::Interrupted);
    assert_eq!(field(&observed, "failure"), "unknown_outcome");
    assert!(session.done());
    assert_eq!(session.run().status, RunStatus::WaitingForApproval);
    assert!(!session.heartbeat_running());
    assert_eq!(session.step().await.unwrap(), None, "no next step");
    let input = session.input();
    assert_eq!(input.approvals.len(), 1);
    assert_eq!(input.approvals[0].kind, INTERRUPTED_SIDE_EFFECT);
    assert_eq!(
        session.current().map(|s| s.status),
        Some(StepStatus::AwaitingApproval)
    );
    session.close().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    w.verified();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_remote_call_that_times_out_pauses_again_and_its_re_run_needs_no_third_approval()
 {
    // Under the default policy a remote mutation needs an approval first.
    let w = World::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = flaky(SideEffect::RemoteMutation, Cause::Timeout, &calls);
    let driver = |ids: &str, decisions: Vec<Decision>| {
        Driver::new(
            w.config(DefaultPolicy, &tool, ids),
            ScriptedAgent::new(decisions),
        )
        .unwrap()
    };
    let run = driver("a-", vec![call()])
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let first = w.approvals().remove(0);
    assert_eq!(first.kind, "remote_mutation");
    let operator = Operator::new(w.store.clone());
    operator
        .approve("r", &first.id, &DecideOptions::default())
        .unwrap();

    // The approved call times out: the same step pauses again.
    let run = driver("b-", vec![]).resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let approvals = w.approvals();
    assert_eq!(approvals.len(), 2);
    assert_eq!(approvals[1].kind, INTERRUPTED_SIDE_EFFECT);
    assert_eq!(approvals[1].step_id, first.step_id);

    // Approving the interrupted side effect runs it once more.
    operator
        .approve("r", &approvals[1].id, &DecideOptions::default())
        .unwrap();
    let run = driver("c-", vec![Decision::complete("1")])
        .resume("r")
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(w.approvals().len(), 2, "no third approval");
    w.verified();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_dies_in_the_hook_leaves_the_step_for_the_next_takeover() {
    const TTL: Duration = Duration::from_millis(300);
    let w = World::new();
    let leases = ManualClock::new(Timestamp::now());
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = flaky(SideEffect::LocalMutation, Cause::Reported, &calls);

    // A hook that never answers: the session is dropped while it waits.
    struct Never(Arc<AtomicUsize>);
    impl Reconcile for Never {
        fn reconcile<'a>(
            &'a self,
            _: &'a ReconcileInput,
        ) -> BoxFuture<'a, std::result::Result<Reconciled, ReconcileError>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::pending())
        }
    }
    let entered = Arc::new(AtomicUsize::new(0));
    let config = w
        .config(allow_all(), &tool, "a-")
        .with_lease_ttl(TTL)
        .with_lease_clock(leases.clock())
        .with_reconcile(Never(entered.clone()));
    let mut first = Driver::new(config, ScriptedAgent::new([call()])).unwrap();
    let task = tokio::spawn(async move {
        first
            .start(Some("r"), "g", Limits::default())
            .await
            .map(|_| ())
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while entered.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the hook was never asked"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    task.abort();
    let _ = task.await;
    let step = w.steps().remove(0);
    assert_eq!(
        step.status,
        StepStatus::Interrupted,
        "the outcome was committed"
    );

    // The next owner, without a hook, pauses the step for an operator.
    leases.advance(TTL + Duration::from_millis(1));
    let config = w
        .config(allow_all(), &tool, "b-")
        .with_lease_ttl(TTL)
        .with_lease_clock(leases.clock());
    let run = Driver::new(config, ScriptedAgent::new([]))
        .unwrap()
        .resume("r")
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approval = w.approvals().remove(0);
    assert_eq!(
        (approval.kind.as_str(), approval.step_id.as_str()),
        (INTERRUPTED_SIDE_EFFECT, step.id.as_str())
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    w.verified();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_leaves_the_interruption_it_opened_as_the_sessions_waiting_approval() {
    let w = World::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = flaky(SideEffect::LocalMutation, Cause::Reported, &calls);
    let gate = Gate::new(w.config(allow_all(), &tool, "a-")).unwrap();
    let mut session = gate.begin(Some("r"), "g", Limits::default()).await.unwrap();
    session.step().await.unwrap().unwrap();
    session.propose(call()).await.unwrap();
    assert_eq!(session.waiting_approval(), None, "allowed: nothing waits");
    session.execute().await.unwrap();
    let stored = w.approvals();
    assert_eq!(stored.len(), 1);
    assert_eq!(session.waiting_approval(), Some(&stored[0]));
    assert_eq!(stored[0].kind, INTERRUPTED_SIDE_EFFECT);
    session.close().await.unwrap();
}
