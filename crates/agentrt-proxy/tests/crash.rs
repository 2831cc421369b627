//! A proxy SIGKILLed in the middle of a call, then a new proxy on the same
//! database: the call is never executed again without an operator. The
//! same request is `IN_PROGRESS` while the dead proxy's lease lasts, then
//! the run is taken over and the call answers `INTERRUPTED`, naming the
//! approval an operator decides. Another request to the same tool takes
//! the cut-off run over first and is blocked by its question (rule 7).

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentrt_mcp_fixture::{Mode, Seen, serve};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use tokio::process::{Child, Command};

/// Starts the proxy binary on `config`, its stdio as the client's
/// transport (so the test can kill the process itself).
async fn start(config: &Path) -> (Child, RunningService<RoleClient, ()>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
        .args(["serve", "--config"])
        .arg(config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the proxy");
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        panic!("the proxy's pipes");
    };
    let client = ().serve((stdout, stdin)).await.expect("handshake");
    (child, client)
}

async fn call(client: &RunningService<RoleClient, ()>) -> CallToolResult {
    call_path(client, "ledger.txt").await
}

async fn call_path(client: &RunningService<RoleClient, ()>, path: &str) -> CallToolResult {
    let serde_json::Value::Object(args) = serde_json::json!({"path": path}) else {
        unreachable!();
    };
    client
        .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args))
        .await
        .expect("a tool result")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// The fixture (never answering a call) and a pinned configuration whose
/// `read_file` is a change with a 3s lease and no repeat window.
async fn setup() -> (Arc<Seen>, tempfile::TempDir, PathBuf) {
    let (url, seen) = serve(Mode::HangOnCall).await;
    let dir = tempfile::tempdir().expect("dir");
    let config = support::configure(
        dir.path(),
        &url,
        r#""session": "crash", "hold": "0s", "lease_ttl": "3s", "repeat_window": "0s""#,
        r#"{"side_effect": "local_mutation", "timeout": "10m"}"#,
    )
    .await;
    (seen, dir, config)
}

/// Starts a proxy, sends a call of `path` upstream and SIGKILLs the proxy
/// while the call hangs there.
async fn crash_mid_call(config: &Path, seen: &Seen, path: &'static str) {
    let (mut first, client) = start(config).await;
    let hanging = tokio::spawn(async move { call_path(&client, path).await });
    let started = Instant::now();
    while seen.call_sessions.lock().expect("lock").is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the call never went out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.start_kill().expect("SIGKILL");
    let _ = first.wait().await;
    hanging.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_a_crash_is_never_run_again_without_an_operator() {
    let (seen, dir, config) = setup().await;
    let upstream_calls = || seen.call_sessions.lock().expect("lock").len();

    // The first proxy sends the call upstream, where it hangs; then dies.
    crash_mid_call(&config, &seen, "ledger.txt").await;

    // A new proxy: the same request waits out the dead proxy's lease, then
    // is interrupted; it never goes upstream again.
    let (_second, client) = start(&config).await;
    let started = Instant::now();
    let interrupted = loop {
        let answer = text(&call(&client).await);
        assert_eq!(upstream_calls(), 1, "never executed again: {answer}");
        if answer.starts_with("INTERRUPTED: ") {
            break answer;
        }
        assert!(answer.starts_with("IN_PROGRESS: "), "{answer}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the lease never expired"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(interrupted.contains("(approval "), "{interrupted}");
    // Asked again, it is still the operator's to decide.
    let again = text(&call(&client).await);
    assert!(again.starts_with("INTERRUPTED: "), "{again}");
    assert_eq!(upstream_calls(), 1);

    let store = agentrt::Store::open_existing(dir.path().join("proxy.db"), true).expect("db");
    let runs = store.list_runs(10, 0).expect("runs").items;
    assert_eq!(runs.len(), 1, "one run for the request");
    let approvals = store.list_approvals(&runs[0].id).expect("approvals");
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].kind, "interrupted_side_effect");
    assert_eq!(approvals[0].status, agentrt::ApprovalStatus::Pending);

    // Rejected, the question resolves nothing: with no repeat window to
    // refuse it, the identical call asks it again in a fresh run, naming
    // the attempt as cut off.
    let writer = agentrt::Store::open_existing(dir.path().join("proxy.db"), false).expect("db");
    agentrt::operator::reject(
        &writer,
        &runs[0].id,
        &approvals[0].id,
        &agentrt::operator::DecideOptions {
            by: "operator",
            note: "",
            shown_hash: None,
        },
    )
    .expect("reject");
    let asked = text(&call(&client).await);
    assert!(asked.starts_with("INTERRUPTED: "), "{asked}");
    assert_eq!(upstream_calls(), 1);
    let mut runs = store.list_runs(10, 0).expect("runs").items;
    runs.sort_by_key(|r| r.created_at);
    assert_eq!(runs.len(), 2, "a fresh run asks");
    let question = store.list_approvals(&runs[1].id).expect("approvals");
    let capability = question[0].capability.as_str();
    assert!(
        capability.contains(&format!(
            r#""interrupted":{{"ended":"cut_off","run_id":"{}""#,
            runs[0].id
        )),
        "{capability}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_change_to_the_tool_takes_the_cut_off_run_over_and_is_blocked() {
    let (seen, dir, config) = setup().await;
    crash_mid_call(&config, &seen, "ledger.txt").await;
    // Past the dead proxy's lease (3s), a new proxy gets another request
    // to the same tool: the cut-off run is taken over first, its question
    // asked, and this call is blocked naming it; nothing runs.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let (_second, client) = start(&config).await;
    // (Were it sent upstream, it would hang there: bounded here.)
    let blocked = tokio::time::timeout(Duration::from_secs(20), call_path(&client, "other.txt"))
        .await
        .expect("answered, not sent upstream");
    let blocked = text(&blocked);
    assert!(blocked.starts_with("BLOCKED: "), "{blocked}");
    assert_eq!(seen.call_sessions.lock().expect("lock").len(), 1);
    let store = agentrt::Store::open_existing(dir.path().join("proxy.db"), true).expect("db");
    let runs = store.list_runs(10, 0).expect("runs").items;
    assert_eq!(runs.len(), 1, "the blocked call began no run");
    let approvals = store.list_approvals(&runs[0].id).expect("approvals");
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].kind, "interrupted_side_effect");
    assert!(
        blocked.contains(&format!("(approval {})", approvals[0].id)),
        "{blocked}"
    );
    client.cancel().await.expect("close");
}
