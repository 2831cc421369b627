//! A proxy SIGKILLed in the middle of a call, then a new proxy on the same
//! database: the call is never executed again without an operator. The
//! same request is `IN_PROGRESS` while the dead proxy's lease lasts, then
//! the run is taken over and the call answers `INTERRUPTED`, naming the
//! approval an operator decides.

use std::path::Path;
use std::time::{Duration, Instant};

use agentrt_mcp_fixture::{Mode, serve};
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
    let serde_json::Value::Object(args) = serde_json::json!({"path": "ledger.txt"}) else {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_a_crash_is_never_run_again_without_an_operator() {
    let (url, seen) = serve(Mode::HangOnCall).await;
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("proxy.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"database": "proxy.db", "session": "crash", "hold": "0s", "lease_ttl": "3s",
                 "servers": [{{"name": "fs", "endpoint": "{url}", "manifest": "fs.manifest.json",
                   "connect_timeout": "10s",
                   "rules": {{"read_file": {{"side_effect": "local_mutation", "timeout": "10m"}}}}}}]}}"#
        ),
    )
    .expect("config");
    let args: Vec<String> = ["pin", "--config", &config.to_string_lossy()]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(
        agentrt_proxy::cli::run(&args, &mut out, &mut err).await,
        0,
        "{}",
        String::from_utf8_lossy(&err)
    );
    let upstream_calls = || seen.call_sessions.lock().expect("lock").len();

    // The first proxy sends the call upstream, where it hangs; then dies.
    let (mut first, client) = start(&config).await;
    let hanging = tokio::spawn(async move { call(&client).await });
    let started = Instant::now();
    while upstream_calls() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the call never went out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.start_kill().expect("SIGKILL");
    let _ = first.wait().await;
    hanging.abort();

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
    client.cancel().await.expect("close");
}
