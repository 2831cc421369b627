//! The store-backed approver (design §34) against runs a scripted
//! agent paused on a real database file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::{
    ApprovalStatus, Decision as AgentDecision, DefaultPolicy, Driver, Event, EventType, GateConfig,
    Limits, Observer, RunStatus, ScriptedAgent, SideEffect, Store, TerminalReason, Timestamp, Tool,
    ToolResult, ToolSpec, clock::ManualClock, tool_fn,
};
use agentrt_approver::{
    Approver, ApproverError, Cancellation, Decision, LOGIN_NONCES_TABLE, SIGNATURES_TABLE,
    SIGNED_IN_EVENT, SignIn, StoreApprover,
};

fn start() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

fn tools() -> Vec<Arc<dyn Tool>> {
    let push: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("push", "Push to the remote", SideEffect::RemoteMutation),
        |_call| async move { Ok(ToolResult::raw(r#"{"pushed":true}"#).with_summary("pushed")) },
    ));
    let read: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("fs_read", "Read a file", SideEffect::ReadOnly),
        |call| async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("read")) },
    ));
    vec![push, read]
}

/// A database in a temporary directory, its clock, and runs paused on it.
struct World {
    _dir: tempfile::TempDir,
    db: PathBuf,
    clock: ManualClock,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        drop(Store::open(&db).unwrap());
        World {
            _dir: dir,
            db,
            clock: ManualClock::new(start()),
        }
    }

    /// Drives run `id` through `decisions` with `limits` until it pauses
    /// or ends.
    fn drive(&self, id: &str, decisions: Vec<AgentDecision>, limits: Limits) -> agentrt::Run {
        let store = Store::open(&self.db).unwrap();
        let config = GateConfig::new(store, DefaultPolicy, tools()).with_clock(self.clock.clock());
        let mut driver = Driver::new(config, ScriptedAgent::new(decisions)).unwrap();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(driver.start(Some(id), "push the fix", limits))
            .unwrap()
    }

    /// A run waiting for approval of `push` with `args`.
    fn waiting(&self, id: &str, args: &str, limits: Limits) -> agentrt::Run {
        let run = self.drive(id, vec![AgentDecision::tool_call("push", args)], limits);
        assert_eq!(run.status, RunStatus::WaitingForApproval);
        run
    }

    fn approver(&self) -> StoreApprover {
        StoreApprover::open(&self.db, None)
            .unwrap()
            .with_clock(self.clock.clock())
    }

    fn store(&self) -> Store {
        Store::open_existing(&self.db, true).unwrap()
    }

    fn events(&self, run: &str) -> Vec<Event> {
        self.store().list_events(run).unwrap()
    }
}

fn decision(run: &str, approval: &str, hash: &str) -> Decision {
    Decision {
        run_id: run.into(),
        approval_id: approval.into(),
        hash: hash.into(),
        by: "alice".into(),
        note: "looks right".into(),
        args: None,
        request_signature: None,
    }
}

fn cancellation(run: &str, by: &str, note: &str) -> Cancellation {
    Cancellation {
        run_id: run.into(),
        by: by.into(),
        note: note.into(),
        request_signature: None,
    }
}

#[test]
fn pending_lists_a_waiting_runs_approvals_bounded_with_the_policys_reason() {
    let world = World::new();
    let long = "x".repeat(5000);
    world.waiting(
        "r1",
        &format!(r#"{{"branch":"{long}"}}"#),
        Limits::default(),
    );
    let approver = world.approver();

    let pending = approver.pending("r1", 10).unwrap();
    assert_eq!(pending.len(), 1);
    let shown = &pending[0];
    let stored = &world.store().list_approvals("r1").unwrap()[0];
    assert_eq!(shown.approval.id, stored.id);
    assert_eq!(
        shown.approval.hash, stored.hash,
        "the hash is never bounded"
    );
    assert!(stored.request.as_str().contains(&long));
    assert!(!shown.approval.request.as_str().contains(&long));
    assert!(shown.approval.request.as_str().contains("bytes omitted"));
    assert!(shown.reason.contains("approval"), "{:?}", shown.reason);
    assert!(!shown.expired);

    let json: serde_json::Value = serde_json::to_value(shown).unwrap();
    assert_eq!(json["hash"], stored.hash.as_str());
    assert_eq!(json["status"], "pending");
    assert_eq!(json["reason"], shown.reason.as_str());
    assert!(json.get("expired").is_none(), "false is left out: {json}");
    assert!(
        json.get("expires_at").is_none(),
        "no expiry is left out: {json}"
    );
}

#[test]
fn pending_is_empty_for_a_run_not_waiting_and_not_found_for_a_missing_run() {
    let world = World::new();
    let done = world.drive(
        "done",
        vec![
            AgentDecision::tool_call("fs_read", r#"{"path":"a"}"#),
            AgentDecision::complete("true"),
        ],
        Limits::default(),
    );
    assert_eq!(done.status, RunStatus::Completed);
    let approver = world.approver();
    assert!(approver.pending("done", 10).unwrap().is_empty());
    let missing = approver.pending("nope", 10).unwrap_err();
    assert!(missing.is_not_found(), "{missing:?}");
}

#[test]
fn show_reads_an_approval_of_any_status_and_not_one_of_another_run() {
    let world = World::new();
    world.waiting("r1", r#"{"branch":"main"}"#, Limits::default());
    world.waiting("r2", r#"{"branch":"dev"}"#, Limits::default());
    let approver = world.approver();
    let first = approver.pending("r1", 0).unwrap().remove(0).approval;
    let other = approver.pending("r2", 0).unwrap().remove(0).approval;

    let e = approver.show("r1", &other.id).unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    approver
        .reject(&decision("r1", &first.id, &first.hash))
        .unwrap();
    let shown = approver.show("r1", &first.id).unwrap();
    assert_eq!(shown.approval.status, ApprovalStatus::Rejected);
    assert_eq!(shown.approval.decided_by, "alice");
}

#[test]
fn a_decision_is_bound_to_the_hash_shown_and_an_approved_run_stays_waiting() {
    let world = World::new();
    world.waiting("r1", r#"{"branch":"main"}"#, Limits::default());
    let approver = world.approver();
    let shown = approver.pending("r1", 0).unwrap().remove(0).approval;
    let before = world.events("r1").len();

    for hash in ["0".repeat(64), String::new()] {
        let e = approver
            .approve(&decision("r1", &shown.id, &hash))
            .unwrap_err();
        assert!(
            matches!(e.core(), Some(agentrt::Error::ApprovalChanged { .. })),
            "{hash:?}: {e:?}"
        );
    }
    assert_eq!(world.events("r1").len(), before, "nothing was written");

    let approved = approver
        .approve(&decision("r1", &shown.id, &shown.hash))
        .unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    assert_eq!(approved.hash, shown.hash);
    let run = world.store().get_run("r1").unwrap();
    assert_eq!(
        run.status,
        RunStatus::WaitingForApproval,
        "its owner resumes it"
    );
    let e = approver
        .approve(&decision("r1", &shown.id, &shown.hash))
        .unwrap_err();
    assert!(
        matches!(e.core(), Some(agentrt::Error::NotPending { .. })),
        "{e:?}"
    );
}

#[test]
fn a_rejection_cancels_the_run() {
    let world = World::new();
    world.waiting("r1", r#"{"branch":"main"}"#, Limits::default());
    let approver = world.approver();
    let shown = approver.pending("r1", 0).unwrap().remove(0).approval;
    let rejected = approver
        .reject(&decision("r1", &shown.id, &shown.hash))
        .unwrap();
    assert_eq!(rejected.status, ApprovalStatus::Rejected);
    let run = world.store().get_run("r1").unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(run.reason, Some(TerminalReason::ApprovalRejected));
    assert!(approver.pending("r1", 0).unwrap().is_empty());
}

#[test]
fn an_incomplete_decision_touches_nothing() {
    let world = World::new();
    world.waiting("r1", r#"{"branch":"main"}"#, Limits::default());
    let approver = world.approver();
    let shown = approver.pending("r1", 0).unwrap().remove(0).approval;
    let before = world.events("r1").len();
    let complete = decision("r1", &shown.id, &shown.hash);
    for (missing, broken) in [
        (
            "run_id",
            Decision {
                run_id: String::new(),
                ..complete.clone()
            },
        ),
        (
            "approval_id",
            Decision {
                approval_id: String::new(),
                ..complete.clone()
            },
        ),
        (
            "by",
            Decision {
                by: String::new(),
                ..complete.clone()
            },
        ),
    ] {
        for e in [
            approver.approve(&broken).unwrap_err(),
            approver.reject(&broken).unwrap_err(),
        ] {
            assert!(
                matches!(e, ApproverError::Incomplete { missing: m } if m == missing),
                "{e:?}"
            );
        }
    }
    let e = approver.cancel(&cancellation("r1", "", "why")).unwrap_err();
    assert!(e.is_incomplete(), "{e:?}");
    let e = approver
        .cancel(&cancellation("", "alice", "why"))
        .unwrap_err();
    assert!(e.is_incomplete(), "{e:?}");
    assert_eq!(world.events("r1").len(), before);
}

#[test]
fn an_expired_approval_is_shown_expired_and_a_decision_on_it_runs_the_expiry() {
    let world = World::new();
    let limits = Limits::default().approval_ttl(Duration::from_secs(60));
    world.waiting("r1", r#"{"branch":"main"}"#, limits);
    let approver = world.approver();
    let shown = approver.pending("r1", 0).unwrap().remove(0);
    assert!(!shown.expired);
    assert!(shown.approval.expires_at.is_some());

    world.clock.advance(Duration::from_secs(61));
    let before = world.events("r1").len();
    let late = approver.show("r1", &shown.approval.id).unwrap();
    assert!(late.expired);
    let json = serde_json::to_value(&late).unwrap();
    assert_eq!(json["expired"], true);
    assert_eq!(json["status"], "pending", "reading writes nothing");
    assert_eq!(world.events("r1").len(), before);

    let e = approver
        .approve(&decision("r1", &shown.approval.id, &shown.approval.hash))
        .unwrap_err();
    assert!(e.is_expired(), "{e:?}");
    assert!(
        matches!(e.core(), Some(agentrt::Error::ApprovalExpired { .. })),
        "{e:?}"
    );
    let stored = &world.store().list_approvals("r1").unwrap()[0];
    assert_eq!(stored.status, ApprovalStatus::Expired);
    let run = world.store().get_run("r1").unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(run.reason, Some(TerminalReason::ApprovalExpired));
}

#[test]
fn cancel_ends_a_run_without_deciding_its_approval_and_refuses_a_finished_one() {
    let world = World::new();
    world.waiting("r1", r#"{"branch":"main"}"#, Limits::default());
    let approver = world.approver();
    let summary = approver.run("r1").unwrap();
    assert_eq!(summary.id, "r1");
    let run = approver
        .cancel(&cancellation("r1", "alice", "wrong branch"))
        .unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(run.reason, Some(TerminalReason::OperatorCancelled));
    let stored = &world.store().list_approvals("r1").unwrap()[0];
    assert_eq!(stored.status, ApprovalStatus::Pending, "not decided");
    assert!(
        approver.pending("r1", 0).unwrap().is_empty(),
        "a run not waiting lists nothing, whatever its rows say"
    );
    let e = approver
        .cancel(&cancellation("r1", "alice", "again"))
        .unwrap_err();
    assert!(
        matches!(e.core(), Some(agentrt::Error::RunState { .. })),
        "{e:?}"
    );
}

#[test]
fn the_observer_hears_every_event_a_decision_commits() {
    let world = World::new();
    world.waiting("r1", r#"{"branch":"main"}"#, Limits::default());
    let heard: Arc<Mutex<Vec<EventType>>> = Arc::default();
    let sink = Arc::clone(&heard);
    let observer: Arc<dyn Observer> =
        Arc::new(move |e: &Event| sink.lock().unwrap().push(e.event_type.clone()));
    let approver = StoreApprover::open(&world.db, Some(observer))
        .unwrap()
        .with_clock(world.clock.clock());
    let shown = approver.pending("r1", 0).unwrap().remove(0).approval;
    approver
        .reject(&decision("r1", &shown.id, &shown.hash))
        .unwrap();
    assert_eq!(
        *heard.lock().unwrap(),
        [EventType::ApprovalDecided, EventType::RunFinished]
    );
}

#[test]
fn open_needs_an_existing_database_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    let e = StoreApprover::open(&missing, None).unwrap_err();
    assert!(e.core().is_some(), "{e:?}");
    assert!(!Path::new(&missing).exists());

    let world = World::new();
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&world.db, &link).unwrap();
    let e = StoreApprover::open(&link, None).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
}

/// A decision carried by a signed request records the signature in its own
/// transaction: the same signature again is refused and decides nothing,
/// also by an approver opened afresh (a restarted server); a refused
/// decision records nothing, so its signature stays unused.
#[test]
fn a_signature_recorded_with_a_decision_is_refused_again_after_a_restart() {
    let world = World::new();
    world.waiting("r1", r#"{"branch":"main"}"#, Limits::default());
    world.waiting("r2", r#"{"branch":"dev"}"#, Limits::default());
    let approver = world.approver();
    let first = approver.pending("r1", 0).unwrap().remove(0).approval;
    let second = approver.pending("r2", 0).unwrap().remove(0).approval;

    let changed = Decision {
        request_signature: Some("v1=aa".into()),
        ..decision("r1", &first.id, &"0".repeat(64))
    };
    assert!(approver.approve(&changed).is_err());
    let signed = Decision {
        request_signature: Some("v1=aa".into()),
        ..decision("r1", &first.id, &first.hash)
    };
    // The refused decision recorded nothing: the same signature decides.
    approver.approve(&signed).unwrap();
    let row = approver
        .store()
        .row(SIGNATURES_TABLE, "v1=aa")
        .unwrap()
        .unwrap();
    assert_eq!(row.text("run_id"), Some("r1"));
    let decided = world.events("r1").pop().unwrap();
    assert_eq!(decided.event_type, agentrt::EventType::ApprovalDecided);
    assert_eq!(row.written_seq(), decided.seq, "explained by the decision");
    drop(approver);

    let restarted = world.approver();
    let before = world.events("r2").len();
    let replayed = Decision {
        request_signature: Some("v1=aa".into()),
        ..decision("r2", &second.id, &second.hash)
    };
    let e = restarted.reject(&replayed).unwrap_err();
    assert!(matches!(e, ApproverError::Replayed), "{e:?}");
    let e = restarted
        .cancel(&Cancellation {
            request_signature: Some("v1=aa".into()),
            ..cancellation("r2", "alice", "stop")
        })
        .unwrap_err();
    assert!(matches!(e, ApproverError::Replayed), "{e:?}");
    assert_eq!(world.events("r2").len(), before, "nothing was decided");
    assert_eq!(
        world.store().get_run("r2").unwrap().status,
        RunStatus::WaitingForApproval
    );
    let report = agentrt::verify::verify(&world.store(), &Default::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}

fn sign_in(run: &str, nonce: &str) -> SignIn {
    SignIn {
        run_id: run.into(),
        by: "alice".into(),
        nonce: nonce.into(),
    }
}

/// A login link's nonce is taken in one transaction of the run's
/// database: of approvers on one database (as two processes would be)
/// taking the same link at once, exactly one signs in; the others are
/// told it was used, and the chain covers the row.
#[test]
fn a_login_nonce_is_taken_once_by_approvers_racing_on_one_database() {
    let world = World::new();
    world.waiting("r1", "{}", Limits::default());
    let approvers: Vec<StoreApprover> = (0..4).map(|_| world.approver()).collect();
    let barrier = Arc::new(std::sync::Barrier::new(approvers.len()));
    let outcomes: Vec<Result<(), ApproverError>> = std::thread::scope(|scope| {
        let racing: Vec<_> = approvers
            .iter()
            .map(|approver| {
                let barrier = Arc::clone(&barrier);
                scope.spawn(move || {
                    barrier.wait();
                    approver.sign_in(&sign_in("r1", "n-1"))
                })
            })
            .collect();
        racing.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(
        outcomes.iter().filter(|o| o.is_ok()).count(),
        1,
        "{outcomes:?}"
    );
    for outcome in outcomes.iter().filter(|o| o.is_err()) {
        assert!(
            matches!(outcome, Err(ApproverError::LinkUsed)),
            "{outcome:?}"
        );
    }
    let signed_in = world.events("r1").pop().unwrap();
    assert_eq!(signed_in.event_type.as_str(), SIGNED_IN_EVENT);
    let row = approvers[0]
        .store()
        .row(LOGIN_NONCES_TABLE, "n-1")
        .unwrap()
        .unwrap();
    assert_eq!(row.text("run_id"), Some("r1"));
    assert_eq!(row.written_seq(), signed_in.seq, "explained by its event");
    let report = agentrt::verify::verify(&world.store(), &Default::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}

/// A sign-in to a missing run, or without its run, person or nonce, takes
/// nothing: the link stays usable.
#[test]
fn a_sign_in_to_no_run_or_incomplete_takes_nothing() {
    let world = World::new();
    world.waiting("r1", "{}", Limits::default());
    let approver = world.approver();
    let e = approver.sign_in(&sign_in("missing", "n-1")).unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    for incomplete in [
        sign_in("", "n-1"),
        sign_in("r1", ""),
        SignIn {
            by: String::new(),
            ..sign_in("r1", "n-1")
        },
    ] {
        let e = approver.sign_in(&incomplete).unwrap_err();
        assert!(e.is_incomplete(), "{e:?}");
    }
    assert_eq!(
        approver.store().row(LOGIN_NONCES_TABLE, "n-1").unwrap(),
        None
    );
    approver.sign_in(&sign_in("r1", "n-1")).unwrap();
}

/// The approver's extension as it was released first: the signatures'
/// table only (migration 1).
const FIRST_EXTENSION: agentrt::store::Extension = agentrt::store::Extension {
    name: "approver",
    // Its text exactly as released: an edited migration 1 would be
    // refused when the approver opens this database.
    migrations: &[(
        1,
        "CREATE TABLE approver_signatures (
             signature   TEXT NOT NULL PRIMARY KEY,
             run_id      TEXT NOT NULL,
             used_at     TEXT NOT NULL,
             written_seq INTEGER NOT NULL DEFAULT 0
         )",
    )],
    tables: &[agentrt_approver::EXTENSION.tables[0]],
};

/// A database the approver opened before login nonces were kept (its
/// extension at migration 1, a signature recorded) gets migration 2 when
/// the approver opens it: the signature is still refused, a link is taken
/// once, and the chain verifies.
#[test]
fn a_database_at_the_first_migration_gains_the_login_nonces_and_keeps_its_signatures() {
    let world = World::new();
    world.waiting("r1", "{}", Limits::default());
    world.waiting("r2", "{}", Limits::default());
    let first = Store::open_with(
        &world.db,
        agentrt::StoreOptions {
            extensions: vec![FIRST_EXTENSION],
            ..agentrt::StoreOptions::default()
        },
    )
    .unwrap();
    let old = StoreApprover::new(first, None).with_clock(world.clock.clock());
    let approval = old.pending("r1", 0).unwrap().remove(0).approval;
    old.approve(&Decision {
        request_signature: Some("v1=old".into()),
        ..decision("r1", &approval.id, &approval.hash)
    })
    .unwrap();
    drop(old);

    let approver = world.approver();
    let second = approver.pending("r2", 0).unwrap().remove(0).approval;
    let replayed = approver
        .approve(&Decision {
            request_signature: Some("v1=old".into()),
            ..decision("r2", &second.id, &second.hash)
        })
        .unwrap_err();
    assert!(matches!(replayed, ApproverError::Replayed), "{replayed:?}");
    approver.sign_in(&sign_in("r2", "n-1")).unwrap();
    let again = approver.sign_in(&sign_in("r2", "n-1")).unwrap_err();
    assert!(matches!(again, ApproverError::LinkUsed), "{again:?}");
    let report = agentrt::verify::verify(&world.store(), &Default::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}
