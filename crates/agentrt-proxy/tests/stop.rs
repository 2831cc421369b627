//! The binary over stdio, as a host sees it: SIGTERM in the middle of a
//! call lets the call finish and be recorded before the proxy exits, and a
//! call held on an approval sends the host progress notifications.

mod support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentrt::{RunStatus, Store};
use agentrt_mcp_fixture::{Mode, serve};
use rmcp::handler::client::ClientHandler;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RoleClient, RunningService, ServiceExt};
use tokio::process::{Child, Command};

/// Writes a configuration (the fixture at `url`, `read_file` a change
/// with `timeout`, and `extra` fields) and pins it.
async fn configure(dir: &Path, url: &str, timeout: &str, extra: &str) -> std::path::PathBuf {
    support::configure(
        dir,
        url,
        &format!(r#""session": "stop" {extra}"#),
        &format!(r#"{{"side_effect": "local_mutation", "timeout": "{timeout}"}}"#),
    )
    .await
}

/// Starts the binary on `config` with `handler` as the host.
async fn start<H: ClientHandler>(
    config: &Path,
    handler: H,
) -> (Child, RunningService<RoleClient, H>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
        .args(["serve", "--config"])
        .arg(config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the proxy");
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        panic!("the proxy's pipes");
    };
    let client = handler.serve((stdout, stdin)).await.expect("handshake");
    (child, client)
}

fn args() -> serde_json::Map<String, serde_json::Value> {
    let serde_json::Value::Object(args) = serde_json::json!({"path": "ledger.txt"}) else {
        unreachable!();
    };
    args
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_call_lets_the_call_finish_and_be_recorded() {
    // The fixture never answers: the call ends when its 2s timeout runs
    // out, an unknown outcome the proxy records before it exits.
    let (url, seen) = serve(Mode::HangOnCall).await;
    let dir = tempfile::tempdir().expect("dir");
    let config = configure(dir.path(), &url, "2s", "").await;
    let (mut child, client) = start(&config, ()).await;
    let pending = tokio::spawn(async move {
        let _ = client
            .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args()))
            .await;
        client
    });
    let began = Instant::now();
    while seen.call_arguments.lock().expect("lock").is_empty() {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the call never went out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().expect("running");
    // SAFETY: signalling a child process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the proxy exits")
        .expect("status");
    assert!(status.success(), "{status}");
    pending.abort();

    let store = Store::open_existing(dir.path().join("proxy.db"), true).expect("db");
    let runs = store.list_runs(10, 0).expect("runs").items;
    assert_eq!(runs.len(), 1);
    // Not left running (to be taken over as cut off): its timeout was
    // recorded and an operator is asked about the unknown outcome.
    assert_eq!(runs[0].status, RunStatus::WaitingForApproval);
    let approvals = store.list_approvals(&runs[0].id).expect("approvals");
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].kind, "interrupted_side_effect");
    assert_eq!(seen.call_arguments.lock().expect("lock").len(), 1);
}

/// A host that notes the progress notifications it gets.
#[derive(Clone, Default)]
struct NotingHost(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ClientHandler for NotingHost {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().expect("lock").push(params);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_sends_the_host_progress_notifications() {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    let config = configure(
        dir.path(),
        &url,
        "5s",
        r#", "hold": "3s", "policy": {"local_mutation": "require_approval"}"#,
    )
    .await;
    let host = NotingHost::default();
    let (_child, client) = start(&config, host.clone()).await;
    let answer = client
        .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args()))
        .await
        .expect("an answer");
    assert!(
        text(&answer).starts_with("PENDING_APPROVAL: "),
        "{}",
        text(&answer)
    );
    let told = host.0.lock().expect("lock").clone();
    let seconds: Vec<(f64, Option<f64>)> = told.iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(seconds, [(1.0, Some(3.0)), (2.0, Some(3.0))], "{told:?}");
    assert!(
        told.iter()
            .all(|p| p.message.as_deref() == Some("waiting for an operator's approval")),
        "{told:?}"
    );
    client.cancel().await.expect("close");
}
