//! Waiting for an operator's decision: the wait wakes when the approval is
//! decided (by this process or another), expires (applied by the wait at
//! its deadline, though nobody touches the row), or the run is cancelled,
//! and gives up at its timeout.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agentrt::ids::random_ids;
use agentrt::operator::{self, Awaited, DecideOptions, Operator};
use agentrt::*;
use common::*;

/// The child's instructions, set only for the child process.
const CHILD_DB: &str = "AGENTRT_TEST_DECIDE_DB";
const CHILD_ACT: &str = "AGENTRT_TEST_DECIDE_ACT";

/// The child process: after a pause, decides or cancels as told, through
/// the operator functions the CLI uses.
#[test]
#[ignore = "a helper run by the cross-process tests"]
fn decide_from_another_process() {
    let (Some(db), Some(act)) = (std::env::var_os(CHILD_DB), std::env::var_os(CHILD_ACT)) else {
        return;
    };
    std::thread::sleep(Duration::from_millis(200));
    let store = Store::open_existing(Path::new(&db), false).unwrap();
    let act = act.to_string_lossy().into_owned();
    let (verb, run, approval) = {
        let mut parts = act.splitn(3, ' ');
        (
            parts.next().unwrap().to_owned(),
            parts.next().unwrap().to_owned(),
            parts.next().unwrap_or_default().to_owned(),
        )
    };
    let options = DecideOptions {
        by: "child",
        note: "from another process",
        ..DecideOptions::default()
    };
    match verb.as_str() {
        "approve" => drop(operator::approve(&store, &run, &approval, &options).unwrap()),
        "reject" => drop(operator::reject(&store, &run, &approval, &options).unwrap()),
        "cancel" => drop(operator::cancel(&store, &run, "child", "stop").unwrap()),
        other => panic!("unknown act {other}"),
    }
}

fn in_child(db: &Path, act: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "decide_from_another_process", "--ignored"])
        .env(CHILD_DB, db)
        .env(CHILD_ACT, act)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// A run paused on an approval for a remote mutation.
async fn paused(store: &Store, limits: Limits) -> (String, String) {
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    let gate = Gate::new(
        GateConfig::new(store.clone(), DefaultPolicy, shared(vec![push])).with_ids(random_ids()),
    )
    .unwrap();
    let mut session = gate.begin(None, "publish", limits).await.unwrap();
    session.step().await.unwrap().unwrap();
    let verdict = session
        .propose(Decision::tool_call("push", "{}"))
        .await
        .unwrap();
    assert_eq!(verdict.outcome, VerdictOutcome::Pending);
    let approval = verdict.approval.unwrap();
    (approval.run_id, approval.id)
}

fn file_store() -> (tempfile::TempDir, std::path::PathBuf, Store) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("wait.db");
    let store = Store::open(&db).unwrap();
    (dir, db, store)
}

/// A wait's own timeout that no test reaches: a wait must be woken.
const LONG: Duration = Duration::from_secs(3600);
/// How long a test lets a wait take before calling it not woken (the
/// decisions come after about 200 ms).
const WOKEN_WITHIN: Duration = Duration::from_secs(20);

async fn woken<T>(wait: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WOKEN_WITHIN, wait)
        .await
        .expect("the wait was not woken by the change")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_made_by_another_process_wakes_the_wait() {
    let (_dir, db, store) = file_store();
    let (run, approval) = paused(&store, Limits::default()).await;
    let mut child = in_child(&db, &format!("approve {run} {approval}"));
    let waited = woken(Operator::new(store.clone()).wait_for_decision(&run, &approval, LONG))
        .await
        .unwrap();
    assert!(child.wait().unwrap().success());
    match waited {
        Awaited::Approved(a) => {
            assert_eq!(a.id, approval);
            assert_eq!(a.decided_by, "child");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_or_a_cancel_by_another_process_wakes_the_wait() {
    let (_dir, db, store) = file_store();
    let (run, approval) = paused(&store, Limits::default()).await;
    let mut child = in_child(&db, &format!("reject {run} {approval}"));
    let waited = woken(Operator::new(store.clone()).wait_for_decision(&run, &approval, LONG))
        .await
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(
        matches!(waited, Awaited::Rejected(ref a) if a.id == approval),
        "{waited:?}"
    );

    let (run, approval) = paused(&store, Limits::default()).await;
    let mut child = in_child(&db, &format!("cancel {run}"));
    let waited = woken(Operator::new(store.clone()).wait_for_decision(&run, &approval, LONG))
        .await
        .unwrap();
    assert!(child.wait().unwrap().success());
    match waited {
        Awaited::RunEnded(ended) => {
            assert_eq!(ended.status, RunStatus::Cancelled);
            assert_eq!(ended.reason, Some(TerminalReason::OperatorCancelled));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_in_this_process_wakes_the_wait() {
    let (_dir, _db, store) = file_store();
    let (run, approval) = paused(&store, Limits::default()).await;
    let waiter = {
        let (store, run, approval) = (store.clone(), run.clone(), approval.clone());
        tokio::spawn(async move {
            Operator::new(store)
                .wait_for_decision(&run, &approval, LONG)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let decider = store.clone();
    tokio::task::spawn_blocking(move || {
        operator::approve(
            &decider,
            &run,
            &approval,
            &DecideOptions {
                by: "me",
                ..DecideOptions::default()
            },
        )
        .unwrap()
    })
    .await
    .unwrap();
    let waited = woken(waiter).await.unwrap().unwrap();
    assert!(matches!(waited, Awaited::Approved(_)), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_is_applied_at_its_deadline_though_nobody_touches_the_row() {
    let (_dir, _db, store) = file_store();
    let limits = Limits::default().approval_ttl(Duration::from_millis(300));
    let (run, approval) = paused(&store, limits).await;
    let waited = woken(Operator::new(store.clone()).wait_for_decision(&run, &approval, LONG))
        .await
        .unwrap();
    match waited {
        Awaited::Expired(a) => {
            assert_eq!(a.status, ApprovalStatus::Expired);
            assert_eq!(a.note, "expired");
        }
        other => panic!("{other:?}"),
    }
    let ended = store.get_run(&run).unwrap();
    assert_eq!(ended.status, RunStatus::Cancelled);
    assert_eq!(ended.reason, Some(TerminalReason::ApprovalExpired));
    let types: Vec<String> = store
        .list_events(&run)
        .unwrap()
        .iter()
        .map(|e| e.event_type.to_string())
        .collect();
    assert_eq!(
        types[types.len() - 2..],
        ["approval.decided", "run.finished"]
    );
    let report = verify::verify(&store, &verify::VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_with_nothing_decided_times_out_and_changes_nothing() {
    let (_dir, _db, store) = file_store();
    let (run, approval) = paused(&store, Limits::default()).await;
    let before = store.list_events(&run).unwrap().len();
    let waited = Operator::new(store.clone())
        .wait_for_decision(&run, &approval, Duration::from_millis(150))
        .await
        .unwrap();
    assert_eq!(waited, Awaited::TimedOut);
    assert_eq!(store.list_events(&run).unwrap().len(), before);
    assert_eq!(
        store.get_run(&run).unwrap().status,
        RunStatus::WaitingForApproval
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_a_run_wakes_on_a_commit_by_another_process() {
    let (_dir, db, store) = file_store();
    let (run, approval) = paused(&store, Limits::default()).await;
    let head = store.list_events(&run).unwrap().last().unwrap().seq;
    assert_eq!(
        store
            .wait_for_run(&run, head, Duration::from_millis(100))
            .await
            .unwrap(),
        None,
        "nothing new yet"
    );
    let mut child = in_child(&db, &format!("approve {run} {approval}"));
    let changed = woken(store.wait_for_run(&run, head, LONG)).await.unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(changed, Some(head + 1), "approval.decided");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_an_approval_that_a_newer_one_replaced_says_which() {
    let (_dir, _db, store) = file_store();
    let (run, approval) = paused(&store, Limits::default()).await;
    let waiter = {
        let (store, run, approval) = (store.clone(), run.clone(), approval.clone());
        tokio::spawn(async move {
            Operator::new(store)
                .wait_for_decision(&run, &approval, LONG)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Another program asks again on the same step (its policy changed).
    let older = store.get_approval(&run, &approval).unwrap();
    let newer = Approval {
        id: "newer".into(),
        ..older.clone()
    };
    let inserted = newer.clone();
    store
        .write(move |tx| {
            tx.insert_approval(&inserted)?;
            tx.append_event(
                &inserted.run_id,
                &inserted.step_id,
                &inserted.created_at,
                EventType::ApprovalRequested,
                "{}",
            )
        })
        .unwrap();
    match woken(waiter).await.unwrap().unwrap() {
        Awaited::Superseded {
            approval: waited,
            latest,
        } => {
            assert_eq!(waited.id, approval);
            assert_eq!(latest.id, "newer");
        }
        other => panic!("{other:?}"),
    }
}
