//! `agentrt-proxy serve --http`: the binary on 127.0.0.1, hosts as rmcp
//! clients over streamable HTTP, the fixture server upstream. Sixteen
//! calls at once are sixteen runs and sixteen answers; each run is
//! labelled with its MCP session; a token file guards the door; SIGTERM
//! ends it cleanly.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agentrt_mcp_fixture::{Mode, serve};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

/// Pins the fixture into a fresh configuration.
async fn setup(url: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        url,
        r#""session": "web""#,
        r#"{"side_effect": "read_only", "timeout": "5s"}"#,
    )
    .await;
    dir
}

/// Starts `serve --http 127.0.0.1:0` (and `extra`); its URL, read from
/// its stderr.
async fn start(dir: &Path, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
        .args(["serve", "--config"])
        .arg(dir.join("proxy.json"))
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("stderr")
            .expect("the proxy says where it serves");
        if let Some(at) = line.find(" on http://") {
            break line[at + 4..].to_owned();
        }
    };
    // Keep draining stderr so the proxy never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn args(path: &str) -> serde_json::Map<String, serde_json::Value> {
    let serde_json::Value::Object(args) = serde_json::json!({"path": path}) else {
        unreachable!();
    };
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_calls_at_once_over_http_are_sixteen_runs_and_sixteen_answers() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = setup(&url).await;
    let (mut proxy, proxy_url) = start(dir.path(), &[]).await;
    let client =
        ().serve(StreamableHttpClientTransport::from_uri(proxy_url.as_str()))
            .await
            .expect("handshake");
    let calls = (0..16).map(|i| {
        let client = &client;
        async move {
            let path = format!("file-{i}.txt");
            let result = client
                .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args(&path)))
                .await
                .expect("an answer");
            (path, text(&result))
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    for (path, answer) in &answers {
        assert_eq!(answer, &format!(r#"{{"path":"{path}"}}"#));
    }
    assert_eq!(seen.call_sessions.lock().expect("lock").len(), 16);
    let store = agentrt::Store::open_existing(dir.path().join("proxy.db"), true).expect("db");
    let runs = store.list_runs(100, 0).expect("runs").items;
    assert_eq!(runs.len(), 16, "one run per call");
    let sessions: std::collections::BTreeSet<_> = runs
        .iter()
        .map(|r| {
            r.labels
                .get("mcp.http_session")
                .expect("labelled with its MCP session")
                .to_owned()
        })
        .collect();
    assert_eq!(sessions.len(), 1, "one host, one session");
    for run in &runs {
        assert_eq!(run.status, agentrt::RunStatus::Completed);
    }
    client.cancel().await.expect("close");

    // SIGTERM: it stops cleanly.
    #[cfg(unix)]
    {
        let pid = proxy.id().expect("pid");
        // SAFETY: kill has no memory preconditions.
        unsafe {
            libc::kill(i32::try_from(pid).expect("pid"), libc::SIGTERM);
        }
        let status = tokio::time::timeout(Duration::from_secs(20), proxy.wait())
            .await
            .expect("it stops")
            .expect("status");
        assert!(status.success(), "{status}");
    }
    #[cfg(not(unix))]
    let _ = proxy.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_guards_the_door_and_a_wide_address_needs_one() {
    let (url, _) = serve(Mode::Json).await;
    let dir = setup(&url).await;
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").expect("token");
    let token_arg = token_file.to_string_lossy().into_owned();
    let (_proxy, proxy_url) = start(dir.path(), &["--token-file", &token_arg]).await;

    let without = ().serve(StreamableHttpClientTransport::from_uri(proxy_url.as_str())).await;
    assert!(without.is_err(), "no token, no session");
    let config = StreamableHttpClientTransportConfig::with_uri(proxy_url.as_str())
        .auth_header("s3cret-token");
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("with the token");
    let result = client
        .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args("t.txt")))
        .await
        .expect("an answer");
    assert_eq!(text(&result), r#"{"path":"t.txt"}"#);
    client.cancel().await.expect("close");

    // Not loopback and no token: refused before anything listens.
    let out = Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
        .args(["serve", "--config"])
        .arg(dir.path().join("proxy.json"))
        .args(["--http", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a loopback address, needs --token-file"),
        "{err}"
    );
}
