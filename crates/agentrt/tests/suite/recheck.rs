//! Re-checking recorded runs against a policy (design §17, controls 60,
//! 66–68): rebuilt exactly, compared by outcome, kind and approval hash,
//! and every evaluation the record cannot rebuild said so.

use crate::engine;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use agentrt::policy::tool_and_args;
use agentrt::recheck::recheck;
use agentrt::recheck::{Identity, RecheckResult, SpecSource};
use agentrt::testkit::{self, RecheckError};
use agentrt::*;
use agentrt::{ids::sequential_ids, recheck::RecheckOptions, recheck::RecheckReport};

/// Allows reads and local changes, denies destruction, answers remote
/// mutations with `remote`; identified by `id`.
fn rules(id: &str, remote: Outcome) -> SideEffectPolicy {
    SideEffectPolicy::new()
        .with(SideEffect::ReadOnly, Outcome::Allow)
        .with(SideEffect::LocalMutation, Outcome::Allow)
        .with(SideEffect::RemoteMutation, remote)
        .with(SideEffect::Destructive, Outcome::Deny)
        .with_id(id)
}

fn lenient() -> SideEffectPolicy {
    rules("rules/1", Outcome::RequireApproval)
}

fn tools() -> Vec<Arc<dyn Tool>> {
    shared(vec![
        Arc::new(Counting::new("read", SideEffect::ReadOnly)),
        Arc::new(Counting::new("write", SideEffect::LocalMutation)),
        Arc::new(Counting::new("push", SideEffect::RemoteMutation)),
        Arc::new(Counting::new("wipe", SideEffect::Destructive)),
    ])
}

/// Step 0 read, 1 write, 2 push (approval, then resume), 3 wipe (denied),
/// 4 complete.
fn plan() -> Vec<Decision> {
    vec![
        Decision::tool_call("read", r#"{"path":"a"}"#),
        Decision::tool_call("write", r#"{"n":1}"#),
        Decision::tool_call("push", r#"{"ref":"main"}"#),
        Decision::tool_call("wipe", "{}"),
        Decision::complete(r#""done""#),
    ]
}

fn approve_pending(store: &Store, run_id: &str) {
    for a in store.list_approvals(run_id).unwrap() {
        if a.status == ApprovalStatus::Pending {
            Operator::new(store.clone())
                .approve(run_id, &a.id, &DecideOptions::default())
                .unwrap();
        }
    }
}

/// Runs `decisions` under `policy` with the Driver, approving every pause.
async fn driven(
    store: &Store,
    policy: impl Policy + 'static,
    tools: Vec<Arc<dyn Tool>>,
    run_id: &str,
    decisions: Vec<Decision>,
) -> Run {
    let clock = stepping_clock();
    let mut d = Driver::new(
        config(store, policy, tools, &clock, &Recorder::default())
            .with_ids(sequential_ids(&format!("{run_id}-"))),
        ScriptedAgent::new(decisions),
    )
    .unwrap();
    let mut run = d.start(Some(run_id), "g", Limits::default()).await.unwrap();
    while run.status == RunStatus::WaitingForApproval {
        approve_pending(store, run_id);
        run = d.resume(run_id).await.unwrap();
    }
    run
}

/// The same plan through a gate loop, attaching after each approval.
async fn gated(store: &Store, policy: impl Policy + 'static, run_id: &str) -> Run {
    let clock = stepping_clock();
    let gate = Gate::new(
        config(store, policy, tools(), &clock, &Recorder::default())
            .with_ids(sequential_ids(&format!("{run_id}-"))),
    )
    .unwrap();
    let decisions = plan();
    let mut session = gate
        .begin(Some(run_id), "g", Limits::default())
        .await
        .unwrap();
    loop {
        while let Some(step) = session.step().await.unwrap() {
            let decision = decisions[step.index as usize].clone();
            let verdict = session.propose(decision).await.unwrap();
            if verdict.outcome == VerdictOutcome::Allowed {
                session.execute().await.unwrap();
            }
        }
        let run = session.run().clone();
        session.close().await.unwrap();
        if run.status != RunStatus::WaitingForApproval {
            return run;
        }
        approve_pending(store, run_id);
        // A closed session keeps its claim on the run until it is dropped.
        drop(session);
        let (attached, verdict) = gate.attach(run_id).await.unwrap();
        session = attached;
        assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
        session.execute().await.unwrap();
    }
}

fn results(report: &RecheckReport) -> Vec<(Option<u64>, RecheckResult, bool)> {
    report
        .evaluations
        .iter()
        .map(|e| (e.step_index, e.result, e.on_resume))
        .collect()
}

fn options() -> RecheckOptions {
    RecheckOptions::default()
}

#[tokio::test]
async fn the_same_policy_rechecks_every_evaluation_the_same_with_identity_unchanged() {
    let store = engine::store();
    let run = driven(&store, lenient(), tools(), "loop", plan()).await;
    assert_eq!(run.status, RunStatus::Completed);
    let gate_run = gated(&store, lenient(), "gate").await;
    assert_eq!(gate_run.status, RunStatus::Completed);

    for run_id in ["loop", "gate"] {
        let report = recheck(&store, run_id, &lenient(), &options()).unwrap();
        use RecheckResult::Same;
        assert_eq!(
            results(&report),
            [
                (Some(0), Same, false),
                (Some(1), Same, false),
                (Some(2), Same, false),
                (Some(2), Same, true),
                (Some(3), Same, false),
            ],
            "{run_id}:\n{report}"
        );
        assert_eq!(report.identity, Identity::Unchanged);
        assert_eq!(report.policy_id, "rules/1");
        assert_eq!(report.spec_source, SpecSource::Recorded);
        assert!(report.same() && report.complete() && report.notes.is_empty());
        assert_eq!((report.rechecked(), report.differences()), (5, 0));
        // The pause and the resume ask for the approval the run recorded.
        let approval = &store.list_approvals(run_id).unwrap()[0];
        for e in &report.evaluations[2..4] {
            assert_eq!(e.recorded_hash.as_deref(), Some(approval.hash.as_str()));
            assert_eq!(e.rechecked_hash, e.recorded_hash);
            assert_eq!(e.spec_source, Some(SpecSource::Recorded));
        }
        testkit::recheck(&store, run_id, &lenient()).unwrap();
    }

    // The JSON form carries the fields and the counts beside them.
    let report = recheck(&store, "loop", &lenient(), &options()).unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["identity"], "unchanged");
    assert_eq!(json["spec_source"], "recorded");
    assert_eq!(json["run_status"], "COMPLETED");
    assert_eq!(
        (
            &json["same"],
            &json["differences"],
            &json["rechecked"],
            &json["not_recheckable"],
            &json["complete"]
        ),
        (
            &serde_json::json!(true),
            &serde_json::json!(0),
            &serde_json::json!(5),
            &serde_json::json!(0),
            &serde_json::json!(true)
        )
    );
    assert_eq!(json["evaluations"][3]["result"], "same");
    assert_eq!(json["evaluations"][3]["on_resume"], true);
    assert_eq!(json["evaluations"][0]["recorded"]["outcome"], "allow");
    let back: RecheckReport = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
}

/// Keeps every request and view it is handed.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(ToolRequest, RunView)>>>);

struct Watching<P> {
    inner: P,
    seen: Seen,
}

impl<P: Policy> Policy for Watching<P> {
    fn evaluate(&self, req: &ToolRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        self.seen
            .0
            .lock()
            .unwrap()
            .push((req.clone(), view.clone()));
        self.inner.evaluate(req, view)
    }
    fn policy_id(&self) -> Option<String> {
        self.inner.policy_id()
    }
}

/// Asks for approval of remote mutations, presenting the round: 0 before
/// any approval, 1 after. The first resume asks again (round 1); the
/// second resume finds the approval it asked for.
struct Rounds;

impl Policy for Rounds {
    fn evaluate(&self, req: &ToolRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        if req.spec.side_effect != SideEffect::RemoteMutation {
            return lenient().evaluate(req, view);
        }
        let round = view.approvals.len().min(1);
        let presentation = serde_json::json!({ "round": round });
        PolicyDecision::need_approval_json("push", "", &tool_and_args(req), &presentation)
            .map_err(PolicyError::new)
    }
    fn policy_id(&self) -> Option<String> {
        Some("rounds/1".into())
    }
}

/// Checks that re-checking `run_id` under `inner` hands the policy exactly
/// what it was handed live (`live`), and returns the views.
fn same_as_live<P: Policy>(store: &Store, run_id: &str, inner: P, live: &Seen) -> Vec<RunView> {
    let again = Seen::default();
    let policy = Watching {
        inner,
        seen: again.clone(),
    };
    testkit::recheck(store, run_id, &policy).unwrap();
    let live = live.0.lock().unwrap();
    let again = again.0.lock().unwrap();
    assert_eq!(again.len(), live.len(), "{run_id}");
    for (i, ((req, view), (req2, view2))) in live.iter().zip(again.iter()).enumerate() {
        assert_eq!(req, req2, "{run_id} evaluation {i}: request");
        assert_eq!(view.run, view2.run, "{run_id} evaluation {i}: run");
        assert_eq!(view.steps, view2.steps, "{run_id} evaluation {i}: steps");
        assert_eq!(
            view.approvals, view2.approvals,
            "{run_id} evaluation {i}: approvals"
        );
    }
    again.iter().map(|(_, view)| view.clone()).collect()
}

#[tokio::test]
async fn the_rebuilt_request_and_view_equal_what_the_policy_was_handed() {
    let store = engine::store();
    let watching = |inner, seen: &Seen| Watching {
        inner,
        seen: seen.clone(),
    };
    let (driver, gate, rounds) = (Seen::default(), Seen::default(), Seen::default());
    driven(
        &store,
        watching(lenient(), &driver),
        tools(),
        "driver",
        plan(),
    )
    .await;
    gated(&store, watching(lenient(), &gate), "gate").await;
    let push = vec![Decision::tool_call("push", "{}"), Decision::complete("1")];
    let run = driven(
        &store,
        Watching {
            inner: Rounds,
            seen: rounds.clone(),
        },
        tools(),
        "rounds",
        push,
    )
    .await;
    assert_eq!(run.status, RunStatus::Completed);

    for (run_id, live) in [("driver", &driver), ("gate", &gate)] {
        let views = same_as_live(&store, run_id, lenient(), live);
        assert_eq!(views.len(), 5);
        // The resume saw the run waiting and its approval approved; the
        // steps after it see the approval as it was then.
        assert_eq!(views[3].run.status, RunStatus::WaitingForApproval);
        assert_eq!(views[3].approvals[0].status, ApprovalStatus::Approved);
        assert_eq!(views[4].approvals.len(), 1);
    }
    // Live pause, a resume that asks again, a resume that runs: each view
    // holds the approvals as they were, the second one pending no more.
    let views = same_as_live(&store, "rounds", Rounds, &rounds);
    let statuses: Vec<Vec<ApprovalStatus>> = views
        .iter()
        .map(|v| v.approvals.iter().map(|a| a.status).collect())
        .collect();
    use ApprovalStatus::Approved;
    assert_eq!(statuses, [vec![], vec![Approved], vec![Approved, Approved]]);
    assert_eq!(store.list_approvals("rounds").unwrap().len(), 2);
}

#[tokio::test]
async fn an_approval_without_a_decided_event_is_judged_by_its_decided_time() {
    let db = engine::Db::new();
    let store = db.open();
    // One clock for the loop and the operator, so decision times and
    // event times are comparable.
    let clock = stepping_clock();
    let live = Seen::default();
    let policy = Watching {
        inner: lenient(),
        seen: live.clone(),
    };
    let mut d = Driver::new(
        config(&store, policy, tools(), &clock, &Recorder::default()),
        ScriptedAgent::new(plan()),
    )
    .unwrap();
    let run = d.start(Some("r"), "g", Limits::default()).await.unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approval = store.list_approvals("r").unwrap()[0].id.clone();
    Operator::new(store.clone())
        .with_clock(clock.clock())
        .approve("r", &approval, &DecideOptions::default())
        .unwrap();
    let run = d.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let removed = db.exec("DELETE FROM events WHERE type = 'approval.decided'");
    assert_eq!(removed, 1);
    let views = same_as_live(&store, "r", lenient(), &live);
    assert_eq!(views[3].approvals[0].status, ApprovalStatus::Approved);
}

#[tokio::test]
async fn a_stricter_policy_names_exactly_the_differing_steps() {
    let store = engine::store();
    driven(&store, lenient(), tools(), "r", plan()).await;
    let strict = rules("rules/2", Outcome::Deny);
    let report = testkit::recheck_differs(&store, "r", &strict, &[2]).unwrap();
    assert_eq!(report.identity, Identity::Changed);
    assert_eq!(
        report.differences(),
        2,
        "the pause and the resume of step 2"
    );
    let first = &report.evaluations[2];
    assert_eq!(first.result, RecheckResult::Different);
    assert_eq!(
        first.recorded.as_ref().map(|d| d.outcome),
        Some(Outcome::RequireApproval)
    );
    assert_eq!(
        first.rechecked.as_ref().map(|d| d.outcome),
        Some(Outcome::Deny)
    );
    assert!(first.recorded_hash.is_some() && first.rechecked_hash.is_none());
    let text = report.to_string();
    assert!(
        text.starts_with(
            "run r COMPLETED: 2 of 5 re-checked evaluations differ; policy changed: recorded \"rules/1\", given \"rules/2\"; recorded specs\n\
             DIFFERENT step 2 seq "
        ),
        "{text}"
    );
    assert!(text.contains("push: require_approval -> deny: remote_mutation tools are denied\n"));
    assert!(text.contains("push (on resume): require_approval -> deny:"));

    // Naming other steps fails, and the failure lists the evaluations.
    let err = testkit::recheck_differs(&store, "r", &strict, &[1]).unwrap_err();
    let RecheckError::Differs { got, want, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!((got.as_slice(), want.as_slice()), (&[2][..], &[1][..]));
    assert!(
        err.to_string()
            .contains("steps 2 differ, want 1:\nrun r COMPLETED")
    );
    assert!(matches!(
        testkit::recheck(&store, "r", &strict),
        Err(RecheckError::Differs { .. })
    ));
}

/// Asks for approval of remote mutations, showing `title`.
struct Asks {
    title: &'static str,
    reason: &'static str,
}

impl Policy for Asks {
    fn evaluate(&self, req: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        if req.spec.side_effect != SideEffect::RemoteMutation {
            return Ok(PolicyDecision::allow());
        }
        let presentation = serde_json::json!({ "title": self.title });
        PolicyDecision::need_approval_json(
            "publish",
            self.reason,
            &tool_and_args(req),
            &presentation,
        )
        .map_err(PolicyError::new)
    }
    fn policy_id(&self) -> Option<String> {
        Some(format!("asks/{}", self.title))
    }
}

#[tokio::test]
async fn a_changed_presentation_differs_by_hash_and_the_reason_is_ignored() {
    let store = engine::store();
    let clock = stepping_clock();
    let asks = Asks {
        title: "Push main",
        reason: "publishes",
    };
    let mut d = Driver::new(
        config(&store, asks, tools(), &clock, &Recorder::default()),
        ScriptedAgent::new([Decision::tool_call("push", r#"{"ref":"main"}"#)]),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let stored = store.list_approvals("r").unwrap()[0].hash.clone();

    let reworded = Asks {
        title: "Push main",
        reason: "entirely other words",
    };
    let report = recheck(&store, "r", &reworded, &options()).unwrap();
    let e = &report.evaluations[0];
    assert_eq!(e.result, RecheckResult::Same, "{report}");
    assert_eq!(e.recorded_hash.as_deref(), Some(stored.as_str()));
    assert_eq!(e.rechecked_hash, e.recorded_hash);

    let retitled = Asks {
        title: "Push to production",
        reason: "publishes",
    };
    let report = recheck(&store, "r", &retitled, &options()).unwrap();
    let e = &report.evaluations[0];
    assert_eq!(e.result, RecheckResult::Different, "{report}");
    assert_eq!(e.recorded_hash.as_deref(), Some(stored.as_str()));
    assert!(e.rechecked_hash.is_some() && e.rechecked_hash != e.recorded_hash);
    assert!(
        e.detail.starts_with("asks for another approval"),
        "{}",
        e.detail
    );
    assert_eq!(report.identity, Identity::Changed);
}

#[tokio::test]
async fn current_tools_make_a_missing_tool_or_failing_arguments_different() {
    let store = engine::store();
    driven(&store, lenient(), tools(), "r", plan()).await;
    let specs: Vec<ToolSpec> = tools().iter().map(|t| t.spec()).collect();
    let current = |specs: Vec<ToolSpec>| RecheckOptions { tools: Some(specs) };

    // The tools as they were: all the same, with the current specs.
    let report = recheck(&store, "r", &lenient(), &current(specs.clone())).unwrap();
    assert!(report.same() && report.rechecked() == 5, "{report}");
    assert_eq!(report.spec_source, SpecSource::Current);
    assert!(
        report
            .evaluations
            .iter()
            .all(|e| e.spec_source == Some(SpecSource::Current))
    );

    // `write` is gone and `read` now wants a number.
    let changed: Vec<ToolSpec> = specs
        .iter()
        .filter(|s| s.name != "write")
        .map(|s| match s.name.as_str() {
            "read" => s
                .clone()
                .with_schema_str(r#"{"type":"object","properties":{"path":{"type":"number"}}}"#)
                .unwrap(),
            _ => s.clone(),
        })
        .collect();
    let report = recheck(&store, "r", &lenient(), &current(changed)).unwrap();
    assert_eq!(report.differing_steps(), [0, 1], "{report}");
    let read = &report.evaluations[0];
    assert!(
        read.detail
            .starts_with("the arguments fail the current tool's schema"),
        "{}",
        read.detail
    );
    assert!(read.rechecked.is_none());
    let write = &report.evaluations[1];
    assert_eq!(
        write.detail,
        "tool \"write\" is not among the current tools: the request would be refused before the policy"
    );

    // A changed description changes the spec, so the approval it asks for.
    let redescribed: Vec<ToolSpec> = specs
        .iter()
        .map(|s| ToolSpec {
            description: format!("{} (v2)", s.description),
            ..s.clone()
        })
        .collect();
    let report = recheck(&store, "r", &lenient(), &current(redescribed)).unwrap();
    assert_eq!(report.differing_steps(), [2], "{report}");

    // Current tools a gate would refuse are refused.
    let bad = vec![ToolSpec {
        timeout_ms: 0,
        ..specs[0].clone()
    }];
    assert!(matches!(
        recheck(&store, "r", &lenient(), &current(bad)),
        Err(Error::InvalidTool { .. })
    ));
}

struct Fails;

impl Policy for Fails {
    fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        Err(PolicyError::new("the rules file is missing"))
    }
    fn policy_id(&self) -> Option<String> {
        Some("fails/1".into())
    }
}

/// Asks for approval of remote mutations, and fails when asked on resume.
struct FailsOnResume;

impl Policy for FailsOnResume {
    fn evaluate(&self, req: &ToolRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        if view.run.status == RunStatus::WaitingForApproval {
            return Err(PolicyError::new("the rules service is down"));
        }
        lenient().evaluate(req, view)
    }
}

struct Panics;

impl Policy for Panics {
    fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        panic!("the policy broke")
    }
}

#[tokio::test]
async fn a_policy_error_is_not_recheckable_at_its_step_failed() {
    let store = engine::store();
    let run = driven(&store, Fails, tools(), "live", plan()).await;
    assert_eq!(run.reason, Some(TerminalReason::InternalError));
    let report = recheck(&store, "live", &lenient(), &options()).unwrap();
    let failed = store
        .list_events("live")
        .unwrap()
        .into_iter()
        .find(|e| e.event_type == EventType::StepFailed)
        .unwrap();
    assert_eq!(report.evaluations.len(), 1, "{report}");
    let e = &report.evaluations[0];
    assert_eq!(
        (e.result, e.seq, e.step_index, e.on_resume),
        (RecheckResult::NotRecheckable, failed.seq, Some(0), false)
    );
    assert_eq!(
        e.detail,
        "policy failed; no evaluation recorded: the rules file is missing"
    );
    assert!(!report.complete() && report.rechecked() == 0);
    assert!(matches!(
        testkit::recheck(&store, "live", &lenient()),
        Err(RecheckError::NotRecheckable { count: 1, .. })
    ));
    let partial = testkit::recheck_partial(&store, "live", &lenient()).unwrap();
    assert_eq!(partial.skipped.len(), 1);
    assert!(partial.to_string().contains("step 0 seq"), "{partial}");

    // A policy that fails on resume: the pause re-checks, the resume cannot.
    let push = vec![Decision::tool_call("push", "{}")];
    let run = driven(&store, FailsOnResume, tools(), "resume", push.clone()).await;
    assert_eq!(run.reason, Some(TerminalReason::InternalError));
    let report = recheck(&store, "resume", &FailsOnResume, &options()).unwrap();
    assert_eq!(
        results(&report),
        [
            (Some(0), RecheckResult::Same, false),
            (Some(0), RecheckResult::NotRecheckable, true),
        ],
        "{report}"
    );

    // A policy that fails, or panics, when re-checked differs.
    driven(&store, lenient(), tools(), "ok", push).await;
    for policy in [&Fails as &dyn Policy, &Panics] {
        let report = recheck(&store, "ok", policy, &options()).unwrap();
        let e = &report.evaluations[0];
        assert_eq!(e.result, RecheckResult::Different);
        assert!(e.rechecked.is_none());
        assert!(e.detail.starts_with("policy failed: "), "{}", e.detail);
    }
}

const TTL: Duration = Duration::from_millis(300);

/// A tool whose first call hangs forever (the process "dies" while it
/// runs); later calls return at once.
fn hanging_once(name: &str, calls: Arc<AtomicUsize>) -> Arc<dyn Tool> {
    let spec = ToolSpec::new(name, "", SideEffect::LocalMutation);
    Arc::new(tool_fn(spec, move |call| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                std::future::pending::<()>().await;
            }
            Ok(ToolResult::raw(call.args.as_str()))
        }
    }))
}

fn leased(store: &Store, tool: &Arc<dyn Tool>, owner: &str) -> GateConfig {
    GateConfig::new(store.clone(), lenient(), vec![tool.clone()])
        .with_ids(sequential_ids(&format!("{owner}-")))
        .with_lease_ttl(TTL)
        .with_lease_owner(owner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_policy_pauses_are_listed_as_not_a_policy_evaluation() {
    let store = engine::store();
    let calls = Arc::new(AtomicUsize::new(0));
    let tool = hanging_once("write", calls.clone());
    // The first owner dies while the tool runs.
    let mut first = Driver::new(
        leased(&store, &tool, "first"),
        ScriptedAgent::new([Decision::tool_call("write", r#"{"n":1}"#)]),
    )
    .unwrap();
    let task = tokio::spawn(async move {
        first
            .start(Some("r"), "g", Limits::default())
            .await
            .map(|_| ())
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    task.abort();
    let _ = task.await;
    tokio::time::sleep(TTL + Duration::from_millis(150)).await;
    // The next owner pauses the interrupted side effect for an operator.
    let mut second = Driver::new(
        leased(&store, &tool, "second"),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    let run = second.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let report = recheck(&store, "r", &lenient(), &options()).unwrap();
    assert!(
        report.notes.contains(
            &"the run is WAITING_FOR_APPROVAL: re-checked up to its current state".into()
        ),
        "{report}"
    );
    approve_pending(&store, "r");
    let run = second.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let report = testkit::recheck(&store, "r", &lenient()).unwrap();
    assert_eq!(
        results(&report),
        [
            (Some(0), RecheckResult::Same, false),
            (Some(0), RecheckResult::NotAPolicyEvaluation, false),
            (Some(0), RecheckResult::Same, true),
        ],
        "{report}"
    );
    let pause = &report.evaluations[1];
    assert_eq!(
        pause.detail,
        "not a policy evaluation: an interrupted side effect's pause"
    );
    assert_eq!(pause.tool, "write");
    assert!(pause.rechecked.is_none() && pause.spec_source.is_none());
    assert!(report.notes.is_empty());
    assert!(
        report.to_string().contains("skipped   step 0 seq "),
        "{report}"
    );
}

#[tokio::test]
async fn a_run_not_finished_gets_a_note_and_an_unknown_run_is_not_found() {
    let store = engine::store();
    let clock = stepping_clock();
    let mut d = Driver::new(
        config(&store, lenient(), tools(), &clock, &Recorder::default()),
        ScriptedAgent::new([Decision::tool_call("push", "{}")]),
    )
    .unwrap();
    let run = d.start(Some("r"), "g", Limits::default()).await.unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let report = testkit::recheck(&store, "r", &lenient()).unwrap();
    assert_eq!(report.run_status, RunStatus::WaitingForApproval);
    assert_eq!(
        report.notes,
        ["the run is WAITING_FOR_APPROVAL: re-checked up to its current state"]
    );
    assert!(
        report.to_string().ends_with(
            "note: the run is WAITING_FOR_APPROVAL: re-checked up to its current state\n"
        )
    );

    let err = recheck(&store, "ghost", &lenient(), &options()).unwrap_err();
    assert!(
        matches!(err, Error::NotFound { what: "run", ref id } if id == "ghost"),
        "{err:?}"
    );
    assert!(matches!(
        testkit::recheck(&store, "ghost", &lenient()),
        Err(RecheckError::Runtime {
            source: Error::NotFound { .. },
            ..
        })
    ));

    // A run with no policy evaluation re-checks nothing: the testkit says so.
    let mut d = Driver::new(
        config(&store, lenient(), tools(), &clock, &Recorder::default())
            .with_ids(sequential_ids("e-")),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    d.start(Some("empty"), "g", Limits::default())
        .await
        .unwrap();
    let report = recheck(&store, "empty", &lenient(), &options()).unwrap();
    assert_eq!(report.notes, ["no policy evaluation is recorded"]);
    assert_eq!(report.identity, Identity::Unknown);
    assert!(report.same() && report.complete() && report.rechecked() == 0);
    assert!(matches!(
        testkit::recheck(&store, "empty", &lenient()),
        Err(RecheckError::NothingRechecked { .. })
    ));
    assert!(testkit::recheck_partial(&store, "empty", &lenient()).is_ok());

    // A policy without an identity leaves the identity unknown.
    let report = recheck(&store, "r", &DefaultPolicy, &options()).unwrap();
    assert_eq!(report.identity, Identity::Unknown);
    assert!(report.same(), "{report}");
}

#[tokio::test]
async fn a_tampered_spec_or_a_damaged_record_is_not_recheckable() {
    let db = engine::Db::new();
    let store = db.open();
    driven(&store, lenient(), tools(), "r", plan()).await;
    let read_hash = tools()[0].spec().hash();
    db.exec(&format!(
        "UPDATE tool_specs SET spec_json = replace(spec_json, 'read tool', 'READ tool') WHERE hash = {}",
        sql_text(&read_hash)
    ));
    let report = recheck(&store, "r", &lenient(), &options()).unwrap();
    let e = &report.evaluations[0];
    assert_eq!(e.result, RecheckResult::NotRecheckable, "{report}");
    assert_eq!(
        e.detail,
        format!("not re-checkable: spec {read_hash}: the stored spec no longer hashes to its key")
    );
    assert_eq!(report.rechecked(), 4, "the other tools' specs are intact");
    assert!(matches!(
        testkit::recheck(&store, "r", &lenient()),
        Err(RecheckError::NotRecheckable { count: 1, .. })
    ));
    db.exec(&format!(
        "DELETE FROM tool_specs WHERE hash = {}",
        sql_text(&read_hash)
    ));
    let report = recheck(&store, "r", &lenient(), &options()).unwrap();
    assert_eq!(
        report.evaluations[0].detail,
        format!("not re-checkable: spec {read_hash} is not stored")
    );

    // A step.policy that does not decode, or whose view counts more than
    // the run has, cannot be rebuilt.
    let policies: Vec<i64> = store
        .list_events("r")
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type == EventType::StepPolicy)
        .map(|e| e.seq)
        .collect();
    db.exec(&format!(
        "UPDATE events SET payload_json = '{{not json' WHERE seq = {}",
        policies[1]
    ));
    db.exec(&format!(
        "UPDATE events SET payload_json = {} WHERE seq = {}",
        engine::json_set("payload_json", "view.steps", "99"),
        policies[2]
    ));
    let report = recheck(&store, "r", &lenient(), &options()).unwrap();
    let details: Vec<&str> = report.evaluations[1..3]
        .iter()
        .map(|e| e.detail.as_str())
        .collect();
    assert!(
        details[0].starts_with("not re-checkable: its step.policy does not decode"),
        "{}",
        details[0]
    );
    assert_eq!(
        details[1],
        "not re-checkable: the view counted 99 steps and 0 approvals; the run has 5 and 1"
    );
    assert!(report.evaluations[1].recorded.is_none());
}

#[tokio::test]
async fn more_approvals_than_a_recheck_reads_whole_are_not_recheckable() {
    let db = engine::Db::new();
    let store = db.open();
    driven(&store, lenient(), tools(), "r", plan()).await;
    db.exec(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1100)
         INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json,
             request_json, hash, status, created_at, decided_at, decided_by, note, expires_at)
         SELECT 'extra-' || i, run_id, step_id, kind, capability_json, presentation_json,
             request_json, hash, status, created_at, decided_at, decided_by, note, expires_at
         FROM approvals, n WHERE run_id = 'r'",
    );
    let last = store
        .list_events("r")
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type == EventType::StepPolicy)
        .map(|e| e.seq)
        .max()
        .unwrap();
    db.exec(&format!(
        "UPDATE events SET payload_json = {} WHERE seq = {last}",
        engine::json_set("payload_json", "view.approvals", "1050"),
    ));
    let report = recheck(&store, "r", &lenient(), &options()).unwrap();
    let e = report.evaluations.last().unwrap();
    assert_eq!(
        e.detail,
        "not re-checkable: the view counted 1050 approvals, more than the 1024 a re-check reads whole"
    );
    assert_eq!(report.rechecked(), 4, "{report}");
}

/// Asks before running a chained shell command, matching the bytes `&&`.
struct NoChains {
    seen: Arc<Mutex<Vec<bool>>>,
}

impl Policy for NoChains {
    fn evaluate(&self, req: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        let chained = req.args.as_str().contains("&&");
        self.seen.lock().unwrap().push(chained);
        if !chained {
            return Ok(PolicyDecision::allow());
        }
        let both = tool_and_args(req);
        Ok(PolicyDecision::need_approval(
            "chained_command",
            "runs two commands",
            Some(both.clone()),
            Some(both),
        ))
    }
    fn policy_id(&self) -> Option<String> {
        Some("no-chains/1".into())
    }
}

#[tokio::test]
async fn a_double_ampersand_policy_decides_alike_live_on_resume_via_attach_and_on_recheck() {
    let store = engine::store();
    let shell = || -> Vec<Arc<dyn Tool>> {
        shared(vec![Arc::new(Counting::new(
            "shell",
            SideEffect::LocalMutation,
        ))])
    };
    // The agent escapes the ampersands; the policy sees the canonical bytes.
    let chained = r#"{"cmd":"make \u0026\u0026 make install"}"#;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let policy = || NoChains { seen: seen.clone() };

    // Live and on resume, through the Driver.
    let decisions = vec![
        Decision::tool_call("shell", chained),
        Decision::complete("1"),
    ];
    let run = driven(&store, policy(), shell(), "driver", decisions).await;
    assert_eq!(run.status, RunStatus::Completed);

    // Live and via attach, through a gate loop.
    let clock = stepping_clock();
    let gate = Gate::new(
        config(&store, policy(), shell(), &clock, &Recorder::default())
            .with_ids(sequential_ids("g-")),
    )
    .unwrap();
    let mut session = gate
        .begin(Some("gate"), "g", Limits::default())
        .await
        .unwrap();
    session.step().await.unwrap().unwrap();
    let verdict = session
        .propose(Decision::tool_call("shell", chained))
        .await
        .unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Pending);
    session.close().await.unwrap();
    drop(session);
    approve_pending(&store, "gate");
    let (mut session, verdict) = gate.attach("gate").await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
    session.execute().await.unwrap();
    session.step().await.unwrap().unwrap();
    session.propose(Decision::complete("1")).await.unwrap();
    session.close().await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 4);

    // On re-check: every evaluation the same, each seeing the `&&`.
    for run_id in ["driver", "gate"] {
        let report = testkit::recheck(&store, run_id, &policy()).unwrap();
        assert_eq!(report.rechecked(), 2, "{report}");
        assert!(report.evaluations[1].on_resume);
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 8);
    assert!(seen.iter().all(|&chained| chained), "{seen:?}");
}

/// Allows the first two requests it is ever asked about, then denies:
/// it reads something besides what it is handed.
struct Counter(AtomicUsize);

impl Policy for Counter {
    fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        if self.0.fetch_add(1, Ordering::SeqCst) < 2 {
            Ok(PolicyDecision::allow())
        } else {
            Ok(PolicyDecision::deny("quota used up"))
        }
    }
}

#[tokio::test]
async fn a_policy_that_reads_anything_else_is_caught_by_its_own_recheck() {
    let store = engine::store();
    let reads = vec![
        Decision::tool_call("read", r#"{"path":"a"}"#),
        Decision::tool_call("read", r#"{"path":"b"}"#),
        Decision::complete("1"),
    ];
    let counter = Arc::new(Counter(AtomicUsize::new(0)));
    struct Shared(Arc<Counter>);
    impl Policy for Shared {
        fn evaluate(&self, r: &ToolRequest, v: &RunView) -> Result<PolicyDecision, PolicyError> {
            self.0.evaluate(r, v)
        }
    }
    driven(&store, Shared(counter.clone()), tools(), "r", reads).await;
    let err = testkit::recheck(&store, "r", &Shared(counter)).unwrap_err();
    let RecheckError::Differs { got, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(got, &[0, 1]);
    assert!(
        err.to_string()
            .contains("DIFFERENT step 0 seq 5 read: allow -> deny: quota used up"),
        "{err}"
    );
}

/// Denies remote mutations in runs labelled `env=prod`; otherwise as
/// [`lenient`] without approvals (allows them).
struct ProdGuard;

impl Policy for ProdGuard {
    fn evaluate(&self, req: &ToolRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        let prod = view.run.labels.get("env") == Some("prod");
        Ok(match req.spec.side_effect {
            SideEffect::RemoteMutation if prod => PolicyDecision::deny("no pushes in prod"),
            _ => PolicyDecision::allow(),
        })
    }
    fn policy_id(&self) -> Option<String> {
        Some("prod-guard/1".into())
    }
}

#[tokio::test]
async fn a_policy_that_reads_the_runs_labels_is_handed_them_again_on_recheck() {
    let store = engine::store();
    for (run_id, env) in [("prod", "env=prod"), ("dev", "env=dev")] {
        let live = Seen::default();
        let mut d = Driver::new(
            config(
                &store,
                Watching {
                    inner: ProdGuard,
                    seen: live.clone(),
                },
                tools(),
                &stepping_clock(),
                &Recorder::default(),
            )
            .with_ids(sequential_ids(&format!("{run_id}-"))),
            ScriptedAgent::new([
                Decision::tool_call("push", r#"{"ref":"main"}"#),
                Decision::complete("1"),
            ]),
        )
        .unwrap();
        let labels = Labels::parse([env]).unwrap();
        let run = d
            .start_labelled(Some(run_id), "g", Limits::default(), labels.clone())
            .await
            .unwrap();
        assert_eq!(run.status, RunStatus::Completed);
        let step = &store.list_steps(run_id).unwrap()[0];
        let outcome = step.policy.as_ref().map(|p| p.outcome);
        let want = if run_id == "prod" {
            Outcome::Deny
        } else {
            Outcome::Allow
        };
        assert_eq!(outcome, Some(want), "{run_id}");
        // The rebuilt run (labels included) equals the one handed live.
        let views = same_as_live(&store, run_id, ProdGuard, &live);
        assert_eq!(views[0].run.labels, labels);
        let report = recheck(&store, run_id, &ProdGuard, &options()).unwrap();
        assert!(report.same() && report.rechecked() == 1, "{report}");
    }
}
