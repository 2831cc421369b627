//! The approver over runs held in PostgreSQL: `agentrt-approver serve --db
//! postgres://…` decides the approval a host's run waits for, in the
//! database that host shares, records the request's signature in its own
//! table there (a replay is refused), and never shows the URL's password;
//! a login link's nonce is taken there once, also by two approvers at
//! once, and a database at the extension's first migration gains the
//! nonces' table.
//!
//! Needs `AGENTRT_TEST_POSTGRES` (as `cargo xtask postgres -- …` sets it).

use std::io::Read;

use agentrt::verify::{self, VerifyOptions};
use agentrt::{ApprovalStatus, Limits};
use agentrt_approver::{
    Approver, ApproverError, LOGIN_NONCES_TABLE, SIGNATURES_TABLE, SignIn, StoreApprover,
};

mod support;

// The test server and a fresh database on it, as agentrt-postgres's own
// tests make them.
#[path = "../../agentrt-postgres/tests/real_postgres/backends.rs"]
mod backends;

use backends::{PASSWORD, client, location, on_plain_thread};

#[tokio::test(flavor = "multi_thread")]
async fn serve_decides_a_run_held_in_postgresql_and_refuses_a_replayed_request() {
    let name = backends::fresh_database_name();
    let url = backends::url(&name);
    // The host that runs the agent: it made the schema and paused the run.
    let host = agentrt_postgres::open(&url).unwrap();
    let (approval, hash) =
        support::pause_on_push_in(&host, "r1", "{}", Limits::default(), None).await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    support::write_secret(&secret, 0o600);

    let (mut child, mut stderr, base) = support::serve_on(url.as_ref(), &secret);

    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let (status, listed) =
        support::send(&http, &base, reqwest::Method::GET, "/runs/r1/approvals", "").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["pending"][0]["hash"], hash.as_str());
    let body =
        serde_json::json!({"run_id": "r1", "approval_id": approval, "hash": hash, "by": "alice"})
            .to_string();
    let path = format!("/runs/r1/approvals/{approval}/approve");
    let headers = support::signed(&reqwest::Method::POST, &path, &body);
    let (status, decided) =
        support::send_signed(&http, &base, reqwest::Method::POST, &path, &body, &headers).await;
    assert_eq!(status, 202, "{decided}");
    assert_eq!(decided["status"], "approved");
    let (status, replay) =
        support::send_signed(&http, &base, reqwest::Method::POST, &path, &body, &headers).await;
    assert_eq!(status, 401, "{replay}");
    assert_eq!(replay["error"], "signature already used");

    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let mut said = String::new();
    stderr.read_to_string(&mut said).unwrap();
    assert!(!said.contains(PASSWORD), "{said}");

    // The host sees the decision; the signature is in the approver's
    // table of the same database; the chain is intact.
    let approvals = host.list_approvals("r1").unwrap();
    assert_eq!(approvals[0].status, ApprovalStatus::Approved);
    assert_eq!(approvals[0].decided_by, "alice");
    let signatures: i64 = on_plain_thread(|| {
        client(&location(&name))
            .query_one(&format!("SELECT COUNT(*) FROM {SIGNATURES_TABLE}"), &[])
            .unwrap()
            .get(0)
    });
    assert_eq!(signatures, 1);
    assert!(
        verify::verify(&host, &VerifyOptions::default())
            .unwrap()
            .intact()
    );
}

#[test]
fn a_database_without_the_schema_is_refused_and_left_without_one() {
    let name = backends::fresh_database_name();
    let url = backends::url(&name);
    let refused = StoreApprover::open(&url, None).map(|_| ());
    let shown = format!("{:?}", refused.as_ref().unwrap_err());
    assert!(!shown.contains(PASSWORD), "{shown}");
    let tables: i64 = on_plain_thread(|| {
        client(&location(&name))
            .query_one(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()",
                &[],
            )
            .unwrap()
            .get(0)
    });
    assert_eq!(tables, 0);
}

/// The approver's extension as it was released first (migration 1).
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

#[tokio::test(flavor = "multi_thread")]
async fn a_login_link_is_taken_once_by_two_approvers_on_postgresql() {
    let name = backends::fresh_database_name();
    let url = backends::url(&name);
    let host = agentrt_postgres::open(&url).unwrap();
    support::pause_on_push_in(&host, "r1", "{}", Limits::default(), None).await;
    // An approver of the first release opened it: migration 1 only.
    let first = {
        let url = url.clone();
        on_plain_thread(move || {
            agentrt_postgres::open_with(
                &url,
                agentrt_postgres::PgOptions {
                    store: agentrt::StoreOptions {
                        extensions: vec![FIRST_EXTENSION],
                        ..agentrt::StoreOptions::default()
                    },
                    ..agentrt_postgres::PgOptions::default()
                },
            )
            .map(drop)
        })
    };
    first.unwrap();

    let outcomes: Vec<Result<(), ApproverError>> = on_plain_thread(move || {
        let approvers: Vec<StoreApprover> = (0..2)
            .map(|_| StoreApprover::open(&url, None).unwrap())
            .collect();
        let barrier = std::sync::Barrier::new(approvers.len());
        std::thread::scope(|scope| {
            let racing: Vec<_> = approvers
                .iter()
                .map(|approver| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        approver.sign_in(&SignIn {
                            run_id: "r1".into(),
                            by: "alice".into(),
                            nonce: "n-1".into(),
                        })
                    })
                })
                .collect();
            racing.into_iter().map(|t| t.join().unwrap()).collect()
        })
    });
    assert_eq!(
        outcomes.iter().filter(|o| o.is_ok()).count(),
        1,
        "{outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .any(|o| matches!(o, Err(ApproverError::LinkUsed))),
        "{outcomes:?}"
    );
    let nonces: i64 = on_plain_thread(|| {
        client(&location(&name))
            .query_one(&format!("SELECT COUNT(*) FROM {LOGIN_NONCES_TABLE}"), &[])
            .unwrap()
            .get(0)
    });
    assert_eq!(nonces, 1);
    let events = host.list_events("r1").unwrap();
    assert_eq!(
        events.last().unwrap().event_type.as_str(),
        agentrt_approver::SIGNED_IN_EVENT
    );
    assert!(
        verify::verify(&host, &VerifyOptions::default())
            .unwrap()
            .intact()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn notify_follows_runs_held_in_postgresql_and_tells_each_approval_once() {
    use std::os::unix::fs::PermissionsExt;
    let name = backends::fresh_database_name();
    let url = backends::url(&name);
    let host = agentrt_postgres::open(&url).unwrap();
    support::pause_on_push_in(&host, "r1", "{}", Limits::default(), None).await;
    let (receiver, listener) = (
        support::receiver::Receiver::new(),
        support::receiver::listener().await,
    );
    let port = listener.local_addr().unwrap().port();
    receiver.serve(listener);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("notify.json");
    std::fs::write(
        &config,
        format!(r#"{{"channels": [{{"kind": "chat", "url": "http://127.0.0.1:{port}/hook"}}]}}"#),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let notifier = agentrt_approver::notify::Notifier::new(
        agentrt_approver::notify::NotifyConfig::load(&config).unwrap(),
        None,
    )
    .unwrap();
    let (handle, stop) = agentrt::cancel_pair();
    let task = {
        let (db, cursor) = (std::path::PathBuf::from(url.clone()), dir.path().join("c"));
        tokio::spawn(async move { notifier.run(db, cursor, false, &stop).await })
    };
    receiver.until(1).await;
    // Another host's run pauses while notify follows: PostgreSQL's change
    // signal wakes it.
    support::pause_on_push_in(&host, "r2", "{}", Limits::default(), None).await;
    let seen = receiver.until(2).await;
    handle.cancel();
    task.await.unwrap().unwrap();
    let texts: Vec<String> = seen
        .iter()
        .map(|r| r.json()["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(texts[0].contains("run r1 waits for approval"), "{texts:?}");
    assert!(texts[1].contains("run r2 waits for approval"), "{texts:?}");
    assert_eq!(receiver.seen().len(), 2);
}
