//! A tool whose rule says `"approvers": 2` (design §46): a call of it is
//! held until two distinct people approve; the first approval leaves it
//! held (nothing runs upstream), the same person again is refused, a
//! second person's approval runs it once. Beside a Cedar policy the rule
//! is refused (the policy's `@approvers` says it there).

mod support;

use std::sync::Arc;
use std::time::Duration;

use agentrt::{ApprovalStatus, DecideOptions, Error, Operator, Store};
use agentrt_mcp_fixture::{Mode, serve};
use agentrt_proxy::Caller;

fn approve(
    store: &Store,
    run: &str,
    approval: &str,
    by: &str,
) -> agentrt::Result<agentrt::Approval> {
    Operator::new(store.clone()).approve(
        run,
        approval,
        &DecideOptions {
            by,
            note: "",
            shown_hash: None,
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_needing_two_approvers_runs_only_after_the_second_person() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        r#""session": "two", "hold": "1m""#,
        r#"{"side_effect": "remote_mutation", "approvers": 2, "timeout": "2s"}"#,
    )
    .await;
    let proxy = Arc::new(support::proxy_on(dir.path()).await);
    let held = {
        let proxy = Arc::clone(&proxy);
        tokio::spawn(async move {
            proxy
                .call_as(
                    "fs_read_file",
                    Some(br#"{"path":"two.txt"}"#),
                    &mut Caller::default(),
                )
                .await
                .expect("offered")
                .text()
                .to_owned()
        })
    };
    let store = Store::open_existing(dir.path().join("proxy.db"), false).expect("db");
    let (run, approval) = loop {
        let runs = store.list_runs(10, 0).expect("runs").items;
        let pending = runs.iter().find_map(|r| {
            store
                .list_approvals(&r.id)
                .expect("approvals")
                .into_iter()
                .find(|a| a.status == ApprovalStatus::Pending)
                .map(|a| (r.id.clone(), a))
        });
        if let Some(found) = pending {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(agentrt::approval::approvers_needed(&approval), 2);

    let first = approve(&store, &run, &approval.id, "alice").expect("recorded");
    assert_eq!(first.status, ApprovalStatus::Pending);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished(), "one approval releases nothing");
    assert!(seen.call_arguments.lock().expect("lock").is_empty());
    let again = approve(&store, &run, &approval.id, "alice");
    assert!(
        matches!(again, Err(Error::SameApprover { .. })),
        "{again:?}"
    );

    approve(&store, &run, &approval.id, "bob").expect("granted");
    let answer = tokio::time::timeout(Duration::from_secs(20), held)
        .await
        .expect("answered")
        .expect("joined");
    assert!(!answer.starts_with("PENDING_APPROVAL"), "{answer}");
    assert_eq!(
        seen.call_arguments.lock().expect("lock").len(),
        1,
        "ran once"
    );
}

#[test]
fn approvers_on_a_rule_is_refused_beside_a_cedar_policy_and_out_of_range() {
    let base = |rule: &str, policy: &str| {
        format!(
            r#"{{"database": "p.db", "session": "s", {policy}
                "servers": [{{"name": "fs", "command": ["x"], "manifest": "m.json",
                  "rules": {{"read_file": {rule}}}}}]}}"#
        )
    };
    let cedar = base(
        r#"{"side_effect": "remote_mutation", "approvers": 2}"#,
        r#""policy": {"cedar": "p.cedar"},"#,
    );
    let refused = agentrt_proxy::parse_config(cedar.as_bytes(), std::path::Path::new("c.json"))
        .expect_err("refused");
    assert!(refused.to_string().contains("@approvers"), "{refused}");
    for n in ["0", "3", "-1"] {
        let text = base(
            &format!(r#"{{"side_effect": "remote_mutation", "approvers": {n}}}"#),
            "",
        );
        let refused = agentrt_proxy::parse_config(text.as_bytes(), std::path::Path::new("c.json"))
            .expect_err(n);
        assert!(refused.to_string().contains("1 to 2"), "{n}: {refused}");
    }
}
