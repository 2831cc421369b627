//! Policy outcomes and the limits checked before each step.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::*;
use agentrt::{clock::ManualClock, model::LimitsError, model::ObservationKind};
use common::*;

/// A policy that answers from a function.
struct FnPolicy<F>(F);

impl<F> Policy for FnPolicy<F>
where
    F: Fn(&ToolRequest) -> Result<PolicyDecision, PolicyError> + Send + Sync,
{
    fn evaluate(&self, req: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        (self.0)(req)
    }
}

async fn drive(
    store: &Store,
    policy: impl Policy + 'static,
    tools: Vec<Arc<dyn Tool>>,
    decisions: Vec<Decision>,
    limits: Limits,
) -> (Run, Recorder, ManualClock) {
    let clock = stepping_clock();
    let rec = Recorder::default();
    let mut driver = Driver::new(
        config(store, policy, tools, &clock, &rec),
        ScriptedAgent::new(decisions),
    )
    .unwrap();
    let run = driver.start(Some("r"), "g", limits).await.unwrap();
    (run, rec, clock)
}

#[tokio::test]
async fn deny_fails_the_step_and_the_run_continues() {
    let store = Store::open(":memory:").unwrap();
    let rm = Arc::new(Counting::new("rm", SideEffect::Destructive));
    let (run, rec, _) = drive(
        &store,
        DefaultPolicy,
        shared(vec![rm.clone()]),
        vec![
            Decision::tool_call("rm", r#"{"path":"/"}"#),
            Decision::complete("1"),
        ],
        Limits::default(),
    )
    .await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(rm.count(), 0);
    let step = &store.list_steps("r").unwrap()[0];
    let o = step.observation.as_ref().unwrap();
    assert_eq!(o.kind, ObservationKind::PolicyDenied);
    assert_eq!(o.summary, "denied: destructive tools are denied");
    assert_eq!(o.content.as_ref().unwrap().to_value()["tool"], "rm");
    assert_eq!(step.policy.as_ref().unwrap().outcome, Outcome::Deny);
    assert_eq!(
        &rec.types()[2..7],
        [
            "step.started",
            "step.decided",
            "step.policy",
            "step.failed",
            "step.started"
        ]
    );
}

#[tokio::test]
async fn abort_ends_the_run_with_the_step_in_one_transaction() {
    let store = Store::open(":memory:").unwrap();
    let t = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    let policy = FnPolicy(|_: &ToolRequest| Ok(PolicyDecision::abort("pushing is forbidden here")));
    let (run, rec, _) = drive(
        &store,
        policy,
        shared(vec![t.clone()]),
        vec![Decision::tool_call("push", "{}")],
        Limits::default(),
    )
    .await;
    assert_eq!(
        (run.status, run.reason),
        (RunStatus::Failed, Some(TerminalReason::PolicyAbort))
    );
    assert_eq!(run.reason_detail, "pushing is forbidden here");
    assert_eq!(t.count(), 0);
    let o = store.list_steps("r").unwrap()[0]
        .observation
        .clone()
        .unwrap();
    assert_eq!(o.summary, "aborted: pushing is forbidden here");
    assert_eq!(
        &rec.types()[3..],
        ["step.decided", "step.policy", "step.failed", "run.finished"]
    );
}

#[tokio::test]
async fn policy_errors_and_panics_end_the_run_internal_error_without_step_policy() {
    for panics in [false, true] {
        let store = Store::open(":memory:").unwrap();
        let t = Arc::new(Counting::new("t", SideEffect::ReadOnly));
        let policy = FnPolicy(move |_: &ToolRequest| {
            if panics {
                panic!("policy bug");
            }
            Err(PolicyError::new("rules file unreadable"))
        });
        let (run, rec, _) = drive(
            &store,
            policy,
            shared(vec![t.clone()]),
            vec![Decision::tool_call("t", "{}")],
            Limits::default(),
        )
        .await;
        assert_eq!(run.status, RunStatus::Failed);
        assert_eq!(run.reason, Some(TerminalReason::InternalError));
        assert!(
            run.reason_detail.starts_with("policy: "),
            "{}",
            run.reason_detail
        );
        assert!(!rec.types().contains(&"step.policy".to_string()));
        let failed = rec
            .events()
            .into_iter()
            .find(|e| e.event_type == EventType::StepFailed)
            .unwrap();
        assert!(
            failed.payload.contains("policy error: "),
            "{}",
            failed.payload
        );
        assert_eq!(t.count(), 0);
    }
}

#[tokio::test]
async fn a_policy_sees_canonical_arguments_whatever_the_spelling() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let policy = FnPolicy(move |req: &ToolRequest| {
        log.lock().unwrap().push(req.args.as_str().to_owned());
        if req.args.as_str().contains("&&") {
            Ok(PolicyDecision::deny("no chaining"))
        } else {
            Ok(PolicyDecision::allow())
        }
    });
    let store = Store::open(":memory:").unwrap();
    let sh = Arc::new(Counting::new("sh", SideEffect::LocalMutation));
    let (run, _, _) = drive(
        &store,
        policy,
        shared(vec![sh.clone()]),
        vec![
            Decision::tool_call("sh", r#"{"cmd":"a && b"}"#),
            Decision::tool_call("sh", r#"{ "cmd" : "a \u0026\u0026 b" }"#),
            Decision::tool_call("sh", r#"{"cmd":"<ok>"}"#),
            Decision::complete("1"),
        ],
        Limits::default(),
    )
    .await;
    assert_eq!(run.status, RunStatus::Completed);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            r#"{"cmd":"a && b"}"#,
            r#"{"cmd":"a && b"}"#,
            r#"{"cmd":"<ok>"}"#
        ]
    );
    assert_eq!(sh.count(), 1);
}

fn always(tool: &str, n: usize) -> Vec<Decision> {
    (0..n)
        .map(|i| Decision::tool_call(tool, format!(r#"{{"i":{i}}}"#)))
        .collect()
}

#[tokio::test]
async fn the_step_limit_is_checked_before_a_step_starts() {
    let store = Store::open(":memory:").unwrap();
    let t = Arc::new(Counting::new("t", SideEffect::ReadOnly));
    let (run, rec, _) = drive(
        &store,
        DefaultPolicy,
        shared(vec![t.clone()]),
        always("t", 10),
        Limits::default().max_steps(3),
    )
    .await;
    assert_eq!(
        (run.status, run.reason),
        (RunStatus::Failed, Some(TerminalReason::LimitSteps))
    );
    assert_eq!(run.step_count, 3);
    assert_eq!(t.count(), 3);
    assert_eq!(store.list_steps("r").unwrap().len(), 3);
    let types = rec.types();
    assert_eq!(
        &types[types.len() - 3..],
        ["step.tool_finished", "limit.exceeded", "run.finished"]
    );
}

fn flaky(outcomes: Vec<bool>) -> Arc<dyn Tool> {
    let n = Arc::new(AtomicUsize::new(0));
    Arc::new(tool_fn(
        ToolSpec::new("flaky", "", SideEffect::ReadOnly),
        move |call| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            let ok = outcomes.get(i).copied().unwrap_or(false);
            async move {
                if ok {
                    Ok(ToolResult::raw(call.args.as_str()))
                } else {
                    Err(ToolError::failed("nope"))
                }
            }
        },
    ))
}

#[tokio::test]
async fn the_failure_streak_limit_fires_and_a_success_resets_it() {
    let store = Store::open(":memory:").unwrap();
    let limits = Limits::default().max_consecutive_tool_failures(2);
    let (run, rec, _) = drive(
        &store,
        DefaultPolicy,
        vec![flaky(vec![false, true, false, false, true])],
        always("flaky", 10),
        limits,
    )
    .await;
    assert_eq!(run.reason, Some(TerminalReason::RepeatedToolFailures));
    assert_eq!(run.step_count, 4, "fail, ok (reset), fail, fail");
    let limit = rec
        .events()
        .into_iter()
        .find(|e| e.event_type == EventType::LimitExceeded)
        .unwrap();
    assert!(limit.payload.contains("repeated_tool_failures"));
}

#[tokio::test]
async fn loops_of_identical_outcomes_are_detected_and_changing_results_are_not() {
    let store = Store::open(":memory:").unwrap();
    let t = Arc::new(Counting::new("t", SideEffect::ReadOnly));
    let same: Vec<Decision> = (0..5)
        .map(|_| Decision::tool_call("t", r#"{"q":1}"#))
        .collect();
    let (run, rec, _) = drive(
        &store,
        DefaultPolicy,
        shared(vec![t.clone()]),
        same,
        Limits::default().loop_threshold(3),
    )
    .await;
    assert_eq!(run.reason, Some(TerminalReason::LoopDetected));
    assert_eq!(t.count(), 3);
    let events = rec.events();
    let detected = events
        .iter()
        .find(|e| e.event_type == EventType::LoopDetected)
        .unwrap();
    let payload: serde_json::Value = serde_json::from_str(&detected.payload).unwrap();
    assert_eq!(payload["repeats"], 3);
    assert_eq!(payload["tool"], "t");
    assert_eq!(payload["args_hash"], json_hash(r#"{"q":1}"#));
    assert!(
        !events
            .iter()
            .any(|e| e.event_type == EventType::LimitExceeded)
    );

    // The same call with a result that changes each time is not a loop.
    let store = Store::open(":memory:").unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let counter: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("t", "", SideEffect::ReadOnly),
        move |_| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            async move { Ok(ToolResult::raw(format!("{i}"))) }
        },
    ));
    let mut same: Vec<Decision> = (0..5)
        .map(|_| Decision::tool_call("t", r#"{"q":1}"#))
        .collect();
    same.push(Decision::complete("1"));
    let (run, _, _) = drive(
        &store,
        DefaultPolicy,
        vec![counter],
        same,
        Limits::default().loop_threshold(3),
    )
    .await;
    assert_eq!(run.status, RunStatus::Completed);
}

fn json_hash(text: &str) -> String {
    Canonical::parse_str(text).unwrap().hash()
}

#[tokio::test]
async fn elapsed_and_active_time_limits_end_the_run() {
    // The stepping clock advances 1 s per reading.
    let store = Store::open(":memory:").unwrap();
    let t = Arc::new(Counting::new("t", SideEffect::ReadOnly));
    let (run, _, _) = drive(
        &store,
        DefaultPolicy,
        shared(vec![t.clone()]),
        always("t", 20),
        Limits::default().max_active_time(Duration::from_secs(5)),
    )
    .await;
    assert_eq!(run.reason, Some(TerminalReason::LimitActiveTime));
    assert!(run.active_ms >= 5000);

    let store = Store::open(":memory:").unwrap();
    let (run, _, _) = drive(
        &store,
        DefaultPolicy,
        shared(vec![t.clone()]),
        always("t", 20),
        Limits::default().max_elapsed_time(Duration::from_secs(10)),
    )
    .await;
    assert_eq!(run.reason, Some(TerminalReason::LimitElapsedTime));
    let detail = run.reason_detail;
    assert!(detail.contains("limit of 10000 ms"), "{detail}");
}

#[test]
fn limits_must_be_positive_where_required() {
    let store = Store::open(":memory:").unwrap();
    let gate = Gate::new(GateConfig::new(store, DefaultPolicy, vec![])).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt
        .block_on(gate.begin(None, "g", Limits::default().max_steps(0)))
        .unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidLimits(LimitsError {
            field: "max_steps",
            ..
        })
    ));
    let err = rt
        .block_on(gate.begin(Some(" "), "g", Limits::default()))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput { what: "run id", .. }));
}
