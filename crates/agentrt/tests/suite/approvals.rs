//! Hash-bound approvals: pause, approve, reject, expiry, resume.

use crate::engine;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use crate::common::*;
use agentrt::*;
use agentrt::{
    clock::ManualClock, ids::IdSource, ids::sequential_ids, model::Origin, model::StepStatus,
};

struct Fixture {
    ids: IdSource,
    store: Store,
    clock: ManualClock,
    rec: Recorder,
    push: Arc<Counting>,
}

impl Fixture {
    fn new(store: Store) -> Fixture {
        Fixture {
            ids: sequential_ids("id"),
            store,
            clock: stepping_clock(),
            rec: Recorder::default(),
            push: Arc::new(Counting::new("push", SideEffect::RemoteMutation)),
        }
    }

    fn driver(
        &self,
        policy: impl Policy + 'static,
        decisions: Vec<Decision>,
    ) -> Driver<ScriptedAgent> {
        Driver::new(
            config(
                &self.store,
                policy,
                shared(vec![self.push.clone()]),
                &self.clock,
                &self.rec,
            )
            .with_ids(self.ids.clone()),
            ScriptedAgent::new(decisions),
        )
        .unwrap()
    }

    async fn paused(&self, limits: Limits) -> (Run, Approval) {
        let mut d = self.driver(
            DefaultPolicy,
            vec![Decision::tool_call("push", r#"{"ref":"main"}"#)],
        );
        let run = d.start(Some("r"), "publish", limits).await.unwrap();
        assert_eq!(run.status, RunStatus::WaitingForApproval);
        let approval = self.store.list_approvals("r").unwrap().pop().unwrap();
        (run, approval)
    }

    fn operator(&self) -> Operator {
        Operator::new(self.store.clone()).with_clock(self.clock.clock())
    }

    fn approve(&self, id: &str) -> Result<Approval> {
        self.operator().approve(
            "r",
            id,
            &DecideOptions {
                by: "alice",
                note: "ok",
                shown_hash: None,
            },
        )
    }
}

fn opts<'a>(shown: Option<&'a str>) -> DecideOptions<'a> {
    DecideOptions {
        by: "alice",
        note: "looks right",
        shown_hash: shown,
    }
}

#[tokio::test]
async fn require_approval_pauses_with_policy_before_request() {
    let f = Fixture::new(engine::store());
    let (run, approval) = f.paused(Limits::default()).await;
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert_eq!(approval.status, ApprovalStatus::Pending);
    assert_eq!(approval.kind, "remote_mutation");
    assert_eq!(
        approval.capability.as_str(),
        r#"{"args":{"ref":"main"},"tool":"push"}"#
    );
    let types = f.rec.types();
    assert_eq!(
        &types[3..],
        ["step.decided", "step.policy", "approval.requested"]
    );
    let step = &f.store.list_steps("r").unwrap()[0];
    assert_eq!(step.status, StepStatus::AwaitingApproval);
    assert_eq!(f.push.count(), 0);
    let (owner, expires) = f.store.lease("r").unwrap();
    assert_eq!(
        (owner.as_str(), expires.as_str()),
        ("", ""),
        "a paused run holds no lease"
    );
}

#[tokio::test]
async fn the_approval_hash_ignores_spelling_and_origin() {
    let mut hashes = Vec::new();
    for decision in [
        Decision::tool_call("push", r#"{"ref":"main","n":1.0}"#),
        Decision::tool_call("push", "{ \"n\" : 1.0,\n \"ref\" : \"\\u006dain\" }")
            .with_origin(Origin::Operator),
    ] {
        let f = Fixture::new(engine::store());
        let mut d = f.driver(DefaultPolicy, vec![decision]);
        d.start(Some("r"), "g", Limits::default()).await.unwrap();
        hashes.push(f.store.list_approvals("r").unwrap()[0].hash.clone());
    }
    assert_eq!(hashes[0], hashes[1]);
}

#[tokio::test]
async fn approve_then_resume_runs_the_recorded_request_exactly_once() {
    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(Limits::default()).await;
    let decided = f.approve(&approval.id).unwrap();
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.decided_by, "alice");
    assert_eq!(
        f.store.get_run("r").unwrap().status,
        RunStatus::WaitingForApproval,
        "approving does not resume"
    );

    let mut d = f.driver(DefaultPolicy, vec![Decision::complete("\"pushed\"")]);
    let run = d.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(f.push.count(), 1);
    assert_eq!(
        f.push.seen.lock().unwrap()[0].args.as_str(),
        r#"{"ref":"main"}"#
    );
    let started = f
        .store
        .list_events("r")
        .unwrap()
        .into_iter()
        .find(|e| e.event_type == EventType::StepToolStarted)
        .unwrap();
    let payload: serde_json::Value = serde_json::from_str(&started.payload).unwrap();
    assert_eq!(payload["approval_id"], approval.id.as_str());
    // A second resume of the finished run runs nothing.
    let err = d.resume("r").await.unwrap_err();
    assert!(err.is_run_state());
    assert_eq!(f.push.count(), 1);
    let types = f.rec.types();
    let resumed_at = types.iter().position(|t| t == "run.resumed").unwrap();
    assert_eq!(
        &types[resumed_at..resumed_at + 4],
        [
            "run.resumed",
            "step.policy",
            "step.tool_started",
            "step.tool_finished"
        ]
    );
}

#[tokio::test]
async fn a_tampered_approval_is_refused_on_approve_and_on_resume() {
    let db = engine::Db::new();
    let f = Fixture::new(db.open());
    let (_, approval) = f.paused(Limits::default()).await;
    db.exec(
        "UPDATE approvals SET capability_json = '{\"args\":{\"ref\":\"prod\"},\"tool\":\"push\"}'",
    );
    let err = f.approve(&approval.id).unwrap_err();
    assert!(matches!(err, Error::ApprovalHash { .. }), "{err:?}");

    // Restore, approve, then tamper with the request before resuming.
    db.exec(&format!(
        "UPDATE approvals SET capability_json = {}",
        sql_text(approval.capability.as_str())
    ));
    f.approve(&approval.id).unwrap();
    db.exec("UPDATE approvals SET request_json = replace(request_json, 'main', 'prod')");
    let mut d = f.driver(DefaultPolicy, vec![]);
    let err = d.resume("r").await.unwrap_err();
    assert!(matches!(err, Error::ApprovalHash { .. }), "{err:?}");
    assert_eq!(f.push.count(), 0);
}

#[tokio::test]
async fn a_stale_or_empty_shown_hash_is_refused() {
    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(Limits::default()).await;
    for shown in ["", "0000"] {
        let err = f
            .operator()
            .approve("r", &approval.id, &opts(Some(shown)))
            .unwrap_err();
        assert!(matches!(err, Error::ApprovalChanged { .. }), "{err:?}");
    }
    let err = f
        .operator()
        .reject("r", &approval.id, &opts(Some("0000")))
        .unwrap_err();
    assert!(matches!(err, Error::ApprovalChanged { .. }));
    assert_eq!(
        f.store.get_approval("r", &approval.id).unwrap().status,
        ApprovalStatus::Pending
    );
    f.operator()
        .approve("r", &approval.id, &opts(Some(&approval.hash)))
        .unwrap();
}

#[tokio::test]
async fn reject_cancels_the_run_and_the_tool_never_runs() {
    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(Limits::default()).await;
    f.operator().reject("r", &approval.id, &opts(None)).unwrap();
    let run = f.store.get_run("r").unwrap();
    assert_eq!(
        (run.status, run.reason),
        (RunStatus::Cancelled, Some(TerminalReason::ApprovalRejected))
    );
    assert_eq!(run.reason_detail, "looks right");
    let step = &f.store.list_steps("r").unwrap()[0];
    assert_eq!(step.status, StepStatus::Failed);
    assert_eq!(
        step.observation.as_ref().unwrap().summary,
        "approval rejected: looks right"
    );
    assert!(
        step.decision.is_some() && step.policy.is_some(),
        "decision and policy untouched"
    );
    let err = f
        .operator()
        .approve("r", &approval.id, &opts(None))
        .unwrap_err();
    assert!(err.is_run_state(), "{err:?}");
    let mut d = f.driver(DefaultPolicy, vec![]);
    assert!(d.resume("r").await.unwrap_err().is_run_state());
    assert_eq!(f.push.count(), 0);
    assert!(
        !f.store
            .list_events("r")
            .unwrap()
            .iter()
            .any(|e| e.event_type == EventType::StepFailed)
    );
}

#[tokio::test]
async fn approval_ttl_expires_on_approve_and_on_resume() {
    let limits = Limits::default().approval_ttl(Duration::from_secs(60));
    // Through approve.
    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(limits).await;
    f.clock.advance(Duration::from_secs(3600));
    let err = f.approve(&approval.id).unwrap_err();
    assert!(matches!(err, Error::ApprovalExpired { .. }));
    assert!(err.is_not_pending());
    let run = f.store.get_run("r").unwrap();
    assert_eq!(
        (run.status, run.reason),
        (RunStatus::Cancelled, Some(TerminalReason::ApprovalExpired))
    );
    let a = f.store.get_approval("r", &approval.id).unwrap();
    assert_eq!(
        (a.status, a.note.as_str()),
        (ApprovalStatus::Expired, "expired")
    );
    assert!(
        f.approve(&approval.id).unwrap_err().is_run_state(),
        "the run is over"
    );

    // Through resume.
    let f = Fixture::new(engine::store());
    f.paused(limits).await;
    f.clock.advance(Duration::from_secs(3600));
    let mut d = f.driver(DefaultPolicy, vec![]);
    let run = d.resume("r").await.unwrap();
    assert_eq!(run.reason, Some(TerminalReason::ApprovalExpired));
    assert_eq!(f.push.count(), 0);
    let types = f.rec.types();
    assert_eq!(
        &types[types.len() - 2..],
        ["approval.decided", "run.finished"]
    );
}

#[tokio::test]
async fn grant_ttl_expires_a_stale_grant_and_approval_ttl_never_does() {
    // A grant used too late expires and runs nothing.
    let f = Fixture::new(engine::store());
    let (_, approval) = f
        .paused(Limits::default().grant_ttl(Duration::from_secs(60)))
        .await;
    f.approve(&approval.id).unwrap();
    f.clock.advance(Duration::from_secs(600));
    let mut d = f.driver(DefaultPolicy, vec![]);
    let run = d.resume("r").await.unwrap();
    assert_eq!(run.reason, Some(TerminalReason::ApprovalExpired));
    let a = f.store.get_approval("r", &approval.id).unwrap();
    assert_eq!(a.status, ApprovalStatus::Expired);
    assert_eq!(a.decided_by, "alice", "an expired grant keeps its decider");
    assert_eq!(f.push.count(), 0);

    // An approval TTL does not expire a grant.
    let f = Fixture::new(engine::store());
    let (_, approval) = f
        .paused(Limits::default().approval_ttl(Duration::from_secs(60)))
        .await;
    f.approve(&approval.id).unwrap();
    f.clock.advance(Duration::from_secs(600));
    let mut d = f.driver(DefaultPolicy, vec![Decision::complete("1")]);
    assert_eq!(d.resume("r").await.unwrap().status, RunStatus::Completed);
    assert_eq!(f.push.count(), 1);
}

#[tokio::test]
async fn the_gate_re_judges_the_grant_ttl_at_execute() {
    let f = Fixture::new(engine::store());
    let (_, approval) = f
        .paused(Limits::default().grant_ttl(Duration::from_secs(60)))
        .await;
    f.approve(&approval.id).unwrap();
    let gate = Gate::new(config(
        &f.store,
        DefaultPolicy,
        shared(vec![f.push.clone()]),
        &f.clock,
        &f.rec,
    ))
    .unwrap();
    let (mut session, verdict) = gate.attach("r").await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
    f.clock.advance(Duration::from_secs(600));
    let err = session.execute().await.unwrap_err();
    assert!(matches!(err, Error::ApprovalExpired { .. }), "{err:?}");
    assert_eq!(f.push.count(), 0);
    assert_eq!(
        f.store.get_run("r").unwrap().reason,
        Some(TerminalReason::ApprovalExpired)
    );
}

/// A policy whose answer for remote mutations is switched by the test.
#[derive(Clone, Default)]
struct Switch(Arc<AtomicU8>);

impl Policy for Switch {
    fn evaluate(&self, req: &ToolRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        match self.0.load(Ordering::SeqCst) {
            0 => DefaultPolicy.evaluate(req, view),
            1 => Ok(PolicyDecision::deny("no longer allowed")),
            2 => Ok(PolicyDecision::need_approval_json(
                "second_opinion",
                "ask again",
                &serde_json::json!({"x": 1}),
                &serde_json::json!({}),
            )
            .unwrap()),
            _ => Ok(PolicyDecision::abort("stop everything")),
        }
    }
}

#[tokio::test]
async fn resume_asks_the_policy_again() {
    // Deny on resume: the step fails, the run continues.
    let f = Fixture::new(engine::store());
    let switch = Switch::default();
    let mut d = f.driver(switch.clone(), vec![Decision::tool_call("push", "{}")]);
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let approval = f.store.list_approvals("r").unwrap()[0].clone();
    f.approve(&approval.id).unwrap();
    switch.0.store(1, Ordering::SeqCst);
    let mut d = f.driver(switch.clone(), vec![Decision::complete("1")]);
    let run = d.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(f.push.count(), 0);
    let step = &f.store.list_steps("r").unwrap()[0];
    assert_eq!(
        step.observation.as_ref().unwrap().summary,
        "denied on resume: no longer allowed"
    );

    // A different approval: pause again on the same step.
    let f = Fixture::new(engine::store());
    let switch = Switch::default();
    let mut d = f.driver(switch.clone(), vec![Decision::tool_call("push", "{}")]);
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let first = f.store.list_approvals("r").unwrap()[0].clone();
    f.approve(&first.id).unwrap();
    switch.0.store(2, Ordering::SeqCst);
    let mut d = f.driver(switch.clone(), vec![]);
    let run = d.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approvals = f.store.list_approvals("r").unwrap();
    assert_eq!(approvals.len(), 2);
    assert_eq!(approvals[1].kind, "second_opinion");
    assert_eq!(approvals[1].step_id, first.step_id);
    assert_eq!(f.push.count(), 0);
    // Only the latest approval grants: with it pending, resume changes nothing, however often.
    let before = f.store.list_events("r").unwrap().len();
    for _ in 0..3 {
        let err = d.resume("r").await.unwrap_err();
        assert!(err.is_run_state(), "{err:?}");
    }
    assert_eq!(
        f.store.list_events("r").unwrap().len(),
        before,
        "no pile-up"
    );
    // Approving the superseded first approval is refused.
    let err = f.approve(&first.id).unwrap_err();
    assert!(err.is_not_pending(), "{err:?}");
    // Approving the latest grants it: the policy (still asking for the same) lets it run.
    f.approve(&approvals[1].id).unwrap();
    let mut d = f.driver(switch.clone(), vec![Decision::complete("1")]);
    assert_eq!(d.resume("r").await.unwrap().status, RunStatus::Completed);
    assert_eq!(f.push.count(), 1);

    // Abort on resume ends the run.
    let f = Fixture::new(engine::store());
    let switch = Switch::default();
    let mut d = f.driver(switch.clone(), vec![Decision::tool_call("push", "{}")]);
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let approval = f.store.list_approvals("r").unwrap()[0].clone();
    f.approve(&approval.id).unwrap();
    switch.0.store(3, Ordering::SeqCst);
    let mut d = f.driver(switch, vec![]);
    let run = d.resume("r").await.unwrap();
    assert_eq!(
        (run.status, run.reason),
        (RunStatus::Failed, Some(TerminalReason::PolicyAbort))
    );
    assert_eq!(f.push.count(), 0);
}

#[tokio::test]
async fn resume_re_validates_arguments_against_the_current_schema() {
    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(Limits::default()).await;
    f.approve(&approval.id).unwrap();
    let strict = Arc::new(Counting {
        spec: ToolSpec::new("push", "", SideEffect::RemoteMutation)
            .with_schema_str(r#"{"type":"object","required":["remote"]}"#)
            .unwrap(),
        ..Counting::new("push", SideEffect::RemoteMutation)
    });
    let mut d = Driver::new(
        config(
            &f.store,
            DefaultPolicy,
            shared(vec![strict.clone()]),
            &f.clock,
            &f.rec,
        )
        .with_ids(f.ids.clone()),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    let run = d.resume("r").await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(strict.count(), 0);
    let step = &f.store.list_steps("r").unwrap()[0];
    assert!(
        step.observation
            .as_ref()
            .unwrap()
            .summary
            .starts_with("invalid decision on resume: ")
    );
}

#[tokio::test]
async fn a_tool_gone_at_resume_ends_the_run_reconcile_conflict() {
    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(Limits::default()).await;
    f.approve(&approval.id).unwrap();
    let mut d = Driver::new(
        config(&f.store, DefaultPolicy, vec![], &f.clock, &f.rec),
        ScriptedAgent::new([]),
    )
    .unwrap();
    let run = d.resume("r").await.unwrap();
    assert_eq!(
        (run.status, run.reason),
        (RunStatus::Failed, Some(TerminalReason::ReconcileConflict))
    );
}

#[tokio::test]
async fn two_concurrent_resumes_execute_once() {
    let db = engine::Db::new();
    let f = Fixture::new(db.open());
    let (_, approval) = f.paused(Limits::default()).await;
    f.approve(&approval.id).unwrap();
    let gate_a = Gate::new(config(
        &db.open(),
        DefaultPolicy,
        shared(vec![f.push.clone()]),
        &f.clock,
        &f.rec,
    ))
    .unwrap();
    let gate_b = Gate::new(config(
        &db.open(),
        DefaultPolicy,
        shared(vec![f.push.clone()]),
        &f.clock,
        &f.rec,
    ))
    .unwrap();
    let (mut a, va) = gate_a.attach("r").await.unwrap();
    let (mut b, vb) = gate_b.attach("r").await.unwrap();
    assert_eq!(
        (va.outcome, vb.outcome),
        (VerdictOutcome::Allowed, VerdictOutcome::Allowed)
    );
    let (ra, rb) = tokio::join!(a.execute(), b.execute());
    assert_eq!(f.push.count(), 1);
    assert!(
        ra.is_ok() != rb.is_ok(),
        "exactly one executes: {ra:?} {rb:?}"
    );
    let loser = ra.err().or(rb.err()).unwrap();
    assert!(loser.is_run_state(), "{loser:?}");
    // Within one gate, a second session on the same run is refused outright.
    let (_held, _) = {
        let f2 = Fixture::new(engine::store());
        let (_, ap) = f2.paused(Limits::default()).await;
        f2.approve(&ap.id).unwrap();
        let gate = Gate::new(config(
            &f2.store,
            DefaultPolicy,
            shared(vec![f2.push.clone()]),
            &f2.clock,
            &f2.rec,
        ))
        .unwrap();
        let first = gate.attach("r").await.unwrap();
        let err = gate.attach("r").await.unwrap_err();
        assert!(matches!(err, Error::RunLeased { .. }), "{err:?}");
        first
    };
}

#[tokio::test]
async fn cancel_ends_any_unfinished_run_and_refuses_a_finished_one() {
    let f = Fixture::new(engine::store());
    f.paused(Limits::default()).await;
    let run = f.operator().cancel("r", "bob", "wrong repository").unwrap();
    assert_eq!(
        (run.status, run.reason),
        (
            RunStatus::Cancelled,
            Some(TerminalReason::OperatorCancelled)
        )
    );
    let step = &f.store.list_steps("r").unwrap()[0];
    assert_eq!(step.status, StepStatus::Failed);
    assert_eq!(
        step.observation.as_ref().unwrap().summary,
        "cancelled by operator: wrong repository"
    );
    let approvals = f.store.list_approvals("r").unwrap();
    assert_eq!(
        approvals[0].status,
        ApprovalStatus::Pending,
        "pending approvals are left as they are"
    );
    let last = f.store.list_events("r").unwrap().pop().unwrap();
    assert!(last.payload.contains(r#""by":"bob""#));
    let err = f.operator().cancel("r", "bob", "again").unwrap_err();
    match err {
        Error::RunState { detail, status, .. } => {
            assert_eq!(status, RunStatus::Cancelled);
            assert_eq!(detail, "already CANCELLED");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        f.operator().cancel("nope", "b", "").unwrap_err(),
        Error::NotFound { what: "run", .. }
    ));
}

#[tokio::test]
async fn a_tool_finishing_after_a_cancel_is_recorded_late() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let cancel_store = store.clone();
    let tool: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("slow", "", SideEffect::LocalMutation),
        move |_| {
            let s = cancel_store.clone();
            async move {
                agentrt::operator::cancel(&s, "r", "ops", "stop").unwrap();
                Ok(ToolResult::raw("\"done anyway\""))
            }
        },
    ));
    let mut d = Driver::new(
        config(&store, DefaultPolicy, vec![tool], &clock, &rec),
        ScriptedAgent::new([Decision::tool_call("slow", "{}")]),
    )
    .unwrap();
    let run = d.start(Some("r"), "g", Limits::default()).await.unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    let events = store.list_events("r").unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.event_type, EventType::StepToolFinished);
    assert!(last.payload.contains(r#""late":true"#));
    assert_eq!(events[events.len() - 2].event_type, EventType::RunFinished);
    let step = &store.list_steps("r").unwrap()[0];
    assert_eq!(
        step.observation.as_ref().unwrap().summary,
        "cancelled by operator: stop",
        "the step row is untouched"
    );
}

#[tokio::test]
async fn operator_clocks_are_chosen_or_wall_and_errors_are_typed() {
    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(Limits::default()).await;
    let expected = f.clock.peek();
    let decided = f.approve(&approval.id).unwrap();
    assert_eq!(decided.decided_at, Some(expected));
    assert!(matches!(
        f.approve(&approval.id).unwrap_err(),
        Error::NotPending {
            status: ApprovalStatus::Approved,
            ..
        }
    ));
    assert!(matches!(
        f.approve("nope").unwrap_err(),
        Error::NotFound {
            what: "approval",
            ..
        }
    ));

    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(Limits::default()).await;
    let before = Timestamp::now();
    let decided = operator::approve(&f.store, "r", &approval.id, &opts(None)).unwrap();
    let at = decided.decided_at.unwrap();
    assert!(
        at >= before && at <= Timestamp::now(),
        "package functions use the wall clock"
    );
}

#[tokio::test]
async fn the_clock_is_read_once_per_state_change_in_a_fixed_order() {
    let f = Fixture::new(engine::store());
    f.paused(Limits::default()).await;
    // begin: created + step 0 start; step 0: decision, policy, approval = 5.
    assert_eq!(f.clock.readings(), 5);
    let approval = f.store.list_approvals("r").unwrap()[0].clone();
    f.approve(&approval.id).unwrap();
    assert_eq!(f.clock.readings(), 6);
    let mut d = f.driver(DefaultPolicy, vec![Decision::complete("1")]);
    d.resume("r").await.unwrap();
    // resume (also the policy stamp), tool start, end, step 1 start; decision, step end, run end.
    assert_eq!(f.clock.readings(), 13);
    let at: Vec<String> = f
        .store
        .list_events("r")
        .unwrap()
        .iter()
        .map(|e| format!("{} {}", e.event_type, &e.at[11..19]))
        .collect();
    assert_eq!(
        at,
        [
            "run.created 09:00:00",
            "run.started 09:00:00",
            "step.started 09:00:01",
            "step.decided 09:00:02",
            "step.policy 09:00:03",
            "approval.requested 09:00:04",
            "approval.decided 09:00:05",
            "run.resumed 09:00:06",
            "step.policy 09:00:06",
            "step.tool_started 09:00:07",
            "step.tool_finished 09:00:08",
            "step.started 09:00:09",
            "step.decided 09:00:10",
            "run.finished 09:00:12",
        ]
    );
}

#[tokio::test]
async fn active_time_excludes_the_approval_wait_and_elapsed_time_includes_it() {
    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(Limits::default()).await;
    f.approve(&approval.id).unwrap();
    f.clock.advance(Duration::from_secs(3600));
    let mut d = f.driver(DefaultPolicy, vec![Decision::complete("1")]);
    let run = d.resume("r").await.unwrap();
    // The resumed step restarts at the tool start: 1 s to its end; step 1 lasts 2 s.
    assert_eq!(run.active_ms, 3000);

    let f = Fixture::new(engine::store());
    let (_, approval) = f
        .paused(Limits::default().max_elapsed_time(Duration::from_secs(600)))
        .await;
    f.approve(&approval.id).unwrap();
    f.clock.advance(Duration::from_secs(3600));
    let mut d = f.driver(DefaultPolicy, vec![Decision::complete("1")]);
    let run = d.resume("r").await.unwrap();
    assert_eq!(run.reason, Some(TerminalReason::LimitElapsedTime));
    assert_eq!(
        f.push.count(),
        1,
        "the approved call ran; the limit stops the next step"
    );
}

#[tokio::test]
async fn a_grant_lapses_at_execute_only_once_its_ttl_is_past() {
    // The clock steps 1 s per reading: approved at A, attach reads A+1 s,
    // the tool start at execute A+2 s.
    for (ttl_ms, runs) in [(2000, true), (1999, false)] {
        let f = Fixture::new(engine::store());
        let (_, approval) = f
            .paused(Limits::default().grant_ttl(Duration::from_millis(ttl_ms)))
            .await;
        let granted = f.approve(&approval.id).unwrap().decided_at.unwrap();
        let gate = Gate::new(config(
            &f.store,
            DefaultPolicy,
            shared(vec![f.push.clone()]),
            &f.clock,
            &f.rec,
        ))
        .unwrap();
        let (mut session, verdict) = gate.attach("r").await.unwrap();
        assert_eq!(verdict.outcome, VerdictOutcome::Allowed, "{ttl_ms}");
        let executed = session.execute().await;
        let started = f
            .store
            .list_events("r")
            .unwrap()
            .into_iter()
            .filter(|e| e.event_type == EventType::StepToolStarted)
            .map(|e| e.at)
            .collect::<Vec<_>>();
        if runs {
            // Exactly at its TTL the grant still stands.
            executed.unwrap();
            assert_eq!(
                started,
                [granted.add(Duration::from_millis(ttl_ms)).to_string()]
            );
            assert_eq!(f.push.count(), 1);
        } else {
            let err = executed.unwrap_err();
            assert!(matches!(err, Error::ApprovalExpired { .. }), "{err:?}");
            assert!(started.is_empty());
            assert_eq!(f.push.count(), 0);
            assert_eq!(
                f.store.get_approval("r", &approval.id).unwrap().status,
                ApprovalStatus::Expired
            );
        }
    }
}

#[tokio::test]
async fn a_resumed_step_row_restarts_at_its_tool_start() {
    let f = Fixture::new(engine::store());
    let (_, approval) = f.paused(Limits::default()).await;
    let paused_start = f.store.list_steps("r").unwrap()[0].started_at;
    f.approve(&approval.id).unwrap();
    f.clock.advance(Duration::from_secs(3600));
    let mut d = f.driver(DefaultPolicy, vec![Decision::complete("1")]);
    d.resume("r").await.unwrap();
    let tool_started = f
        .store
        .list_events("r")
        .unwrap()
        .into_iter()
        .find(|e| e.event_type == EventType::StepToolStarted)
        .unwrap();
    let step = &f.store.list_steps("r").unwrap()[0];
    assert_ne!(step.started_at, paused_start);
    assert_eq!(
        step.started_at.to_string(),
        tool_started.at,
        "the stored start is the resumed tool start, not the first decision's"
    );
}
