//! What an operator's approve, reject and cancel leave in the stored rows:
//! every column they write, read back, and nothing written when they
//! refuse.

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::*;
use agentrt::{
    clock::ManualClock, gate::SatelliteRows, ids::IdSource, ids::sequential_ids,
    model::Observation, model::ObservationKind, model::Step, model::StepStatus,
};
use common::*;

const RUN: &str = "r";

/// The operator's clock reads this instant, apart from every loop time.
fn operator_time() -> Timestamp {
    Timestamp::parse("2026-10-02T12:34:56.123456789Z").unwrap()
}

/// Everything the store holds about the run.
#[derive(Debug, Clone, PartialEq)]
struct Rows {
    run: Run,
    lease: (String, String),
    steps: Vec<Step>,
    approvals: Vec<Approval>,
    events: Vec<Event>,
}

fn rows(store: &Store) -> Rows {
    Rows {
        run: store.get_run(RUN).unwrap(),
        lease: store.lease(RUN).unwrap(),
        steps: store.list_steps(RUN).unwrap(),
        approvals: store.list_approvals(RUN).unwrap(),
        events: store.list_events(RUN).unwrap(),
    }
}

/// An event as `(step_id, at, type, payload)`, the payload parsed.
fn event(e: &Event) -> (String, String, EventType, serde_json::Value) {
    (
        e.step_id.clone(),
        e.at.clone(),
        e.event_type.clone(),
        serde_json::from_str(&e.payload).unwrap(),
    )
}

/// The events stored after `before`'s.
fn new_events(before: &Rows, after: &Rows) -> Vec<(String, String, EventType, serde_json::Value)> {
    assert_eq!(
        after.events[..before.events.len()],
        before.events[..],
        "earlier events are kept as they were"
    );
    after.events[before.events.len()..]
        .iter()
        .map(event)
        .collect()
}

/// What a tool saw of an operator's action: the rows before, the
/// operator's answer, the rows after.
type Seen<T> = Arc<Mutex<Vec<(Rows, T, Rows)>>>;

struct Fixture {
    store: Store,
    /// A file store's directory.
    dir: Option<tempfile::TempDir>,
    /// Shared by every driver of the fixture, so a resume makes new ids.
    ids: IdSource,
    clock: ManualClock,
    operator_clock: ManualClock,
    rec: Recorder,
    /// What the operator's observer heard.
    heard: Recorder,
}

impl Fixture {
    fn in_memory() -> Fixture {
        Fixture::with_store(Store::open(":memory:").unwrap(), None)
    }

    fn db_path(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("op.db")
    }

    /// A file store, for a raw connection beside it.
    fn on_disk() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(Fixture::db_path(&dir)).unwrap();
        Fixture::with_store(store, Some(dir))
    }

    fn with_store(store: Store, dir: Option<tempfile::TempDir>) -> Fixture {
        Fixture {
            store,
            dir,
            ids: sequential_ids("id"),
            clock: stepping_clock(),
            operator_clock: ManualClock::new(operator_time()),
            rec: Recorder::default(),
            heard: Recorder::default(),
        }
    }

    fn raw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(Fixture::db_path(self.dir.as_ref().unwrap())).unwrap()
    }

    fn operator(&self) -> Operator {
        Operator::new(self.store.clone())
            .with_clock(self.operator_clock.clock())
            .with_observer(Arc::new(self.heard.clone()))
    }

    fn config(&self, tools: Vec<Arc<dyn Tool>>) -> GateConfig {
        self.config_with(DefaultPolicy, tools)
    }

    fn config_with(&self, policy: impl Policy + 'static, tools: Vec<Arc<dyn Tool>>) -> GateConfig {
        config(&self.store, policy, tools, &self.clock, &self.rec).with_ids(self.ids.clone())
    }

    /// A driver with a read-only `read` tool and a remote-mutation `push`
    /// tool (which needs an approval).
    fn driver(&self, decisions: Vec<Decision>) -> Driver<ScriptedAgent> {
        self.driver_with(standard_tools(), decisions)
    }

    fn driver_with(
        &self,
        tools: Vec<Arc<dyn Tool>>,
        decisions: Vec<Decision>,
    ) -> Driver<ScriptedAgent> {
        Driver::new(self.config(tools), ScriptedAgent::new(decisions)).unwrap()
    }

    /// Step 0 reads (done), step 1 waits for the approval of a push.
    async fn paused(&self) -> Approval {
        let run = self
            .driver(vec![
                Decision::tool_call("read", "{}"),
                Decision::tool_call("push", r#"{"ref":"main"}"#),
            ])
            .start(Some(RUN), "publish", Limits::default())
            .await
            .unwrap();
        assert_eq!(run.status, RunStatus::WaitingForApproval);
        let steps = self.store.list_steps(RUN).unwrap();
        assert_eq!(
            steps.iter().map(|s| s.status).collect::<Vec<_>>(),
            [StepStatus::Done, StepStatus::AwaitingApproval]
        );
        self.store.list_approvals(RUN).unwrap().pop().unwrap()
    }

    fn approve(&self, id: &str) -> Result<Approval> {
        self.operator().approve(RUN, id, &decide())
    }

    fn reject(&self, id: &str) -> Result<Approval> {
        self.operator().reject(RUN, id, &decide())
    }
}

fn standard_tools() -> Vec<Arc<dyn Tool>> {
    shared(vec![
        Arc::new(Counting::new("read", SideEffect::ReadOnly)),
        Arc::new(Counting::new("push", SideEffect::RemoteMutation)),
    ])
}

fn decide() -> DecideOptions<'static> {
    DecideOptions {
        by: "alice",
        note: "not this branch",
        shown_hash: None,
    }
}

/// Asserts `err` is exactly `RunState` for the run with `status` and `detail`.
fn assert_run_state(err: Error, status: RunStatus, detail: &str) {
    match err {
        Error::RunState {
            run,
            status: found,
            detail: said,
        } => assert_eq!(
            (run.as_str(), found, said.as_str()),
            (RUN, status, detail),
            "the refusal"
        ),
        other => panic!("expected RunState, got {other:?}"),
    }
}

/// Asserts what a cancel or a rejection wrote over `before`: the run
/// CANCELLED with `reason` and `detail`, finished at the operator's time,
/// its lease cleared and every other column kept; the steps in `failed`
/// failed at that time with `observation`, every other step untouched.
fn assert_ended_by_operator(
    before: &Rows,
    after: &Rows,
    reason: TerminalReason,
    detail: &str,
    failed: &[&str],
    observation: &Observation,
) {
    assert_eq!(
        after.run,
        Run {
            status: RunStatus::Cancelled,
            reason: Some(reason),
            reason_detail: detail.to_owned(),
            finished_at: Some(operator_time()),
            ..before.run.clone()
        },
        "the stored run"
    );
    assert_eq!(
        after.lease,
        (String::new(), String::new()),
        "the lease is released"
    );
    assert_eq!(after.steps.len(), before.steps.len());
    for (old, new) in before.steps.iter().zip(&after.steps) {
        let expected = if failed.contains(&old.id.as_str()) {
            Step {
                status: StepStatus::Failed,
                observation: Some(observation.clone()),
                finished_at: Some(operator_time()),
                ..old.clone()
            }
        } else {
            old.clone()
        };
        assert_eq!(new, &expected, "step {}", old.index);
    }
}

fn cancel_observation(by: &str, note: &str) -> Observation {
    Observation::runtime(
        ObservationKind::Interrupted,
        &[("by", by), ("note", note)],
        format!("cancelled by operator: {note}"),
    )
}

fn run_finished(
    reason: &str,
    detail: &str,
    steps: u64,
    by: Option<&str>,
) -> (String, String, EventType, serde_json::Value) {
    let mut payload = serde_json::json!({
        "status": "CANCELLED",
        "reason": reason,
        "detail": detail,
        "steps": steps,
    });
    if let Some(by) = by {
        payload["by"] = by.into();
    }
    (
        String::new(),
        operator_time().to_string(),
        EventType::RunFinished,
        payload,
    )
}

#[tokio::test]
async fn cancelling_a_running_run_fails_its_deciding_step_and_clears_the_lease() {
    let f = Fixture::in_memory();
    let gate = Gate::new(f.config(standard_tools())).unwrap();
    let mut session = gate
        .begin(Some(RUN), "read twice", Limits::default())
        .await
        .unwrap();
    session.step().await.unwrap().unwrap();
    let verdict = session
        .propose(Decision::tool_call("read", "{}"))
        .await
        .unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
    session.execute().await.unwrap();
    let deciding = session.step().await.unwrap().unwrap();
    let before = rows(&f.store);
    assert_eq!(before.run.status, RunStatus::Running);
    assert_eq!(
        before.steps.iter().map(|s| s.status).collect::<Vec<_>>(),
        [StepStatus::Done, StepStatus::Deciding]
    );
    assert!(
        !before.lease.0.is_empty() && !before.lease.1.is_empty(),
        "the session holds the lease: {:?}",
        before.lease
    );

    let returned = f.operator().cancel(RUN, "bob", "wrong repository").unwrap();

    let after = rows(&f.store);
    assert_ended_by_operator(
        &before,
        &after,
        TerminalReason::OperatorCancelled,
        "wrong repository",
        &[&deciding.id],
        &cancel_observation("bob", "wrong repository"),
    );
    assert_eq!(returned, after.run, "the returned run is the stored one");
    assert_eq!(
        new_events(&before, &after),
        [run_finished(
            "operator_cancelled",
            "wrong repository",
            2,
            Some("bob")
        )]
    );
    assert_eq!(f.heard.events(), after.events[before.events.len()..]);
    drop(session);
}

#[tokio::test]
async fn cancel_during_a_tool_call_fails_the_executing_step_at_the_operator_time() {
    let f = Fixture::in_memory();
    let seen: Seen<Result<Run>> = Arc::default();
    let (operator, store, slot) = (f.operator(), f.store.clone(), seen.clone());
    let slow: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("slow", "", SideEffect::LocalMutation),
        move |_| {
            let (operator, store, slot) = (operator.clone(), store.clone(), slot.clone());
            async move {
                let before = rows(&store);
                let cancelled = operator.cancel(RUN, "ops", "stop now");
                slot.lock().unwrap().push((before, cancelled, rows(&store)));
                Ok(ToolResult::raw("\"done anyway\""))
            }
        },
    ));
    let run = f
        .driver_with(vec![slow], vec![Decision::tool_call("slow", "{}")])
        .start(Some(RUN), "g", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);

    let (before, cancelled, after) = seen.lock().unwrap().pop().unwrap();
    assert_eq!(before.run.status, RunStatus::Running);
    assert_eq!(before.steps[0].status, StepStatus::Executing);
    assert!(!before.lease.0.is_empty(), "the loop holds the lease");
    assert_ended_by_operator(
        &before,
        &after,
        TerminalReason::OperatorCancelled,
        "stop now",
        &[&before.steps[0].id],
        &cancel_observation("ops", "stop now"),
    );
    assert_eq!(cancelled.unwrap(), after.run);
    assert_eq!(
        new_events(&before, &after),
        [run_finished(
            "operator_cancelled",
            "stop now",
            1,
            Some("ops")
        )]
    );
    // The late tool result leaves the rows the cancel wrote.
    let last = rows(&f.store);
    assert_eq!((last.run, last.steps), (after.run, after.steps));
}

#[tokio::test]
async fn cancel_of_a_waiting_run_fails_the_awaiting_step_and_leaves_the_approval_as_it_was() {
    let f = Fixture::in_memory();
    f.paused().await;
    let before = rows(&f.store);

    let returned = f.operator().cancel(RUN, "bob", "not today").unwrap();

    let after = rows(&f.store);
    assert_ended_by_operator(
        &before,
        &after,
        TerminalReason::OperatorCancelled,
        "not today",
        &[&before.steps[1].id],
        &cancel_observation("bob", "not today"),
    );
    assert_eq!(
        after.approvals, before.approvals,
        "the approval is untouched"
    );
    assert_eq!(returned, after.run);
    assert_eq!(
        new_events(&before, &after),
        [run_finished(
            "operator_cancelled",
            "not today",
            2,
            Some("bob")
        )]
    );
    assert_eq!(f.heard.events(), after.events[before.events.len()..]);
}

/// A run finished each way: COMPLETED, FAILED, CANCELLED.
async fn finished_runs() -> Vec<(Fixture, RunStatus)> {
    let mut out = Vec::new();
    let f = Fixture::in_memory();
    f.driver(vec![Decision::complete("1")])
        .start(Some(RUN), "g", Limits::default())
        .await
        .unwrap();
    out.push((f, RunStatus::Completed));
    let f = Fixture::in_memory();
    f.driver(vec![Decision::fail("gave up")])
        .start(Some(RUN), "g", Limits::default())
        .await
        .unwrap();
    out.push((f, RunStatus::Failed));
    let f = Fixture::in_memory();
    f.paused().await;
    Operator::new(f.store.clone())
        .cancel(RUN, "ops", "first")
        .unwrap();
    out.push((f, RunStatus::Cancelled));
    for (f, status) in &out {
        assert_eq!(f.store.get_run(RUN).unwrap().status, *status);
    }
    out
}

#[tokio::test]
async fn cancel_refuses_a_finished_run_with_already_status_and_changes_no_row_or_event() {
    for (f, status) in finished_runs().await {
        let before = rows(&f.store);
        let err = f.operator().cancel(RUN, "bob", "again").unwrap_err();
        assert_run_state(err, status, &format!("already {status}"));
        assert_eq!(rows(&f.store), before, "{status}: nothing changed");
        assert!(f.heard.events().is_empty(), "{status}: nothing heard");
    }
}

/// Makes every step update turn the run `status` inside the same
/// transaction. The store refuses a trigger at open and the transaction
/// keeps other writers out, so the status check before the guarded write
/// already refuses these statuses; a trigger added after open is the one
/// way to change the run between that check and the guarded write, the
/// race the guard is there for.
fn flip_run_on_step_update(raw: &rusqlite::Connection, status: RunStatus) {
    raw.execute_batch(&format!(
        "DROP TRIGGER IF EXISTS flip;
         CREATE TRIGGER flip AFTER UPDATE ON steps
         BEGIN UPDATE runs SET status = '{status}' WHERE id = NEW.run_id; END;"
    ))
    .unwrap();
}

#[tokio::test]
async fn cancel_refuses_a_run_that_finishes_between_its_check_and_its_write() {
    let f = Fixture::on_disk();
    f.paused().await;
    let raw = f.raw();
    let before = rows(&f.store);
    for status in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        flip_run_on_step_update(&raw, status);
        let err = f.operator().cancel(RUN, "bob", "now").unwrap_err();
        assert_run_state(
            err,
            RunStatus::WaitingForApproval,
            "the run changed while it was being cancelled",
        );
        raw.execute_batch("DROP TRIGGER flip").unwrap();
        assert_eq!(rows(&f.store), before, "{status}: nothing changed");
    }
    assert!(f.heard.events().is_empty());
}

#[tokio::test]
async fn approve_stores_the_decider_the_note_and_the_operator_time_and_changes_nothing_else() {
    let f = Fixture::in_memory();
    let approval = f.paused().await;
    let before = rows(&f.store);

    let returned = f.approve(&approval.id).unwrap();

    let after = rows(&f.store);
    let stored = Approval {
        status: ApprovalStatus::Approved,
        decided_at: Some(operator_time()),
        decided_by: "alice".into(),
        note: "not this branch".into(),
        ..approval.clone()
    };
    assert_eq!(
        after.approvals,
        std::slice::from_ref(&stored),
        "the stored approval"
    );
    assert_eq!(returned, stored, "the returned approval is the stored one");
    assert_eq!(
        (&after.run, &after.lease, &after.steps),
        (&before.run, &before.lease, &before.steps),
        "the run stays waiting, its steps untouched"
    );
    assert_eq!(
        new_events(&before, &after),
        [(
            approval.step_id.clone(),
            operator_time().to_string(),
            EventType::ApprovalDecided,
            serde_json::json!({
                "approval_id": approval.id,
                "status": "approved",
                "by": "alice",
                "note": "not this branch",
            }),
        )]
    );
    assert_eq!(f.heard.events(), after.events[before.events.len()..]);
}

#[tokio::test]
async fn reject_stores_the_decision_fails_the_step_and_cancels_the_run_at_the_operator_time() {
    let f = Fixture::in_memory();
    let approval = f.paused().await;
    let before = rows(&f.store);

    let returned = f.reject(&approval.id).unwrap();

    let after = rows(&f.store);
    let stored = Approval {
        status: ApprovalStatus::Rejected,
        decided_at: Some(operator_time()),
        decided_by: "alice".into(),
        note: "not this branch".into(),
        ..approval.clone()
    };
    assert_eq!(
        after.approvals,
        std::slice::from_ref(&stored),
        "the stored approval"
    );
    assert_eq!(returned, stored, "the returned approval is the stored one");
    assert_ended_by_operator(
        &before,
        &after,
        TerminalReason::ApprovalRejected,
        "not this branch",
        &[&approval.step_id],
        &Observation::runtime(
            ObservationKind::PolicyDenied,
            &[("approval_id", &approval.id), ("note", "not this branch")],
            "approval rejected: not this branch",
        ),
    );
    assert_eq!(
        new_events(&before, &after),
        [
            (
                approval.step_id.clone(),
                operator_time().to_string(),
                EventType::ApprovalDecided,
                serde_json::json!({
                    "approval_id": approval.id,
                    "status": "rejected",
                    "by": "alice",
                    "note": "not this branch",
                }),
            ),
            run_finished("approval_rejected", "not this branch", 2, None),
        ]
    );
    assert_eq!(f.heard.events(), after.events[before.events.len()..]);
}

#[tokio::test]
async fn a_rejection_or_a_cancel_clears_a_lease_left_on_the_waiting_run() {
    // No write of the runtime leaves a lease on a waiting run (the pause
    // clears it); one set by hand shows that ending the run clears it.
    for verb in ["reject", "cancel"] {
        let f = Fixture::on_disk();
        let approval = f.paused().await;
        f.raw()
            .execute(
                "UPDATE runs SET lease_owner = 'ghost', lease_expires_at = '2099-01-01T00:00:00.000000000Z'",
                [],
            )
            .unwrap();
        let before = rows(&f.store);
        assert_eq!(before.lease.0, "ghost");
        if verb == "reject" {
            f.reject(&approval.id).unwrap();
        } else {
            f.operator().cancel(RUN, "bob", "stop").unwrap();
        }
        let after = rows(&f.store);
        assert_eq!(after.run.status, RunStatus::Cancelled, "{verb}");
        assert_eq!(after.lease, (String::new(), String::new()), "{verb}");
    }
}

#[tokio::test]
async fn approve_and_reject_refuse_a_finished_run_and_change_no_row_or_event() {
    const DETAIL: &str = "only a run waiting for approval can have an approval decided";
    // Cancelled while the approval is pending.
    let f = Fixture::in_memory();
    let approval = f.paused().await;
    Operator::new(f.store.clone())
        .cancel(RUN, "ops", "first")
        .unwrap();
    let mut cases = vec![(f, approval, RunStatus::Cancelled)];
    // Approved, then resumed to an end.
    for (last, status) in [
        (Decision::complete("1"), RunStatus::Completed),
        (Decision::fail("gave up"), RunStatus::Failed),
    ] {
        let f = Fixture::in_memory();
        let approval = f.paused().await;
        Operator::new(f.store.clone())
            .approve(RUN, &approval.id, &decide())
            .unwrap();
        let run = f.driver(vec![last]).resume(RUN).await.unwrap();
        assert_eq!(run.status, status);
        cases.push((f, approval, status));
    }
    for (f, approval, status) in cases {
        let before = rows(&f.store);
        assert_run_state(f.reject(&approval.id).unwrap_err(), status, DETAIL);
        assert_run_state(f.approve(&approval.id).unwrap_err(), status, DETAIL);
        assert_eq!(rows(&f.store), before, "{status}: nothing changed");
        assert!(f.heard.events().is_empty(), "{status}: nothing heard");
    }
}

#[tokio::test]
async fn approve_and_reject_refuse_a_running_run_and_change_no_row_or_event() {
    // The resumed tool call runs with the run RUNNING; it tries to decide
    // the approval that let it run.
    let f = Fixture::in_memory();
    let approval = f.paused().await;
    f.approve(&approval.id).unwrap();
    let seen: Seen<Error> = Arc::default();
    let (operator, store, slot, id) = (f.operator(), f.store.clone(), seen.clone(), approval.id);
    let push: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("push", "push tool", SideEffect::RemoteMutation),
        move |_| {
            let (operator, store, slot, id) =
                (operator.clone(), store.clone(), slot.clone(), id.clone());
            async move {
                for reject in [true, false] {
                    let before = rows(&store);
                    let err = if reject {
                        operator.reject(RUN, &id, &decide())
                    } else {
                        operator.approve(RUN, &id, &decide())
                    };
                    slot.lock()
                        .unwrap()
                        .push((before, err.unwrap_err(), rows(&store)));
                }
                Ok(ToolResult::raw("\"pushed\""))
            }
        },
    ));
    let read: Arc<dyn Tool> = Arc::new(Counting::new("read", SideEffect::ReadOnly));
    let heard_before = f.heard.events().len();
    let run = f
        .driver_with(vec![read, push], vec![Decision::complete("1")])
        .resume(RUN)
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(seen.len(), 2);
    for (before, err, after) in seen {
        assert_eq!(before.run.status, RunStatus::Running);
        assert_run_state(
            err,
            RunStatus::Running,
            "only a run waiting for approval can have an approval decided",
        );
        assert_eq!(after, before, "nothing changed");
    }
    assert_eq!(f.heard.events().len(), heard_before, "nothing heard");
}

#[tokio::test]
async fn reject_refuses_a_run_that_stops_waiting_between_its_check_and_its_write() {
    let f = Fixture::on_disk();
    let approval = f.paused().await;
    let raw = f.raw();
    let before = rows(&f.store);
    for status in [
        RunStatus::Running,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        flip_run_on_step_update(&raw, status);
        let err = f.reject(&approval.id).unwrap_err();
        assert_run_state(
            err,
            RunStatus::WaitingForApproval,
            "the run changed while the rejection was recorded",
        );
        raw.execute_batch("DROP TRIGGER flip").unwrap();
        assert_eq!(rows(&f.store), before, "{status}: nothing changed");
    }
    assert!(f.heard.events().is_empty());
}

#[tokio::test]
async fn an_approval_is_decidable_until_a_nanosecond_before_its_expiry_and_expired_at_it() {
    let limits = Limits::default().approval_ttl(Duration::from_secs(60));
    for (offset, expired) in [(1, false), (0, true)] {
        let f = Fixture::in_memory();
        let approval = f
            .driver(vec![Decision::tool_call("push", "{}")])
            .start(Some(RUN), "g", limits)
            .await
            .map(|_| f.store.list_approvals(RUN).unwrap().pop().unwrap())
            .unwrap();
        let expires_at = approval.expires_at.unwrap();
        let at = Timestamp::from_unix_nanos(expires_at.as_unix_nanos() - offset);
        f.operator_clock.set(at);
        let decided = f.approve(&approval.id);
        let stored = f.store.get_approval(RUN, &approval.id).unwrap();
        if expired {
            assert!(
                matches!(decided, Err(Error::ApprovalExpired { .. })),
                "{decided:?}"
            );
            assert_eq!(
                (stored.status, stored.decided_at, stored.note.as_str()),
                (ApprovalStatus::Expired, Some(at), "expired")
            );
        } else {
            assert_eq!(decided.unwrap(), stored);
            assert_eq!(
                (stored.status, stored.decided_at),
                (ApprovalStatus::Approved, Some(at))
            );
        }
    }
}

#[tokio::test]
async fn an_earlier_steps_approval_does_not_supersede_the_pending_one_of_a_later_step() {
    let f = Fixture::in_memory();
    let first = f.paused().await;
    f.approve(&first.id).unwrap();
    let run = f
        .driver(vec![Decision::tool_call("push", r#"{"ref":"next"}"#)])
        .resume(RUN)
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let second = f.store.list_approvals(RUN).unwrap().pop().unwrap();
    assert_ne!(second.step_id, first.step_id);

    let decided = f.approve(&second.id).unwrap();

    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(f.store.get_approval(RUN, &second.id).unwrap(), decided);
}

/// Asks for an approval of every request, each time of a new kind (the
/// count is shared by clones): a resume asks again, so one step collects a
/// second approval.
#[derive(Clone, Default)]
struct AskAgain(Arc<std::sync::atomic::AtomicUsize>);

impl Policy for AskAgain {
    fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(PolicyDecision::need_approval_json(
            format!("ask_{n}"),
            "ask again",
            &serde_json::json!({ "n": n }),
            &serde_json::json!({}),
        )
        .unwrap())
    }
}

#[tokio::test]
async fn a_superseded_approval_is_refused_even_while_it_reads_pending() {
    let f = Fixture::on_disk();
    let policy = AskAgain::default();
    let driver = |decisions| {
        Driver::new(
            f.config_with(policy.clone(), standard_tools()),
            ScriptedAgent::new(decisions),
        )
        .unwrap()
    };
    driver(vec![Decision::tool_call("push", "{}")])
        .start(Some(RUN), "g", Limits::default())
        .await
        .unwrap();
    let first = f.store.list_approvals(RUN).unwrap().pop().unwrap();
    f.approve(&first.id).unwrap();
    let run = driver(vec![]).resume(RUN).await.unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approvals = f.store.list_approvals(RUN).unwrap();
    let latest = approvals[1].clone();
    assert_eq!(latest.step_id, first.step_id, "one step, two approvals");
    // No write of the runtime leaves a superseded approval pending; set by
    // hand, it shows the supersession check on its own.
    f.raw()
        .execute(
            "UPDATE approvals SET status = 'pending', decided_at = '', decided_by = '', note = '' WHERE id = ?1",
            [&first.id],
        )
        .unwrap();
    let before = rows(&f.store);
    assert_eq!(before.approvals[0].status, ApprovalStatus::Pending);

    for verb in ["approve", "reject"] {
        let err = if verb == "approve" {
            f.approve(&first.id)
        } else {
            f.reject(&first.id)
        }
        .unwrap_err();
        match err {
            Error::ApprovalSuperseded {
                approval,
                latest: newer,
            } => assert_eq!((approval, newer), (first.id.clone(), latest.id.clone())),
            other => panic!("{verb}: expected ApprovalSuperseded, got {other:?}"),
        }
        assert_eq!(rows(&f.store), before, "{verb}: nothing changed");
    }
    assert_eq!(
        f.approve(&latest.id).unwrap().status,
        ApprovalStatus::Approved
    );
}

#[tokio::test]
async fn reject_refuses_an_approval_whose_step_no_longer_awaits_it_and_changes_nothing() {
    // Another program sharing the file moved the step on (the runtime never
    // leaves a pending approval on a step that does not await it).
    let f = Fixture::on_disk();
    let approval = f.paused().await;
    f.raw()
        .execute(
            "UPDATE steps SET status = 'deciding' WHERE id = ?1",
            [&approval.step_id],
        )
        .unwrap();
    let before = rows(&f.store);
    let err = f.reject(&approval.id).unwrap_err();
    assert_run_state(
        err,
        RunStatus::WaitingForApproval,
        "the approval's step no longer awaits it; nothing was rejected",
    );
    assert_eq!(rows(&f.store), before, "nothing changed");
    assert!(f.heard.events().is_empty());
}

/// A channel's rows ride in the decision's own transaction: written and
/// explained by the decision's events when it commits; a refusal from the
/// rows (a request seen before) rolls the decision back; an operator's
/// own refusal writes no row.
#[tokio::test]
async fn a_satellites_rows_are_written_with_the_decision_or_not_at_all() {
    use agentrt::store::SqlValue;

    let store = Store::open_with(":memory:", proxy::options(proxy::PROXY)).unwrap();
    let f = Fixture::with_store(store, None);
    let nonce = |n: &'static str| -> SatelliteRows {
        Box::new(move |tx| {
            if tx.row("proxy_nonces", n)?.is_some() {
                return Err(Error::ClaimHeld {
                    claim: "nonce",
                    detail: "used before".into(),
                });
            }
            tx.insert_row(
                "proxy_nonces",
                &[
                    ("nonce", SqlValue::from(n)),
                    ("seen_at", SqlValue::from("now")),
                    ("uses", SqlValue::Int(1)),
                ],
            )?;
            Ok(())
        })
    };
    let approval = f.paused().await;
    let before = rows(&f.store);

    // Refused by the operator (another hash shown): no row.
    let changed = DecideOptions {
        shown_hash: Some("0"),
        ..decide()
    };
    let e = f
        .operator()
        .approve_with_rows(RUN, &approval.id, &changed, nonce("n-0"))
        .unwrap_err();
    assert!(matches!(e, Error::ApprovalChanged { .. }), "{e:?}");
    assert!(f.store.row("proxy_nonces", "n-0").unwrap().is_none());

    // Committed: the row is written, explained by the decision's event.
    f.operator()
        .approve_with_rows(RUN, &approval.id, &decide(), nonce("n-1"))
        .unwrap();
    let after = rows(&f.store);
    let decided = after.events.last().unwrap();
    assert_eq!(decided.event_type, EventType::ApprovalDecided);
    let row = f.store.row("proxy_nonces", "n-1").unwrap().unwrap();
    assert_eq!(row.written_seq(), decided.seq);
    assert_eq!(after.events.len(), before.events.len() + 1);

    // Refused by the rows: the cancel rolls back whole, and the
    // satellite's typed refusal comes back as it was raised.
    let e = f
        .operator()
        .cancel_with_rows(RUN, "alice", "stop", nonce("n-1"))
        .unwrap_err();
    assert_eq!(e.held_claim(), Some("nonce"), "{e:?}");
    assert_eq!(rows(&f.store), after, "nothing of the cancel was written");
    let cancelled = f
        .operator()
        .cancel_with_rows(RUN, "alice", "stop", nonce("n-2"))
        .unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    assert!(f.store.row("proxy_nonces", "n-2").unwrap().is_some());
    let report =
        agentrt::verify::verify(&f.store, &agentrt::verify::VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}
