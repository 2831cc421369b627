//! Two people when it matters (design §46): a policy asks for two
//! distinct approvers; the first approval is recorded (chained) and
//! leaves the request pending; the same person cannot approve twice; a
//! second person grants it, both bound to the one hash; one rejection
//! rejects it; such a request is not edited.

use crate::engine;

use std::sync::Arc;

use crate::common::*;
use agentrt::store::ApprovalChange;
use agentrt::*;
use agentrt::{clock::ManualClock, ids::IdSource, ids::sequential_ids};

/// Pushes need two approvers.
struct TwoForPushes;

impl Policy for TwoForPushes {
    fn evaluate(
        &self,
        request: &ToolRequest,
        _view: &RunView,
    ) -> std::result::Result<PolicyDecision, PolicyError> {
        let both = agentrt::policy::tool_and_args(request);
        Ok(PolicyDecision::need_approval(
            "production",
            "two people",
            Some(both.clone()),
            Some(both),
        )
        .with_approvers(2))
    }
}

struct Fixture {
    ids: IdSource,
    store: Store,
    clock: ManualClock,
    rec: Recorder,
    push: Arc<Counting>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            ids: sequential_ids("id"),
            store: engine::store(),
            clock: stepping_clock(),
            rec: Recorder::default(),
            push: Arc::new(Counting::new("push", SideEffect::RemoteMutation)),
        }
    }

    fn driver(&self, decisions: Vec<Decision>) -> Driver<ScriptedAgent> {
        Driver::new(
            config(
                &self.store,
                TwoForPushes,
                shared(vec![self.push.clone()]),
                &self.clock,
                &self.rec,
            )
            .with_ids(self.ids.clone()),
            ScriptedAgent::new(decisions),
        )
        .unwrap()
    }

    async fn paused(&self) -> Approval {
        let run = self
            .driver(vec![Decision::tool_call("push", r#"{"ref":"main"}"#)])
            .start(Some("r"), "publish", Limits::default())
            .await
            .unwrap();
        assert_eq!(run.status, RunStatus::WaitingForApproval);
        self.store.list_approvals("r").unwrap().pop().unwrap()
    }

    fn decide(&self, approve: bool, id: &str, by: &str) -> Result<Approval> {
        let operator = Operator::new(self.store.clone()).with_clock(self.clock.clock());
        let options = DecideOptions {
            by,
            note: "checked",
            shown_hash: None,
        };
        if approve {
            operator.approve("r", id, &options)
        } else {
            operator.reject("r", id, &options)
        }
    }

    async fn resume(&self) -> Result<Run> {
        self.driver(vec![Decision::complete("true")])
            .resume("r")
            .await
    }
}

#[tokio::test]
async fn a_request_that_needs_two_runs_only_after_two_distinct_people_approve_it() {
    let f = Fixture::new();
    let approval = f.paused().await;
    assert!(
        approval
            .request
            .as_str()
            .starts_with(r#"{"approvers":2,"args":"#),
        "the count is part of the request the hash binds: {}",
        approval.request.as_str()
    );
    assert_eq!(agentrt::approval::approvers_needed(&approval), 2);

    // The first approval is recorded, and the request still waits.
    let first = f.decide(true, &approval.id, "alice").unwrap();
    assert_eq!(first.status, ApprovalStatus::Pending);
    let stored = f.store.list_approvals("r").unwrap().pop().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Pending);
    assert_eq!(agentrt::approval::first_approver(&stored), Some("alice"));
    assert_eq!(stored.hash, approval.hash);
    let refused = f.resume().await;
    assert!(
        matches!(&refused, Err(Error::RunState { detail, .. }) if detail.contains("pending")),
        "one approval runs nothing: {refused:?}"
    );
    assert_eq!(f.push.count(), 0);

    // The same person again is refused, and changes nothing.
    let again = f.decide(true, &approval.id, "alice");
    assert!(
        matches!(&again, Err(Error::SameApprover { by, .. }) if by == "alice"),
        "{again:?}"
    );

    // Another person grants it: it runs once.
    let second = f.decide(true, &approval.id, "bob").unwrap();
    assert_eq!(second.status, ApprovalStatus::Approved);
    assert_eq!(second.decided_by, "bob");
    let run = f.resume().await.unwrap();
    assert_eq!(
        run.status,
        RunStatus::Completed,
        "{run:?} {:?}",
        f.store.list_steps("r").unwrap()
    );
    assert_eq!(f.push.count(), 1);

    // Both decisions are chained, bound to the one hash.
    let events = f.store.list_events("r").unwrap();
    let endorsed: Vec<_> = events
        .iter()
        .filter(|e| e.event_type == EventType::ApprovalEndorsed)
        .collect();
    assert_eq!(endorsed.len(), 1);
    let payload: serde_json::Value = serde_json::from_str(&endorsed[0].payload).unwrap();
    assert_eq!(payload["by"], "alice");
    assert_eq!(payload["hash"], approval.hash.as_str());
    assert_eq!(payload["approvers"], 2);
    let decided: serde_json::Value = serde_json::from_str(
        &events
            .iter()
            .find(|e| e.event_type == EventType::ApprovalDecided)
            .unwrap()
            .payload,
    )
    .unwrap();
    assert_eq!(decided["by"], "bob");
    assert_eq!(decided["first_by"], "alice");
    assert_eq!(decided["status"], "approved");
    let report =
        agentrt::verify::verify(&f.store, &agentrt::verify::VerifyOptions::default()).unwrap();
    assert!(report.intact(), "the chain holds: {report:?}");
}

#[tokio::test]
async fn one_rejection_rejects_a_request_that_needs_two() {
    let f = Fixture::new();
    let approval = f.paused().await;
    f.decide(true, &approval.id, "alice").unwrap();
    let rejected = f.decide(false, &approval.id, "bob").unwrap();
    assert_eq!(rejected.status, ApprovalStatus::Rejected);
    let run = f.store.get_run("r").unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(f.push.count(), 0);
    // The first approver may reject it too (before anyone else approves).
    let g = Fixture::new();
    let approval = g.paused().await;
    g.decide(true, &approval.id, "alice").unwrap();
    let rejected = g.decide(false, &approval.id, "alice").unwrap();
    assert_eq!(rejected.status, ApprovalStatus::Rejected);
}

#[tokio::test]
async fn a_request_that_needs_two_is_not_edited() {
    let f = Fixture::new();
    let approval = f.paused().await;
    let refused = Operator::new(f.store.clone()).approve_edited(
        "r",
        &approval.id,
        r#"{"ref":"other"}"#,
        &DecideOptions {
            by: "alice",
            note: "",
            shown_hash: None,
        },
    );
    assert!(
        matches!(refused, Err(Error::EditRefused { .. })),
        "{refused:?}"
    );
    let stored = f.store.list_approvals("r").unwrap().pop().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Pending);
    assert_eq!(agentrt::approval::first_approver(&stored), None);
}

#[tokio::test]
async fn a_policy_asking_for_more_approvers_than_two_is_a_policy_error() {
    struct Three;
    impl Policy for Three {
        fn evaluate(
            &self,
            _request: &ToolRequest,
            _view: &RunView,
        ) -> std::result::Result<PolicyDecision, PolicyError> {
            Ok(PolicyDecision::need_approval("k", "", None, None).with_approvers(3))
        }
    }
    let f = Fixture::new();
    let run = Driver::new(
        config(
            &f.store,
            Three,
            shared(vec![f.push.clone()]),
            &f.clock,
            &f.rec,
        )
        .with_ids(f.ids.clone()),
        ScriptedAgent::new(vec![Decision::tool_call("push", "{}")]),
    )
    .unwrap()
    .start(Some("r"), "publish", Limits::default())
    .await
    .unwrap();
    assert_ne!(run.status, RunStatus::WaitingForApproval);
    assert!(f.store.list_approvals("r").unwrap().is_empty());
    let step = &f.store.list_steps("r").unwrap()[0];
    let seen = step
        .observation
        .as_ref()
        .map(|o| o.summary.clone())
        .unwrap_or_default();
    assert!(seen.contains("approvers 3"), "{seen}");
}

#[tokio::test]
async fn a_decision_is_written_only_over_the_first_approver_it_read() {
    let f = Fixture::new();
    let approval = f.paused().await;
    f.decide(true, &approval.id, "alice").unwrap();
    // A decision that read no first approver (another process's, racing)
    // changes nothing; one that read alice's does.
    let change = |by_was| ApprovalChange {
        status: ApprovalStatus::Approved,
        from: ApprovalStatus::Pending,
        hash: &approval.hash,
        decided_at: None,
        decided_by: Some("carol"),
        note: None,
        by_was: Some(by_was),
    };
    let (stale, _) = f
        .store
        .write(|tx| tx.update_approval(&approval.id, &change("")))
        .unwrap();
    assert!(!stale, "written over a first approver it did not read");
    let stored = f.store.list_approvals("r").unwrap().pop().unwrap();
    assert_eq!(stored.status, ApprovalStatus::Pending);
    assert_eq!(agentrt::approval::first_approver(&stored), Some("alice"));
}
