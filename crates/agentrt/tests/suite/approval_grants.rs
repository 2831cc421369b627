//! Only a step's latest approval grants, even when two programs (an old and
//! a new deploy, say) attach the same waiting run on one database file.

use crate::engine;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::common::*;
use agentrt::*;
use agentrt::{clock::ManualClock, ids::sequential_ids, model::StepStatus};

/// Asks for a second opinion on every request: a changed policy whose
/// approval hashes differently from the default one.
#[derive(Clone)]
struct Opinion(&'static str);

impl Policy for Opinion {
    fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        Ok(PolicyDecision::need_approval_json(
            self.0,
            "ask again",
            &serde_json::json!({"opinion": self.0}),
            &serde_json::json!({}),
        )
        .unwrap())
    }
}

/// Answers like `inner`, but only after telling the test it was asked and
/// hearing back: the test lets another program write in between.
struct Held<P> {
    inner: P,
    asked: mpsc::Sender<()>,
    go: Mutex<mpsc::Receiver<()>>,
}

impl Policy for Held<Box<dyn Policy>> {
    fn evaluate(&self, req: &ToolRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        let _ = self.asked.send(());
        let _ = self.go.lock().unwrap().recv();
        self.inner.evaluate(req, view)
    }
}

struct Deny;

impl Policy for Deny {
    fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        Ok(PolicyDecision::deny("no longer allowed"))
    }
}

struct Abort;

impl Policy for Abort {
    fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        Ok(PolicyDecision::abort("stop everything"))
    }
}

/// A run paused on one `push` with its approval approved, in a file that
/// several programs open.
struct Shared {
    db: engine::Db,
    store: Store,
    clock: ManualClock,
    rec: Recorder,
    push: Arc<Counting>,
    granted: Approval,
}

impl Shared {
    async fn approved() -> Shared {
        let db = engine::Db::new();
        let store = db.open();
        let clock = stepping_clock();
        let rec = Recorder::default();
        let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
        let mut d = Driver::new(
            config(
                &store,
                DefaultPolicy,
                shared(vec![push.clone()]),
                &clock,
                &rec,
            )
            .with_ids(sequential_ids("first-")),
            ScriptedAgent::new([Decision::tool_call("push", r#"{"ref":"main"}"#)]),
        )
        .unwrap();
        let run = d
            .start(Some("r"), "publish", Limits::default())
            .await
            .unwrap();
        assert_eq!(run.status, RunStatus::WaitingForApproval);
        let pending = store.list_approvals("r").unwrap().remove(0);
        let granted = Operator::new(store.clone())
            .with_clock(clock.clock())
            .approve("r", &pending.id, &DecideOptions::default())
            .unwrap();
        Shared {
            db,
            store,
            clock,
            rec,
            push,
            granted,
        }
    }

    /// Another program: its own connection, policy and ids.
    fn gate(&self, policy: impl Policy + 'static, ids: &str) -> Gate {
        Gate::new(
            config(
                &self.db.open(),
                policy,
                shared(vec![self.push.clone()]),
                &self.clock,
                &self.rec,
            )
            .with_ids(sequential_ids(ids)),
        )
        .unwrap()
    }
}

#[tokio::test]
async fn a_grant_superseded_after_attach_runs_nothing_and_the_refusal_is_on_record() {
    let s = Shared::approved().await;
    // Program A (the old deploy) is allowed on the approved grant X...
    let old = s.gate(DefaultPolicy, "a-");
    let (mut a, verdict) = old.attach("r").await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
    // ...then program B (the new deploy, a changed policy) pauses the step
    // again with a new approval Y.
    let new = s.gate(Opinion("second_opinion"), "b-");
    let (_b, verdict) = new.attach("r").await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Pending);
    let latest = verdict.approval.unwrap();

    let err = a.execute().await.unwrap_err();
    match &err {
        Error::GrantSuperseded {
            approval,
            latest: newer,
        } => {
            assert_eq!(approval, &s.granted.id);
            assert_eq!(newer, &latest.id);
        }
        other => panic!("expected GrantSuperseded, got {other:?}"),
    }
    assert_eq!(
        s.push.count(),
        0,
        "the tool never ran on the superseded grant"
    );
    let run = s.store.get_run("r").unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let steps = s.store.list_steps("r").unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].status, StepStatus::AwaitingApproval);
    let approvals = s.store.list_approvals("r").unwrap();
    assert_eq!(
        approvals
            .iter()
            .map(|a| (a.id.as_str(), a.status))
            .collect::<Vec<_>>(),
        [
            (s.granted.id.as_str(), ApprovalStatus::Approved),
            (latest.id.as_str(), ApprovalStatus::Pending)
        ]
    );
    // The refusal is on record, chained like any event.
    let last = s.store.list_events("r").unwrap().pop().unwrap();
    assert_eq!(last.event_type, EventType::ApprovalSuperseded);
    assert_eq!(last.step_id, steps[0].id);
    assert_eq!(
        last.payload,
        format!(
            r#"{{"approval_id":"{}","latest_approval_id":"{}","owner":"{}"}}"#,
            s.granted.id,
            latest.id,
            old.owner()
        )
    );
    assert!(
        verify::verify(&s.store, &Default::default())
            .unwrap()
            .intact()
    );
    // A re-check reads past the refusal (it is not a policy evaluation).
    recheck::recheck(
        &s.store,
        "r",
        &Opinion("second_opinion"),
        &Default::default(),
    )
    .unwrap();

    // The latest approval, once approved, grants: the request runs once.
    Operator::new(s.store.clone())
        .with_clock(s.clock.clock())
        .approve("r", &latest.id, &DecideOptions::default())
        .unwrap();
    let (mut c, verdict) = s
        .gate(Opinion("second_opinion"), "c-")
        .attach("r")
        .await
        .unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
    c.execute().await.unwrap();
    assert_eq!(s.push.count(), 1);
}

/// What program B's changed policy answers once program A has already
/// paused the step again.
enum Late {
    Repause,
    Deny,
    Abort,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_decided_on_a_grant_that_was_superseded_meanwhile_writes_nothing() {
    for late in [Late::Repause, Late::Deny, Late::Abort] {
        let s = Shared::approved().await;
        let (asked_tx, asked) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let held = |inner: Box<dyn Policy>| Held {
            inner,
            asked: asked_tx,
            go: Mutex::new(go_rx),
        };
        // Program B reads the run (grant X approved), and its policy is
        // asked...
        let b = match late {
            Late::Repause => s.gate(held(Box::new(Opinion("third_opinion"))), "b-"),
            Late::Deny => s.gate(held(Box::new(Deny)), "b-"),
            Late::Abort => s.gate(held(Box::new(Abort)), "b-"),
        };
        let b_attach = tokio::spawn(async move { b.attach("r").await.map(|(_, v)| v.outcome) });
        tokio::task::spawn_blocking(move || asked.recv().unwrap())
            .await
            .unwrap();
        // ...while program A pauses the step again with approval Y.
        let (_a, verdict) = s
            .gate(Opinion("second_opinion"), "a-")
            .attach("r")
            .await
            .unwrap();
        assert_eq!(verdict.outcome, VerdictOutcome::Pending);
        let y = verdict.approval.unwrap();
        let events = s.store.list_events("r").unwrap().len();
        go.send(()).unwrap();
        let err = b_attach.await.unwrap().unwrap_err();
        assert!(err.is_run_state(), "{err:?}");
        // B wrote nothing: Y is the step's only pending approval, the run
        // still waits on it.
        assert_eq!(s.store.list_events("r").unwrap().len(), events);
        let approvals = s.store.list_approvals("r").unwrap();
        assert_eq!(approvals.len(), 2);
        assert_eq!(approvals[1].id, y.id);
        assert_eq!(approvals[1].status, ApprovalStatus::Pending);
        assert_eq!(
            s.store.get_run("r").unwrap().status,
            RunStatus::WaitingForApproval
        );
        assert_eq!(
            s.store.list_steps("r").unwrap()[0].status,
            StepStatus::AwaitingApproval
        );
        assert_eq!(s.push.count(), 0);
    }
}

#[tokio::test]
async fn approving_a_pending_approval_that_a_newer_one_superseded_is_refused_as_superseded() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    let mut d = Driver::new(
        config(&store, DefaultPolicy, shared(vec![push]), &clock, &rec),
        ScriptedAgent::new([Decision::tool_call("push", "{}")]),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let older = store.list_approvals("r").unwrap().remove(0);
    // The gate never leaves a superseded approval pending (every resume
    // write is guarded by its grant); another program writing the shared
    // database through the store's write API can.
    let newer = Approval {
        id: "newer".into(),
        ..older.clone()
    };
    store
        .write(|tx| {
            tx.insert_approval(&newer)?;
            tx.append_event(
                "r",
                &newer.step_id,
                &newer.created_at,
                EventType::ApprovalRequested,
                r#"{"approval_id":"newer"}"#,
            )
        })
        .unwrap();
    let err = Operator::new(store.clone())
        .with_clock(clock.clock())
        .approve("r", &older.id, &DecideOptions::default())
        .unwrap_err();
    match err {
        Error::ApprovalSuperseded { approval, latest } => {
            assert_eq!(approval, older.id);
            assert_eq!(latest, "newer");
        }
        other => panic!("expected ApprovalSuperseded, got {other:?}"),
    }
    let stored = store.list_approvals("r").unwrap();
    assert_eq!(stored[0].status, ApprovalStatus::Pending, "nothing decided");
    assert!(stored[0].decided_at.is_none());
    // The latest one can be decided.
    Operator::new(store.clone())
        .with_clock(clock.clock())
        .approve("r", "newer", &DecideOptions::default())
        .unwrap();
}

#[tokio::test]
async fn a_grant_whose_run_another_program_ended_runs_nothing_and_the_session_sees_the_end() {
    let s = Shared::approved().await;
    // Program A is allowed on the approved grant...
    let (mut a, verdict) = s.gate(DefaultPolicy, "a-").attach("r").await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
    // ...then the run row is damaged, and program B, attaching, fails the
    // run without rewriting its rows: the step still awaits, the grant is
    // still its latest approval, approved.
    s.db.exec("UPDATE runs SET limits_json = '{not json' WHERE id = 'r'");
    let (_b, verdict) = s.gate(DefaultPolicy, "b-").attach("r").await.unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Ended);
    assert_eq!(
        s.store.list_steps("r").unwrap()[0].status,
        StepStatus::AwaitingApproval
    );
    let events = s.store.list_events("r").unwrap().len();

    let err = a.execute().await.unwrap_err();
    assert!(err.is_run_state(), "{err:?}");
    assert_eq!(s.push.count(), 0, "the tool never ran");
    assert_eq!(s.store.list_events("r").unwrap().len(), events);
    assert_eq!(
        s.store.list_steps("r").unwrap()[0].status,
        StepStatus::AwaitingApproval
    );
    // The session saw the run end and is over.
    assert!(a.done());
    assert_eq!(
        (a.run().status, a.run().reason),
        (RunStatus::Failed, Some(TerminalReason::InternalError))
    );
}
