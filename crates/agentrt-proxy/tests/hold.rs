//! A held call and the host's side of it, in process against the fixture
//! server over HTTP: progress while held, a host giving up ends the hold
//! (never an execution), a stop ends holds, turns new calls away and waits
//! for the calls executing upstream, and an approval that lapsed is
//! expired and the call decided again (design §30 rule 1, §31).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::{ApprovalStatus, RunStatus, Store, TerminalReason};
use agentrt_mcp_fixture::{Mode, Seen, serve};
use agentrt_proxy::{Caller, Proxy};

/// Long enough never to be reached by a test that passes.
const NEVER: Duration = Duration::from_secs(20);

struct World {
    dir: tempfile::TempDir,
    seen: Arc<Seen>,
    proxy: Arc<Proxy>,
}

/// The fixture in `mode`, its `read_file` a change needing approval, and
/// a proxy over it with the configuration fields `extra`.
async fn world(mode: Mode, extra: &str) -> World {
    let (url, seen) = serve(mode).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        &format!(r#""session": "hold" {extra}"#),
        r#"{"side_effect": "remote_mutation", "timeout": "2s"}"#,
    )
    .await;
    let proxy = proxy_on(dir.path()).await;
    World { dir, seen, proxy }
}

/// A proxy on the configuration and database in `dir`, shared.
async fn proxy_on(dir: &std::path::Path) -> Arc<Proxy> {
    Arc::new(support::proxy_on(dir).await)
}

impl World {
    fn store(&self) -> Store {
        Store::open_existing(self.dir.path().join("proxy.db"), true).expect("db")
    }

    fn store_rw(&self) -> Store {
        Store::open_existing(self.dir.path().join("proxy.db"), false).expect("db")
    }

    fn upstream_calls(&self) -> usize {
        self.seen.call_arguments.lock().expect("lock").len()
    }

    /// The pending approvals, oldest first: (run, approval).
    fn pending(&self) -> Vec<(String, String)> {
        let store = self.store();
        let mut runs = store.list_runs(100, 0).expect("runs").items;
        runs.sort_by_key(|r| r.created_at);
        runs.iter()
            .flat_map(|r| store.list_approvals(&r.id).expect("approvals"))
            .filter(|a| a.status == ApprovalStatus::Pending)
            .map(|a| (a.run_id, a.id))
            .collect()
    }

    /// Waits until an approval is pending.
    async fn until_pending(&self) -> (String, String) {
        let began = std::time::Instant::now();
        loop {
            if let Some(first) = self.pending().into_iter().next() {
                return first;
            }
            assert!(began.elapsed() < NEVER, "no approval was asked");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

const ARGS: &[u8] = br#"{"path":"held.txt"}"#;

async fn call_as(proxy: &Proxy, caller: &mut Caller) -> String {
    proxy
        .call_as("fs_read_file", Some(ARGS), caller)
        .await
        .expect("the tool is offered")
        .text()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_reports_its_progress_about_once_a_second() {
    let world = world(Mode::Json, r#", "hold": "3s""#).await;
    let told: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let sink = Arc::clone(&told);
    let mut caller = Caller::default().with_progress(Box::new(move |waited, hold| {
        sink.lock().expect("lock").push((waited, hold));
        Box::pin(async {})
    }));
    let answer = call_as(&world.proxy, &mut caller).await;
    assert!(answer.starts_with("PENDING_APPROVAL: "), "{answer}");
    let told = told.lock().expect("lock").clone();
    // Told after each whole second but the last (the hold's end answers).
    assert_eq!(told, [(1, 3), (2, 3)], "{told:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_giving_up_ends_the_hold_and_the_approval_still_waits() {
    let world = world(Mode::Json, r#", "hold": "10m""#).await;
    let (gave_up, gone) = tokio::sync::oneshot::channel::<()>();
    let mut caller = Caller::default().gone_when(async move {
        let _ = gone.await;
    });
    let proxy = Arc::clone(&world.proxy);
    let held = tokio::spawn(async move { call_as(&proxy, &mut caller).await });
    world.until_pending().await;
    gave_up.send(()).expect("the call holds");
    let answer = tokio::time::timeout(NEVER, held)
        .await
        .expect("the hold ended with the host")
        .expect("the call");
    assert!(answer.starts_with("PENDING_APPROVAL: "), "{answer}");
    assert_eq!(world.pending().len(), 1, "the approval still waits");
    assert_eq!(world.upstream_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_ends_holds_turns_new_calls_away_and_waits_for_calls_executing() {
    // The fixture never answers a call: a call executing upstream ends
    // when its tool's timeout (2s) runs out, and is recorded.
    let world = world(Mode::HangOnCall, r#", "hold": "10m""#).await;
    let proxy = Arc::clone(&world.proxy);
    let held = tokio::spawn(async move { call_as(&proxy, &mut Caller::default()).await });
    let (run_id, approval_id) = world.until_pending().await;
    // Approved elsewhere: the held call collects it and executes.
    agentrt::operator::approve(
        &world.store_rw(),
        &run_id,
        &approval_id,
        &agentrt::operator::DecideOptions {
            by: "operator",
            note: "",
            shown_hash: None,
        },
    )
    .expect("approved");
    let began = std::time::Instant::now();
    while world.upstream_calls() == 0 {
        assert!(began.elapsed() < NEVER, "the call never went out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // And another call holds on an approval of its own.
    let proxy = Arc::clone(&world.proxy);
    let other = tokio::spawn(async move {
        proxy
            .call("fs_read_file", Some(br#"{"path":"other.txt"}"#), None)
            .await
            .expect("offered")
            .text()
            .to_owned()
    });
    while world.pending().is_empty() {
        assert!(began.elapsed() < NEVER, "the other call never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    world.proxy.stop();
    let other = tokio::time::timeout(NEVER, other)
        .await
        .expect("the stop ended the hold")
        .expect("the other call");
    assert!(other.starts_with("PENDING_APPROVAL: "), "{other}");
    let turned_away = world
        .proxy
        .call("fs_read_file", Some(br#"{"path":"late.txt"}"#), None)
        .await
        .expect("offered");
    assert!(
        turned_away
            .text()
            .starts_with("UNAVAILABLE: The proxy is stopping"),
        "{}",
        turned_away.text()
    );
    tokio::time::timeout(NEVER, world.proxy.landed())
        .await
        .expect("the executing call landed");
    // Landed means recorded: the run is no longer running, its attempt's
    // unknown outcome asked about.
    let run = world.store().get_run(&run_id).expect("run");
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let answer = held.await.expect("the held call");
    assert!(answer.starts_with("UNKNOWN_OUTCOME: "), "{answer}");
    assert_eq!(world.upstream_calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_that_lapsed_is_expired_and_the_call_decided_again() {
    // Without a repeat window nothing refuses the request again: the call
    // asks anew.
    let world = world(
        Mode::Json,
        r#", "hold": "0s", "approval_ttl": "1s", "repeat_window": "0s""#,
    )
    .await;
    let first = call_as(&world.proxy, &mut Caller::default()).await;
    assert!(first.starts_with("PENDING_APPROVAL: "), "{first}");
    let (first_run, first_approval) = world.pending().remove(0);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let again = call_as(&world.proxy, &mut Caller::default()).await;
    assert!(again.starts_with("PENDING_APPROVAL: "), "{again}");
    assert!(!again.contains(&first_approval), "a new approval: {again}");
    let store = world.store();
    let run = store.get_run(&first_run).expect("run");
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(run.reason, Some(TerminalReason::ApprovalExpired));
    assert_eq!(world.pending().len(), 1, "one question waits");
    assert_eq!(world.upstream_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn within_the_window_a_lapsed_approval_answers_expired() {
    let world = world(Mode::Json, r#", "hold": "0s", "approval_ttl": "1s""#).await;
    let first = call_as(&world.proxy, &mut Caller::default()).await;
    assert!(first.starts_with("PENDING_APPROVAL: "), "{first}");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let again = call_as(&world.proxy, &mut Caller::default()).await;
    assert!(again.starts_with("EXPIRED: "), "{again}");
    assert!(world.pending().is_empty(), "nothing asked anew");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_run_approved_across_a_restart_runs_once_without_asking_again() {
    // A change needing approval whose answer is lost: its outcome is
    // unknown.
    let mut world = world(Mode::Lost, r#", "hold": "0s", "repeat_window": "0s""#).await;
    let options = agentrt::operator::DecideOptions {
        by: "operator",
        note: "",
        shown_hash: None,
    };
    let asked = call_as(&world.proxy, &mut Caller::default()).await;
    assert!(asked.starts_with("PENDING_APPROVAL: "), "{asked}");
    let (run, approval) = world.pending().remove(0);
    agentrt::operator::approve(&world.store_rw(), &run, &approval, &options).expect("approve");
    let first = call_as(&world.proxy, &mut Caller::default()).await;
    assert!(first.starts_with("UNKNOWN_OUTCOME: "), "{first}");
    assert_eq!(world.upstream_calls(), 1);
    // Rejected, the question resolves nothing: the same call asks again
    // in a fresh run, the policy told of the attempt (rule 6).
    let (run, question) = world.pending().remove(0);
    agentrt::operator::reject(&world.store_rw(), &run, &question, &options).expect("reject");
    let asked = call_as(&world.proxy, &mut Caller::default()).await;
    assert!(asked.starts_with("INTERRUPTED: "), "{asked}");
    let (rerun, again) = world.pending().remove(0);
    assert_ne!(rerun, run, "a fresh run");

    // A new proxy (the old one's memory gone); the operator approves the
    // re-run. The policy asked again on collection must know what the
    // question was about, or it asks for a plain approval instead.
    world.proxy = proxy_on(world.dir.path()).await;
    agentrt::operator::approve(&world.store_rw(), &rerun, &again, &options).expect("approve");
    let collected = call_as(&world.proxy, &mut Caller::default()).await;
    assert_eq!(world.upstream_calls(), 2, "run once more: {collected}");
    // (Its answer lost again: an unknown outcome, not a new approval.)
    assert!(collected.starts_with("UNKNOWN_OUTCOME: "), "{collected}");
}

/// An operator edits the held call's arguments and approves the edit: the
/// host's held call returns the edited call's result, and a block before
/// it says the call was changed and how; upstream saw only the edit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_an_operator_edits_returns_the_edited_calls_result_and_says_so() {
    let world = world(Mode::Json, r#", "hold": "10m""#).await;
    let proxy = Arc::clone(&world.proxy);
    let held = tokio::spawn(async move {
        let mut caller = Caller::default();
        proxy
            .call_as("fs_read_file", Some(ARGS), &mut caller)
            .await
            .expect("the tool is offered")
    });
    let (run, approval) = world.until_pending().await;
    agentrt::Operator::new(world.store_rw())
        .approve_edited(
            &run,
            &approval,
            r#"{"path":"edited.txt"}"#,
            &agentrt::DecideOptions {
                by: "alice",
                note: "the other file",
                shown_hash: None,
            },
        )
        .expect("the edit is approved");
    let answer = tokio::time::timeout(NEVER, held)
        .await
        .expect("the held call returns")
        .expect("the call");
    let agentrt_proxy::Answer::Result { edited, .. } = &answer else {
        panic!("{answer:?}");
    };
    let said = edited.as_deref().unwrap_or_default();
    assert!(
        said.starts_with("EDITED: ")
            && said.contains(r#"{"path":"edited.txt"}"#)
            && said.contains("the other file"),
        "{said}"
    );
    let upstream = world.seen.call_arguments.lock().expect("lock").clone();
    assert_eq!(upstream, [serde_json::json!({"path": "edited.txt"})]);
    assert_eq!(
        world.store().get_run(&run).expect("run").status,
        RunStatus::Completed
    );
}
