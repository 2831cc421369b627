//! The approver over runs held in PostgreSQL: `agentrt-approver serve --db
//! postgres://…` decides the approval a host's run waits for, in the
//! database that host shares, records the request's signature in its own
//! table there (a replay is refused), and never shows the URL's password.
//!
//! Needs `AGENTRT_TEST_POSTGRES` (as `cargo xtask postgres -- …` sets it).

use std::io::Read;

use agentrt::verify::{self, VerifyOptions};
use agentrt::{ApprovalStatus, Limits};
use agentrt_approver::{SIGNATURES_TABLE, StoreApprover};

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
